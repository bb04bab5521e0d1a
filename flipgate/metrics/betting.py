"""One-sided testing by betting for the mean of bounded values (docs/definitions.md §12.2).

To test the null "mean ≤ m" (side ``above``) of values u in [0, 1], a gambler starts with capital
1 and on each value stakes a predictable fraction λ of it on the mean being above m:
K_t = Π (1 + λ_i (u_i − m)), with 0 ≤ λ_i < 1/m so the capital stays non-negative. Under the null
K is a non-negative supermartingale, so by Ville's inequality it ever reaches 1/α with
probability at most α, however often one looks (Shafer 2021; Waudby-Smith & Ramdas 2024 §3).
Side ``below`` bets on the mean being below m: Π (1 − λ_i (u_i − m)), λ_i < 1/(1 − m).

No single bet is good everywhere, so the e-process is an average (itself an e-process) of two
strategies with weight ½ each:

- a mixture of fixed bets λ_j = c_j · λ_max, c_j in :data:`FIXED_FRACTIONS` (weights equal) —
  it is the likelihood-ratio mixture when values are binary, and the fastest against an extreme
  truth such as a control that never flips;
- aGRAPA, the adaptive bet λ_t = ĝ/(σ̂² + ĝ²) with ĝ = μ̂_{t−1} − m (the running mean with one
  prior observation at m) and σ̂²_{t−1} the running variance (prior ¼), truncated at
  :data:`AGRAPA_TRUNCATION` · λ_max — it follows a truth near the bound.

Binary cells use the mixture of fixed bets as the *shape* of an exactly calibrated
group-sequential test instead (flipgate.metrics.binary_tests), which is uniformly more powerful;
this e-process decides bounded continuous values (OSI, pairwise disagreement, per-item parse
rates) at the full α.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from flipgate.metrics.onesided import Evidence, Side

FloatArray = npt.NDArray[np.float64]

#: the fixed bets of the mixture, as fractions of the largest bet that keeps capital ≥ 0
FIXED_FRACTIONS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.85, 0.95)
#: aGRAPA's bet is at most this fraction of the largest bet
AGRAPA_TRUNCATION = 0.9
#: the test's name as cards print it
NAME = "betting e-process"


def max_bet(m: float, side: Side) -> float:
    """The largest bet that keeps the capital non-negative for every value in [0, 1]."""
    return 1.0 / m if side == "above" else 1.0 / (1.0 - m)


def _gains(u: FloatArray, m: float, side: Side) -> FloatArray:
    out: FloatArray = (u - m) if side == "above" else (m - u)
    return out


def fixed_bets_log_e(u: npt.ArrayLike, m: float, side: Side) -> FloatArray:
    """log of the fixed-bet mixture's e-process after each value of ``u`` (last axis)."""
    x = np.asarray(u, dtype=float)
    lams = np.asarray(FIXED_FRACTIONS) * max_bet(m, side)
    with np.errstate(divide="ignore"):
        log_k = np.cumsum(np.log1p(_gains(x, m, side)[..., None] * lams), axis=-2)
    peak = log_k.max(axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    mixed: FloatArray = np.log(np.exp(log_k - peak).mean(axis=-1)) + peak[..., 0]
    return mixed


def agrapa_log_e(u: npt.ArrayLike, m: float, side: Side) -> FloatArray:
    """log of the aGRAPA bettor's capital after each value of ``u`` (last axis)."""
    x = np.asarray(u, dtype=float)
    n = x.shape[-1]
    t = np.arange(1, n + 1, dtype=float)
    mu = (m + np.cumsum(x, axis=-1)) / (t + 1)
    var = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1)
    mu_before = np.concatenate([np.full(x.shape[:-1] + (1,), m), mu[..., :-1]], axis=-1)
    var_before = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), var[..., :-1]], axis=-1)
    g = mu_before - m if side == "above" else m - mu_before
    bets = np.clip(g / (var_before + g**2), 0.0, AGRAPA_TRUNCATION * max_bet(m, side))
    with np.errstate(divide="ignore"):
        out: FloatArray = np.cumsum(np.log1p(bets * _gains(x, m, side)), axis=-1)
    return out


def log_e_process(u: npt.ArrayLike, m: float, side: Side) -> FloatArray:
    """log of the e-process (½ aGRAPA + ½ fixed-bet mixture) after each value of ``u``, values in
    [0, 1] along the last axis (many sequences at once: shape ``(replications, n)``)."""
    a, f = agrapa_log_e(u, m, side), fixed_bets_log_e(u, m, side)
    out: FloatArray = np.logaddexp(a, f) - math.log(2.0)
    return out


def best_growth(m: float, side: Side) -> float:
    """The largest factor by which any bet of this e-process can multiply its capital on one
    value (a value at the far end of [0, 1]): a bound for futility."""
    gain = (1.0 - m) if side == "above" else m
    return 1.0 + max(FIXED_FRACTIONS[-1], AGRAPA_TRUNCATION) * max_bet(m, side) * gain


def betting_test(u: npt.ArrayLike, m: float, side: Side, alpha: float, cap: int) -> Evidence:
    """The betting e-process on ``u`` (values in [0, 1], drawn order) against bound ``m``: it
    rejects once its e-value has reached 1/α at any look so far (a look at every value is allowed).
    ``reachable``: whether the e-value could still reach 1/α by ``cap`` values if every remaining
    value went its way."""
    x = np.asarray(u, dtype=float)
    critical = 1.0 / alpha
    if m <= 0.0 or m >= 1.0:
        return _edge(x, m, side, critical)
    if not x.size:
        left = cap * math.log(best_growth(m, side))
        return Evidence(NAME, side, False, "e", 1.0, critical, 0, left >= math.log(critical))
    log_e = log_e_process(x, m, side)
    rejected = bool((log_e >= math.log(critical)).any())
    value = float(np.exp(min(log_e.max(), 700.0)))
    # every strategy grows by at most best_growth per value, so the average does too
    left = max(cap - x.size, 0) * math.log(best_growth(m, side))
    reachable = rejected or float(log_e[-1]) + left >= math.log(critical)
    return Evidence(NAME, side, rejected, "e", value, critical, int(x.size), reachable)


def _edge(x: FloatArray, m: float, side: Side, critical: float) -> Evidence:
    """A bound at the edge of [0, 1]: "mean ≤ 0" is refuted by any positive value (its null
    allows none), while "mean ≥ 0" can never be refuted (and symmetrically at 1)."""
    refutable = (side == "above" and m <= 0.0) or (side == "below" and m >= 1.0)
    hit = bool(((x > m) if side == "above" else (x < m)).any()) if refutable else False
    value = math.inf if hit else 1.0
    return Evidence(NAME, side, hit, "e", value, critical, int(x.size), refutable)
