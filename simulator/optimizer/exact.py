"""Exact optimum of a capture-size layout for a batch-size distribution: the dynamic programme.

Owns the arithmetic only (plain arrays in, sizes out); the step costs, the memory model and the
report live in study_optimize.py. Everything here is exact: no heuristic ever decides the answer.

Problem. Candidate sizes c_1 < ... < c_N. A layout S picks at most K of them. A step of batch b
runs padded to the smallest chosen size >= b at cost alpha(c) + beta(b); above the largest chosen
size it runs without a graph at cost eager(b). The objective is the expected cost over the
distribution. Intervals: batches in (c_i, c_j] pay alpha(c_j), so with cumulative sums P, Q over the
distribution W(i, j) = alpha_j (P_j - P_i) + (Q_j - Q_i) and tail(j) = E_total - E_j.

Resources (budgets optional):
- memory: the largest size J adds static_J; each size i then adds `inc_i` to a running figure r after
  checking r + chk_i <= budget. Private pools: inc = chk = pool_i (memory = static + sum of pools).
  Shared pool captured largest-first (graph_memory.py): static_J holds the static buffers plus the
  largest size's base, inc = chk = out_i, and the optional `mem_floor_J` (the largest graph's pool, W,
  slack) bounds the figure below: memory = max(floor_J, static_J + sum of out_i) <= budget. A floor is
  fixed once the largest size is, so labels need only floor_J <= budget at the start.
- capture: sum of capture_i <= budget.
Either way the future of a partial layout (built from the largest size down) depends only on
(smallest size so far, sizes used, r, capture so far), so Pareto labels over (objective, r, capture)
at each (count, size) state with dominance pruning are exact.

Algorithm. (1) The classic O(K N^2) partition DP (vectorised over sizes; a block scan of the Monge array when
alpha is non-decreasing, or over its tail of non-decreasing alpha, see `_forward`) gives, for every (count, largest
size), the best layout ignoring memory and capture; if the overall best fits the budgets it is the answer
(a capture cost equal for all sizes is folded into K first). (2) Otherwise a branch and bound over Pareto
labels, from the largest size down, with exact prunes only: budgets; obj + a lower bound on the best
completion above the incumbent (the DP table, and a Lagrangian table for resources that add up exactly);
dominance within a state and by labels with fewer sizes; a label no completion of which can break a budget
is closed at once with its unconstrained completion. Incumbents come from single sizes, caller seeds
(presets), the Lagrangian optima and two narrow beam passes; none of them decides the answer. The search
raises SearchTooLarge past LABEL_LIMIT labels rather than answer approximately. Past FIRST_LIMIT labels it first
restarts with more Lagrangian tables; a count bound (budget left / the least a size adds) caps the sizes a
completion may still use.
"""

from __future__ import annotations

import numpy as np

from simulator.optimizer.dp import (INF, Infeasible, Problem, Solution, _backtrack, _forward, _tables, monotone,
                                    monotone_tail, resources)
from simulator.optimizer.dp import objective  # noqa: F401  (the optimizer's front door: opt.objective for callers)
from simulator.optimizer.search import FIRST_LIMIT, SearchTooLarge, _Search


def _fits(p: Problem, mem: float, cap: float) -> bool:
    return ((p.memory_budget is None or mem <= p.memory_budget)
            and (p.capture_budget is None or cap <= p.capture_budget))


def _count_limit(p: Problem) -> tuple[int, bool]:
    """(K after a constant-per-size capture cost is folded in, whether capture still needs tracking)."""
    K = min(p.max_graphs, len(p.sizes))
    if p.capture_budget is None:
        return K, False
    c = p.capture
    if np.all(c == c[0]):
        tot, k = 0.0, 0
        while k < K and tot + c[0] <= p.capture_budget:
            tot += c[0]
            k += 1
        return k, False
    return K, True


def check_feasible(p: Problem) -> None:
    """Raise Infeasible (with the smallest budgets any layout needs) when no layout fits."""
    if p.max_graphs < 1:
        raise Infeasible("max graphs must be >= 1", {})
    ok = np.nonzero(p.final_ok)[0]
    if ok.size == 0:
        raise Infeasible("no candidate size may be the largest", {})
    single_mem = p.static[ok] + p.mem_chk[ok]
    if p.mem_floor is not None:
        single_mem = np.maximum(single_mem, p.mem_floor[ok])
    single_cap = p.capture[ok]
    fm = np.ones(ok.size, bool) if p.memory_budget is None else single_mem <= p.memory_budget
    fc = np.ones(ok.size, bool) if p.capture_budget is None else single_cap <= p.capture_budget
    if (fm & fc).any():
        return
    smallest = {}
    if not fm.any():
        smallest["memory"] = float(single_mem[fc].min() if fc.any() else single_mem.min())
    if not fc.any():
        smallest["capture"] = float(single_cap[fm].min() if fm.any() else single_cap.min())
    if not smallest:  # each budget alone is met, never both at once
        smallest["memory"] = float(single_mem[fc].min())
    raise Infeasible("no layout meets the budgets", smallest)


# ---------------------------------------------------------------------------------------------------
def solve(p: Problem, seeds: list[list[int]] = ()) -> Solution:
    """The exact optimum. `seeds`: layouts (lists of sizes) to try first as upper bounds (e.g. presets)."""
    check_feasible(p)
    K, track_cap = _count_limit(p)
    if K < 1:
        raise Infeasible("no layout meets the budgets", {"capture": float(p.capture.min())})
    W, tail = _tables(p)
    A, arg = _forward(W, K, monotone=monotone(p), tail=monotone_tail(p))
    fin = np.concatenate(([False], p.final_ok))
    tot = A + np.where(fin, tail, INF)[None, :]
    by_count = np.minimum.accumulate(tot.min(axis=1)[1:]).tolist()
    n, j = np.unravel_index(int(np.argmin(tot)), tot.shape)
    idx = _backtrack(arg, int(n), int(j))
    if _fits(p, *resources(p, idx)):  # the unconstrained optimum fits: done
        return _solution(p, idx, float(tot[n, j]), "dp", 0, by_count)
    s = _Search(p, W, tail, A, arg, K, track_cap)
    pos = {int(c): i + 1 for i, c in enumerate(p.sizes)}
    for lay in list(seeds) + [[int(c)] for c in p.sizes[p.final_ok]]:
        ix = sorted({pos.get(int(c), -1) for c in lay})
        if ix and ix[0] > 0 and len(ix) == len(set(lay)):
            s.offer(ix)
    s.lagrange()
    if s.dual < s.ub - s.slack():
        for beam in (1, 4):  # heuristic layouts first: a good upper bound keeps the exact search small
            s.run(beam)
        try:  # cheap tables first; a search that grows past FIRST_LIMIT labels restarts with more tables
            s.run(None, FIRST_LIMIT)
        except SearchTooLarge:
            s.widen()
            for beam in (1, 4):  # the new tables also steer the heuristic passes to better incumbents
                s.run(beam)
            s.run(None)
    return _solution(p, s.ub_idx, s.ub, "labels", s.kept, by_count)


def _solution(p, idx, value, method, labels, by_count) -> Solution:
    mem, cap = resources(p, idx)
    return Solution([int(p.sizes[i - 1]) for i in idx], value, mem, cap, method, labels, by_count)


