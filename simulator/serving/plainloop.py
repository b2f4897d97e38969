"""The replica's event loop where the scheduler's limits provably do not bind: a lean sequential kernel, then the
bookkeeping for every event at once in numpy.

`fastloop.loop_fast` pays, per event, for what decides the trajectory (the clock, the decoding cohort, admissions,
the step's time, where a merged run stops) and for what only measures it (the KV pool's blocks, summed over each
run's steps; the collector's step, busy, GPU, block and token sums; the batch histogram). Here the kernel keeps only
the first and logs each event (its start, steps, decode rows or memo key, and for mixed steps the grid cell and
weights); `_settle` then computes the second from the log with numpy, in event order where floats are summed
(`np.cumsum` adds sequentially, as the loop's `+=`), so the figures are loop_fast's bit for bit.

The kernel runs only while nothing the scheduler would do can differ from "admit every waiting request whole at
the next scheduling point, never preempt":
- every waiting request is admitted at once: `max_num_seqs` and the token budget (its whole prompt, no chunking)
  allow all of them;
- the KV pool cannot run short: the blocks the running requests could ever hold (each ceil((prompt + output - 1) /
  block size), its blocks when it finishes) fit in the pool. Then the scheduler's block checks all pass (its
  admission room, the decode rows' next blocks, `Scheduler.extend`'s affordability of a run, which stops at the first
  finish anyway), so the kernel does not track blocks at all; `_settle` computes them: a decoding request holds
  ceil(context / block size) blocks, a function of the step counter, summed over requests as a difference array
  (its blocks at joining, +1 every block size steps, laid out on block-size strides, minus its blocks when it leaves).
The first time this does not hold (a request that would wait or prefill in chunks, a pool that could run short), at
that scheduling point, the kernel settles its log so far into the scheduler, the collector and the series (the state
`loop_fast` would have there, its float sums to go on from) and hands the run over to `loop_fast` from there. Plain
decoding only, with `StepTimer`'s forward alone (scheduling "none"), the case the timer's memos are inlined for;
otherwise it returns None at once and the caller runs `loop_fast`.
tests/serving/test_serving_plainloop.py checks it against both loops on random workloads, limits binding or not.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from .fastloop import _admissible, loop_fast
from .scheduler import DECODE, DONE, REJECTED
from .steptime import C_GRID, D_GRID, L_GRID, StepTimer, bracket

taken = 0  # runs the kernel finished (tests read it to check that the kernel, not the fallback, ran)
handed = 0  # runs it handed over to the inlined loop part way


def _figures(c) -> tuple:
    return c.step_s, c.gpu_busy_s, c.cpu_bound, c.mode != "none", c.rows, c.padded


def _weights(q: np.ndarray, weight) -> np.ndarray:
    """weight(value) for every entry of the int array q, computed once per distinct value."""
    u, inv = np.unique(q, return_inverse=True)
    return np.asarray([weight(v) for v in u.tolist()], dtype=float)[inv]


def _seqsum(a: np.ndarray) -> float:
    """a[0] + a[1] + ... added left to right, as a loop's `s += x` from 0.0."""
    return float(np.cumsum(a)[-1]) if a.size else 0.0


