"""The replica's event loop with the common steps inlined (plain decoding: no speculative decode).

`replica._loop_reference` drives the loop through `Scheduler.schedule / extend / complete`,
`StepTimer.decode / mixed` and `Collector.track / on_steps`: about 700k events for an hour at 80 req/s, each
paying a dozen method calls, a `Plan` object and attribute look-ups. This loop runs the same arithmetic, in the
same order, on local variables:
- the scheduling point when nothing is prefilling and the decoding cohort's next blocks fit (no preemption):
  the decode rows, then first-come-first-served admissions (`Scheduler.schedule`), without a `Plan` unless
  admission is blocked; every other point (prefilling requests, a pool that must preempt, nothing to run) goes through
  `Scheduler.schedule`, and a plan that it or a blocked admission gives through `Scheduler.extend`, with the
  step counter, block count and cohort totals handed over before and taken back after;
- the merged run of decode-only steps (`Scheduler.extend`, `Cohort.needs_over` for runs shorter than a block
  period), the completion of every step (`Scheduler.complete`: finishes, first tokens, cohort joins) and the
  collector's step and Little's-law sums (`Collector.on_steps / track`);
- a decode step's figures come from a memo keyed by (sequences, context bucket), the key `StepTimer.plain_decode`
  memoises under, and a mixed step's from `StepTimer.mixed`'s interpolation written out (its memos, the same
  operations), when the timer is a `StepTimer` itself (mixed: without engine host work); other timers are asked;
- arrivals are checked against the pool and the limits once for all requests (`Scheduler.arrive`'s test: it
  depends on the request alone).
The scheduler's and collector's state at the end is the reference loop's, so `metrics.summarize` reads the same
figures; tests/serving/test_serving_fastloop.py checks the two loops give identical results on random
configurations.
"""

from __future__ import annotations

import heapq
import math
from operator import mul

import numpy as np

from .scheduler import DECODE, DONE, PREFILL, REJECTED, Plan
from .steptime import C_GRID, D_GRID, L_GRID, StepTimer, bracket


