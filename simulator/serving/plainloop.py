"""The replica's event loop where the scheduler's limits provably do not bind: a lean sequential kernel, then the
bookkeeping for every event at once in numpy.

`fastloop.loop_fast` pays, per event, for what decides the trajectory (the clock, the decoding cohort, admissions,
the step's time, where a merged run stops) and for what only measures it (the KV pool's blocks, summed over each
run's steps; the collector's step, busy, GPU, block and token sums; the batch histogram; Little's-law area; each
request's first-token, finish and join times). Here the kernel keeps only the first and logs each event as small
ints (a decode run's steps and memo key; a mixed step's position, decode rows, mean context and grid cell number);
`_settle` then computes the second from the log with numpy, in event order where floats are summed (`np.cumsum`
adds sequentially, as the loop's `+=`), so the figures are loop_fast's bit for bit. What the kernel does per event
is cut to the trajectory: arrivals are a position in the sorted arrival list (`bisect`) and a count of admissible
requests (the waiting ones are the next admissible ids), the cohort a heap of ints (finish step x n + id) with its
first finish step held apart, the step times read from tables (the grids' brackets of every decode-row count, prompt
length and context; the decode memo by key; one-chunk cells by bracket numbers).

The kernel runs only while nothing the scheduler would do can differ from "admit every waiting request whole at
the next scheduling point, never preempt":
- every waiting request is admitted at once: `max_num_seqs` and the token budget (its whole prompt, no chunking)
  allow all of them;
- the KV pool cannot run short: the blocks the running requests could ever hold (each ceil((prompt + output - 1) /
  block size), its blocks when it finishes) fit in the pool (checked exactly only where the cohort and newcomers
  times the largest such count could exceed it). Then the scheduler's block checks all pass (its
  admission room, the decode rows' next blocks, `Scheduler.extend`'s affordability of a run, which stops at the first
  finish anyway), so the kernel does not track blocks at all; `_settle` computes them: a decoding request holds
  ceil(context / block size) blocks, a function of the step counter, summed over requests as a difference array
  (its blocks at joining, +1 every block size steps, laid out on block-size strides, minus its blocks when it leaves).
The first time this does not hold (a request that would wait or prefill in chunks, a pool that could run short), at
that scheduling point, the kernel settles its log so far into the scheduler, the collector and the series (the state
`loop_fast` would have there, its float sums to go on from) and hands the run over to `loop_fast` from there. Plain
decoding only, with `StepTimer`'s forward alone (scheduling "none"), the case the timer's memos are inlined for, and
a finite run; otherwise it returns None at once and the caller runs `loop_fast`.
tests/serving/test_serving_plainloop.py checks it against both loops on random workloads, limits binding or not.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right

import numpy as np

from .fastloop import _admissible, loop_fast
from .scheduler import DECODE, DONE, REJECTED
from .steptime import C_GRID, D_GRID, L_GRID, StepTimer, bracket

MODES = ("none", "full", "piecewise")  # plan modes (routing.PLAN_MODES) by number, in the kernel's cell keys

taken = 0  # runs the kernel finished (tests read it to check that the kernel, not the fallback, ran)
handed = 0  # runs it handed over to the inlined loop part way


def _figures(c) -> tuple:
    return c.step_s, c.gpu_busy_s, c.cpu_bound, c.mode != "none", c.rows, c.padded


def _bracket_table(grid: list[int], n: int) -> tuple[list[tuple], np.ndarray]:
    """For x = 0 .. n - 1: (the bracket's number, its weight w, 1.0 - w, lo, hi), (lo, hi, w) being
    `bracket(x, grid)`'s (the same floats: (x - lo) / (hi - lo) of exact integers, correctly rounded either way); the
    number tells brackets apart (2 x lo's grid index, + 1 where hi > lo). And the weights as an array."""
    g = np.asarray(grid, dtype=np.int64)
    x = np.arange(n, dtype=np.int64)
    i = np.searchsorted(g, x, side="left")
    ic = np.minimum(i, g.size - 1)
    exact = (i < g.size) & (g[ic] == x)
    lo = np.where(exact, x, np.where(i == 0, g[0], g[np.maximum(i - 1, 0)]))
    hi = np.where(exact, x, np.where(i == 0, g[0], g[ic]))
    span = hi > lo
    w = np.where(span, (x - lo) / np.where(span, hi - lo, 1), 0.0)
    num = 2 * np.searchsorted(g, lo, side="left") + span
    return list(zip(num.tolist(), w.tolist(), (1.0 - w).tolist(), lo.tolist(), hi.tolist())), w


def _seqsum(a: np.ndarray) -> float:
    """a[0] + a[1] + ... added left to right, as a loop's `s += x` from 0.0."""
    return float(np.cumsum(a)[-1]) if a.size else 0.0


def loop_plain(cfg, sched, col, timer, times: list, w0: float, w1: float, stop: float, series: dict,
               kv_blocks: int, prompt: np.ndarray, output: np.ndarray) -> tuple[float, int, int] | None:
    """`fastloop.loop_fast`'s result and end state (handing over to it where a limit could bind), or None (nothing
    done) where the kernel does not apply."""
    global taken, handed
    if sched.spec is not None or sched.rate != 1 or type(timer) is not StepTimer or timer.setup.spec is not None \
            or timer.scheduling != "none" or sched.G or sched.used or sched.waiting or sched.running \
            or timer.ctx_bucket != cfg.ctx_bucket or not math.isfinite(stop):
        return None
    n = len(sched.P)
    if not n or int(prompt.min()) < 1 or int(output.min()) < 1:
        return None
    heappop, heappush = heapq.heappop, heapq.heappush
    inf, ceil = math.inf, math.ceil
    cb, merge = cfg.ctx_bucket, cfg.merge_steps
    bounds = [w0, w1, stop, inf]
    bi = 0
    lim = sched.lim
    max_seqs, budget = lim.max_num_seqs, lim.max_num_batched_tokens
    total, bs = sched.total, sched.bs
    P, O = sched.P, sched.O
    ok = _admissible(sched, prompt, output)
    okv = np.asarray(ok, dtype=bool)
    okidx = np.flatnonzero(okv).tolist()  # the admissible requests, in arrival order
    cumok = np.concatenate(([0], np.cumsum(okv), [0])).tolist()  # admissible requests among the first i
    p64, o64 = prompt.astype(np.int64), output.astype(np.int64)
    mba = np.maximum(-(-(p64 + o64 - 1) // bs), -(-p64 // bs))  # the most blocks a request holds
    # the pool's room is checked exactly only where the cohort and its newcomers could hold more than it has
    ubcap = total // max(1, int(mba.max()))
    dmax = min(max_seqs, n)
    plain = timer.plain_decode
    mroutes, route_mixed, cell_of = timer._mroutes, timer._route_mixed, timer.cell
    cells, bc, bl = timer._cells, timer._brackets_c, timer._brackets_l
    # bracket tables (steptime.bracket of every value a step can meet): decode rows, one chunk's tokens, context
    pmax = int(prompt.max())
    cmax = int((p64 + o64).max()) + 2
    tab_d, w_d = _bracket_table(D_GRID, dmax + 1)
    tab_l, w_l = _bracket_table(L_GRID, pmax + 1)
    tab_c, w_c = _bracket_table(C_GRID, cmax + 1)
    nbd, nbl, nbc = 2 * len(D_GRID) + 2, 2 * len(L_GRID) + 2, 2 * len(C_GRID) + 2
    single = pmax + max_seqs - 1 <= budget  # a lone waiting request always fits the token budget
    mmode: list = [None] * (dmax + pmax + 1)  # a one-chunk mixed step's tokens -> its plan mode's number (MODES)
    cmemo: dict = {}  # a one-chunk mixed step's (cell number, its 8 step times), by (mode, d, L, ctx) bracket numbers
    cnum: dict = {}  # cell key (StepTimer.cell's) -> its number
    clist: list = []  # the cells by number
    kd = dmax + 1  # decode memo key: context bucket * kd + decode rows
    dmemo: dict = {}
    dtl: list = [None] * ((-(-cmax // cb) + 1) * kd)  # the decode memo's step times by key
    base = [0] * n
    every = stop / 500.0
    next_sample = 0.0
    s_t: list = []
    s_q: list = []
    s_e: list = []
    # the log (small ints, which numpy reads fast; _settle recomputes the floats and the requests' times): each
    # decode run's memo key and steps; each mixed step's decode runs before it, decode rows, mean context and grid
    # cell, and (position, chunks) where it admits more than one request; the clock after each wait for an arrival
    # (by the index of the event that follows it)
    E_x: list = []
    E_k: list = []
    M_e: list = []
    M_d: list = []
    M_ctx: list = []
    M_v: list = []
    M_multi: list = []
    I_e: list = []
    I_now: list = []
    big = 1 << 62
    heap: list = [big * n]  # finish step * n + id of each decoding request (the order of (step, id)), a sentinel
    hf = big  # the first finish step (the sentinel's when none decodes)
    G = cn = cbase = 0
    cok = 0  # admissible requests admitted so far
    now = 0.0
    nxt = bisect_right(times, now)
    ta = times[nxt]
    npend = cumok[nxt]  # waiting requests (all admitted at the next scheduling point): okidx[cok:cok + npend]
    aborted = False
    bnd = bounds[0]
    while bnd <= now:
        bi += 1
        bnd = bounds[bi]
    mark = min(next_sample, bnd, stop)
    while True:
        if npend:  # a mixed step admitting every waiting request whole, or give up
            d = cn
            if npend == 1 and single:
                if cn >= max_seqs:
                    aborted = True
                    break
                rid = okidx[cok]
                if cn >= ubcap and _over(heap, n, mba, [rid], total):
                    aborted = True
                    break
                ptok = P[rid]
                T = d + ptok
                mi = mmode[T]
                if mi is None:
                    rt = mroutes.get(T)
                    if rt is None:
                        r = route_mixed(T)
                        rt = mroutes[T] = (r.mode, r.executed)
                    mi = mmode[T] = MODES.index(rt[0])
                ed, wd, ud, d0, d1 = tab_d[d]
                el, wl, ul, l0, l1 = tab_l[ptok]
                ctx = -(-(cbase + d * (G + 1)) // (d + 1))
                ec, wc, uc, c0, c1 = tab_c[ctx]
                ck = ((mi * nbd + ed) * nbl + el) * nbc + ec
                v = cmemo.get(ck)
                if v is None:
                    ci = _cell_number((MODES[mi], 1, d0, d1, l0, l1, c0, c1), cells, cell_of, cnum, clist)
                    v = cmemo[ck] = (ci, *clist[ci][0])
                ci, s0, s1, s2, s3, s4, s5, s6, s7 = v
                dt = ((s0 * uc + s1 * wc) * ul + (s2 * uc + s3 * wc) * wl) * ud + \
                     ((s4 * uc + s5 * wc) * ul + (s6 * uc + s7 * wc) * wl) * wd
                M_e.append(len(E_k))
                M_d.append(d)
                M_ctx.append(ctx)
                M_v.append(ci)
                cok += 1
                npend = 0
                now = now + dt
                if ta <= now:
                    nxt = bisect_right(times, now, nxt)
                    ta = times[nxt]
                    npend = cumok[nxt] - cok
                if d:
                    G += 1
                    while hf <= G:
                        f = heappop(heap) % n
                        cn -= 1
                        cbase -= base[f]
                        hf = heap[0] // n
                o = O[rid]
                if o > 1:
                    b = base[rid] = ptok - G
                    cn += 1
                    cbase += b
                    f = G + o - 1
                    heappush(heap, f * n + rid)
                    if f < hf:
                        hf = f
            else:
                np_ = npend
                if cn + np_ > max_seqs:
                    aborted = True
                    break
                chunks = okidx[cok:cok + np_]
                ptok = 0
                for rid in chunks:
                    left = budget - cn - ptok
                    rem = P[rid]
                    if left <= 0 or rem > left:
                        aborted = True
                        break
                    ptok += rem
                if aborted or (cn + np_ > ubcap and _over(heap, n, mba, chunks, total)):
                    aborted = True
                    break
                T = d + ptok
                rt = mroutes.get(T)
                if rt is None:
                    r = route_mixed(T)
                    rt = mroutes[T] = (r.mode, r.executed)
                mode = rt[0]
                d0, d1, wd = tab_d[d][3], tab_d[d][4], tab_d[d][1]
                lk = (ptok, np_)
                l0, l1, wl = bl.get(lk) or bl.setdefault(lk, bracket(ptok / np_, L_GRID))
                ctx = -(-(cbase + d * (G + 1)) // (d + np_))
                c0, c1, wc = bc.get(ctx) or bc.setdefault(ctx, bracket(ctx, C_GRID))
                ci = _cell_number((mode, np_, d0, d1, l0, l1, c0, c1), cells, cell_of, cnum, clist)
                st = clist[ci][0]
                uc, ul, ud = 1.0 - wc, 1.0 - wl, 1.0 - wd
                dt = ((st[0] * uc + st[1] * wc) * ul + (st[2] * uc + st[3] * wc) * wl) * ud + \
                     ((st[4] * uc + st[5] * wc) * ul + (st[6] * uc + st[7] * wc) * wl) * wd
                if np_ > 1:
                    M_multi.append((len(M_e), np_))
                M_e.append(len(E_k))
                M_d.append(d)
                M_ctx.append(ctx)
                M_v.append(ci)
                cok += np_
                npend = 0
                now = now + dt
                if ta <= now:
                    nxt = bisect_right(times, now, nxt)
                    ta = times[nxt]
                    npend = cumok[nxt] - cok
                if d:
                    G += 1
                    while hf <= G:
                        f = heappop(heap) % n
                        cn -= 1
                        cbase -= base[f]
                        hf = heap[0] // n
                for rid in chunks:
                    o = O[rid]
                    if o > 1:
                        b = base[rid] = P[rid] - G
                        cn += 1
                        cbase += b
                        f = G + o - 1
                        heappush(heap, f * n + rid)
                        if f < hf:
                            hf = f
        elif cn:  # a run of decode-only steps
            d = cn
            ctx = -(-(cbase + d * (G + 1)) // d)
            q = -(-ctx // cb)
            key = q * kd + d
            dt = dtl[key]
            if dt is None:
                fig = dmemo[key] = _figures(plain(d, ctx))
                dt = dtl[key] = fig[0]
            k = 1
            if merge:  # (bnd: the first window bound after now, finite: now < stop)
                if ta <= bnd and cn < max_seqs:  # the arrival comes first (ceil is monotone)
                    cap = ceil((ta - now) / dt)
                else:
                    cap = ceil((bnd - now) / dt)
                    if ta != inf and cn < max_seqs:
                        ka = ceil((ta - now) / dt)
                        if ka < cap:
                            cap = ka
                if cap > 1:  # Scheduler.extend: the first finish, the context bucket (the pool cannot run short)
                    k = hf - G
                    if cap < k:
                        k = cap
                    kc = q * cb - ctx + 1
                    if kc < k:
                        k = kc
            E_x.append(key)
            E_k.append(k)
            now = now + k * dt
            if ta <= now:
                nxt = bisect_right(times, now, nxt)
                ta = times[nxt]
                npend = cumok[nxt] - cok
            G += k
            while hf <= G:
                f = heappop(heap) % n
                cn -= 1
                cbase -= base[f]
                hf = heap[0] // n
        else:  # nothing to run: idle until the next arrival
            if ta == inf or ta >= stop:
                break
            now = now + (ta - now)
            I_e.append(len(E_k) + len(M_e))
            I_now.append(now)
            nxt = bisect_right(times, now, nxt)
            ta = times[nxt]
            npend = cumok[nxt] - cok
            continue
        if now >= mark:  # a sample of the series, the end, the next window bound
            if now >= next_sample:
                s_t.append(now)
                s_q.append(npend)
                s_e.append(len(E_k) + len(M_e) - 1)
                next_sample = now + every
            if now >= stop:
                break
            while bnd <= now:
                bi += 1
                bnd = bounds[bi]
            mark = min(next_sample, bnd, stop)
    events = len(E_k) + len(M_e)
    rejected = nxt - cumok[nxt]
    alive = sorted((f // n, f % n, base[f % n]) for f in heap if f != big * n)  # (finish step, id, base)
    _settle(sched, col, series, kv_blocks, p64, o64, dmemo, kd, mroutes, okv, nxt, okidx[cok:cok + npend], alive,
            G, cn, cbase, E_k, E_x, (M_e, M_d, M_ctx, M_v, M_multi), clist, (I_e, I_now), s_t, s_q, s_e, times,
            len(dtl), (w_d, w_l, w_c), aborted)
    if aborted:  # a limit could bind from this scheduling point on: the inlined loop takes the run over from here
        handed += 1
        return loop_fast(cfg, sched, col, timer, times, None, w0, w1, stop, series, kv_blocks, prompt, output,
                         start=(now, nxt, next_sample, rejected, events))
    taken += 1
    return now, rejected, events


def _cell_number(key: tuple, cells: dict, cell_of, cnum: dict, clist: list) -> int:
    """The number of StepTimer.cell's cell `key` (its figures from the timer's memo, priced where it lacks them)."""
    ci = cnum.get(key)
    if ci is None:
        ci = cnum[key] = len(clist)
        clist.append(cells.get(key) or cell_of(*key))
    return ci


def _over(heap: list, n: int, mb: np.ndarray, newcomers: list, total: int) -> bool:
    """Whether the blocks the decoding requests (the heap's, less its sentinel) and the newcomers could hold exceed the
    pool (`Scheduler`'s admission test where every request is admitted whole and none is preempted)."""
    ids = [f % n for f in heap if f // n < 1 << 61] + newcomers
    return int(mb[ids].sum()) > total


def _area(col, ta: np.ndarray, end: np.ndarray, gone: np.ndarray) -> None:
    """Collector.track's Little's-law sum over the run so far, from when requests came and left (`ta`: the admissible
    arrivals' times, in order; `gone`: how many requests left at the end of each event, `end`): the number in the
    system changes at each arrival (to those arrived so far less those gone before it) and at each instant requests
    leave (after that instant's arrivals); each change adds n x (the overlap of the interval since the last change
    with the window), in time order (`np.cumsum`: the loop's sequential `+=`)."""
    fe = np.flatnonzero(gone)
    ft = end[fe]  # the instants requests left (increasing)
    cf = np.concatenate(([0], np.cumsum(gone[fe])))  # requests gone by each instant (none before the first)
    ia = np.searchsorted(ft, ta, side="left")  # instants before each arrival
    na = np.arange(1, ta.size + 1) - cf[ia]
    jf = np.searchsorted(ta, ft, side="right")  # arrivals up to each instant
    nf = jf - cf[1:]
    m = ta.size + ft.size
    if not m:
        return
    t = np.empty(m)
    nn = np.empty(m, dtype=np.int64)
    pa = np.arange(ta.size) + ia  # merged in time order, arrivals first at equal times
    pf = np.arange(ft.size) + jf
    t[pa], nn[pa] = ta, na
    t[pf], nn[pf] = ft, nf
    pt = np.concatenate(([col._t], t[:-1]))
    pn = np.concatenate(([col._n], nn[:-1]))
    lo = np.maximum(pt, col.w0)
    hi = np.minimum(t, col.w1)
    add = np.where(hi > lo, pn * (hi - lo), 0.0)
    col.area = float(np.cumsum(np.concatenate(([col.area], add)))[-1])
    col._t, col._n = float(t[-1]), int(nn[-1])


def _bracket_w(grid: list[int], x: np.ndarray) -> np.ndarray:
    """bracket(v, grid)'s weight for every v of x (ints or floats: the same IEEE operations)."""
    g = np.asarray(grid, dtype=np.int64)
    i = np.searchsorted(g, x, side="left")
    ic = np.minimum(i, g.size - 1)
    lo, hi = g[np.maximum(i - 1, 0)], g[ic]
    span = (i > 0) & (g[ic] != x) & (hi > lo)
    return np.where(span, (x - lo) / np.where(span, hi - lo, 1), 0.0)


def _settle(sched, col, series, kv_blocks, P, O, dmemo, kd, mroutes, okv, nxt, pending, heap, G, cn, cbase, E_k,
            E_x, M, clist, idle, s_t, s_q, s_e, times, nkeys, wtabs, handover: bool = False) -> None:
    """The collector's sums (Little's-law area included), the KV figures, the series' KV and running columns, the
    requests' first-token, finish and join times and the scheduler's end state, from the log (`heap`: the decoding
    requests' (finish step, id, base), in order; `clist`: the mixed steps' cells by number; `nkeys`: the decode
    memo's key space; `wtabs`: the bracket weights of decode rows, prompt lengths and contexts by
    value (the kernel's tables); `handover`: the state `fastloop.loop_fast` goes on from, per-request lists as the scheduler
    keeps them)."""
    bs = sched.bs
    n = len(P)
    M_e, M_d, M_ctx, M_c, M_multi = M
    nm = len(M_c)
    ne = len(E_k) + nm
    mi = np.asarray(M_e, dtype=np.int64) + np.arange(nm)  # the mixed steps (by the decode runs before each)
    isd = np.ones(ne, dtype=bool)
    isd[mi] = False
    di = np.flatnonzero(isd)  # the decode runs
    kk = np.ones(ne, dtype=np.int64)
    kdec = np.asarray(E_k, dtype=np.int64)
    kk[di] = kdec
    x = np.full(ne, -1, dtype=np.int64)
    xd = np.asarray(E_x, dtype=np.int64)
    x[di] = xd
    npm = np.ones(nm, dtype=np.int64)
    if M_multi:
        j, c = zip(*M_multi)
        npm[list(j)] = c
    # the admitted requests, in admission order (first come first served, each admitted whole): those that arrived,
    # were not rejected and are not still waiting
    handed = np.flatnonzero(okv[:nxt])
    adm = handed[:handed.size - len(pending)]
    nbl = -(-P // bs)  # a prompt's blocks
    dt = np.empty(ne)
    gbf = np.empty(ne)
    d = np.empty(ne, dtype=np.int64)
    # decode runs: figures by memo key (a table over the key space)
    keys = np.asarray(sorted(dmemo), dtype=np.int64)
    tab = [dmemo[q] for q in keys.tolist()]
    kt_dt, kt_gb = np.zeros(nkeys), np.zeros(nkeys)
    kt_dt[keys] = [f[0] for f in tab]
    kt_gb[keys] = [f[1] for f in tab]
    d_key = keys % kd
    d[di] = xd % kd
    dt[di] = kt_dt[xd]
    gbf[di] = kt_gb[xd]
    # mixed steps: StepTimer.mixed's figures again, from the cell and the brackets (the kernel's arithmetic)
    dm = np.asarray(M_d, dtype=np.int64)
    cpu_m = graph_m = np.zeros(0, dtype=bool)
    pad_m = T = nbs = nb1 = np.zeros(0, dtype=np.int64)
    if nm:
        off = np.concatenate(([0], np.cumsum(npm)[:-1]))
        ptok = np.add.reduceat(P[adm], off)
        ci = np.asarray(M_c, dtype=np.int64)
        sv = np.asarray([v[0] for v in clist], dtype=float).T[:, ci]
        gv = np.asarray([v[1] for v in clist], dtype=float).T[:, ci]
        cbm = np.asarray([v[2] for v in clist], dtype=bool)
        w_d, w_l, w_c = wtabs
        wd = w_d[dm]
        wc = w_c[np.asarray(M_ctx, dtype=np.int64)]
        multi = npm > 1
        wl = w_l[np.where(multi, 0, ptok)]
        if M_multi:
            wl[multi] = _bracket_w(L_GRID, ptok[multi] / npm[multi])
        uc, ul, ud = 1.0 - wc, 1.0 - wl, 1.0 - wd
        dt[mi] = ((sv[0] * uc + sv[1] * wc) * ul + (sv[2] * uc + sv[3] * wc) * wl) * ud + \
                 ((sv[4] * uc + sv[5] * wc) * ul + (sv[6] * uc + sv[7] * wc) * wl) * wd
        gbf[mi] = ((gv[0] * uc + gv[1] * wc) * ul + (gv[2] * uc + gv[3] * wc) * wl) * ud + \
                  ((gv[4] * uc + gv[5] * wc) * ul + (gv[6] * uc + gv[7] * wc) * wl) * wd
        cpu_m = cbm[ci, (wd >= 0.5) * 4 + (wl >= 0.5) * 2 + (wc >= 0.5)]
        T = dm + ptok
        rtk = np.asarray(sorted(mroutes), dtype=np.int64)
        rt_graph = np.zeros(int(max(rtk.max(), T.max())) + 1, dtype=bool)
        rt_pad = np.zeros(rt_graph.size, dtype=np.int64)
        rt_graph[rtk] = [mroutes[t][0] != "none" for t in rtk.tolist()]
        rt_pad[rtk] = [mroutes[t][1] for t in rtk.tolist()]
        graph_m = rt_graph[T]
        pad_m = rt_pad[T]
        nbs = np.add.reduceat(nbl[adm], off)  # blocks of the prompts a mixed step admits
        nb1 = np.add.reduceat(np.where(O[adm] <= 1, nbl[adm], 0), off)  # ... of those that finish at once
    d[mi] = dm
    # the steps' start and end times: the clock's sums again, `now + k * dt` from 0 or from the end of each wait
    xs = kk * dt
    start = np.empty(ne)
    end = np.empty(ne)
    marks = dict(zip(*idle))  # the last wait before each event
    if 0 not in marks:
        marks[0] = 0.0
    cuts = sorted(e for e in marks if e < ne)
    for a, b in zip(cuts, cuts[1:] + [ne]):
        c = np.cumsum(np.concatenate(([marks[a]], xs[a:b])))
        start[a:b] = c[:-1]
        end[a:b] = c[1:]
    gstep = np.where(d > 0, kk, 0)
    g_after = np.cumsum(gstep)
    g_before = g_after - gstep
    # the requests' times: first token at the end of the mixed step that admits them, joining the cohort at its
    # counter (outputs of 2 tokens or more), finishing at the end of the step whose counter reaches
    # join + output - 1 (one-token outputs at their first token)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    joinv = np.zeros(n, dtype=np.int64)
    am = np.repeat(mi, npm)  # the mixed step of each admitted request
    first[adm] = end[am]
    one = O[adm] <= 1
    finish[adm[one]] = end[am[one]]
    joined = adm[~one]
    J = joinv[joined] = g_after[am[~one]]
    Fs = J + O[joined] - 1
    fe = np.searchsorted(g_after, Fs, side="left")
    gone = fe < ne
    finish[joined[gone]] = end[fe[gone]]
    _area(col, np.asarray(times[:nxt])[okv[:nxt]], end, np.bincount(np.concatenate((am[one], fe[gone])), minlength=ne))
    # blocks of the decoding requests by step number g (the step that takes the counter from g - 1 to g): request i
    # joined at J (counter after its prefill) decodes steps J + 1 .. J + O - 1 holding ceil((P + g - J) / bs) blocks:
    # its blocks at J + 1, one more every bs steps (a difference array on bs strides), none after its last step.
    # Block counts are exact integers in float64 (far below 2 ** 53)
    Lp = (-(-(G + 2) // bs) + 1) * bs
    Pj, Oj = P[joined], O[joined]
    top = -(-(Pj + Oj - 1) // bs)  # its blocks at its last step
    c0 = -(-(Pj + 1) // bs) * bs  # the first context past prompt + 1 that fills a block
    g0 = J + 1 + c0 - Pj  # the step that takes the next one
    cnt = np.where(c0 <= Pj + Oj - 2, (Pj + Oj - 2 - c0) // bs + 1, 0)
    e = g0 + cnt * bs
    s = cnt > 0
    ends = Fs + 1 < Lp
    ix = np.concatenate((g0[s], e[s & (e < Lp)]))
    cross = np.bincount(ix, weights=np.repeat([1.0, -1.0], [int(s.sum()), ix.size - int(s.sum())]), minlength=Lp)
    cross = cross.reshape(-1, bs).cumsum(axis=0).ravel()
    steps = np.bincount(np.concatenate((J + 1, Fs[ends] + 1)),
                        weights=np.concatenate((-(-(Pj + 1) // bs), -top[ends])).astype(float), minlength=Lp)
    V = np.cumsum(cross + steps)
    PV = np.cumsum(V)
    fin = np.bincount(Fs[Fs < Lp], weights=top[Fs < Lp], minlength=Lp)  # blocks freed at step g
    ga = g_after[di]
    gm = g_before[mi] + 1
    had = dm > 0
    vm = np.where(had, V[gm], 0.0)
    bst = np.empty(ne)
    bst[di] = PV[ga] - PV[g_before[di]]
    bst[mi] = vm + nbs

    def used_end(idx: np.ndarray) -> np.ndarray:
        """Blocks held after the finishes of events idx."""
        g = g_after[idx]
        u = np.where(d[idx] > 0, V[g] - fin[g], 0.0)
        mx = x[idx] < 0
        j = np.searchsorted(mi, idx[mx])
        u[mx] += nbs[j] - nb1[j]
        return u

    # the collector (Collector.on_steps over the steps that start inside the window: a range of events)
    e0, e1 = np.searchsorted(start, [col.w0, col.w1], side="left").tolist()
    a0, a1 = np.searchsorted(di, [e0, e1]).tolist()
    b0, b1 = np.searchsorted(mi, [e0, e1]).tolist()
    per_key = np.bincount(xd[a0:a1], weights=kdec[a0:a1], minlength=nkeys)[keys].astype(np.int64)  # steps by entry
    cpu_k = np.asarray([bool(f[2]) for f in tab], dtype=bool)
    graph_k = np.asarray([bool(f[3]) for f in tab], dtype=bool)
    rows_k = np.asarray([f[4] for f in tab], dtype=np.int64)
    pad_k = np.asarray([f[5] for f in tab], dtype=np.int64)
    gmw = graph_m[b0:b1]
    col.steps += int(kk[e0:e1].sum())
    col.decode_steps += int(per_key.sum())
    col.mixed_steps += b1 - b0
    col.cpu_bound += int(per_key[cpu_k].sum()) + int(cpu_m[b0:b1].sum())
    col.graph_steps += int(per_key[graph_k].sum()) + int(gmw.sum())
    col.rows += int((per_key * rows_k)[graph_k].sum()) + int(T[b0:b1][gmw].sum())
    col.padded += int((per_key * pad_k)[graph_k].sum()) + int(pad_m[b0:b1][gmw].sum())
    col.tokens += int((per_key * d_key).sum()) + int((dm[b0:b1] + npm[b0:b1]).sum())
    col.busy_s += _seqsum(xs[e0:e1])
    col.gpu_s += _seqsum((kk[e0:e1] * gbf[e0:e1]))
    col.block_s += _seqsum(bst[e0:e1] * dt[e0:e1])
    pk = max(int(V[ga[a0:a1]].max()) if a1 > a0 else 0, int((vm + nbs)[b0:b1].max()) if b1 > b0 else 0)
    if pk > col.peak_blocks:
        col.peak_blocks = pk
    if per_key.any():
        h = col.hist
        by_d = np.bincount(d_key, weights=per_key)
        for b in np.flatnonzero(by_d).tolist():
            h[b] = h.get(b, 0) + int(by_d[b])
    # the series (its KV column now that blocks are known)
    kv_div = max(1, kv_blocks)
    series["t"].extend(s_t)
    se = np.asarray(s_e, dtype=np.int64)
    run_e = d[se]
    smx = x[se] < 0
    run_e[smx] += npm[np.searchsorted(mi, se[smx])]
    series["running"].extend(run_e.tolist())
    series["kv_used_frac"].extend(int(u) / kv_div for u in used_end(se).tolist())
    series["queue"].extend(s_q)
    # the scheduler's end state (what summarize reads, and the rest kept consistent)
    sched.G = G
    sched.used = int(used_end(np.asarray([ne - 1]))[0]) if ne else 0
    co = sched.cohort
    co.n, co.base_sum = cn, cbase
    for _, rid, b in heap:
        co.count[b % bs] += 1
    sched.heap[:] = [(f, rid, 0) for f, rid, _ in heap]  # sorted: a heap
    alive = sorted(rid for _, rid, _ in heap)
    state = np.zeros(n, dtype=np.int64)  # WAITING
    rej = np.nonzero(~okv[:nxt])[0]
    state[rej] = REJECTED
    state[adm] = DONE
    gen = np.zeros(n, dtype=np.int64)
    gen[adm] = O[adm]
    comp = np.zeros(n, dtype=np.int64)
    comp[adm] = P[adm]
    target = np.zeros(n, dtype=np.int64)
    target[handed] = P[handed]
    if alive:
        av = np.asarray(alive, dtype=np.int64)
        state[av] = DECODE
        gen[av] = 1
        base = sched.base
        for rid in alive:
            base[rid] = sched.P[rid] - int(joinv[rid])
    if handover:
        sched.state, sched.gen, sched.comp, sched.target = state.tolist(), gen.tolist(), comp.tolist(), target.tolist()
        sched.first_t, sched.finish_t = first.tolist(), finish.tolist()
    else:  # per-request arrays where the loops keep lists (metrics.summarize reads either; nothing else reads them)
        sched.state, sched.gen, sched.comp, sched.target, sched.O = state, gen, comp, target, O
        sched.first_t, sched.finish_t = first, finish
    sched.join = joinv.tolist() if handover else joinv
    sched.running.update((rid, None) for rid in alive)
    sched.waiting.extend(pending)
