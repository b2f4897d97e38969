"""GEMM time and cuBLAS kernel count for (n, k) shapes the profile's GEMM tables do not hold.

Built only from the profile's own measured GEMM tables (`device.tables.gemm`, calibration/microbench.py /
tables.py: per-node times of one (m x k) @ (k x n) bf16 GEMM in a replayed graph over a grid of M).

Time. For each measured table T = (n', k') and each M on its grid, the slowdown over the profile's roofline

    s_T(M) = t_T(M) / r(n', k', M),    r(n, k, M) = max(2 M n k / F, 2 (M k + n k + M n) / B)

(F, B: the profile's effective bf16 peak and HBM bandwidth, the same figures as CostModel's roofline; at small M
this is the reciprocal of the achieved fraction of bandwidth on the weight bytes, at large M of the FLOP rate).
A table's s at another M is interpolated linearly in log s over log M. For a new (n, k) the shape is placed at

    x = (ln(n k), W ln(k / n))        (W = 0.25: weight elements first, aspect second)

and log s is the inverse-distance mean (power 1) of the NN = 2 measured tables nearest in x:

    ln s(n, k, M) = sum_i w_i ln s_Ti(M) / sum_i w_i,   w_i = 1 / |x - x_i|
    t(n, k, M) = max(s(n, k, M) r(n, k, M), min_T t_T(M))

The floor is the fastest measured GEMM at that M (cuBLAS's launch-to-finish floor of a small GEMM, 4-5 us on the
H200; a roofline far below it is never reached). Tables of a degenerate shape (n or k below MIN_DIM, e.g. the MoE
router's 64 x 1) take no part, and such a shape is not priced (None: the roofline). M outside the tables' common grid: None (the caller's roofline), as for a
measured shape outside its own grid.

Kernel count (cuBLAS's split-K: a GEMM and its reduce kernel) of the table nearest in (ln(n k), W_K ln(k / n)),
W_K = 1 (plain Euclidean distance in (ln n, ln k), up to a factor sqrt 2), at the grid M nearest in log M; 1 where
no table records counts.

W, NN and the power were chosen by leave-one-shape-out on the h200 tables (predict each measured (n, k) from the
others; calibration/validation/gemm_fallback.md), never on a model's measured step. W_K: leave-one-shape-out on the
tables cannot tell W_K = 1 from 2 (23 vs 21 wrong of 165 (shape, M) cells); 1 was taken after round f's held-out
kernel counts were seen (W_K = 2 splits 512 x 2048 and 2048 x 2048: held-out kernels MAPE 3.1 % against 0.8 %), so
that one binary choice is not held out (gemm_fallback.md says so).
"""

from __future__ import annotations

import math

import numpy as np

MIN_DIM = 16
W = 0.25
NN = 2
POWER = 1.0
W_K = 1.0


class GridTable:
    """One row of a profile's GEMM grid read as a GEMM table: the fields of a `profile.GemmTable` (n, k, m, us,
    kernels) that pricing reads, as plain attributes (the grid is validated as a whole by its schema model; a
    pydantic `model_construct` per row was ~7 us each of the grid's ~1,000 rows in an `optimize` process)."""

    __slots__ = ("n", "k", "m", "us", "kernels")

    def __init__(self, n: int, k: int, m: list[int], us: list[float], kernels: list[int] | None):
        self.n, self.k, self.m, self.us, self.kernels = n, k, m, us, kernels

    def __repr__(self) -> str:
        return f"GridTable(n={self.n}, k={self.k})"


def grid_tables(grid) -> dict[tuple[int, int], GridTable]:
    """A profile's GEMM grid (profile.GemmGrid) as one table (`GridTable`) per (n, k), in the grid's order."""
    ks = grid.kernels
    m = grid.m
    return {(n, k): GridTable(n, k, list(m), list(grid.us[i]), None if ks is None else list(ks[i]))
            for i, (n, k) in enumerate(grid.shapes)}