def _admissible(sched, prompt: np.ndarray, output: np.ndarray) -> list[bool]:
    """Scheduler.arrive's test for every request at once (plain decoding: rate 1; lengths as int64 arrays)."""
    lim, bs = sched.lim, sched.bs
    need = prompt.astype(np.int64) + output
    bad = (-(-(need - 1) // bs) > sched.total) | (need > lim.max_model_len)
    if not lim.chunked_prefill:
        bad |= need - 1 > lim.max_num_batched_tokens
    return (~bad).tolist()


def _figures(c) -> tuple:
    """What the loop reads of a StepCost: (step s, GPU busy s, CPU-bound, graph replayed, rows, padded rows)."""
    return c.step_s, c.gpu_busy_s, c.cpu_bound, c.mode != "none", c.rows, c.padded


def loop_fast(cfg, sched, col, timer, times: list, spec, w0: float, w1: float, stop: float, series: dict,
              kv_blocks: int, prompt: np.ndarray, output: np.ndarray, start: tuple | None = None) -> tuple[float, int, int]:
    """`replica._loop_reference` for plain decoding, inlined (module docstring); the same return value and the same
    state left in `sched` and `col`. `start`: (clock, next arrival, next sample, rejected, events) of a run that
    `sched`, `col` and `series` hold up to there (plainloop's kernel hands over); the collector's float sums go on
    from `col`'s, as one loop's would."""
    if spec is not None or sched.rate != 1:
        raise ValueError("the inlined loop is for plain decoding (no speculative decode)")
    heappop, heappush = heapq.heappop, heapq.heappush
    inf, ceil = math.inf, math.ceil
    cb, merge = cfg.ctx_bucket, cfg.merge_steps
    bounds = [w0, w1, stop, inf]
    bi = 0
    lim = sched.lim
    max_seqs, budget, chunked = lim.max_num_seqs, lim.max_num_batched_tokens, lim.chunked_prefill
    total, bs = sched.total, sched.bs
    co = sched.cohort
    count = co.count
    heap, epoch, state, base, gen, join = sched.heap, sched.epoch, sched.state, sched.base, sched.gen, sched.join
    P, O, target, comp, held = sched.P, sched.O, sched.target, sched.comp, sched.held
    first_t, finish_t = sched.first_t, sched.finish_t
    waiting, running, prefilling = sched.waiting, sched.running, sched.prefilling
    schedule, extend, admission_open = sched.schedule, sched.extend, sched.admission_open
    ok = _admissible(sched, prompt, output)
    dmax = min(max_seqs, len(ok))  # the most sequences a step can hold
    decode_time, mixed_time = timer.decode, timer.mixed
    dmemo: dict | None = None
    mfast = False
    if type(timer) is StepTimer and timer.setup.spec is None:  # (a subclass may price steps its own way)
        dmemo, cbt, plain = {}, timer.ctx_bucket, timer.plain_decode
        if timer.scheduling == "none":  # StepTimer.mixed inlined (its memos shared)
            mfast = True
            mroutes, cells, route_mixed, cell_of = timer._mroutes, timer._cells, timer._route_mixed, timer.cell
            bc, bl = timer._brackets_c, timer._brackets_l
            bdl: list = [None] * (dmax + 1)  # bracket(d, D_GRID) by decode rows
            bl1: dict = {}  # bracket(L, L_GRID) of one chunk of L tokens
    # the collector's figures (Collector.on_steps / track), written back at the end
    c_steps = c_dec = c_mix = c_cpu = c_graph = c_rows = c_padded = c_tokens = 0
    c_busy, c_gpu, c_block = col.busy_s, col.gpu_s, col.block_s
    c_peak = col.peak_blocks
    hist = [0] * (dmax + 1)  # Collector.hist by batch
    area, tt, tn = col.area, col._t, col._n
    s_t, s_run, s_kv, s_q = series["t"], series["running"], series["kv_used_frac"], series["queue"]
    kv_div = max(1, kv_blocks)
    every = stop / 500.0
    next_sample = 0.0
    G, used = sched.G, sched.used
    cn, cbase = co.n, co.base_sum  # the decoding cohort's size and summed base (kv.Cohort), handed over around calls
    rejected = events = 0
    now = 0.0
    nxt = 0  # next arrival not yet handed to the scheduler
    if start is not None:
        now, nxt, next_sample, rejected, events = start
    no_chunks: tuple = ()
    while True:
        while times[nxt] <= now:  # hand every request that has arrived by now to the scheduler, in order
            if ok[nxt]:
                target[nxt] = P[nxt]
                waiting.append(nxt)
                t = times[nxt]
                lo = tt if tt >= w0 else w0
                hi = t if t <= w1 else w1
                if hi > lo:
                    area += tn * (hi - lo)
                tt, tn = t, len(waiting) + len(running)
            else:
                state[nxt] = REJECTED
                rejected += 1
            nxt += 1
        # -- the scheduling point (Scheduler.schedule) ------------------------------------------------------------
        g1 = G + 1
        need1 = count[(1 - g1) % bs]
        plan = None
        if not prefilling and need1 <= total - used and (waiting or cn):
            # no preemption, nothing prefilling: decode rows, then admissions (none when nothing waits)
            chunks = no_chunks
            ptok = 0
            if waiting:
                chunks = []
                room = total - used - need1
                while waiting and len(running) < max_seqs:
                    left = budget - cn - ptok
                    if left <= 0:
                        break
                    rid = waiting[0]
                    rem = target[rid]
                    if not chunked and rem > left:
                        break
                    chunk = rem if rem < left else left
                    nb = -(-chunk // bs)
                    if nb > room:
                        break
                    waiting.popleft()
                    running[rid] = None
                    prefilling[rid] = None
                    state[rid] = PREFILL
                    comp[rid], held[rid] = 0, nb
                    used += nb
                    room -= nb
                    chunks.append((rid, chunk))
                    ptok += chunk
                sched.admission_skipped = False
                if not chunks and not cn:  # the scheduler's empty plan
                    ta = times[nxt]
                    if ta == inf or ta >= stop:
                        break
                    now = now + (ta - now)  # idle until the next arrival (the float a timer of ta - now gives)
                    continue
            used += need1
            d = cn
            ctx_sum = cbase + d * g1
            pctx = 0
            peak = bsteps = used
            if waiting and not chunks:  # admission blocked: a decode-only plan that the scheduler's extend takes
                plan = Plan(d, ctx_sum, [], 0, 0, 1, used, used)
        else:
            sched.G, sched.used, co.n, co.base_sum = G, used, cn, cbase
            plan = schedule()
            used, cn, cbase = sched.used, co.n, co.base_sum
            if plan is None:
                ta = times[nxt]
                if ta == inf or ta >= stop:
                    break
                now = now + (ta - now)  # idle until the next arrival (the float a timer of ta - now gives)
                continue
            d, ctx_sum, chunks, ptok, pctx = plan.decode, plan.decode_ctx_sum, plan.chunks, plan.prefill_tokens, \
                plan.prefill_ctx_sum
            peak = bsteps = used
        # -- its step time, and a merged run of decode-only steps (Scheduler.extend) ---------------------------------
        k = 1
        fig = None
        if chunks:
            T = d + ptok
            if mfast:  # StepTimer.mixed
                rt = mroutes.get(T)
                if rt is None:
                    r = route_mixed(T)
                    rt = mroutes[T] = (r.mode, r.executed)
                mode, padded = rt
                graph = mode != "none"
                np_ = len(chunks)
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
                ctx = -(-(ctx_sum + pctx) // (d + np_))
                c0, c1, wc = bc.get(ctx) or bc.setdefault(ctx, bracket(ctx, C_GRID))
                v = cells.get((mode, np_, d0, d1, l0, l1, c0, c1)) or cell_of(mode, np_, d0, d1, l0, l1, c0, c1)
                st, gp, cbv, _ = v
                uc, ul, ud = 1.0 - wc, 1.0 - wl, 1.0 - wd
                dt = ((st[0] * uc + st[1] * wc) * ul + (st[2] * uc + st[3] * wc) * wl) * ud + \
                     ((st[4] * uc + st[5] * wc) * ul + (st[6] * uc + st[7] * wc) * wl) * wd
                gb = ((gp[0] * uc + gp[1] * wc) * ul + (gp[2] * uc + gp[3] * wc) * wl) * ud + \
                     ((gp[4] * uc + gp[5] * wc) * ul + (gp[6] * uc + gp[7] * wc) * wl) * wd
                cpub = cbv[(wd >= 0.5) * 4 + (wl >= 0.5) * 2 + (wc >= 0.5)]  # the nearest grid point decides
                rows = T
            else:
                np_ = len(chunks)
                cost = mixed_time(d, np_, ptok, -(-(ctx_sum + pctx) // (d + np_)))
                dt, gb, cpub, graph, rows, padded = _figures(cost)
        else:
            ctx = -(-ctx_sum // d)
            if dmemo is not None:
                key = (-(-ctx // cbt) << 32) | d
                fig = dmemo.get(key)
                if fig is None:
                    fig = dmemo[key] = [*_figures(plain(d, ctx)), 0]
                dt, gb = fig[0], fig[1]
            else:
                fig = None
                dt, gb, cpub, graph, rows, padded = _figures(decode_time(d, ctx))
            if merge:
                while bounds[bi] <= now:
                    bi += 1
                bnd = bounds[bi]
                cap = ceil((bnd - now) / dt) if bnd != inf else 1 << 62
                ta = times[nxt]
                if plan is not None:  # through the scheduler
                    if ta != inf and admission_open():
                        ka = ceil((ta - now) / dt)
                        if ka < cap:
                            cap = ka
                    if cap > 1:
                        sched.G, sched.used, co.n, co.base_sum = G, used, cn, cbase
                        k = extend(plan, cap, cb)
                        used, peak, bsteps = sched.used, plan.peak_used, plan.block_steps
                else:
                    if ta != inf and len(running) < max_seqs:  # admission open (nothing waits here)
                        ka = ceil((ta - now) / dt)
                        if ka < cap:
                            cap = ka
                    if cap > 1:  # Scheduler.extend (the plan has no chunks and admission was not skipped)
                        h0 = heap[0]
                        if sched.preemptions:  # entries go stale only when a request is preempted
                            while h0[2] != epoch[h0[1]] or state[h0[1]] != DECODE:
                                heappop(heap)
                                h0 = heap[0]
                        k = h0[0] - G
                        if cap < k:
                            k = cap
                        kc = -(-ctx // cb) * cb - ctx + 1  # ctx = ceil(cbase / d) + g1, the next step's mean
                        if kc < k:
                            k = kc
                        if k > 1:
                            free = total - used
                            if free < d * (-(-(k - 1) // bs)):
                                co.n = cn
                                ka = 1 + co.steps_affordable(g1 + 1, free)
                                if ka < k:
                                    k = ka
                            if k > 1:
                                rem = k - 1
                                if rem < bs:  # Cohort.needs_over(g1 + 1, rem) of a run shorter than a period
                                    o = -g1 % bs
                                    head = count[o:o - rem:-1] if rem <= o else count[o::-1] + count[:o - rem:-1]
                                    taken = sum(head)
                                    weighted = rem * taken - sum(map(mul, head, range(rem)))
                                else:
                                    co.n = cn
                                    taken, weighted = co.needs_over(g1 + 1, rem)
                                bsteps = k * used + weighted
                                used += taken
                                peak = used
                            else:
                                k = 1
                        else:
                            k = 1
        events += 1
        start = now
        now = now + k * dt
        while times[nxt] <= now:
            if ok[nxt]:
                target[nxt] = P[nxt]
                waiting.append(nxt)
                t = times[nxt]
                lo = tt if tt >= w0 else w0
                hi = t if t <= w1 else w1
                if hi > lo:
                    area += tn * (hi - lo)
                tt, tn = t, len(waiting) + len(running)
            else:
                state[nxt] = REJECTED
                rejected += 1
            nxt += 1
        # -- the step's completion (Scheduler.complete) ----------------------------------------------------------
        done = False
        tokens = 0
        if d:
            G += k
            tokens = d * k
            while heap and heap[0][0] <= G:
                _, rid, e = heappop(heap)
                if e != epoch[rid] or state[rid] != DECODE:
                    continue
                b = base[rid]
                count[b % bs] -= 1
                cn -= 1
                cbase -= b
                used -= -(-(b + G) // bs)
                gen[rid] = O[rid]
                state[rid] = DONE
                finish_t[rid] = now
                del running[rid]
                done = True
        for rid, chunk in chunks:
            c = comp[rid] + chunk
            comp[rid] = c
            if c < target[rid]:
                continue
            del prefilling[rid]
            gen[rid] += 1
            tokens += 1
            if first_t[rid] != first_t[rid]:  # nan: first token
                first_t[rid] = now
            if gen[rid] >= O[rid]:
                used -= held[rid]
                held[rid] = 0
                state[rid] = DONE
                finish_t[rid] = now
                del running[rid]
                done = True
                continue
            held[rid] = 0
            state[rid] = DECODE
            b = target[rid] - G
            base[rid] = b
            join[rid] = G
            count[b % bs] += 1
            cn += 1
            cbase += b
            heappush(heap, (G + O[rid] - gen[rid], rid, epoch[rid]))
        if w0 <= start < w1 and fig is not None:  # Collector.on_steps of a memoised decode step: its counts by entry
            c_busy += k * dt
            c_gpu += k * gb
            fig[6] += k
            c_block += bsteps * dt
            if peak > c_peak:
                c_peak = peak
        elif w0 <= start < w1:  # Collector.on_steps
            c_steps += k
            c_busy += k * dt
            c_gpu += k * gb
            if cpub:
                c_cpu += k
            if graph:
                c_graph += k
                c_rows += k * rows
                c_padded += k * padded
            if chunks:
                c_mix += k
            else:
                c_dec += k
                hist[d] += k
            c_tokens += tokens
            c_block += bsteps * dt
            if peak > c_peak:
                c_peak = peak
        if done:
            lo = tt if tt >= w0 else w0
            hi = now if now <= w1 else w1
            if hi > lo:
                area += tn * (hi - lo)
            tt, tn = now, len(waiting) + len(running)
        if now >= next_sample:
            s_t.append(now)
            s_run.append(d + len(chunks))
            s_kv.append(used / kv_div)
            s_q.append(len(waiting))
            next_sample = now + every
        if now >= stop:
            break
    sched.G, sched.used, co.n, co.base_sum = G, used, cn, cbase
    if dmemo is not None:  # the memoised decode steps' counts (their figures depend on the entry alone)
        for key, (_, _, cpub, graph, rows, padded, n) in dmemo.items():
            if n:
                d = key & 0xFFFFFFFF
                c_steps += n
                c_dec += n
                hist[d] += n
                c_tokens += d * n
                if cpub:
                    c_cpu += n
                if graph:
                    c_graph += n
                    c_rows += n * rows
                    c_padded += n * padded
    col.steps += c_steps
    col.decode_steps += c_dec
    col.mixed_steps += c_mix
    col.cpu_bound += c_cpu
    col.graph_steps += c_graph
    col.rows += c_rows
    col.padded += c_padded
    col.tokens += c_tokens
    col.busy_s = c_busy  # (the sums went on from col's)
    col.gpu_s = c_gpu
    col.block_s = c_block
    col.peak_blocks = c_peak
    h = col.hist
    for b, c in enumerate(hist):
        if c:
            h[b] = h.get(b, 0) + c
    col.area, col._t, col._n = area, tt, tn
    return now, rejected, events
