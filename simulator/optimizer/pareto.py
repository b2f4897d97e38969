"""Pareto dominance filters: per-state label sets for the exact optimizer and 2-D frontiers for reports.

`dominance_keep` keeps the labels of each group (a DP state) that no other label of the group beats
on every coordinate (objective and resources, lower is better). Labels marked `fixed` (kept from an
earlier layer, i.e. built with fewer sizes) may dominate new ones but are never dropped themselves.
`frontier` is the lower-left staircase of (cost, objective) points.
"""

from __future__ import annotations

import numpy as np


def dominance_keep(group: np.ndarray, obj: np.ndarray, dims: list[np.ndarray],
                   fixed: np.ndarray | None = None) -> np.ndarray:
    """Mask of labels to keep. A non-fixed label goes when an earlier-sorted label of its group has
    obj and every resource <= its own (exact ties: the fixed one, then the first, wins)."""
    n = group.size
    keep = np.ones(n, bool)
    if n == 0:
        return keep
    fixed = np.zeros(n, bool) if fixed is None else fixed
    order = np.lexsort(tuple(reversed([group, obj] + list(dims) + [~fixed])))
    g = group[order]
    new_group = np.concatenate(([True], g[1:] != g[:-1]))
    fx = fixed[order]
    if not dims:
        drop = ~new_group & ~fx
        keep[order[drop]] = False
        return keep
    if len(dims) == 1:
        # sorted by (obj, r): a label survives iff its r is below every earlier r of its group
        rank = np.unique(dims[0], return_inverse=True)[1].reshape(-1).astype(np.int64)[order]
        gid = np.cumsum(new_group) - 1
        v = rank - gid * (n + 1)  # each later group sits wholly below the earlier ones: the min resets
        run = np.minimum.accumulate(v)
        prev = np.concatenate(([np.iinfo(np.int64).max], run[:-1]))
        prev[new_group] = np.iinfo(np.int64).max
        drop = (v >= prev) & ~fx
        keep[order[drop]] = False
        return keep
    R = np.stack(dims, axis=1)[order]
    starts = np.nonzero(new_group)[0].tolist() + [n]
    for a, b in zip(starts[:-1], starts[1:]):
        sub, alive = R[a:b], np.ones(b - a, bool)
        for t in range(1, b - a):  # sorted by obj: only earlier labels can dominate
            if not fx[a + t] and np.any(np.all(sub[:t][alive[:t]] <= sub[t], axis=1)):
                alive[t] = False
        keep[order[a:b][~alive]] = False
    return keep


def beam_keep(group: np.ndarray, key: np.ndarray, keep: np.ndarray, beam: int) -> np.ndarray:
    """Of the kept labels, only the `beam` lowest `key` per group (a heuristic, never used for the answer's
    proof of optimality)."""
    ix = np.nonzero(keep)[0]
    out = np.zeros(group.size, bool)
    if ix.size == 0:
        return out
    order = ix[np.lexsort((key[ix], group[ix]))]
    g = group[order]
    start = np.concatenate(([True], g[1:] != g[:-1]))
    first = np.maximum.accumulate(np.where(start, np.arange(order.size), 0))
    out[order[np.arange(order.size) - first < beam]] = True
    return out


def frontier(points: list[tuple[float, float, object]]) -> list[tuple[float, float, object]]:
    """The (cost, objective, payload) points not beaten on both: sorted by cost, objective falling."""
    out, best = [], float("inf")
    for c, v, pl in sorted(points, key=lambda t: (t[0], t[1])):
        if v < best:
            out.append((c, v, pl))
            best = v
    return out
