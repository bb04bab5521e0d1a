"""Uncertainty estimators of the continuity suite (docs/definitions.md §10), each in [0, 1].

- ``dse``: discrete semantic entropy (Kuhn et al. 2023, black-box form): N answers sampled at
  T > 0 on the input, clustered by semantic equivalence of the normalised answer (the sweep's
  canonical answer; an unparsable answer by its normalised text), equal weights;
  u = H(cluster shares) / ln N (1: every sample its own cluster).
- ``festa`` (Bhattacharya et al. 2025): N answers sampled on functionally equivalent rewordings of
  the input and N on complementary ones (the answer should flip), read against the greedy answer
  y0 on the input. The ideal model gives y0 on every equivalent and never on a complement;
  FESTA's KL(ideal ‖ observed) is −ln q, q = the share of equivalent answers equal to y0
  (resp. of complementary answers that are another valid answer). Here q is floored at 1/(N + 1)
  and the KL divided by ln(N + 1), so each part is in [0, 1]; u = their mean (equivalents alone
  where a sweep has no complements, as the paper does for counting).
- ``logprob``: the normalised entropy H(p)/ln m of the answer distribution at the answer
  position, p = the softmax over the first-token log-probs of the m canonical answers (each the
  sum over its spellings); needs a backend that exposes log-probs.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

ESTIMATORS = ("dse", "festa", "logprob")


def cluster_key(answer: str | None, text: str) -> str:
    """The semantic cluster of one sampled answer: its canonical answer, else its normalised
    text (lower case, punctuation and extra space dropped)."""
    if answer is not None:
        return answer
    return "?" + " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def normalised_entropy(counts: Sequence[float], n_max: int) -> float:
    """Shannon entropy of ``counts`` (normalised to shares) divided by ln ``n_max``; 0 when
    ``n_max`` < 2."""
    total = float(sum(counts))
    if n_max < 2 or total <= 0:
        return 0.0
    h = -sum(c / total * math.log(c / total) for c in counts if c > 0)
    return min(1.0, h / math.log(n_max))


def dse(keys: Sequence[str]) -> float:
    """Discrete semantic entropy of N sampled answers' cluster keys, in [0, 1]."""
    if not keys:
        raise ValueError("DSE needs at least one sampled answer")
    return normalised_entropy(list(Counter(keys).values()), len(keys))


def _kl_to_ideal(hits: int, n: int) -> float:
    """−ln q / ln(N + 1), q = hits / N floored at 1/(N + 1): 0 when every answer is ideal, 1 when
    none is."""
    q = max(hits / n, 1 / (n + 1))
    return -math.log(q) / math.log(n + 1)


def festa(
    y0: str | None, equivalent: Sequence[str | None], complementary: Sequence[str | None]
) -> float:
    """FESTA from the greedy answer ``y0`` and the canonical answers (None: unparsable) sampled on
    equivalent and on complementary inputs. An equivalent answer agrees when it equals y0 (an
    unparsable y0 agrees with nothing); a complementary one when it is a valid answer other
    than y0."""
    if not equivalent:
        raise ValueError("FESTA needs answers on equivalent inputs")
    parts = [_kl_to_ideal(sum(y0 is not None and a == y0 for a in equivalent), len(equivalent))]
    if complementary:
        flipped = sum(a is not None and a != y0 for a in complementary)
        parts.append(_kl_to_ideal(flipped, len(complementary)))
    return sum(parts) / len(parts)


def answer_probabilities(
    label_logprobs: dict[str, float], spellings: dict[str, tuple[str, ...]]
) -> dict[str, float] | str:
    """Per canonical answer, its probability among the answers (the sum over its spellings'
    first-token probabilities, renormalised), or why there is none."""
    missing = [a for a, labels in spellings.items() if not any(s in label_logprobs for s in labels)]
    if missing:
        return f"no log-prob for answer(s) {missing}"
    mass = {
        a: sum(math.exp(label_logprobs[s]) for s in labels if s in label_logprobs)
        for a, labels in spellings.items()
    }
    total = sum(mass.values())
    if total <= 0:
        return "the answers' log-probs are all -inf"
    return {a: m / total for a, m in mass.items()}


def logprob_uncertainty(probabilities: dict[str, float]) -> float:
    """H(p) / ln m over the m canonical answers."""
    return normalised_entropy(list(probabilities.values()), len(probabilities))
