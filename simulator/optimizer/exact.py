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
alpha is non-decreasing, see `_forward`) gives, for every (count, largest
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

from dataclasses import dataclass, field

import numpy as np


INF = float("inf")


@dataclass
class Problem:
    sizes: np.ndarray  # candidate capture sizes, ascending, unique, positive (N,)
    batches: np.ndarray  # distribution support (M,)
    weights: np.ndarray  # probabilities (M,)
    alpha: np.ndarray  # per candidate: cost of a step padded to it (N,)
    beta: np.ndarray  # per batch: added to alpha when the batch runs in a graph (M,)
    eager: np.ndarray  # per batch: cost when no chosen size fits (M,)
    max_graphs: int
    final_ok: np.ndarray | None = None  # per candidate: may it be the largest size? (default all)
    static: np.ndarray | None = None  # memory: bytes added by the largest size (N,)
    mem_chk: np.ndarray | None = None  # memory: r + chk_i must fit (N,)
    mem_inc: np.ndarray | None = None  # memory: r += inc_i (N,)
    capture: np.ndarray | None = None  # capture seconds per size (N,)
    memory_budget: float | None = None
    capture_budget: float | None = None
    mem_floor: np.ndarray | None = None  # memory: a layout whose largest size is J needs at least this (N,)

    def __post_init__(self):
        n = len(self.sizes)
        self.sizes = np.asarray(self.sizes, dtype=np.int64)
        if self.mem_floor is not None:
            self.mem_floor = np.asarray(self.mem_floor, dtype=float)
        for name in ("static", "mem_chk", "mem_inc", "capture"):
            v = getattr(self, name)
            setattr(self, name, np.zeros(n) if v is None else np.asarray(v, dtype=float))
        self.final_ok = np.ones(n, bool) if self.final_ok is None else np.asarray(self.final_ok, bool)


@dataclass
class Solution:
    sizes: list[int]
    objective: float
    memory: float
    capture: float
    method: str = "dp"
    labels: int = 0  # labels the exact search kept (0 on the fast path)
    by_count: list[float] = field(default_factory=list)  # unconstrained optimum with <= k sizes, k=1..K


class Infeasible(Exception):
    """No layout meets the budgets; `smallest` maps each budget to the least value some layout needs."""

    def __init__(self, msg: str, smallest: dict[str, float]):
        super().__init__(msg)
        self.smallest = smallest


# ---------------------------------------------------------------------------------------------------
def _tables(p: Problem):
    """Interval costs W ((N+1)x(N+1), +inf where i >= j; index 0 is 'nothing below') and tail(j)."""
    b = np.asarray(p.batches, dtype=np.int64)
    w = np.asarray(p.weights, dtype=float)
    pos = np.searchsorted(b, p.sizes, side="right")  # batches <= c_j
    cw = np.concatenate(([0.0], np.cumsum(w)))
    cq = np.concatenate(([0.0], np.cumsum(w * p.beta)))
    ce = np.concatenate(([0.0], np.cumsum(w * p.eager)))
    P = np.concatenate(([0.0], cw[pos]))
    Q = np.concatenate(([0.0], cq[pos]))
    E = np.concatenate(([0.0], ce[pos]))
    a = np.concatenate(([0.0], p.alpha))
    W = a[None, :] * (P[None, :] - P[:, None]) + (Q[None, :] - Q[:, None])
    W[np.tril_indices(W.shape[0])] = INF
    tail = ce[-1] - E
    return W, tail


def _forward(W: np.ndarray, K: int, pen: np.ndarray | None = None, monotone: bool = False):
    """A[n, j]: least cost of batches <= c_j using exactly n sizes, the largest c_j; arg[n, j]: previous.

    The cost of interval (i, j] is W[i, j] (+ pen[i]: a Lagrangian penalty of size i). `monotone`: the caller
    knows alpha is non-decreasing (and P is, weights being >= 0), so W is a Monge array:
    W[i, j] + W[i', j'] - W[i, j'] - W[i', j] = (alpha_j - alpha_j') (P_i' - P_i) <= 0 for i < i', j < j', and
    adding A[n-1, i] + pen[i] keeps it Monge. The leftmost minimising i then never decreases with j, so each
    layer scans only rows between the minimisers of block-boundary columns: about N * (N / B + B) cells instead
    of N^2 / 2, the same minima and the same leftmost argmins (np.argmin's ties) as the full scan."""
    n1 = W.shape[0]
    A = np.full((K + 1, n1), INF)
    arg = np.zeros((K + 1, n1), dtype=np.int64)
    A[1] = W[0] if pen is None else W[0] + pen[0]
    A[1, 0] = INF
    if K < 2:
        return A, arg
    if monotone and n1 > MONOTONE_MIN:
        return _forward_monotone(W, K, pen, A, arg, MONOTONE_BLOCK)
    WT = np.ascontiguousarray((W if pen is None else W + pen[:, None]).T)  # reductions along contiguous rows
    buf = np.empty_like(WT)
    rows = np.arange(n1)
    for n in range(2, K + 1):
        np.add(WT, A[n - 1][None, :], out=buf)
        arg[n] = buf.argmin(axis=1)
        A[n] = buf[rows, arg[n]]
    return A, arg


MONOTONE_MIN, MONOTONE_BLOCK = 64, 32  # the block scan from this many candidates on; columns per block


def _forward_monotone(W, K, pen, A, arg, B: int):
    n1 = W.shape[0]
    Wp = W if pen is None else W + pen[:, None]
    bounds = np.unique(np.concatenate((np.arange(1, n1, B), [n1 - 1])))  # boundary columns, ascending
    Wb = np.ascontiguousarray(Wp[:, bounds])
    for n in range(2, K + 1):
        prev = A[n - 1]
        vb = Wb + prev[:, None]
        ab = vb.argmin(axis=0)  # leftmost minimiser of each boundary column (full scan)
        arg[n, bounds] = ab
        A[n, bounds] = vb[ab, np.arange(bounds.size)]
        for t in range(bounds.size - 1):
            j0, j1 = int(bounds[t]) + 1, int(bounds[t + 1])
            if j0 >= j1:
                continue
            lo, hi = int(ab[t]), max(int(ab[t + 1]), int(ab[t]))
            blk = Wp[lo:hi + 1, j0:j1] + prev[lo:hi + 1, None]
            a = blk.argmin(axis=0)
            arg[n, j0:j1] = a + lo
            A[n, j0:j1] = blk[a, np.arange(j1 - j0)]
    return A, arg


def monotone(p: "Problem") -> bool:
    """Is the interval cost Monge (alpha non-decreasing over the candidates, weights >= 0)? See `_forward`."""
    return bool(np.all(np.diff(p.alpha) >= 0) and np.all(np.asarray(p.weights) >= 0))


def _backtrack(arg: np.ndarray, n: int, j: int) -> list[int]:
    out = []
    while n >= 1 and j > 0:
        out.append(j)
        j = int(arg[n, j]) if n > 1 else 0
        n -= 1
    return out[::-1]


def resources(p: Problem, idx: list[int]) -> tuple[float, float]:
    """(memory, capture) of a layout given as 1-based candidate indices (ascending)."""
    if not idx:
        return 0.0, 0.0
    r = p.static[idx[-1] - 1]
    peak = -INF if p.mem_floor is None else p.mem_floor[idx[-1] - 1]
    for i in reversed(idx):
        peak = max(peak, r + p.mem_chk[i - 1])
        r += p.mem_inc[i - 1]
    cap = 0.0
    for i in idx:
        cap += p.capture[i - 1]
    return float(peak), float(cap)


def objective(p: Problem, sizes) -> float:
    """Expected cost of a layout (any sorted sizes, not only candidates)."""
    s = np.asarray(sorted(sizes), dtype=np.int64)
    cand = {int(c): a for c, a in zip(p.sizes, p.alpha)}
    total = 0.0
    for b, w, be, ea in zip(p.batches, p.weights, p.beta, p.eager):
        i = np.searchsorted(s, b, side="left")
        total += w * (ea if i >= len(s) else cand[int(s[i])] + be)
    return float(total)


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
    A, arg = _forward(W, K, monotone=monotone(p))
    fin = np.concatenate(([False], p.final_ok))
    tot = A + np.where(fin, tail, INF)[None, :]
    by_count = np.minimum.accumulate(tot.min(axis=1)[1:]).tolist()
    n, j = np.unravel_index(int(np.argmin(tot)), tot.shape)
    idx = _backtrack(arg, int(n), int(j))
    if _fits(p, *resources(p, idx)):  # the unconstrained optimum fits: done
        return _solution(p, idx, float(tot[n, j]), "dp", 0, by_count)
    from simulator.optimizer.search import _Search

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


def _path_value(W, tail, idx) -> float:
    v, prev = 0.0, 0
    for j in idx:
        v += W[prev, j]
        prev = j
    return float(v + tail[idx[-1]])


def _solution(p, idx, value, method, labels, by_count) -> Solution:
    mem, cap = resources(p, idx)
    return Solution([int(p.sizes[i - 1]) for i in idx], value, mem, cap, method, labels, by_count)


from simulator.optimizer.search import FIRST_LIMIT, LABEL_LIMIT, SearchTooLarge  # noqa: E402  (re-exported: part of this API)
