"""The vectorised engine: the same model as `des.py` as max-plus recurrences in numpy.

With c_i = gap_i + gpu_i and a_i the submission time of kernel i's launch, the stream obeys
    end_i = max(a_i, end_{i-1}) + c_i,
a max-plus scan: end_i = C_i + max(end_init, max_{k<=i}(a_k - C_k + c_k)), with C the running sum
of c. The host obeys submit_j = max(submit_{j-1} + host_j, leave_{j-Q}) (Q = queue depth, leave =
start of a launch's last kernel). Without stalls both scans run over the whole step at once. Where
the queue fills, launches are processed in blocks of Q: inside a block every leave_{j-Q} it needs is
already final, so each block is again two vectorised scans; once a block ends with no stall in force
the rest is tried unconstrained again. Runs of full blocks are first tried at once, as rows of one array, on the
guess that the GPU never waits in them (checked; bitwise the block loop's values, `_saturated_blocks`).
`step_times` gives the step times of many host-noise replicates of one plan in one pass.

Memory (what bounds long plans, 1M kernels: a fresh array costs first-touch page faults, a pass over data not in
cache several times a pass over data in it): the prefix sums live in the buffers of the stall and gpu_start arrays
(written last), so a call touches four fresh arrays, one allocation; on long plans D = C - c is formed where it is
read, the prefix sums are filled in pieces just ahead of the blocks, and the blocked mode writes stall and
gpu_start behind itself while those rows are in cache. Every value is the same floating-point operation on the same
inputs as one pass over the whole arrays (tests/engine: bitwise, hypothesis).

Host syncs (`wait_kernel`, multi-step plans): launch j with a sync starts its host work no earlier than
the end of the kernel it waits for, submit_j = max(max(submit_{j-1}, end_w) + host_j, leave_{j-Q}). No
block crosses a synced launch: each block starts at one, where that kernel's end is already final, and
the block's starting host time is lifted to it.
"""

from __future__ import annotations

import numpy as np

from simulator.engine.plan import LaunchPlan
from simulator.engine.timeline import Timeline


