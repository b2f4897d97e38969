"""The vectorised engine: the same model as `des.py` as max-plus recurrences in numpy.

With c_i = gap_i + gpu_i and a_i the submission time of kernel i's launch, the stream obeys
    end_i = max(a_i, end_{i-1}) + c_i,
a max-plus scan: end_i = C_i + max(end_init, max_{k<=i}(a_k - C_k + c_k)), with C the running sum
of c. The host obeys submit_j = max(submit_{j-1} + host_j, leave_{j-Q}) (Q = queue depth, leave =
start of a launch's last kernel). Without stalls both scans run over the whole step at once. Where
the queue fills, launches are processed in blocks of Q: inside a block every leave_{j-Q} it needs is
already final, so each block is again two vectorised scans; once a block ends with no stall in force
the rest is tried unconstrained again.
"""

from __future__ import annotations

import numpy as np

from .plan import LaunchPlan
from .timeline import Timeline


def _gpu_scan(ready: np.ndarray, c: np.ndarray, end_init: float) -> np.ndarray:
    C = np.cumsum(c)
    best = np.maximum.accumulate(ready - C + c)
    return C + np.maximum(best, end_init)


def _host_scan(host: np.ndarray, floor: np.ndarray, sub_init: float) -> np.ndarray:
    H = np.cumsum(host)
    best = np.maximum.accumulate(floor - H)
    return H + np.maximum(best, sub_init)


def simulate_fast(plan: LaunchPlan) -> Timeline:
    host, counts = plan.host_s, plan.kernels_per_launch
    c = plan.gap_s + plan.gpu_s
    n_l, Q = host.size, plan.queue_depth
    single = c.size == n_l  # every launch submits one kernel: index arrays are identities
    last_k = np.arange(n_l) if single else np.cumsum(counts) - 1  # each launch's last kernel
    first_k = last_k - counts + 1
    submit = np.empty(n_l)
    end = np.empty(c.size)
    j0, sub_prev, end_prev = 0, 0.0, 0.0
    unconstrained = True
    while j0 < n_l:
        if unconstrained:
            j1 = n_l
            floor = np.full(n_l - j0, -np.inf)
        else:
            j1 = min(n_l, j0 + Q)
            idx = np.arange(j0, j1) - Q
            lv = np.full(j1 - j0, -np.inf)
            ok = idx >= 0
            li = last_k[idx[ok]]
            lv[ok] = end[li] - plan.gpu_s[li]
            floor = lv
        sub = _host_scan(host[j0:j1], floor, sub_prev)
        k0, k1 = first_k[j0], last_k[j1 - 1] + 1
        ready = sub if single else np.repeat(sub, counts[j0:j1])
        e = _gpu_scan(ready, c[k0:k1], end_prev)
        if unconstrained:
            # check the queue bound on this tentative answer
            submit[j0:j1] = sub
            end[k0:k1] = e
            js0 = max(j0, Q)
            if js0 < n_l:
                lk = last_k[js0 - Q:n_l - Q]
                lvs = end[lk] - plan.gpu_s[lk]
                prev = submit[js0 - 1:n_l - 1].copy()
                if js0 == j0:
                    prev[0] = sub_prev
                bad = np.nonzero(lvs > prev + host[js0:n_l])[0]
            else:
                bad = np.array([], dtype=int)
            if bad.size == 0:
                j0 = n_l
                break
            jv = js0 + int(bad[0])  # everything before jv is exact
            j0_new = jv
            if j0_new > j0:
                sub_prev = float(submit[j0_new - 1])
                end_prev = float(end[first_k[j0_new] - 1]) if first_k[j0_new] > 0 else 0.0
            j0 = j0_new
            unconstrained = False
            continue
        submit[j0:j1] = sub
        end[k0:k1] = e
        # did the bound bind anywhere in this block?
        ready_cpu = np.concatenate(([sub_prev], sub[:-1])) + host[j0:j1]
        bound = bool(np.any(floor > ready_cpu))
        sub_prev, end_prev = float(sub[-1]), float(e[-1])
        j0 = j1
        unconstrained = not bound
    ready_cpu = np.concatenate(([0.0], submit[:-1])) + host
    stall = np.maximum(submit - ready_cpu, 0.0)
    start = end - plan.gpu_s
    return Timeline(plan, submit, stall, start, end)
