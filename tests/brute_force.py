"""The optimizer's reference answer for tests: every layout of at most K candidates (exponential)."""

from __future__ import annotations

from itertools import combinations

from simulator.optimizer.dp import INF, Problem, objective, resources
from simulator.optimizer.exact import _fits


def brute_force(p: Problem) -> tuple[list[int] | None, float]:
    """The best feasible layout by enumeration, and its objective (INF when none fits)."""
    best, best_s = INF, None
    N = len(p.sizes)
    for k in range(1, min(p.max_graphs, N) + 1):
        for idx in combinations(range(1, N + 1), k):
            if not p.final_ok[idx[-1] - 1]:
                continue
            mem, cap = resources(p, list(idx))
            if not _fits(p, mem, cap):
                continue
            v = objective(p, [int(p.sizes[i - 1]) for i in idx])
            if v < best - 1e-12:
                best, best_s = v, [int(p.sizes[i - 1]) for i in idx]
    return best_s, best