def simulate_fast(plan: LaunchPlan) -> Timeline:
    host, counts, gpu, gap = plan.host_s, plan.kernels_per_launch, plan.gpu_s, plan.gap_s
    n_l, n_k, Q = host.size, gpu.size, plan.queue_depth
    single = n_k == n_l  # every launch submits one kernel: launch and kernel indices coincide
    if single:  # launch j is kernel j: index maps, not arrays
        last_k = first_k = _SAME
    else:
        last_k = np.cumsum(counts) - 1  # type: ignore[assignment]  # each launch's last kernel
        first_k = last_k - counts + 1  # type: ignore[assignment]
    # global prefix sums: a block [j0, j1) needs only slices of these. H and C live in the buffers of the stall and
    # gpu_start arrays, which are written last, from submit and end: on long plans first-touch page faults on fresh
    # memory cost more than a pass of arithmetic over it, and this keeps the fresh arrays to the four the timeline
    # returns (one allocation for the four: fewer faults than four, numpy asks for huge pages on large ones)
    # H: host time up to and including launch j; C: stream time up to and including kernel i (running sums of host
    # and of c_i = gap_i + gpu_i); D = C - c, stream time excluding kernel i. Short plans get all three at once (D a
    # small array of its own). Long plans form D where it is read (`_ds`) and fill H and C just ahead of where they
    # are read (`ahead`), so that a block's prefix sums are still in cache when it runs; each piece continues the
    # previous one's sum, the same sequence of additions as one running sum over the whole array
    D = None
    if n_l <= _PREFIX_ALL and n_k <= _PREFIX_ALL:
        H = np.cumsum(host)
        c = np.add(gap, gpu)
        C = np.cumsum(c)
        D = np.subtract(C, c, out=c)
        submit, end = np.empty(n_l), np.empty(n_k)
    else:
        mem = np.empty(2 * (n_l + n_k))
        submit, H, end, C = mem[:n_l], mem[n_l:2 * n_l], mem[2 * n_l:2 * n_l + n_k], mem[2 * n_l + n_k:]
    filled = [0, 0] if D is None else [n_l, n_k]  # H and C hold final values below these

    def ahead(jh: int, kc: int) -> None:
        h0, c0 = filled
        if jh > h0:
            h1 = n_l if n_l <= _PREFIX_ALL else min(n_l, max(jh, h0 + _PREFIX_MIN))
            seg = H[h0:h1]
            np.copyto(seg, host[h0:h1])
            if h0:
                seg[0] = H[h0 - 1] + seg[0]
            np.cumsum(seg, out=seg)
            filled[0] = h1
        if kc > c0:
            c1 = n_k if n_k <= _PREFIX_ALL else min(n_k, max(kc, c0 + _PREFIX_MIN))
            seg = C[c0:c1]
            np.add(gap[c0:c1], gpu[c0:c1], out=seg)
            if c0:
                seg[0] = C[c0 - 1] + seg[0]
            np.cumsum(seg, out=seg)
            filled[1] = c1

    acc = np.maximum.accumulate

    def run_block(j0: int, j1: int, floor, sub_prev: float, end_prev: float) -> None:
        """submit_j = max(submit_{j-1} + host_j, floor_j); end_i = max(ready_i, end_{i-1}) + c_i.
        Written in place into submit and end (the same operations as sub = hj + max(acc(floor - hj), ...))."""
        k0, k1 = first_k[j0], last_k[j1 - 1] + 1
        if D is None:
            ahead(j1, k1)
        hj = H[j0:j1]
        h_prev = H[j0 - 1] if j0 else 0.0
        sub = submit[j0:j1]
        if floor is None:
            np.add(hj, sub_prev - h_prev, out=sub)
        else:
            t = floor - hj
            acc(t, out=t)
            np.maximum(t, sub_prev - h_prev, out=t)
            np.add(hj, t, out=sub)
        ready = sub if single else np.repeat(sub, counts[j0:j1])
        e = end[k0:k1]
        if D is None:
            np.subtract(ready, _ds(C, D, gap, gpu, k0, k1, e), out=e)
            acc(e, out=e)
            np.maximum(e, end_prev - (C[k0] - (gap[k0] + gpu[k0])), out=e)
        else:
            np.subtract(ready, D[k0:k1], out=e)
            acc(e, out=e)
            np.maximum(e, end_prev - D[k0], out=e)
        np.add(C[k0:k1], e, out=e)

    def leave(j0: int, j1: int) -> np.ndarray:
        if single:
            return end[j0:j1] - gpu[j0:j1]
        lk = last_k[j0:j1]
        return end[lk] - gpu[lk]

    wk = plan.wait_kernel
    bounds = np.flatnonzero(wk >= 0) if wk is not None else np.empty(0, dtype=np.int64)

    def cap(j0: int, j1: int) -> int:
        """j1 cut at the first synced launch after j0: no block crosses a sync."""
        if not bounds.size:
            return j1
        i = int(np.searchsorted(bounds, j0, side="right"))
        return min(j1, int(bounds[i])) if i < bounds.size else j1

    def lifted(j0: int, sub_prev: float) -> float:
        """The host time launch j0's work starts from: after the previous submit and any kernel it waits for."""
        if wk is not None and wk[j0] >= 0:
            return max(sub_prev, float(end[wk[j0]]))
        return sub_prev

    j0, sub_prev, end_prev = 0, 0.0, 0.0
    fin = 0  # launches (single, no syncs) whose stall and gpu_start are already written: [0, fin)
    window = 8 * Q  # optimistic windows grow while no stall shows up
    while j0 < n_l:
        # optimistic pass: no queue stalls in [j0, j1); keep it up to the first launch that would stall
        j1 = cap(j0, min(n_l, j0 + window))
        sub_prev = lifted(j0, sub_prev)
        run_block(j0, j1, None, sub_prev, end_prev)
        js0 = max(j0, Q)
        bad = np.empty(0, dtype=np.int64)
        if js0 < j1:
            bound = submit[js0 - 1:j1 - 1] + host[js0:j1]  # the host-only chain: previous submit + host work
            if js0 == j0:
                bound[0] = sub_prev + host[j0]
            bad = np.flatnonzero(leave(js0 - Q, j1 - Q) > bound)
        if bad.size == 0:
            sub_prev, end_prev = float(submit[j1 - 1]), float(end[last_k[j1 - 1]])
            j0 = j1
            window *= 2
            continue
        window = 8 * Q
        j0 = js0 + int(bad[0])
        sub_prev = float(submit[j0 - 1])
        end_prev = float(end[first_k[j0] - 1])
        # blocked mode: blocks of Q launches, each needing only leave times already final
        if single and wk is None:
            j0, sub_prev, end_prev, fin = _blocked_single(j0, Q, H, C, D, gap, host, gpu, submit, end, fin, ahead)
            continue
        while j0 < n_l:
            j1 = cap(j0, min(n_l, j0 + Q))
            sub_prev = lifted(j0, sub_prev)
            floor = leave(j0 - Q, j1 - Q)
            run_block(j0, j1, floor, sub_prev, end_prev)
            # the bound binds where the floor lifted submit above the host-only chain
            binding = floor[0] > sub_prev + host[j0] or bool(
                np.greater(floor[1:], submit[j0:j1 - 1] + host[j0 + 1:j1]).any())
            sub_prev, end_prev = float(submit[j1 - 1]), float(end[last_k[j1 - 1]])
            j0 = j1
            if not binding:
                break
    wait = None
    if wk is not None:
        start_cpu = np.concatenate(([0.0], submit[:-1]))
        wait = np.zeros(n_l)
        m = wk >= 0
        wait[m] = np.maximum(end[wk[m]] - start_cpu[m], 0.0)
        start_cpu = start_cpu + wait
        stall = np.maximum(submit - start_cpu - host, 0.0, out=H)
        np.subtract(end, gpu, out=C)
    else:
        stall = H
        if fin:  # single-kernel launches, partly written behind the blocked mode
            if n_l > fin:
                _finish(fin, n_l, submit, host, gpu, end, H, C)
        else:  # the same operations over the whole arrays: (submit_j - submit_{j-1}) - host_j, at least 0
            if n_l:
                stall[0] = submit[0] - 0.0
                np.subtract(submit[1:], submit[:-1], out=stall[1:])
                np.subtract(stall, host, out=stall)
                np.maximum(stall, 0.0, out=stall)
            np.subtract(end, gpu, out=C)
    return Timeline(plan, submit, stall, C, end, wait)


