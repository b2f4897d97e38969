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

Algorithm. (1) The classic O(K N^2) partition DP (vectorised over sizes) gives, for every (count, largest
size), the best layout ignoring memory and capture; if the overall best fits the budgets it is the answer
(a capture cost equal for all sizes is folded into K first). (2) Otherwise a branch and bound over Pareto
labels, from the largest size down, with exact prunes only: budgets; obj + a lower bound on the best
completion above the incumbent (the DP table, and a Lagrangian table for resources that add up exactly);
dominance within a state and by labels with fewer sizes; a label no completion of which can break a budget
is closed at once with its unconstrained completion. Incumbents come from single sizes, caller seeds
(presets), the Lagrangian optima and two narrow beam passes; none of them decides the answer. The search
raises SearchTooLarge past LABEL_LIMIT labels rather than answer approximately.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .pareto import beam_keep, dominance_keep

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
    WT = np.ascontiguousarray(W.T)  # WT[j, i]: reductions run along contiguous rows (10x faster)
    A = np.full((K + 1, n1), INF)
    arg = np.zeros((K + 1, n1), dtype=np.int64)
    A[1] = W[0]
    A[1, 0] = INF
    buf = np.empty_like(WT)
    rows = np.arange(n1)
    for n in range(2, K + 1):
        np.add(WT, A[n - 1][None, :], out=buf)
        arg[n] = buf.argmin(axis=1)
        A[n] = buf[rows, arg[n]]
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
    """The exact optimum. `seeds`: layouts (lists of sizes) to try first as upper bounds (e.g. presets)."""
    check_feasible(p)
    K, track_cap = _count_limit(p)
    if K < 1:
        raise Infeasible("no layout meets the budgets", {"capture": float(p.capture.min())})
    W, tail = _tables(p)
    A, arg = _forward(W, K)
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


class SearchTooLarge(Exception):
    """The exact search would keep more labels than LABEL_LIMIT (it never answers approximately)."""


LABEL_LIMIT = 3_000_000