class _PerTable:
    """A list of per-table arrays, each made by `make(i)` at its first read."""

    __slots__ = ("_make", "_v")

    def __init__(self, make, n: int):
        self._make, self._v = make, [None] * n

    def __getitem__(self, i: int):
        v = self._v[i]
        if v is None:
            v = self._v[i] = self._make(i)
        return v

    def __len__(self) -> int:
        return len(self._v)


def _front(y: np.ndarray, chunk: int = 64) -> list[int]:
    """The rows of `y` (tables x grid points) taken in order of their totals (stable) that no row taken before is
    below by more than 1e-9 at every point: by total, a row can only be below rows of a larger total. Rows are
    checked a chunk at a time against the rows kept before the chunk, and the few that pass, one by one, against
    those kept within it: the same rows as checking each in turn."""
    order = np.argsort(y.sum(axis=1), kind="stable").tolist()
    front: list[int] = []
    for c0 in range(0, len(order), chunk):
        rows = order[c0:c0 + chunk]
        lim = y[rows] - 1e-9  # (chunk, points)
        if front:
            below = (y[front][:, None, :] <= lim[None, :, :]).all(axis=2).any(axis=0)
        else:
            below = np.zeros(len(rows), dtype=bool)
        start = len(front)
        for q, r in enumerate(rows):
            if below[q]:
                continue
            new = front[start:]
            if new and (y[new] <= lim[q]).all(axis=1).any():
                continue
            front.append(r)
    return front


def _coord(n: int, k: int, w: float) -> tuple[float, float]:
    return math.log(n * k), w * math.log(k / n)


