"""How a golden card is compared with a fresh one: exactly, except for the Monte Carlo section.

ODI's numbers are posterior summaries of MCMC draws. JAX compiles its sampler for the CPU it runs
on (XLA picks AVX-512 or AVX2 code), so the same seed gives other draws on another CPU class: the
chains part after a few steps and every summary moves by its Monte Carlo error (on the tiny golden
panel: medians by < 0.01, interval ends by < 0.2, ESS by < 20%, R̂ by < 0.002; the AVX2 and
AVX-512 classes, measured 2026-11-28). Everything else a card holds is computed without random
draws from the replayed outputs, so it must match number for number.

Within the Monte Carlo section the structure, every string, flag, count and verdict must still
match; only floats get a tolerance, and ``worst`` (which parameter mixes slowest, an argmax among
near-ties) is free. The tolerances are loose enough for another CPU class's draws (at most 44% of
one used) and tight enough that moving θ's median by 0.1 or σ_π's by 20%, dividing an ESS by 2.5
or flipping a verdict fails (tests/integration/test_golden_compare.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

#: the card section (and its Markdown heading) whose numbers are Monte Carlo estimates
MONTE_CARLO_SECTION = "odi"
MONTE_CARLO_HEADING = "## ODI"
#: sampler diagnostics (ESS, R̂), as a section or as the metric of a threshold row: noisy by nature
DIAGNOSTIC_KEYS = {"diagnostics", "ess_bulk_min", "ess_tail_min", "rhat_max"}
#: keys whose value names the slowest-mixing parameter: an argmax among near-ties
FREE_KEYS = {"worst"}
#: |a - b| <= absolute + relative * max(|a|, |b|)
POSTERIOR_MEDIAN = (0.05, 0.05)
POSTERIOR_INTERVAL = (0.1, 0.1)
DIAGNOSTIC = (0.01, 0.5)
MARKDOWN_NUMBER = (0.1, 0.25)
INTERVAL_KEYS = {"ci", "cis", "hdi"}
#: the keys under which a float is an estimate from the draws; any other float (a setting, a
#: bound, a threshold) must match exactly
ESTIMATE_KEYS = INTERVAL_KEYS | {"estimate", "median", "ess_bulk_min", "ess_tail_min", "rhat_max"}
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def close(a: float, b: float, tolerance: tuple[float, float]) -> bool:
    absolute, relative = tolerance
    return (
        math.isfinite(a)
        and math.isfinite(b)
        and (abs(a - b) <= absolute + relative * max(abs(a), abs(b)))
    )


def card_mismatches(got: dict, expected: dict) -> list[str]:
    """Where ``got`` differs from ``expected``: exact outside the Monte Carlo section."""
    rest = sorted(set(got) | set(expected))
    found = [
        f"{key}: {got.get(key)!r} != {expected.get(key)!r}"
        for key in rest
        if key != MONTE_CARLO_SECTION and got.get(key) != expected.get(key)
    ]
    if MONTE_CARLO_SECTION in got or MONTE_CARLO_SECTION in expected:
        found += list(
            _monte_carlo(
                got.get(MONTE_CARLO_SECTION),
                expected.get(MONTE_CARLO_SECTION),
                (MONTE_CARLO_SECTION,),
            )
        )
    return found


def _tolerance(path: tuple[str, ...]) -> tuple[float, float]:
    if not ESTIMATE_KEYS & set(path):
        return (0.0, 0.0)
    if DIAGNOSTIC_KEYS & set(path):
        return DIAGNOSTIC
    return POSTERIOR_INTERVAL if INTERVAL_KEYS & set(path) else POSTERIOR_MEDIAN


def _monte_carlo(got: object, expected: object, path: tuple[str, ...]) -> Iterator[str]:
    where = "/".join(path)
    if path[-1] in FREE_KEYS:
        return
    if isinstance(got, dict) and isinstance(expected, dict):
        if set(got) != set(expected):
            yield f"{where}: keys {sorted(got)} != {sorted(expected)}"
            return
        if "metric" in got:  # a threshold row: its metric decides its estimates' tolerance
            path = (*path, str(got["metric"]))
        for key in got:
            yield from _monte_carlo(got[key], expected[key], (*path, str(key)))
    elif isinstance(got, list) and isinstance(expected, list):
        if len(got) != len(expected):
            yield f"{where}: {len(got)} entries != {len(expected)}"
            return
        for index, (a, b) in enumerate(zip(got, expected, strict=True)):
            yield from _monte_carlo(a, b, (*path, str(index)))
    elif isinstance(got, float) and isinstance(expected, float):
        if not close(got, expected, _tolerance(path)):
            yield f"{where}: {got!r} not within {_tolerance(path)} of {expected!r}"
    elif got != expected or type(got) is not type(expected):
        yield f"{where}: {got!r} != {expected!r}"


def markdown_mismatches(got: list[str], expected: list[str]) -> list[str]:
    """Line by line; inside the Monte Carlo section a line's words must match and its numbers be
    within :data:`MARKDOWN_NUMBER` of the golden ones."""
    if len(got) != len(expected):
        return [f"{len(got)} lines != {len(expected)}"]
    found, inside = [], False
    for number, (a, b) in enumerate(zip(got, expected, strict=True), start=1):
        if b.startswith("## "):
            inside = b.startswith(MONTE_CARLO_HEADING)
        if a == b:
            continue
        numbers_a, numbers_b = NUMBER.findall(a), NUMBER.findall(b)
        if (
            inside
            and NUMBER.sub("#", a) == NUMBER.sub("#", b)
            and all(
                close(float(x), float(y), MARKDOWN_NUMBER)
                for x, y in zip(numbers_a, numbers_b, strict=True)
            )
        ):
            continue
        found.append(f"line {number}: {a!r} != {b!r}")
    return found
