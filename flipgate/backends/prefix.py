"""Shared-prefix batching: which prompts of a call share a token prefix, and how to batch them.

The K orderings of an item share everything before the first permuted unit (the instruction and
the question), the K replicates of a same-ordering control share the whole prompt, and k-shot
envelope prompts share their exemplars. The local engine computes such a prefix's key/value
cache once per group and runs only the rest of each prompt (docs/engine.md). Pure functions over
token ids; the transformers side is in :mod:`flipgate.backends.hf`.
"""

from __future__ import annotations

from dataclasses import dataclass

#: a prefix shorter than this is not worth a separate forward pass
MIN_SHARED = 8


@dataclass(frozen=True)
class Group:
    """Prompts (indices into the call's requests) whose first ``shared`` tokens are equal;
    ``shared`` is 0 for a prompt computed whole."""

    rows: tuple[int, ...]
    shared: int


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _groups(ids: list[list[int]], rows: list[int], batch_size: int) -> list[Group]:
    """Split ``rows`` (sorted so that equal prefixes are adjacent) into consecutive groups of at
    most ``batch_size`` that maximise the prompt tokens saved, Σ (size − 1) · shared."""
    n = len(rows)
    adjacent = [common_prefix(ids[rows[t]], ids[rows[t + 1]]) for t in range(n - 1)]

    def shared(i: int, j: int) -> int:  # rows[i:j]; every prompt keeps ≥ 1 token of its own
        if j - i < 2:
            return 0
        s = min(min(adjacent[i : j - 1]), min(len(ids[r]) for r in rows[i:j]) - 1)
        return s if s >= MIN_SHARED else 0

    best = [0] * (n + 1)
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        best[j], cut[j] = best[j - 1], j - 1  # row j-1 alone
        for i in range(max(0, j - batch_size), j - 1):
            gain = best[i] + (j - i - 1) * shared(i, j)
            if gain > best[j]:
                best[j], cut[j] = gain, i
    groups: list[Group] = []
    j = n
    while j > 0:
        i = cut[j]
        groups.append(Group(tuple(rows[i:j]), shared(i, j)))
        j = i
    return groups[::-1]


def plan_batches(
    ids: list[list[int]], budgets: list[int], batch_size: int, share: bool = True
) -> list[list[Group]]:
    """Batches (lists of groups, at most ``batch_size`` prompts each, one generation budget
    each) covering every prompt once. Prompts are sorted by budget and then by their tokens, so
    shared prefixes are adjacent; the groups are then packed by shared and prompt length (less
    padding). Without ``share`` every prompt is its own group, packed by length."""
    order = sorted(range(len(ids)), key=lambda i: (budgets[i], ids[i] if share else len(ids[i])))
    batches: list[list[Group]] = []
    start = 0
    while start < len(order):
        end = start
        while end < len(order) and budgets[order[end]] == budgets[order[start]]:
            end += 1
        run = order[start:end]
        groups = _groups(ids, run, batch_size) if share else [Group((r,), 0) for r in run]
        groups.sort(key=lambda g: (g.shared, max(len(ids[r]) for r in g.rows)))
        current: list[Group] = []
        for group in groups:
            if sum(len(g.rows) for g in current) + len(group.rows) > batch_size:
                batches.append(current)
                current = []
            current.append(group)
        batches.append(current)
        start = end
    return batches