class GemmFallback:
    """Prices bf16 GEMMs of unmeasured (n, k) from a profile's GEMM tables (see the module docstring)."""

    def __init__(self, tables, peak_flops: float, bw: float):
        self.peak_flops, self.bw = float(peak_flops), float(bw)
        self.tables = [t for t in tables if t.n >= MIN_DIM and t.k >= MIN_DIM and len(t.m) >= 1]
        self._counted = [t for t in self.tables if t.kernels is not None]
        if self.tables:
            self.m_lo = max(min(t.m) for t in self.tables)
            self.m_hi = min(max(t.m) for t in self.tables)
        tabs = self.tables
        # per table, made at its first use (a run reads a few tables' slowdowns and the floor tables' times):
        # log slowdown over the roofline at each grid M, log M, log time
        self._log_s = _PerTable(lambda i: np.log(np.asarray(tabs[i].us, float) * 1e-6 / self._roofline_grid(tabs[i])),
                                len(tabs))
        self._x = [_coord(t.n, t.k, W) for t in self.tables]
        self._xk = [_coord(t.n, t.k, W_K) for t in self._counted]
        # memos of what does not depend on m (the neighbours of an (n, k), its nearest counted table) and of the
        # floor at an m: the same figures, computed once (a step grid prices the same shapes at many m)
        self._log_m = _PerTable(lambda i: np.log(np.asarray(tabs[i].m, float)), len(tabs))  # each table's log M grid
        self._log_us = _PerTable(lambda i: np.log(np.asarray(tabs[i].us, float)), len(tabs))
        self._near: dict[tuple[int, int], tuple] = {}
        self._floor: dict[float, float] = {}
        self._count_at: dict[tuple[int, int], object] = {}
        self._count_m: dict[tuple[int, int], int] = {}
        self._floor_idx: list[int] | None = None  # the tables the floor can come from (`_floor_tables`)

    def _floor_tables(self) -> list[int]:
        """Indices of the tables that can be the fastest at some m: on a shared M grid, a table slower by more
        than 1e-9 in log time at every grid point than another is slower everywhere between them too (the same
        interpolation weights), beyond any rounding, so it never sets the floor. The floor is the minimum over
        these, exactly the minimum over all tables (round k's grid has 1,010 rows: the minimum over every one of
        them at each new m cost half of an `optimize` run)."""
        if self._floor_idx is None:
            groups: dict[tuple, list[int]] = {}
            for i, t in enumerate(self.tables):  # tables of one M grid (equal grids: equal log grids)
                groups.setdefault(tuple(t.m), []).append(i)
            keep: list[int] = []
            for key, idx in groups.items():
                if len(key) == 1 or len(idx) == 1:
                    keep += idx
                    continue
                y = np.stack([self._log_us[i] for i in idx])  # (tables, grid points)
                keep += [idx[r] for r in _front(y)]
            self._floor_idx = sorted(keep)
        return self._floor_idx

    def _roofline_grid(self, t) -> np.ndarray:
        """`roofline_s(t.n, t.k, m)` at each m of a table's grid."""
        return self._roofline_array(int(t.n), int(t.k), np.asarray(t.m, dtype=np.int64))

    def _roofline_ms(self, n: int, k: int, ms: list[int]) -> list[float]:
        """`roofline_s(n, k, m)` of each m (ints), as floats."""
        if all(type(m) is int for m in ms) and type(n) is int and type(k) is int:
            return self._roofline_array(n, k, np.asarray(ms, dtype=np.int64)).tolist()
        return [self.roofline_s(n, k, m) for m in ms]

    def _roofline_array(self, n: int, k: int, m: np.ndarray) -> np.ndarray:
        """`roofline_s(n, k, m)` over an int64 array of m, elementwise the same operations (float products left to
        right; the int sum exact in int64, then rounded to float as Python's int -> float)."""
        return np.maximum(2.0 * m * n * k / self.peak_flops, 2.0 * (m * k + n * k + m * n) / self.bw)

    def roofline_s(self, n: int, k: int, m: int) -> float:
        return max(2.0 * m * n * k / self.peak_flops, 2.0 * (m * k + n * k + m * n) / self.bw)

    @staticmethod
    def _at_m(ms, ys, m: float) -> float:
        """ys (log values) at m: linear in log M between grid points."""
        if len(ms) == 1:
            return float(ys[0])
        return float(np.interp(math.log(m), np.log(np.asarray(ms, float)), ys))

    @staticmethod
    def _at_log_m(lm, ys, m: float) -> float:
        """`_at_m` with the grid's log M given (`lm`: np.log of the grid, as `_at_m` computes it)."""
        if len(lm) == 1:
            return float(ys[0])
        return float(np.interp(math.log(m), lm, ys))

    def time_s(self, n: int, k: int, m: int) -> float | None:
        """Predicted seconds of one GEMM (m x k) @ (k x n), or None (no tables, or m outside their grid)."""
        if not self.tables or n < MIN_DIM or k < MIN_DIM or not (self.m_lo <= m <= self.m_hi):
            return None
        near = self._near.get((n, k))
        if near is None:
            x = _coord(n, k, W)
            d = [math.hypot(x[0] - a, x[1] - b) for a, b in self._x]
            order = sorted(range(len(d)), key=lambda i: d[i])[:NN]
            near = self._near[(n, k)] = (order, None if d[order[0]] < 1e-12 else
                                         [1.0 / d[i] ** POWER for i in order])
        order, w = near
        at, lm = self._at_log_m, self._log_m
        if w is None:
            ls = at(lm[order[0]], self._log_s[order[0]], m)
        else:
            ls = sum(wi * at(lm[i], self._log_s[i], m) for wi, i in zip(w, order)) / sum(w)
        floor = self._floor.get(m)
        if floor is None:
            floor = self._floor[m] = min(math.exp(at(lm[i], self._log_us[i], m))
                                         for i in self._floor_tables()) * 1e-6
        return max(math.exp(ls) * self.roofline_s(n, k, m), floor)

    def time_many(self, n: int, k: int, ms: list[int]) -> list[float | None]:
        """`time_s(n, k, m)` for each m, the interpolations over all of them at once: the same operations per
        element (math.log / math.exp per m as `time_s` takes them, np.interp elementwise, the weighted sum in the
        order `sum` adds), so each figure is bitwise `time_s`'s."""
        if not ms:
            return []
        if not self.tables or n < MIN_DIM or k < MIN_DIM:
            return [None] * len(ms)
        first = next((m for m in ms if self.m_lo <= m <= self.m_hi), None)
        if first is None:
            return [None] * len(ms)
        self.time_s(n, k, first)  # fills the (n, k) neighbour memo
        order, w = self._near[(n, k)]
        inside = [self.m_lo <= m <= self.m_hi for m in ms]
        mm = [m for m, ok in zip(ms, inside) if ok]
        lx = np.array([math.log(m) for m in mm])
        lm = self._log_m

        def at(i, ys):
            return np.full(lx.size, float(ys[0])) if len(lm[i]) == 1 else np.interp(lx, lm[i], ys)

        if w is None:
            ls = at(order[0], self._log_s[order[0]])
        else:
            acc = np.add(0, w[0] * at(order[0], self._log_s[order[0]]))  # sum() starts from the int 0
            for wi, i in zip(w[1:], order[1:]):
                acc = acc + wi * at(i, self._log_s[i])
            ls = acc / sum(w)
        new = [j for j, m in enumerate(mm) if m not in self._floor]
        if new:  # the floor at each new m: the fastest table there (math.exp per value, as time_s takes it)
            per_t = [[math.exp(v) for v in at(i, self._log_us[i])[new].tolist()] for i in self._floor_tables()]
            for c, j in enumerate(new):
                self._floor[mm[j]] = min(col[c] for col in per_t) * 1e-6
        fl = self._floor
        roof = self._roofline_ms(n, k, mm)
        out_in = [max(math.exp(v) * r, fl[m]) for m, v, r in zip(mm, ls.tolist(), roof)]
        it = iter(out_in)
        return [next(it) if ok else None for ok in inside]

    def kernels_many(self, n: int, k: int, ms: list[int]) -> list[int]:
        """`kernels(n, k, m)` for each m: the nearest grid M of all new m at once (np.log over the array; where the
        nearest two grid points are within 1e-9 in |log| of each other, whose order a last-ulp difference between
        np.log and math.log could swap, the scalar reading), so each count is `kernels`'."""
        if not ms:
            return []
        v0 = self.kernels(n, k, ms[0])  # the (n, k) -> nearest counted table memo, and the degenerate cases
        t = self._count_at.get((n, k))
        if t is None:
            return [v0] * len(ms)
        tid, memo = id(t), self._count_m
        todo = sorted({m for m in ms if (tid, m) not in memo})
        if todo:
            grid = np.asarray(t.m, dtype=float)
            if grid.size == 1:
                g = [0] * len(todo)
            else:
                d = np.abs(np.log(np.maximum(np.asarray(todo, dtype=float), 1.0)[:, None] / grid[None, :]))
                two = np.partition(d, 1, axis=1)
                g = d.argmin(axis=1).tolist()
                for q in np.flatnonzero(two[:, 1] - two[:, 0] <= 1e-9).tolist():
                    dd = [abs(math.log(max(todo[q], 1) / mm)) for mm in t.m]
                    g[q] = min(range(len(dd)), key=dd.__getitem__)
            for m, gi in zip(todo, g):
                memo[(tid, m)] = int(t.kernels[gi])
        return [memo[(tid, m)] for m in ms]

    def kernels(self, n: int, k: int, m: int) -> int:
        """cuBLAS kernels per call (2: split-K plus its reduce) of the nearest table recording counts; else 1."""
        if not self._counted or n < MIN_DIM or k < MIN_DIM:
            return 1
        t = self._count_at.get((n, k))
        if t is None:
            x = _coord(n, k, W_K)
            i = min(range(len(self._xk)), key=lambda j: (math.hypot(x[0] - self._xk[j][0], x[1] - self._xk[j][1]), j))
            t = self._count_at[(n, k)] = self._counted[i]
        key = (id(t), m)  # the count depends on the table and m only (tables live as long as this model)
        v = self._count_m.get(key)
        if v is None:
            d = [abs(math.log(max(m, 1) / mm)) for mm in t.m]
            g = min(range(len(d)), key=d.__getitem__)  # np.argmin's pick: the first smallest
            v = self._count_m[key] = int(t.kernels[g])
        return v
