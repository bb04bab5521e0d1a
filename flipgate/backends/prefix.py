"""Prefix trees over a call's prompts: which tokens several prompts share, so the local engine
computes them once, and how to cut a call into decode batches.

The K orderings of an item share everything before the first permuted unit (the instruction and
the question), the K replicates of a same-ordering control share the whole prompt, k-shot
envelope prompts share their exemplars, and every prompt of a dataset shares the system prompt
and instruction. The engine (:mod:`flipgate.backends.hf`) walks the tree: each node's own tokens
run once, as one row, on top of its parent's key/value cache; each leaf prompt runs only the
tokens no other prompt shares; then the prompts of a batch decode together from their caches
(docs/engine.md). Pure functions over token ids.
"""

from __future__ import annotations

from dataclasses import dataclass

#: a shared run is worth a forward pass of its own (one row) only if it saves at least this many
#: prompt tokens, (rows − 1) × its length: a pass costs a fixed overhead, and splitting an item's
#: orderings into smaller batches costs more passes (measured in docs/engine.md)
MIN_SAVED = 48


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass(frozen=True)
class Node:
    """Rows (indices into the call's token lists) whose first ``end`` tokens are equal. Tokens
    ``[start, end)`` run once on top of the parent's cache (``start == end``: nothing of its
    own); each child continues from ``end``; each leaf row runs ``seq[end:]`` alone."""

    rows: tuple[int, ...]
    start: int
    end: int
    children: tuple[Node, ...]
    leaves: tuple[int, ...]

    def computed_tokens(self, seqs: list[list[int]]) -> int:
        """Tokens the tree runs (each shared run once), against Σ len(seq) computed whole."""
        own = self.end - self.start
        return (
            own
            + sum(c.computed_tokens(seqs) for c in self.children)
            + sum(len(seqs[r]) - self.end for r in self.leaves)
        )


def prefix_tree(seqs: list[list[int]], rows: list[int], min_saved: int = MIN_SAVED) -> Node:
    """The prefix tree of ``seqs[r]`` for ``r`` in ``rows``: a node wherever a run of rows
    shares enough more tokens than their parent to save ``min_saved`` prompt tokens."""
    order = sorted(rows, key=lambda r: seqs[r])
    return _node(seqs, order, 0, min_saved)


def _saves(rows: int, shared: int, min_saved: int) -> bool:
    return shared > 0 and (rows - 1) * shared >= min_saved


def _node(seqs: list[list[int]], order: list[int], start: int, min_saved: int) -> Node:
    adjacent = [common_prefix(seqs[a], seqs[b]) for a, b in zip(order, order[1:])]
    end = min(adjacent) if adjacent else start
    if not _saves(len(order), end - start, min_saved):  # only at the root: run nothing
        end = start
    children: list[Node] = []
    leaves: list[int] = []

    def split(lo: int, hi: int, level: int) -> None:
        """Rows ``order[lo:hi]`` into runs sharing more than ``level`` tokens: a child where the
        run saves enough on top of ``end``, else its own runs one level deeper."""
        i = lo
        while i < hi:
            j = i + 1
            while j < hi and adjacent[j - 1] > level:
                j += 1
            if j - i == 1:
                leaves.append(order[i])
            else:
                shared = min(adjacent[i : j - 1])
                if _saves(j - i, shared - end, min_saved):
                    children.append(_node(seqs, order[i:j], end, min_saved))
                else:
                    split(i, j, shared)
            i = j

    split(0, len(order), end)
    return Node(tuple(order), start, end, tuple(children), tuple(leaves))


def decode_batches(ids: list[list[int]], budgets: list[int], size: int) -> list[list[int]]:
    """Rows cut into batches of at most ``size`` prompts with one generation budget each, sorted
    by token ids so that prompts sharing a prefix fall into one batch; a batch is cut where
    neighbouring prompts share the fewest tokens (in its second half)."""
    order = sorted(range(len(ids)), key=lambda i: (budgets[i], ids[i]))
    batches: list[list[int]] = []
    start = 0
    while start < len(order):
        stop = start + 1
        while (
            stop < len(order)
            and stop - start < size
            and budgets[order[stop]] == budgets[order[start]]
        ):
            stop += 1
        if (
            stop < len(order)
            and stop - start == size
            and budgets[order[stop]] == budgets[order[start]]
        ):
            stop = min(
                range(start + max(1, size // 2), stop + 1),
                key=lambda c: (common_prefix(ids[order[c - 1]], ids[order[c]]), -c),
            )
        batches.append(order[start:stop])
        start = stop
    return batches


def length_batches(ids: list[list[int]], budgets: list[int], size: int) -> list[list[int]]:
    """Rows cut into batches of at most ``size`` prompts of one generation budget, sorted by
    length (little padding): the engine's path when every prompt is computed whole."""
    order = sorted(range(len(ids)), key=lambda i: (budgets[i], len(ids[i])))
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < size and budgets[batches[-1][0]] == budgets[i]:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches
