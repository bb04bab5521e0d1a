"""The figure helpers every picture shares (the suites' Allure plots in flipgate/<suite>/allure.py
and plots.py, :mod:`flipgate.trend`): matplotlib on the non-interactive Agg backend, and a
finished figure as PNG bytes. matplotlib is imported on first use, not with this module."""

from __future__ import annotations

import io
from types import ModuleType
from typing import Any


def pyplot() -> ModuleType:
    """``matplotlib.pyplot``, with the Agg backend selected (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png(fig: Any) -> bytes:
    """``fig`` laid out tightly and saved as PNG bytes; the figure is closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
