"""The reference engine: a SimPy model of a host thread feeding a bounded launch queue and one
in-order GPU stream.

The CPU process spends `host_s[j]` on launch j, blocks while the queue already holds
`queue_depth` launches the GPU has not finished taking, then pushes launch j. The GPU process
takes launches in order; each kernel starts `gap` after the later of its submission and the end
of the previous kernel. A launch leaves the queue when its last kernel starts. Everything already
queued runs back to back, so the GPU takes it all in one event (a graph replay's nodes, or a full
queue in a GPU-bound step); a CPU-bound eager step costs three events per kernel: host timeout, GPU
wake-up, GPU completion. Where the slot a launch needs frees at a known time, the host's work and
its stall are one timeout.

A plan with host syncs (`wait_kernel`, multi-step plans) makes the host wait, before launch j's host work,
for the end of an earlier kernel: if the GPU has already taken that kernel's launch its end is known and the
wait is one timeout, otherwise the host waits for the GPU to take it first.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import simpy

from simulator.engine.plan import LaunchPlan
from simulator.engine.timeline import Timeline


def simulate_des(plan: LaunchPlan) -> Timeline:
    env = simpy.Environment()
    timeout, event = env.timeout, env.event
    host = plan.host_s.tolist()
    counts = plan.kernels_per_launch.tolist()
    dur = plan.gpu_s.tolist()
    gap = plan.gap_s.tolist()
    n_l, Q = len(host), plan.queue_depth
    first = np.concatenate(([0], np.cumsum(plan.kernels_per_launch)[:-1])).tolist()
    submit = [0.0] * n_l
    stall = [0.0] * n_l
    leave: list[float | None] = [None] * n_l
    start = [0.0] * len(dur)
    end = [0.0] * len(dur)
    queue: deque[int] = deque()
    waiters: dict[int, simpy.Event] = {}
    wake: list[simpy.Event | None] = [None]  # the GPU's pending wake-up, when it is idle
    done = [False]
    wk = plan.wait_kernel.tolist() if plan.wait_kernel is not None else None
    launch_of = np.repeat(np.arange(n_l), plan.kernels_per_launch).tolist() if wk is not None else None
    wait = [0.0] * n_l
    sync_waiters: dict[int, simpy.Event] = {}

    def cpu():
        for j in range(n_l):
            if wk is not None and wk[j] >= 0:
                k = wk[j]
                t0 = env.now
                lj = launch_of[k]
                if leave[lj] is None:  # not taken by the GPU yet: its end is unknown until it is
                    ev = sync_waiters[lj] = event()
                    yield ev
                if end[k] > env.now:
                    yield timeout(end[k] - env.now)
                wait[j] = env.now - t0
            lv = leave[j - Q] if j >= Q else -1.0
            if lv is not None:
                # the slot this launch needs frees at a known time: one event covers work + stall
                ready = env.now + host[j]
                yield timeout(lv - env.now if lv > ready else host[j])
                if lv > ready:
                    stall[j] = lv - ready
            else:
                yield timeout(host[j])
                t0 = env.now
                lv = leave[j - Q]
                if lv is None:
                    ev = waiters[j - Q] = event()
                    yield ev
                    lv = leave[j - Q]
                if lv > env.now:
                    yield timeout(lv - env.now)
                stall[j] = env.now - t0
            submit[j] = env.now
            queue.append(j)
            w = wake[0]
            if w is not None:
                wake[0] = None
                w.succeed()
        done[0] = True
        w = wake[0]
        if w is not None:
            wake[0] = None
            w.succeed()

    def gpu():
        t = 0.0
        while True:
            if not queue:
                if done[0]:
                    return
                w = wake[0] = event()
                yield w
                continue
            # every launch already queued runs back to back: take them all in one event
            t = env.now
            while queue:
                j = queue.popleft()
                i0 = first[j]
                for i in range(i0, i0 + counts[j]):
                    s = t + gap[i]
                    start[i] = s
                    t = s + dur[i]
                    end[i] = t
                leave[j] = start[i0 + counts[j] - 1]
                if waiters:
                    w = waiters.pop(j, None)
                    if w is not None:
                        w.succeed()
                if sync_waiters:
                    w = sync_waiters.pop(j, None)
                    if w is not None:
                        w.succeed()
            yield timeout(t - env.now)

    env.process(cpu())
    env.process(gpu())
    env.run()
    return Timeline(plan, np.asarray(submit), np.asarray(stall), np.asarray(start), np.asarray(end),
                    np.asarray(wait) if wk is not None else None)
