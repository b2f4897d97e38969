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
  Shared pool captured largest-first: r = static + outputs kept so far, chk_i = pool_i + (g-1) out_i,
  inc_i = g out_i, which is exactly static + max_k (pool_k + outputs of larger sizes) <= budget.
- capture: sum of capture_i <= budget.
Either way the future of a partial layout (built from the largest size down) depends only on
(smallest size so far, sizes used, r, capture so far), so Pareto labels over (objective, r, capture)
at each (count, size) state with dominance pruning are exact.

Fast path: with no memory budget and a capture cost equal for all sizes (a count limit in
disguise), the classic O(K N^2) partition DP answers directly (vectorised over sizes). Otherwise the
label search runs with two exact prunes: an upper bound from feasible layouts (single sizes, the
unconstrained optima, caller-supplied seeds such as presets) and, per label, a lower bound on its
completion from the unconstrained DP table.
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

    def __post_init__(self):
        n = len(self.sizes)
        self.sizes = np.asarray(self.sizes, dtype=np.int64)
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


def _forward(W: np.ndarray, K: int):
    """A[n, j]: least cost of batches <= c_j using exactly n sizes, the largest c_j; arg[n, j]: previous."""
    n1 = W.shape[0]
    A = np.full((K + 1, n1), INF)
    arg = np.zeros((K + 1, n1), dtype=np.int64)
    A[1] = W[0]
    A[1, 0] = INF
    buf = np.empty_like(W)
    for n in range(2, K + 1):
        prev = A[n - 1].copy()
        prev[0] = INF
        np.add(prev[:, None], W, out=buf)
        arg[n] = buf.argmin(axis=0)
        A[n] = buf[arg[n], np.arange(n1)]
    return A, arg


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
    peak = -INF
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
    """The exact optimum. `seeds`: layouts (sizes) known to be candidates-only, used as upper bounds."""
    check_feasible(p)
    K, track_cap = _count_limit(p)
    if K < 1:
        raise Infeasible("no layout meets the budgets", {"capture": float(p.capture.min())})
    W, tail = _tables(p)
    A, arg = _forward(W, K)
    fin = np.concatenate(([False], p.final_ok))
    tot = A + np.where(fin, tail, INF)[None, :]
    by_count = np.minimum.accumulate(tot.min(axis=1)[1:]).tolist()
    # candidates in order of value: the first that fits is the optimum
    order = np.argsort(tot, axis=None, kind="stable")
    best_idx, best = None, INF
    for flat in order[:64]:
        n, j = divmod(int(flat), tot.shape[1])
        if not np.isfinite(tot[n, j]):
            break
        idx = _backtrack(arg, n, j)
        mem, cap = resources(p, idx)
        if _fits(p, mem, cap):
            best_idx, best = idx, float(tot[n, j])
            break
    if best_idx is not None and best <= float(tot.min()):  # the unconstrained optimum fits: done
        return _solution(p, best_idx, best, "dp", 0, by_count)
    # exact label search, seeded with every feasible layout we know of
    ub, ub_idx = (best, best_idx) if best_idx is not None else (INF, None)
    pos = {int(c): i + 1 for i, c in enumerate(p.sizes)}
    for s in list(seeds) + [[int(c)] for c in p.sizes[p.final_ok]]:
        idx = [pos[c] for c in sorted(set(s)) if c in pos]
        if len(idx) != len(set(s)) or not idx or len(idx) > K or not p.final_ok[idx[-1] - 1]:
            continue
        mem, cap = resources(p, idx)
        if _fits(p, mem, cap):
            v = _path_value(W, tail, idx)
            if v < ub:
                ub, ub_idx = v, idx
    for beam in (1, 4):  # quick heuristic layouts: a good upper bound makes the exact search small
        h_idx, h_val, _ = _labels(p, W, tail, A, arg, K, track_cap, ub, ub_idx, beam=beam, lagrange=False)
        if h_val < ub:
            ub, ub_idx = h_val, h_idx
    res = _labels(p, W, tail, A, arg, K, track_cap, ub, ub_idx)
    return _solution(p, res[0], res[1], "labels", res[2], by_count)


def _path_value(W, tail, idx) -> float:
    v, prev = 0.0, 0
    for j in idx:
        v += W[prev, j]
        prev = j
    return float(v + tail[idx[-1]])


def _solution(p, idx, value, method, labels, by_count) -> Solution:
    mem, cap = resources(p, idx)
    return Solution([int(p.sizes[i - 1]) for i in idx], value, mem, cap, method, labels, by_count)


class SearchTooLarge(Exception):
    """The exact search would keep more labels than LABEL_LIMIT (never answered approximately)."""


LABEL_LIMIT = 4_000_000


def _penalties(p: Problem, track_mem: bool, track_cap: bool):
    """Per-size additive lower bounds of resource use: memory min(inc, chk), capture seconds."""
    dims = []
    if track_mem:
        dims.append((np.minimum(p.mem_inc, p.mem_chk), p.static, float(p.memory_budget)))
    if track_cap:
        dims.append((p.capture, np.zeros(len(p.sizes)), float(p.capture_budget)))
    return dims


