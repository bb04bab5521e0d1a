"""flipgate: a pytest-based model-card conformance suite for ordering robustness."""

__version__ = "0.1.0"


class FlipgateError(Exception):
    """A user-facing error: bad config, bad data, a failed backend call. Its message names the
    file, field and value at fault, so no traceback from deep inside is needed."""