class _Search:
    """Branch and bound over Pareto labels, from the largest size down.

    A label at layer k (k sizes chosen, the smallest c_j) holds obj (cost of batches > c_j), r (memory
    running figure) and c (capture so far). Prunes, all exact: budgets; obj + a lower bound of the best
    completion > the incumbent (unconstrained completion table, and a Lagrangian one for additive
    resources); dominance inside a state, and by labels of earlier layers (fewer sizes). A label whose
    every completion fits the budgets is closed at once with its unconstrained completion."""

    def __init__(self, p, W, tail, A, arg, K, track_cap):
        self.p, self.W, self.tail, self.A, self.arg, self.K = p, W, tail, A, arg, K
        self.WT = np.ascontiguousarray(W.T)
        self.track_mem, self.track_cap = p.memory_budget is not None, track_cap
        self.Bm = p.memory_budget if self.track_mem else INF
        self.Bc = p.capture_budget if track_cap else INF
        self.cap = p.capture if track_cap else np.zeros(len(p.sizes))
        self.Abest = np.minimum.accumulate(A, axis=0)
        self.ub, self.ub_idx, self.kept = INF, None, 0
        self.dual, self.lam, self.Alam = -INF, [], None
        self.tables = []  # (multipliers, completion table) of every Lagrangian evaluation: all are valid bounds
        # resources that add up exactly (private pools, capture) get Lagrange multipliers
        self.dims = []
        if self.track_mem and np.array_equal(p.mem_inc, p.mem_chk):
            self.dims.append(("r", p.mem_inc, p.static, self.Bm))
        if track_cap:
            self.dims.append(("c", p.capture, np.zeros(len(p.sizes)), self.Bc))

    def slack(self) -> float:
        return 1e-12 * max(1.0, abs(self.ub)) if np.isfinite(self.ub) else 0.0

    def offer(self, idx: list[int]) -> None:
        """A candidate layout (1-based indices): the incumbent if it fits and beats it."""
        p = self.p
        if len(idx) > self.K or not p.final_ok[idx[-1] - 1]:
            return
        mem, cap = resources(p, idx)
        if (mem <= self.Bm) and (not self.track_cap or cap <= self.Bc):
            v = _path_value(self.W, self.tail, idx)
            if v < self.ub:
                self.ub, self.ub_idx = v, list(idx)

    # -- Lagrangian bound ---------------------------------------------------------------------------
    def _eval(self, lam):
        p, W = self.p, self.W
        pen, top = np.zeros(W.shape[0]), np.zeros(W.shape[0])
        for (_, pe, stc, _), l in zip(self.dims, lam):
            pen[1:] += l * pe
            top[1:] += l * (stc + pe)
        A, arg = _forward(W + pen[:, None], self.K)
        fin = np.concatenate(([False], p.final_ok))
        tot = A + np.where(fin, self.tail + top, INF)[None, :]
        n, j = np.unravel_index(int(np.argmin(tot)), tot.shape)
        d = float(tot[n, j]) - sum(l * b for (_, _, _, b), l in zip(self.dims, lam))
        idx = _backtrack(arg, int(n), int(j))
        self.offer(idx)  # the penalised optimum is a layout too
        use = [float(stc[idx[-1] - 1] + pe[np.asarray(idx) - 1].sum()) - b for _, pe, stc, b in self.dims]
        tab = np.minimum.accumulate(A, axis=0)
        self.tables.append((dict(zip([x[0] for x in self.dims], lam)), tab))
        if d > self.dual:
            self.dual, self.lam, self.Alam = d, list(lam), tab
        return use

    def lagrange(self) -> None:
        """Multipliers by doubling then geometric bisection, one resource at a time. Any multipliers >= 0
        give valid bounds: the search only decides how strong the pruning is."""
        if not self.dims:
            return
        lam = [0.0] * len(self.dims)
        base = float(np.min(self.Abest[self.K][1:][self.p.final_ok] + self.tail[1:][self.p.final_ok]))
        self.dual = base
        for d, (_, _, _, b) in enumerate(self.dims):
            lo, hi = 0.0, max(self.ub - base, 1e-300) / max(abs(b), 1e-300)
            for _ in range(40):
                lam[d] = hi
                if self._eval(lam)[d] <= 0 or self.dual >= self.ub:
                    break
                lo, hi = hi, hi * 4
            for _ in range(6):
                if self.dual >= self.ub - self.slack():
                    break
                mid = (lo * hi) ** 0.5 if lo > 0 else hi / 4
                lam[d] = mid
                lo, hi = (mid, hi) if self._eval(lam)[d] > 0 else (lo, mid)
            lam[d] = self.lam[d] if self.lam else 0.0

    # -- the label search ---------------------------------------------------------------------------
    def run(self, beam: int | None) -> None:
        """Exact when beam is None; with a beam, a fast heuristic that only improves the incumbent."""
        p, W, K, N = self.p, self.W, self.K, len(self.p.sizes)
        Bm, Bc = self.Bm, self.Bc
        chk = np.concatenate(([INF], p.mem_chk))
        inc = np.concatenate(([0.0], p.mem_inc))
        capx = np.concatenate(([0.0], self.cap))

        worst_mem, worst_cap = _worst(p.mem_inc, p.mem_chk, K), _worst(self.cap, self.cap, K)
        lamr = dict(zip([d[0] for d in self.dims], self.lam)) if self.lam else {}
        J = np.arange(1, N + 1)
        ok = p.final_ok & (p.static + p.mem_chk <= Bm) & (self.cap <= Bc)
        st, ob = J[ok], self.tail[1:][ok]
        r, c = (p.static + p.mem_inc)[ok], self.cap[ok]
        layers = [(st, np.full(st.size, -1))]
        arch = (st, ob, r, c)  # every label kept so far: labels of earlier layers dominate later ones
        kept = st.size
        for k in range(1, K + 1):
            if st.size == 0:
                break
            left = K - k
            safe = np.ones(st.size, bool)  # no completion can break a budget
            if left > 0 and self.track_mem:
                safe &= r + worst_mem[left, st] <= Bm
            if left > 0 and self.track_cap:
                safe &= c + worst_cap[left, st] <= Bc
            done = ob + np.where(safe, self.Abest[left + 1, st], W[0, st])
            m = int(np.argmin(done))
            if done[m] < self.ub:
                path = _trace(layers, k, m)
                if safe[m] and left > 0:
                    j = int(st[m])
                    n = int(np.argmin(self.A[1:left + 2, j])) + 1
                    path = _backtrack(self.arg, n, j)[:-1] + path
                self.ub, self.ub_idx = float(done[m]), path
            if left == 0:
                break
            live = np.nonzero(~safe)[0]
            st, ob, r, c = st[live], ob[live], r[live], c[live]
            if st.size == 0:
                break
            ns, no, nr, nc, npar = [], [], [], [], []
            b0 = self.Abest[left]
            bls = [(lr, t[left]) for lr, t in self.tables if any(v > 0 for v in lr.values())]
            lim = self.ub + self.slack()
            for s0 in range(0, st.size, 512):
                sl = slice(s0, s0 + 512)
                cand = ob[sl, None] + self.WT[st[sl]]  # (labels, i): batches in (c_i, c_j] pay c_j
                okm = np.isfinite(cand) & (cand + b0[None, :] <= lim)
                okm[:, 0] = False
                okm &= (r[sl, None] + chk[None, :] <= Bm) & (c[sl, None] + capx[None, :] <= Bc)
                li, ii = np.nonzero(okm)
                o2, r2, c2 = cand[li, ii], r[sl][li] + inc[ii], c[sl][li] + capx[ii]
                for lr, bl in bls:  # every Lagrangian table bounds the completion: keep only what all allow
                    lb = o2 + bl[ii] - lr.get("r", 0.0) * (Bm - r2 if self.track_mem else 0.0) \
                        - lr.get("c", 0.0) * (Bc - c2 if self.track_cap else 0.0)
                    f = lb <= lim
                    li, ii, o2, r2, c2 = li[f], ii[f], o2[f], r2[f], c2[f]
                ns.append(ii); no.append(o2); nr.append(r2); nc.append(c2); npar.append(live[li + s0])
            st, ob, r, c, par = (np.concatenate(x) for x in (ns, no, nr, nc, npar))
            dims = ([r] if self.track_mem else []) + ([c] if self.track_cap else [])
            if beam is not None:
                key = ob + lamr.get("r", 0.0) * r + lamr.get("c", 0.0) * c
                keep = beam_keep(st, key, dominance_keep(st, ob, dims), beam)
            else:
                na = arch[0].size
                u = [np.concatenate((a, b)) for a, b in zip(arch, (st, ob, r, c))]
                udims = ([u[2]] if self.track_mem else []) + ([u[3]] if self.track_cap else [])
                fixed = np.arange(u[0].size) < na
                keep = dominance_keep(u[0], u[1], udims, fixed)[na:]
            st, ob, r, c, par = st[keep], ob[keep], r[keep], c[keep], par[keep]
            if beam is None:
                arch = tuple(np.concatenate((a, b)) for a, b in zip(arch, (st, ob, r, c)))
            layers.append((st, par))
            kept += st.size
            if kept > LABEL_LIMIT:
                raise SearchTooLarge(f"the exact search passed {LABEL_LIMIT:,} labels")
        if beam is None:
            self.kept = kept