def loop_plain(cfg, sched, col, timer, times: list, w0: float, w1: float, stop: float, series: dict,
               kv_blocks: int, prompt: np.ndarray, output: np.ndarray) -> tuple[float, int, int] | None:
    """`fastloop.loop_fast`'s result and end state (handing over to it where a limit could bind), or None (nothing
    done) where the kernel does not apply."""
    global taken, handed
    if sched.spec is not None or sched.rate != 1 or type(timer) is not StepTimer or timer.setup.spec is not None \
            or timer.scheduling != "none" or sched.G or sched.used or sched.waiting or sched.running:
        return None
    n = len(sched.P)
    if n and (int(prompt.min()) < 1 or int(output.min()) < 1):
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
    p64, o64 = prompt.astype(np.int64), output.astype(np.int64)
    mb = np.maximum(-(-(p64 + o64 - 1) // bs), -(-p64 // bs)).tolist()  # the most blocks a request holds
    dmax = min(max_seqs, n)
    dmemo: dict = {}
    cbt, plain = timer.ctx_bucket, timer.plain_decode
    mroutes, cells, route_mixed, cell_of = timer._mroutes, timer._cells, timer._route_mixed, timer.cell
    bc, bl = timer._brackets_c, timer._brackets_l
    bdl: list = [None] * (dmax + 1)
    bl1: dict = {}
    first_t, finish_t, join = [math.nan] * n, [math.nan] * n, [0] * n
    area, tt, tn = col.area, col._t, col._n
    every = stop / 500.0
    next_sample = 0.0
    s_t: list = []
    s_run: list = []
    s_q: list = []
    s_e: list = []
    # the log (small ints, which numpy reads fast; _settle recomputes the floats): every event's steps and decode
    # memo key (-1 for a mixed step); each mixed step's decode rows, chunks, mean context and grid cell; the clock
    # after each wait for an arrival (by the index of the event that follows it)
    E_k: list = []
    E_x: list = []
    M_d: list = []
    M_np: list = []
    M_ctx: list = []
    M_v: list = []
    I_e: list = []
    I_now: list = []
    kd = dmax + 1  # memo key: context bucket * kd + decode rows
    heap: list = []  # (finish step, id, cohort base)
    pending: list = []  # waiting requests (all admitted at the next scheduling point)
    G = cn = cbase = ub = 0
    rejected = events = 0
    now = 0.0
    nxt = 0
    no_chunks: tuple = ()
    aborted = False
    waited = True
    while True:
        if waited:  # arrivals at 0 or at the end of a wait for one (after a step, the step's end handed them over)
            waited = False
            while times[nxt] <= now:
                if ok[nxt]:
                    pending.append(nxt)
                    t = times[nxt]
                    lo = tt if tt >= w0 else w0
                    hi = t if t <= w1 else w1
                    if hi > lo:
                        area += tn * (hi - lo)
                    tt, tn = t, len(pending) + cn
                else:
                    rejected += 1
                nxt += 1
        g1 = G + 1
        d = cn
        if pending:  # a mixed step admitting every waiting request whole, or give up
            np_ = len(pending)
            if cn + np_ > max_seqs:
                aborted = True
                break
            if np_ == 1:
                rid = pending[0]
                ptok = P[rid]
                if ptok > budget - cn:
                    aborted = True
                    break
                ub += mb[rid]
            else:
                ptok = 0
                for rid in pending:
                    left = budget - cn - ptok
                    rem = P[rid]
                    if left <= 0 or rem > left:
                        aborted = True
                        break
                    ptok += rem
                    ub += mb[rid]
                if aborted:
                    break
            if ub > total:
                aborted = True
                break
            chunks = pending
            pending = []
            T = d + ptok
            rt = mroutes.get(T)
            if rt is None:
                r = route_mixed(T)
                rt = mroutes[T] = (r.mode, r.executed)
            mode = rt[0]
            bk = bdl[d]
            if bk is None:
                bk = bdl[d] = bracket(d, D_GRID)
            d0, d1, wd = bk
            if np_ == 1:
                bk = bl1.get(ptok)
                if bk is None:
                    bk = bl1[ptok] = bracket(ptok, L_GRID)
            else:
                lk = (ptok, np_)
                bk = bl.get(lk) or bl.setdefault(lk, bracket(ptok / np_, L_GRID))
            l0, l1, wl = bk
            ctx = -(-(cbase + d * g1) // (d + np_))
            c0, c1, wc = bc.get(ctx) or bc.setdefault(ctx, bracket(ctx, C_GRID))
            v = cells.get((mode, np_, d0, d1, l0, l1, c0, c1)) or cell_of(mode, np_, d0, d1, l0, l1, c0, c1)
            st = v[0]
            uc, ul, ud = 1.0 - wc, 1.0 - wl, 1.0 - wd
            dt = ((st[0] * uc + st[1] * wc) * ul + (st[2] * uc + st[3] * wc) * wl) * ud + \
                 ((st[4] * uc + st[5] * wc) * ul + (st[6] * uc + st[7] * wc) * wl) * wd
            k = 1
            M_d.append(d)
            M_np.append(np_)
            M_ctx.append(ctx)
            M_v.append(v)
            E_x.append(-1)
        elif cn:  # a run of decode-only steps
            chunks = no_chunks
            np_ = 0
            ctx = -(-(cbase + d * g1) // d)
            key = -(-ctx // cbt) * kd + d
            fig = dmemo.get(key)
            if fig is None:
                fig = dmemo[key] = _figures(plain(d, ctx))
            dt = fig[0]
            k = 1
            if merge:
                while bounds[bi] <= now:
                    bi += 1
                bnd = bounds[bi]
                ta = times[nxt]
                if ta <= bnd and ta != inf and cn < max_seqs:  # the arrival comes first (ceil is monotone)
                    cap = ceil((ta - now) / dt)
                else:
                    cap = ceil((bnd - now) / dt) if bnd != inf else 1 << 62
                    if ta != inf and cn < max_seqs:
                        ka = ceil((ta - now) / dt)
                        if ka < cap:
                            cap = ka
                if cap > 1:  # Scheduler.extend: the first finish, the context bucket (the pool cannot run short)
                    k = heap[0][0] - G
                    if cap < k:
                        k = cap
                    kc = -(-ctx // cb) * cb - ctx + 1
                    if kc < k:
                        k = kc
            E_x.append(key)
        else:  # nothing to run: idle until the next arrival
            ta = times[nxt]
            if ta == inf or ta >= stop:
                break
            now = now + (ta - now)
            I_e.append(events)
            I_now.append(now)
            waited = True
            continue
        events += 1
        E_k.append(k)
        now = now + k * dt
        while times[nxt] <= now:
            if ok[nxt]:
                pending.append(nxt)
                t = times[nxt]
                lo = tt if tt >= w0 else w0
                hi = t if t <= w1 else w1
                if hi > lo:
                    area += tn * (hi - lo)
                tt, tn = t, len(pending) + d + np_
            else:
                rejected += 1
            nxt += 1
        done = False
        if d:
            G += k
            while heap and heap[0][0] <= G:
                _, rid, b = heappop(heap)
                cn -= 1
                cbase -= b
                ub -= mb[rid]
                finish_t[rid] = now
                done = True
        for rid in chunks:
            first_t[rid] = now
            if O[rid] <= 1:
                finish_t[rid] = now
                ub -= mb[rid]
                done = True
                continue
            b = P[rid] - G
            join[rid] = G
            cn += 1
            cbase += b
            heappush(heap, (G + O[rid] - 1, rid, b))
        if done:
            lo = tt if tt >= w0 else w0
            hi = now if now <= w1 else w1
            if hi > lo:
                area += tn * (hi - lo)
            tt, tn = now, len(pending) + cn
        if now >= next_sample:
            s_t.append(now)
            s_run.append(d + np_)
            s_q.append(len(pending))
            s_e.append(events - 1)
            next_sample = now + every
        if now >= stop:
            break
    col.area, col._t, col._n = area, tt, tn
    _settle(sched, col, series, kv_blocks, p64, o64, dmemo, kd, mroutes, ok, nxt, pending, heap, G, cn, cbase,
            first_t, finish_t, join, E_k, E_x, (M_d, M_np, M_ctx, M_v), (I_e, I_now), bdl, s_t, s_run, s_q, s_e,
            aborted)
    if aborted:  # a limit could bind from this scheduling point on: the inlined loop takes the run over from here
        handed += 1
        return loop_fast(cfg, sched, col, timer, times, None, w0, w1, stop, series, kv_blocks, prompt, output,
                         start=(now, nxt, next_sample, rejected, events))
    taken += 1
    return now, rejected, events


def _settle(sched, col, series, kv_blocks, P, O, dmemo, kd, mroutes, ok, nxt, pending, heap, G, cn, cbase, first_t,
            finish_t, join, E_k, E_x, M, idle, bdl, s_t, s_run, s_q, s_e, handover: bool = False) -> None:
    """The collector's sums, the KV figures, the series' KV column and the scheduler's end state, from the log
    (`handover`: the state `fastloop.loop_fast` goes on from, per-request lists as the scheduler keeps them)."""
    bs = sched.bs
    n = len(P)
    okv = np.asarray(ok, dtype=bool)
    ne = len(E_k)
    kk = np.asarray(E_k, dtype=np.int64)
    x = np.asarray(E_x, dtype=np.int64)
    di = np.flatnonzero(x >= 0)  # the decode runs
    mi = np.flatnonzero(x < 0)  # the mixed steps
    M_d, M_np, M_ctx, M_v = M
    nm = len(M_v)
    # the admitted requests, in admission order (first come first served, each admitted whole): those that arrived,
    # were not rejected and are not still waiting
    handed = np.flatnonzero(okv[:nxt])
    adm = handed[:handed.size - len(pending)]
    nbl = -(-P // bs)  # a prompt's blocks
    dt = np.empty(ne)
    gbf = np.empty(ne)
    d = np.empty(ne, dtype=np.int64)
    # decode runs: figures by memo entry
    keys, inv = np.unique(x[di], return_inverse=True)
    tab = [dmemo[q] for q in keys.tolist()]
    kdec = kk[di]
    d_key = keys % kd
    d[di] = d_key[inv]
    dt[di] = np.asarray([f[0] for f in tab], dtype=float)[inv]
    gbf[di] = np.asarray([f[1] for f in tab], dtype=float)[inv]
    # mixed steps: StepTimer.mixed's figures again, from the cell and the brackets (the kernel's arithmetic)
    npm = np.asarray(M_np, dtype=np.int64)
    dm = np.asarray(M_d, dtype=np.int64)
    cpu_m = graph_m = np.zeros(0, dtype=bool)
    pad_m = T = nbs = nb1 = np.zeros(0, dtype=np.int64)
    if nm:
        off = np.concatenate(([0], np.cumsum(npm)[:-1]))
        ptok = np.add.reduceat(P[adm], off)
        ids = np.fromiter(map(id, M_v), dtype=np.int64, count=nm)  # the cells (one tuple each, the timer's memo)
        _, first, ci = np.unique(ids, return_index=True, return_inverse=True)
        uv = [M_v[i] for i in first.tolist()]
        sv = np.asarray([v[0] for v in uv], dtype=float)[ci].T
        gv = np.asarray([v[1] for v in uv], dtype=float)[ci].T
        cbm = np.asarray([v[2] for v in uv], dtype=bool)
        wd = _weights(dm, lambda q: (bdl[q] if q < len(bdl) and bdl[q] is not None else bracket(q, D_GRID))[2])
        m = int(npm.max()) + 1
        wl = _weights(ptok * m + npm, lambda q: bracket(q // m if q % m == 1 else (q // m) / (q % m), L_GRID)[2])
        wc = _weights(np.asarray(M_ctx, dtype=np.int64), lambda q: bracket(q, C_GRID)[2])
        uc, ul, ud = 1.0 - wc, 1.0 - wl, 1.0 - wd
        dt[mi] = ((sv[0] * uc + sv[1] * wc) * ul + (sv[2] * uc + sv[3] * wc) * wl) * ud + \
                 ((sv[4] * uc + sv[5] * wc) * ul + (sv[6] * uc + sv[7] * wc) * wl) * wd
        gbf[mi] = ((gv[0] * uc + gv[1] * wc) * ul + (gv[2] * uc + gv[3] * wc) * wl) * ud + \
                  ((gv[4] * uc + gv[5] * wc) * ul + (gv[6] * uc + gv[7] * wc) * wl) * wd
        cpu_m = cbm[ci, (wd >= 0.5) * 4 + (wl >= 0.5) * 2 + (wc >= 0.5)]
        T = dm + ptok
        ts, tinv = np.unique(T, return_inverse=True)
        rts = [mroutes[t] for t in ts.tolist()]
        graph_m = np.asarray([r[0] != "none" for r in rts], dtype=bool)[tinv]
        pad_m = np.asarray([r[1] for r in rts], dtype=np.int64)[tinv]
        nbs = np.add.reduceat(nbl[adm], off)  # blocks of the prompts a mixed step admits
        nb1 = np.add.reduceat(np.where(O[adm] <= 1, nbl[adm], 0), off)  # ... of those that finish at once
    d[mi] = dm
    # the steps' start times: the clock's sums again, `now + k * dt` from 0 or from the end of each wait
    xs = kk * dt
    start = np.empty(ne)
    marks = dict(zip(*idle))  # the last wait before each event
    if 0 not in marks:
        marks[0] = 0.0
    cuts = sorted(e for e in marks if e < ne)
    for a, b in zip(cuts, cuts[1:] + [ne]):
        seg = np.concatenate(([marks[a]], xs[a:b - 1]))
        start[a:b] = np.cumsum(seg)
    gstep = np.where(d > 0, kk, 0)
    g_after = np.cumsum(gstep)
    g_before = g_after - gstep
    # blocks of the decoding requests by step number g (the step that takes the counter from g - 1 to g): request i
    # joined at J (counter after its prefill) decodes steps J + 1 .. J + O - 1 holding ceil((P + g - J) / bs) blocks:
    # its blocks at J + 1, one more every bs steps (a difference array on bs strides), none after its last step.
    # Block counts are exact integers in float64 (far below 2 ** 53)
    Lp = (-(-(G + 2) // bs) + 1) * bs
    joined = adm[O[adm] >= 2]
    J = np.asarray(join, dtype=np.int64)[joined]
    Pj, Oj = P[joined], O[joined]
    Fs = J + Oj - 1
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
    per_key = np.bincount(inv[a0:a1], weights=kdec[a0:a1], minlength=keys.size).astype(np.int64)  # steps by entry
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
    series["running"].extend(s_run)
    series["kv_used_frac"].extend(int(u) / kv_div for u in used_end(np.asarray(s_e, dtype=np.int64)).tolist())
    series["queue"].extend(s_q)
    # the scheduler's end state (what summarize reads, and the rest kept consistent)
    sched.G = G
    sched.used = int(used_end(np.asarray([ne - 1]))[0]) if ne else 0
    co = sched.cohort
    co.n, co.base_sum = cn, cbase
    for _, rid, b in heap:
        co.count[b % bs] += 1
    sched.heap[:] = [(f, rid, 0) for f, rid, _ in heap]
    alive = sorted(rid for _, rid, _ in heap)
    sched.first_t, sched.finish_t = first_t, finish_t
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
            base[rid] = sched.P[rid] - join[rid]
    if handover:
        sched.state, sched.gen, sched.comp, sched.target = state.tolist(), gen.tolist(), comp.tolist(), target.tolist()
    else:  # per-request arrays where the loops keep lists (metrics.summarize reads either; nothing else reads them)
        sched.state, sched.gen, sched.comp, sched.target, sched.O = state, gen, comp, target, O
    sched.join = join
    sched.running.update((rid, None) for rid in alive)
    sched.waiting.extend(pending)