def step_times(plan: LaunchPlan, hosts: np.ndarray) -> np.ndarray:
    """Step time of `plan` under each row of `hosts` (host times of replicates): bitwise
    `step_s(simulate_fast(plan.with_host(row)))` for every row. The rows go through `simulate_fast`'s first
    unconstrained pass together (the same operations along each row) where that pass covers the whole plan; a row
    where the queue would bind, and any plan the pass does not cover in one window, run alone."""
    from simulator.engine.timeline import step_s

    hosts = np.asarray(hosts, dtype=float)
    n_r, n_l = hosts.shape
    Q = plan.queue_depth
    out = np.empty(n_r)
    alone = np.ones(n_r, dtype=bool)
    if n_l and plan.wait_kernel is None and n_l <= 8 * Q:  # simulate_fast's first window is the whole plan
        counts, gpu = plan.kernels_per_launch, plan.gpu_s
        c = plan.gap_s + gpu
        C = np.cumsum(c)
        D = C - c
        single = c.size == n_l
        sub = np.cumsum(hosts, axis=1)
        np.add(sub, 0.0 - 0.0, out=sub)  # run_block(0, n, None, 0.0, 0.0)
        e = np.subtract(sub if single else np.repeat(sub, counts, axis=1), D)
        np.maximum.accumulate(e, axis=1, out=e)
        np.maximum(e, 0.0 - D[0], out=e)
        np.add(C, e, out=e)
        alone[:] = False
        if Q < n_l:  # the stall check: leave times of launches j - Q against the host-only chain
            last_k = np.arange(n_l) if single else np.cumsum(counts) - 1
            lk = last_k[:n_l - Q]
            alone = (e[:, lk] - gpu[lk] > sub[:, Q - 1:n_l - 1] + hosts[:, Q:n_l]).any(axis=1)
        tail = plan.host_tail_s
        for r in np.flatnonzero(~alone):
            out[r] = max(float(sub[r, -1]) + tail, float(e[r, -1]))
    for r in np.flatnonzero(alone):
        out[r] = step_s(simulate_fast(plan.with_host(hosts[r])))
    return out


class _Same:
    """x[j] == j: the launch -> kernel index maps when every launch is one kernel."""

    def __getitem__(self, j):
        return j


_SAME = _Same()


def _ds(C, D, gap, gpu, k0: int, k1: int, out: np.ndarray) -> np.ndarray:
    """D[k0:k1] = C - c (stream time before kernel i): the slice of D, or (D None) formed into `out` by the
    operations that made D, `C - (gap + gpu)`."""
    if D is not None:
        return D[k0:k1]
    np.add(gap[k0:k1], gpu[k0:k1], out=out)
    return np.subtract(C[k0:k1], out, out=out)