def _dual(p, W, tail, K, dims, lam):
    """Lagrangian dual value at multipliers `lam` and the bound table for label completions."""
    pen = np.zeros(W.shape[0])
    top = np.zeros(W.shape[0])
    for (pe, stc, _), l in zip(dims, lam):
        pen[1:] += l * pe
        top[1:] += l * (stc + pe)
    A, arg = _forward(W + pen[:, None], K)
    fin = np.concatenate(([False], p.final_ok))
    tot = A + np.where(fin, tail + top, INF)[None, :]
    n, j = np.unravel_index(int(np.argmin(tot)), tot.shape)
    d = float(tot[n, j]) - sum(l * b for (_, _, b), l in zip(dims, lam))
    idx = _backtrack(arg, int(n), int(j))
    use = [float(stc[idx[-1] - 1] + pe[np.asarray(idx) - 1].sum()) - b for pe, stc, b in dims]
    return d, np.minimum.accumulate(A, axis=0), use


def _multipliers(p, W, tail, K, dims, ub, d0):
    """Multipliers with a good dual bound: doubling then geometric bisection, one dimension at a time.
    Any multipliers >= 0 give valid bounds; the search only makes the pruning stronger."""
    lam = [0.0] * len(dims)
    best = (d0, None, [0.0] * len(dims))
    for d in range(len(dims)):
        scale = max(ub - d0, 1e-300) / max(abs(dims[d][2]), 1e-300)
        lo, hi, tries = 0.0, scale, 0
        while tries < 40:
            lam[d] = hi
            val, tab, use = _dual(p, W, tail, K, dims, lam)
            best = max(best, (val, tab, list(lam)), key=lambda t: t[0])
            if use[d] <= 0 or val >= ub:
                break
            lo, hi, tries = hi, hi * 4, tries + 1
        for _ in range(6):
            if best[0] >= ub or lo == 0 and hi == 0:
                break
            mid = (lo * hi) ** 0.5 if lo > 0 else hi / 4
            lam[d] = mid
            val, tab, use = _dual(p, W, tail, K, dims, lam)
            best = max(best, (val, tab, list(lam)), key=lambda t: t[0])
            lo, hi = (mid, hi) if use[d] > 0 else (lo, mid)
        lam[d] = best[2][d]
    return best


def _labels(p, W, tail, A, arg, K, track_cap, ub, ub_idx, beam: int | None = None, lagrange: bool = True):
    """Label search from the largest size down. Returns (indices, value, labels kept). With `beam`, only
    the `beam` cheapest labels per state survive: a fast heuristic whose answer seeds the exact search."""
    N = len(p.sizes)
    track_mem = p.memory_budget is not None
    Bm = INF if not track_mem else p.memory_budget
    Bc = INF if not track_cap else p.capture_budget
    cap = p.capture if track_cap else np.zeros(N)
    Abest = np.minimum.accumulate(A, axis=0)
    dims = _penalties(p, track_mem, track_cap)
    lam, Alam = [0.0] * len(dims), None
    d0 = float(np.min(Abest[K][1:][p.final_ok] + tail[1:][p.final_ok]))
    if d0 < ub and lagrange:
        dual, tab, lam_b = _multipliers(p, W, tail, K, dims, ub, d0)
        if tab is not None:
            Alam, lam = tab, lam_b
        if dual >= ub - 1e-12 * max(1.0, abs(ub)):
            return ub_idx, ub, 0
    chk = np.concatenate(([INF], p.mem_chk))
    inc = np.concatenate(([0.0], p.mem_inc))
    capx = np.concatenate(([0.0], cap))
    # worst-case use of sizes below j (prefix maxima, excluding j): a label that cannot break a budget
    # whatever it adds is closed at once with its unconstrained completion
    maxinc = np.concatenate(([0.0], np.maximum.accumulate(np.concatenate(([0.0], p.mem_inc)))[:-1]))
    maxchk = np.concatenate(([0.0], np.maximum.accumulate(np.concatenate(([0.0], p.mem_chk)))[:-1]))
    maxcap = np.concatenate(([0.0], np.maximum.accumulate(np.concatenate(([0.0], cap)))[:-1]))
    slack = lambda: 1e-12 * max(1.0, abs(ub))  # noqa: E731
    J = np.arange(1, N + 1)
    keep = p.final_ok & (p.static + p.mem_chk <= Bm) & (cap <= Bc)
    st, ob = J[keep], tail[1:][keep]
    r, c = (p.static + p.mem_inc)[keep], cap[keep]
    layers = [(st, np.full(st.size, -1))]
    kept = st.size
    cols = np.arange(N + 1)
    for k in range(1, K + 1):
        if st.size == 0:
            break
        left = K - k  # sizes a completion may still add below st
        # safe labels: every completion fits, so the unconstrained completion is theirs
        safe = np.ones(st.size, bool)
        if left > 0 and track_mem:
            safe &= r + (left - 1) * maxinc[st] + maxchk[st] <= Bm
        if left > 0 and track_cap:
            safe &= c + left * maxcap[st] <= Bc
        done = ob + np.where(safe, Abest[left + 1, st], W[0, st])
        m = int(np.argmin(done))
        if done[m] < ub:
            ub = float(done[m])
            path = _trace(layers, k, m)
            if safe[m]:
                j = int(st[m])
                n = int(np.argmin(A[1:left + 2, j])) + 1
                path = _backtrack(arg, n, j)[:-1] + path
            ub_idx = path
        if left == 0:
            break
        live = ~safe
        st, ob, r, c = st[live], ob[live], r[live], c[live]
        idx_live = np.nonzero(live)[0]
        if st.size == 0:
            break
        ns, no, nr, nc, npar = [], [], [], [], []
        bound0 = Abest[left]
        boundl = None if Alam is None else Alam[left]
        for s0 in range(0, st.size, 1024):
            sl = slice(s0, s0 + 1024)
            cand = ob[sl, None] + W[:, st[sl]].T  # (labels, i): batches in (c_i, c_j] pay c_j
            ok = np.isfinite(cand) & (cand + bound0[None, :] <= ub + slack())
            nr_all = r[sl, None] + inc[None, :]
            nc_all = c[sl, None] + capx[None, :]
            if boundl is not None:
                lb = cand + boundl[None, :]
                for (_, _, b), l, use in zip(dims, lam, [nr_all, nc_all] if track_mem else [nc_all]):
                    lb = lb - l * (b - use)
                ok &= lb <= ub + slack()
            ok &= (r[sl, None] + chk[None, :] <= Bm) & (c[sl, None] + capx[None, :] <= Bc)
            ok[:, 0] = False
            li, ii = np.nonzero(ok)
            ns.append(cols[ii]); no.append(cand[li, ii]); npar.append(idx_live[li + s0])
            nr.append(nr_all[li, ii]); nc.append(nc_all[li, ii])
        st, ob, r, c, par = (np.concatenate(x) for x in (ns, no, nr, nc, npar))
        keep = _pareto(st, ob, r if track_mem else None, c if track_cap else None, beam)
        st, ob, r, c, par = st[keep], ob[keep], r[keep], c[keep], par[keep]
        layers.append((st, par))
        kept += st.size
        if kept > LABEL_LIMIT:
            raise SearchTooLarge(f"the exact search passed {LABEL_LIMIT:,} labels")
    if ub_idx is None:
        raise Infeasible("no layout meets the budgets", {})
    return ub_idx, ub, kept