def _worst(inc: np.ndarray, chk: np.ndarray, K: int) -> np.ndarray:
    """out[m, j]: an upper bound on how far any completion adding <= m sizes below c_j pushes the running
    figure past its check: max over its sizes i_1 > i_2 > ... of (inc of the earlier ones + chk of i_t).
    With the running maxima of inc and chk (non-decreasing, >= the real values) the worst completion
    is the m sizes right below j, because i_s <= j - s."""
    inc, chk = np.maximum.accumulate(inc), np.maximum.accumulate(chk)
    n1 = inc.size + 1
    out = np.zeros((K + 1, n1))
    S = np.concatenate(([0.0], np.cumsum(inc)))  # S[x] = inc_1 + ... + inc_x
    c1 = np.concatenate(([0.0], chk))
    j = np.arange(n1)
    for t in range(1, K + 1):
        lo = np.maximum(j - t, 0)
        v = np.where(j - t >= 1, S[np.maximum(j - 1, 0)] - S[lo] + c1[lo], -INF)
        out[t] = np.maximum(out[t - 1], v)
    return out


def _trace(layers, k, m) -> list[int]:
    out = []
    for lev in range(k - 1, -1, -1):
        st, par = layers[lev]
        out.append(int(st[m]))
        m = int(par[m])
    return out


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
