"""How a golden card is compared with a fresh one: exactly, except for the Monte Carlo section.

ODI's numbers are posterior summaries of MCMC draws. JAX compiles its sampler for the CPU it runs
on (XLA picks AVX-512 or AVX2 code), so the same seed gives other draws on another CPU class: the
chains part after a few steps and every summary moves by its Monte Carlo error (on the tiny golden
panel: medians by < 0.01, interval ends by < 0.2, ESS by < 20%, R̂ by < 0.002; the AVX2 and
AVX-512 classes, measured 2026-11-28). Everything else a card holds is computed without random
draws from the replayed outputs, so it must match number for number.

Within the Monte Carlo section the structure, every string, flag and verdict must still match;
posterior summaries get a tolerance, and ``worst`` (which parameter mixes slowest, an argmax among
near-ties) is free. The sampler's own outcomes are never compared as settings: a fit draws on
until its ESS and R̂ meet their targets, so the draws per chain, the ESS and R̂ are whatever the
CPU's draws made them (700 against 646 draws on one panel, the AVX2 and avx512_bf16 classes,
2026-12-07). Each is compared by what it decided: a count of draws is a positive integer, an ESS or
R̂ lies on the same side of its declared target as the golden one (and a diagnostic threshold row
keeps its outcome). The tolerances are loose enough for another CPU class's draws and tight enough
that moving θ's median by 0.1 or σ_π's by 20%, an ESS that falls below its target or a flipped
verdict fails (tests/integration/test_golden_compare.py).
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
#: the sampler's own outcomes: how many draws a fit took to reach its targets
DRAW_KEYS = {"draws_per_chain"}
#: a diagnostic -> (its target's key in the section's ``thresholds``, True when it must be >=)
TARGETS = {
    "ess_bulk_min": ("ess_min", True),
    "ess_tail_min": ("ess_min", True),
    "rhat_max": ("rhat_max", False),
}
#: |a - b| <= absolute + relative * max(|a|, |b|)
POSTERIOR_MEDIAN = (0.05, 0.05)
POSTERIOR_INTERVAL = (0.1, 0.1)
MARKDOWN_NUMBER = (0.1, 0.25)
INTERVAL_KEYS = {"ci", "cis", "hdi"}
#: the keys under which a float is an estimate from the draws; any other float (a setting, a
#: bound, a threshold) must match exactly
ESTIMATE_KEYS = INTERVAL_KEYS | {"estimate", "median", "ess_bulk_min", "ess_tail_min", "rhat_max"}
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
#: in the Monte Carlo section's Markdown, the sampler's outcomes (draws per chain, ESS, R̂, the
#: estimate of a diagnostic threshold row), masked before the line is compared
OUTCOMES = (
    re.compile(r"(draws per chain) (?:\{[^}]*\}|\d+)"),
    re.compile(r"(R̂ max|ESS bulk min|tail min) -?\d+(?:\.\d+)?"),
    re.compile(
        r"^(\| (?:panel · )?(?:%s)\\\[.*?\|) -?\d+(?:\.\d+)? (?=\|)"
        % "|".join(sorted(DIAGNOSTIC_KEYS))
    ),
)


def _outcomes_masked(line: str) -> str:
    for pattern in OUTCOMES:
        line = pattern.sub(r"\1 <draws>", line)
    return line


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
        return (0.0, 0.0)  # a diagnostic's setting (its bound); its outcomes never reach here
    return POSTERIOR_INTERVAL if INTERVAL_KEYS & set(path) else POSTERIOR_MEDIAN


def _draws(got: object, expected: object, where: str) -> Iterator[str]:
    """A count of draws (or a mapping of them): the same shape, each a positive integer."""
    if isinstance(got, dict) and isinstance(expected, dict):
        if set(got) != set(expected):
            yield f"{where}: keys {sorted(got)} != {sorted(expected)}"
            return
        for key in got:
            yield from _draws(got[key], expected[key], f"{where}/{key}")
    elif not (isinstance(got, int) and isinstance(expected, int) and got > 0 and expected > 0):
        yield f"{where}: {got!r} is not a count of draws like {expected!r}"


def _diagnostics(got: dict, expected: dict, where: str) -> Iterator[str]:
    """A fit's diagnostics: each ESS / R̂ on the same side of its declared target as the golden's."""
    targets = got.get("thresholds") or {}
    for key, (target, at_least) in TARGETS.items():
        a, b, bound = got.get(key), expected.get(key), targets.get(target)
        if not all(isinstance(v, (int, float)) for v in (a, b, bound)):
            continue
        side_a = a >= bound if at_least else a <= bound  # type: ignore[operator]
        side_b = b >= bound if at_least else b <= bound  # type: ignore[operator]
        if side_a != side_b:
            yield f"{where}/{key}: {a!r} and {b!r} lie on either side of its target {bound!r}"


def _monte_carlo(got: object, expected: object, path: tuple[str, ...]) -> Iterator[str]:
    where = "/".join(path)
    if path[-1] in FREE_KEYS:
        return
    if path[-1] in DRAW_KEYS:
        yield from _draws(got, expected, where)
        return
    if isinstance(got, dict) and isinstance(expected, dict):
        if set(got) != set(expected):
            yield f"{where}: keys {sorted(got)} != {sorted(expected)}"
            return
        if "metric" in got:  # a threshold row: its metric decides its estimates' tolerance
            path = (*path, str(got["metric"]))
        if isinstance(got.get("thresholds"), dict):  # a fit's diagnostics
            yield from _diagnostics(got, expected, where)
        for key in got:
            if DIAGNOSTIC_KEYS & {*path, key} and key in ESTIMATE_KEYS:
                continue  # an outcome of the draws: its side of the target (above), its verdict
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
        if a == b or (inside and _outcomes_masked(a) == _outcomes_masked(b)):
            continue
        a, b = (_outcomes_masked(a), _outcomes_masked(b)) if inside else (a, b)
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