def _trace(layers, k, m) -> list[int]:
    out = []
    for lev in range(k - 1, -1, -1):
        st, par = layers[lev]
        out.append(int(st[m]))
        m = int(par[m])
    return out


def _pareto(group, obj, r1, r2, beam: int | None = None) -> np.ndarray:
    """Keep mask of labels not dominated inside their group on (obj, r1, r2); None dims are ignored.
    With `beam`, also drop all but the `beam` cheapest survivors of each group."""
    keep = _pareto_exact(group, obj, r1, r2)
    if beam is None or not keep.any():
        return keep
    ix = np.nonzero(keep)[0]
    order = ix[np.lexsort((obj[ix], group[ix]))]
    g = group[order]
    start = np.concatenate(([True], g[1:] != g[:-1]))
    first = np.maximum.accumulate(np.where(start, np.arange(order.size), 0))
    out = np.zeros(group.size, bool)
    out[order[np.arange(order.size) - first < beam]] = True
    return out


def _pareto_exact(group, obj, r1, r2) -> np.ndarray:
    n = group.size
    if n == 0:
        return np.ones(0, bool)
    dims = [x for x in (r1, r2) if x is not None]
    order = np.lexsort(tuple(reversed([group, obj] + dims)))
    g = group[order]
    new_group = np.concatenate(([True], g[1:] != g[:-1]))
    keep = np.zeros(n, bool)
    if not dims:
        keep[order[new_group]] = True
        return keep
    if len(dims) == 1:
        # within a group (sorted by obj, then r) keep a label iff its r beats every earlier one
        rank = np.unique(dims[0], return_inverse=True)[1].astype(np.int64)[order]
        gid = np.cumsum(new_group) - 1
        v = rank - gid * (n + 1)  # later groups sit strictly below earlier ones: the running min resets
        run = np.minimum.accumulate(v)
        prev = np.concatenate(([np.iinfo(np.int64).max], run[:-1]))
        prev[new_group] = np.iinfo(np.int64).max
        keep[order[v < prev]] = True
        return keep
    starts = np.nonzero(new_group)[0].tolist() + [n]
    R = np.stack(dims, axis=1)[order]
    for a, b in zip(starts[:-1], starts[1:]):
        sub = R[a:b]
        k = np.ones(b - a, bool)
        for t in range(1, b - a):  # sorted by obj: only earlier labels can dominate
            k[t] = not np.any(np.all(sub[:t][k[:t]] <= sub[t], axis=1))
        keep[order[a:b][k]] = True
    return keep


def brute_force(p: Problem) -> tuple[list[int], float]:
    """Every layout of at most K candidates (tests only: exponential)."""
    from itertools import combinations

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
