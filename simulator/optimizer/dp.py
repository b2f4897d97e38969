"""The capture-size problem and its partition DP: the parts both exact search methods share.

`Problem` (candidate sizes, the per-size costs alpha, the distribution's cumulative sums, budgets) and `Solution`;
`_tables` (the interval cost matrix W and the tail), `_forward` (the O(K N^2) partition DP, a Monge block scan when
alpha is non-decreasing), `_backtrack`, `_path_value`, `resources` (memory and capture of a layout) and
`objective`. exact.py (the DP answer, and the driver) and search.py (the label search for binding budgets) both
import from here; neither imports the other's internals. The method is described in exact.py's docstring.
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
    W[np.tri(W.shape[0], dtype=bool)] = INF  # i >= j: the lower triangle and the diagonal (a mask, no index arrays)
    tail = ce[-1] - E
    return W, tail


def _forward(W: np.ndarray, K: int, pen: np.ndarray | None = None, monotone: bool = False,
             tail: tuple[int, float] | None = None):
    """A[n, j]: least cost of batches <= c_j using exactly n sizes, the largest c_j; arg[n, j]: previous.

    The cost of interval (i, j] is W[i, j] (+ pen[i]: a Lagrangian penalty of size i). `monotone`: the caller
    knows alpha is non-decreasing (and P is, weights being >= 0), so W is a Monge array:
    W[i, j] + W[i', j'] - W[i, j'] - W[i', j] = (alpha_j - alpha_j') (P_i' - P_i) <= 0 for i < i', j < j', and
    adding A[n-1, i] + pen[i] keeps it Monge. The leftmost minimising i then never decreases with j, so each
    layer scans only rows between the minimisers of block-boundary columns: about N * (N / B + B) cells instead
    of N^2 / 2, the same minima and the same leftmost argmins (np.argmin's ties) as the full scan.

    `tail` = (m, S) (`monotone_tail`): alpha is non-decreasing over the columns m.. only (small sizes often cost
    a little less than smaller ones). Columns below m are scanned in full; the columns from m on are block-scanned
    as above, each block's narrow scan taken only where a rounding certificate at its boundary columns proves it
    the full scan's (`_forward_tail`), else scanned in full: the same minima and leftmost argmins, bitwise."""
    n1 = W.shape[0]
    A = np.full((K + 1, n1), INF)
    arg = np.zeros((K + 1, n1), dtype=np.int64)
    A[1] = W[0] if pen is None else W[0] + pen[0]
    A[1, 0] = INF
    if K < 2:
        return A, arg
    if monotone and n1 > MONOTONE_MIN:
        return _forward_monotone(W, K, pen, A, arg, MONOTONE_BLOCK)
    if (tail is not None and n1 - tail[0] > MONOTONE_MIN
            and (pen is None or bool(np.all(np.isfinite(pen))))):
        return _forward_tail(W, K, pen, A, arg, tail[0], tail[1], TAIL_BLOCK)
    WT = np.ascontiguousarray((W if pen is None else W + pen[:, None]).T)  # reductions along contiguous rows
    buf = np.empty_like(WT)
    # column j's interval starts i < j only (W[i, j] is +inf for i >= j): the rows of a block of columns
    # [j0, j1) scan i < j1, about half the array; the cut cells are +inf, so the minima and the leftmost argmins
    # (np.argmin's ties; index 0 where a whole column is +inf) are the full scan's
    blocks = [(j0, min(j0 + FORWARD_BLOCK, n1)) for j0 in range(0, n1, FORWARD_BLOCK)]
    for n in range(2, K + 1):
        prev = A[n - 1]
        for j0, j1 in blocks:
            b = buf[j0:j1, :j1]
            np.add(WT[j0:j1, :j1], prev[None, :j1], out=b)
            a = b.argmin(axis=1)
            arg[n, j0:j1] = a
            A[n, j0:j1] = b[np.arange(j1 - j0), a]
    return A, arg


FORWARD_BLOCK = 128  # columns per block of the full scan


MONOTONE_MIN, MONOTONE_BLOCK = 64, 32  # the block scan from this many candidates on; columns per block
TAIL_BLOCK = 64  # columns per block of the tail's certified block scan (`_forward_tail`)


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


def _forward_tail(W, K, pen, A, arg, m: int, scale: float, B: int):
    """`_forward`'s layers 2..K where alpha is non-decreasing over the columns m.. (1 <= m < N): bitwise the full
    scan's minima and leftmost argmins.

    Columns below m: the full scan. Boundary columns m, m + B, ..., N: the full scan. Between boundaries b < b':
    for j in (b, b') with alpha_b <= alpha_j <= alpha_b', the interval costs of columns {b, j, b'} are Monge in
    exact arithmetic ((alpha_j - alpha_j')(P_i' - P_i) <= 0 for i < i', j < j'; a row's A[n-1, i] + pen[i]
    cancels). Let lo, hi be the leftmost minimisers of b and b', and V the float sums the full scan compares. If
    every row r < lo of column b exceeds V[lo, b] by more than `tol`, and every row r > hi of column b' exceeds
    V[hi, b'] by more than `tol`, then for every j in between every row r < lo exceeds V[lo, j] and every row
    r > hi exceeds V[hi, j] (the Monge inequality, less the rounding of V and of W itself, both within tol / 2:
    W = alpha_j (P_j - P_i) + (Q_j - Q_i) rounds within 3.01 u S with S = `scale` >= max|alpha| (P_N - P_0) +
    (max Q - min Q), and each sum V within u (2 |W| + 2 |pen| + |A|)(1 + u)); so the full scan's leftmost
    minimiser of j lies in [lo, hi] and the narrow scan finds it. A block whose boundaries do not certify it (ties
    or near-ties within tol, or hi < lo) is scanned in full."""
    n1 = W.shape[0]
    WT = np.ascontiguousarray((W if pen is None else W + pen[:, None]).T)  # rows: columns of W
    bounds = np.arange(m, n1, B)  # boundary columns, ascending, the last column included (no np.unique: it
    if bounds[-1] != n1 - 1:  # imports numpy.ma)
        bounds = np.append(bounds, n1 - 1)
    WB = WT[bounds]  # [boundary, row]
    nb = bounds.size
    rows = np.arange(n1)
    pmax = 0.0 if pen is None else float(np.max(np.abs(pen)))
    head = [(j0, min(j0 + FORWARD_BLOCK, m)) for j0 in range(0, m, FORWARD_BLOCK)]
    # (first column, end column, boundary index, row numbers of the block's columns) of each block
    blocks = [(int(bounds[t]) + 1, int(bounds[t + 1]), t, np.arange(int(bounds[t + 1]) - int(bounds[t]) - 1))
              for t in range(nb - 1) if bounds[t] + 1 < bounds[t + 1]]
    ib = np.arange(nb)
    for n in range(2, K + 1):
        prev = A[n - 1]
        fin = prev[np.isfinite(prev)]
        tol = 2.0 ** -44 * (scale + pmax + (float(np.max(np.abs(fin))) if fin.size else 0.0))
        for j0, j1 in head:
            b = WT[j0:j1, :j1] + prev[None, :j1]
            a = b.argmin(axis=1)
            arg[n, j0:j1] = a
            A[n, j0:j1] = b[np.arange(j1 - j0), a]
        vb = WB + prev[None, :]
        ab = vb.argmin(axis=1)
        val = vb[ib, ab]
        arg[n, bounds] = ab
        A[n, bounds] = val
        # certificates: the gap from each boundary's minimum to its rows left of (right of) its minimiser
        # (a boundary with no finite cell has no rows to exclude: certified)
        inf = ~np.isfinite(val)
        val0 = np.where(inf, 0.0, val)
        okl = (inf | (np.where(rows[None, :] < ab[:, None], vb, INF).min(axis=1) - val0 > tol)).tolist()
        okr = (inf | (np.where(rows[None, :] > ab[:, None], vb, INF).min(axis=1) - val0 > tol)).tolist()
        abl = ab.tolist()
        An, argn = A[n], arg[n]
        for j0, j1, t, ar in blocks:
            lo, hi = abl[t], abl[t + 1]
            if okl[t] and okr[t + 1] and lo <= hi:
                b = WT[j0:j1, lo:hi + 1] + prev[lo:hi + 1]
                a = b.argmin(axis=1)
                argn[j0:j1] = a + lo
            else:  # the full scan (rows below j1: the cells from j on are +inf)
                b = WT[j0:j1, :j1] + prev[:j1]
                a = b.argmin(axis=1)
                argn[j0:j1] = a
            An[j0:j1] = b[ar, a]
    return A, arg


def monotone_tail(p: "Problem") -> tuple[int, float] | None:
    """(m, S) for `_forward`'s `tail`: W's columns m.. (candidates m..N, 1-based) are those over which alpha is
    non-decreasing, and S >= max|alpha| (P_N - P_0) + (max Q - min Q) bounds the terms of W (its rounding);
    None where the weights are not all >= 0 or a figure is not finite (no certificate then)."""
    a = np.asarray(p.alpha, dtype=float)
    w = np.asarray(p.weights, dtype=float)
    bq = w * np.asarray(p.beta, dtype=float)
    if a.size < 2 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(bq)) and np.all(w >= 0)):
        return None
    bad = np.flatnonzero(~(np.diff(a) >= 0))
    m = int(bad[-1]) + 2 if bad.size else 1
    q = np.concatenate(([0.0], np.cumsum(bq)))
    return m, float(np.max(np.abs(a)) * np.sum(w) * (1 + 1e-12) + (q.max() - q.min()) * (1 + 1e-12))


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


def _path_value(W, tail, idx) -> float:
    v, prev = 0.0, 0
    for j in idx:
        v += W[prev, j]
        prev = j
    return float(v + tail[idx[-1]])
