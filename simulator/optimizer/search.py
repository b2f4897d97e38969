"""The exact search the optimizer falls back on when a memory or capture budget binds.

Branch and bound over Pareto labels, from the largest size down (see simulator/optimizer/exact.py for the
problem and why every prune is exact). Raises SearchTooLarge past LABEL_LIMIT labels rather than
answer approximately.
"""

from __future__ import annotations

import numpy as np

from simulator.optimizer.dp import INF, _backtrack, _forward, _path_value, monotone, monotone_tail, resources
from simulator.optimizer.pareto import beam_keep, dominance_keep


class SearchTooLarge(Exception):
    """The exact search would keep more labels than LABEL_LIMIT (it never answers approximately)."""


LABEL_LIMIT = 3_000_000
# the search first runs with the tables of the multiplier search alone; past FIRST_LIMIT labels it starts again
# with the tables of these multiples of the best multipliers as well (`_Search.widen`)
FIRST_LIMIT = 20_000
WIDEN_FACTORS = (0.125, 0.25, 0.5, 0.7, 1.4, 2.0, 4.0, 8.0, 16.0)


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
        self.monotone = monotone(p)
        self.monotone_tail = monotone_tail(p)  # (m, S): _forward's certified scan of a monotone tail
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
        A, arg = _forward(W, self.K, pen, self.monotone, self.monotone_tail)
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

    def widen(self) -> None:
        """More completion tables: the best multipliers scaled by WIDEN_FACTORS, one resource at a time. A label
        is pruned when any table's bound exceeds the incumbent, and the multiplier that bounds a label best
        depends on how much budget it has left, so a spread of multipliers prunes far more than the best dual
        alone (bench_optimizer's bimodal private-pool case: 233k labels -> 20k)."""
        best = list(self.lam) if self.lam else [0.0] * len(self.dims)
        for d in range(len(self.dims)):
            if best[d] <= 0:
                continue
            for f in WIDEN_FACTORS:
                lam = list(best)
                lam[d] = best[d] * f
                self._eval(lam)

    # -- the label search ---------------------------------------------------------------------------
    def run(self, beam: int | None, limit: int | None = None) -> None:
        """Exact when beam is None; with a beam, a fast heuristic that only improves the incumbent. Past `limit`
        labels (default LABEL_LIMIT) it raises SearchTooLarge."""
        limit = LABEL_LIMIT if limit is None else limit
        p, W, K, N = self.p, self.W, self.K, len(self.p.sizes)
        Bm, Bc = self.Bm, self.Bc
        chk = np.concatenate(([INF], p.mem_chk))
        inc = np.concatenate(([0.0], p.mem_inc))
        capx = np.concatenate(([0.0], self.cap))

        worst_mem, worst_cap = _worst(p.mem_inc, p.mem_chk, K), _worst(self.cap, self.cap, K)
        # least a size below candidate i adds to each budget's figure (index 0 unused): every one of m more sizes
        # adds at least that much, so m <= budget left / it (the count the completion table may use)
        cap_lo, mem_lo = _below_min(self.cap), _below_min(np.minimum(p.mem_inc, p.mem_chk))
        count_bound = self.track_cap or self.track_mem
        lamr = dict(zip([d[0] for d in self.dims], self.lam)) if self.lam else {}
        J = np.arange(1, N + 1)
        ok = p.final_ok & (p.static + p.mem_chk <= Bm) & (self.cap <= Bc)
        if p.mem_floor is not None:
            ok &= p.mem_floor <= Bm
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
                if count_bound:  # the budget left caps how many sizes can still come below c_i
                    n_ok = np.full(ii.size, left)
                    if self.track_cap:
                        n_ok = np.minimum(n_ok, 1 + _more(Bc - c2, cap_lo[ii], K, Bc))
                    if self.track_mem:
                        n_ok = np.minimum(n_ok, 1 + _more(Bm - r2, mem_lo[ii], K, Bm))
                    f = o2 + self.Abest[np.maximum(n_ok, 1), ii] <= lim
                    li, ii, o2, r2, c2 = li[f], ii[f], o2[f], r2[f], c2[f]
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
            if kept > limit:
                raise SearchTooLarge(f"the exact search passed {limit:,} labels")
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


def _below_min(v: np.ndarray) -> np.ndarray:
    """out[i] (1-based candidate i): the least v over candidates 1..i-1; inf for i = 1 (none below)."""
    return np.concatenate(([INF, INF], np.minimum.accumulate(v)[:-1])) if v.size else np.array([INF])


def _more(room: np.ndarray, least: np.ndarray, K: int, budget: float = 0.0) -> np.ndarray:
    """An upper bound on how many more sizes fit in `room` (= budget - the figure so far) when each adds at least
    `least` (a least <= 0 bounds nothing: K). Rounded up (room + 1e-12 of the budget, then a relative 1e-9), so
    the rounding of the figures' sums never cuts a completion that fits."""
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.floor((room + 1e-12 * abs(budget)) / least * (1 + 1e-9) + 1e-9)
    m = np.where(least > 0, m, K)
    return np.clip(np.nan_to_num(m, nan=K, posinf=K, neginf=0), 0, K).astype(np.int64)


def _trace(layers, k, m) -> list[int]:
    out = []
    for lev in range(k - 1, -1, -1):
        st, par = layers[lev]
        out.append(int(st[m]))
        m = int(par[m])
    return out