def _d1(C, D, gap, gpu, k: int):
    """D[k] (see `_ds`)."""
    return C[k] - (gap[k] + gpu[k]) if D is None else D[k]


def _finish(a: int, b: int, submit, host, gpu, end, stall, gs) -> None:
    """stall[a:b] and gpu_start[a:b], a < b, into the buffers that held H and C there (plans without syncs; gpu_start
    by launch index: single-kernel plans, or the whole plan): stall_j = max((submit_j - submit_{j-1}) - host_j, 0)
    with submit_{-1} = 0, gpu_start_i = end_i - gpu_i. The same operations as over the whole arrays at once."""
    st = stall[a:b]
    if a == 0:
        st[0] = submit[0] - 0.0
        np.subtract(submit[1:b], submit[:b - 1], out=st[1:])
    else:
        np.subtract(submit[a:b], submit[a - 1:b - 1], out=st)
    np.subtract(st, host[a:b], out=st)
    np.maximum(st, 0.0, out=st)
    if gs is not None:
        np.subtract(end[a:b], gpu[a:b], out=gs[a:b])


def _blocked_single(j0, Q, H, C, D, gap, host, gpu, submit, end, fin, ahead):
    """Blocked mode when every launch is one kernel (GPU-bound eager steps): the same two scans as
    `run_block`, written into preallocated buffers. Returns (next launch, its submit and end floors).

    Runs of full blocks are first tried all at once (`_saturated_blocks`); a block that attempt cannot settle
    is done alone, then the attempts resume. Behind the blocks, the stall and gpu_start of launches [fin, j0 - 1)
    are written while they are in cache (H and C are read from j0 - 1 on); returns that new `fin` too."""
    n = host.size
    fl = np.empty(Q)
    tmp = np.empty(Q)
    acc = np.maximum.accumulate
    tries = 8  # blocks per attempt: doubles while every block settles, up to _MAX_BLOCKS
    buf = flags = None
    while j0 < n:
        nb = min((n - j0) // Q, tries)
        if nb >= 2:
            if buf is None:  # scratch rows for the attempts (allocated once: attempts run back to back)
                buf, flags = np.empty((3, _MAX_BLOCKS * Q)), np.empty(_MAX_BLOCKS * Q, dtype=bool)
            if D is None:
                ahead(j0 + nb * Q, j0 + nb * Q)
            done, stop = _saturated_blocks(j0, nb, Q, H, C, D, gap, host, gpu, submit, end, buf, flags)
            j0 += done * Q
            if j0 - 1 > fin:
                _finish(fin, j0 - 1, submit, host, gpu, end, H, C)
                fin = j0 - 1
            if stop:
                break
            tries = min(tries * 2, _MAX_BLOCKS) if done == nb else 8
            if done == nb:
                continue
        j1 = min(n, j0 + Q)
        if D is None:
            ahead(j1, j1)
        m = j1 - j0
        f, t = fl[:m], tmp[:m]
        sub_prev, end_prev = submit[j0 - 1], end[j0 - 1]
        np.subtract(end[j0 - Q:j1 - Q], gpu[j0 - Q:j1 - Q], out=f)  # leave times of launches j-Q
        bind0 = f[0] > sub_prev + host[j0]
        np.subtract(f, H[j0:j1], out=t)
        acc(t, out=t)
        np.maximum(t, sub_prev - H[j0 - 1], out=t)
        sub = submit[j0:j1]
        np.add(t, H[j0:j1], out=sub)
        np.subtract(sub, _ds(C, D, gap, gpu, j0, j1, t), out=t)
        acc(t, out=t)
        np.maximum(t, end_prev - _d1(C, D, gap, gpu, j0), out=t)
        np.add(t, C[j0:j1], out=end[j0:j1])
        binding = bind0 or bool(np.greater(f[1:], sub[:-1] + host[j0 + 1:j1]).any())
        j0 = j1
        if j0 - 1 > fin:
            _finish(fin, j0 - 1, submit, host, gpu, end, H, C)
            fin = j0 - 1
        if not binding:
            break
    return j0, float(submit[j0 - 1]), float(end[j0 - 1]), fin


_MAX_BLOCKS = 32  # rows of one attempt: 32 blocks of Q launches stay in cache
_PREFIX_ALL = 1 << 16  # plans up to this many launches (kernels) get their prefix sums in one go ...
_PREFIX_MIN = 1 << 12  # ... longer ones in pieces of at least this many, as the blocks reach them


def _saturated_blocks(j0, nb, Q, H, C, D, gap, host, gpu, submit, end, buf, flags):
    """`nb` full blocks of the loop in `_blocked_single` at once, on the guess that the GPU never waits in them
    (each kernel starts when the previous one ends, so a block's ends are its floor plus the running stream
    time). Under that guess the leave times each block needs are known, both scans run over all blocks as
    rows of one array, and only the scalars carried from block to block (the end floor, the submit floor) are
    a Python loop. The guess is then checked against the block loop's own expressions: the blocks before the
    first where it fails are kept. Every kept value is the same floating-point operation on the same inputs
    as the block loop, so the results are bitwise equal. Returns (blocks kept, whether the blocked mode ends:
    a kept block with no binding floor is the loop's last)."""
    k1 = j0 + nb * Q
    Cm, Hm = C[j0:k1].reshape(nb, Q), H[j0:k1].reshape(nb, Q)
    # end floors: K_b = end_prev - D[first]; the next end_prev is the block's last end, K_b + C[last]
    k = float(end[j0 - 1] - _d1(C, D, gap, gpu, j0))
    d_first = (C[j0:k1:Q] - (gap[j0:k1:Q] + gpu[j0:k1:Q]) if D is None else D[j0:k1:Q]).tolist()
    c_last = C[j0 + Q - 1:k1:Q].tolist()
    K = []
    for b in range(nb):
        K.append(k)
        if b + 1 < nb:
            k = (k + c_last[b]) - d_first[b + 1]
    Kc = np.asarray(K)[:, None]
    E = end[j0:k1].reshape(nb, Q)
    np.add(Kc, Cm, out=E)
    m = nb * Q
    F, T, W = (buf[i, :m].reshape(nb, Q) for i in range(3))
    np.subtract(end[j0 - Q:k1 - Q].reshape(nb, Q), gpu[j0 - Q:k1 - Q].reshape(nb, Q), out=F)  # leaves of j-Q
    np.subtract(F, Hm, out=T)
    # the running maximum along each row; where the rows already rise (the GPU-bound steady state: each leave
    # time is a kernel later than the last, the host's work shorter) it is T itself, the same values
    gt = flags[:m].reshape(nb, Q)
    if Q > 1 and not np.greater_equal(T[:, 1:], T[:, :-1], out=gt[:, 1:]).all():
        np.maximum.accumulate(T, axis=1, out=T)
    # submit floors: s_b = submit_prev - H[first - 1]; the next submit_prev is max(T[b, -1], s_b) + H[last]
    s = float(submit[j0 - 1] - H[j0 - 1])
    t_last, h_last = T[:, -1].tolist(), H[j0 + Q - 1:k1:Q].tolist()
    S = []
    for b in range(nb):
        S.append(s)
        sub_last = max(t_last[b], s) + h_last[b]  # submit of the block's last launch, as stored
        s = sub_last - h_last[b]
    Sub = submit[j0:k1].reshape(nb, Q)
    Sc = np.asarray(S)
    if not (T[:, 0] >= Sc).all():  # rows rise from T[:, 0]: where it is at least the floor, so is the whole row
        np.maximum(T, Sc[:, None], out=T)
    np.add(T, Hm, out=Sub)
    # the guess holds in a block where no (submit - D) rises above its end floor
    np.subtract(Sub, _ds(C, D, gap, gpu, j0, k1, W.reshape(-1)).reshape(nb, Q), out=W)
    ok = W.max(axis=1) <= Kc[:, 0]
    bad = int(np.argmin(ok)) if not ok.all() else nb
    # a block binds where some leave time lies above the host-only chain (previous submit + host work); a block
    # whose first launch binds needs no more look (the GPU-bound steady state), the others are checked whole
    binding = F[:, 0] > submit[j0 - 1:k1 - 1:Q] + host[j0:k1:Q]
    free = nb  # first block whose floor never binds
    for b in np.flatnonzero(~binding[:bad + 1]).tolist():
        if not np.greater(F[b, 1:], submit[j0 + b * Q:j0 + (b + 1) * Q - 1] + host[j0 + b * Q + 1:j0 + (b + 1) * Q]).any():
            free = b
            break
    if free < bad:
        return free + 1, True
    return bad, False
