"""A simulated step as a Chrome trace (JSON that Perfetto and chrome://tracing load).

Two processes, named by "M" metadata events: the host (one thread, the launch lane) and the GPU
(one stream). Each host launch is a `cpu_op` "X" event from its start to its submission, holding a
`cuda_runtime` call (cudaLaunchKernel, or cudaGraphLaunch for a replay) that ends at the submission
and carries `args.correlation`; each kernel is a `kernel` "X" event with the same correlation and
`args["launchsim.op_class"]`. A `ProfilerStep#0` annotation spans the step's host side, and time
the host sat blocked on a full launch queue is a `launchsim` event; flow events ("s"/"f", cat
`ac2g`) draw an arrow from each launch to its (first) kernel. The layout follows
torch.profiler's, so `launchsim import-trace` reads an exported step back as the same kernels.
Times are µs from the step's start.
"""

from __future__ import annotations

from pathlib import Path

from simulator.model.kernels import Step
from simulator.common.jsonfile import write_json
from simulator.engine.timeline import Timeline

HOST_PID, GPU_PID, HOST_TID, STREAM = 1, 0, 1, 7
RUNTIME_US = 1.0  # drawn length of the runtime call at the end of each launch (capped at a quarter)


def _meta(pid, tid, pname, tname, sort):
    return [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": pname}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": tname}},
    ]


def chrome_trace(tl: Timeline, step: Step, info: dict | None = None, gpu_name: str = "") -> dict:
    p = tl.plan
    us = 1e6
    evs = _meta(HOST_PID, HOST_TID, "CPU (launchsim host)", "launch lane", 0)
    evs += _meta(GPU_PID, STREAM, "GPU (launchsim)", f"stream {STREAM}", 1)
    classes = [o.op_class.value for o in step.kernel_ops()]
    start = tl.cpu_start
    host_end = float(tl.submit[-1]) + p.host_tail_s
    evs.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": HOST_PID, "tid": HOST_TID,
                "ts": 0.0, "dur": host_end * us, "args": {}})
    k = 0
    for j in range(p.launches):
        n = int(p.kernels_per_launch[j])
        corr = j + 1
        t0, sub, stall = float(start[j]) * us, float(tl.submit[j]) * us, float(tl.stall[j]) * us
        host = float(p.host_s[j]) * us
        label = p.launch_labels[j] if j < len(p.launch_labels) else f"launch {j}"
        evs.append({"ph": "X", "cat": "cpu_op", "name": label, "pid": HOST_PID, "tid": HOST_TID,
                    "ts": t0, "dur": sub - t0, "args": {"kernels": n}})
        if stall > 0:
            evs.append({"ph": "X", "cat": "launchsim", "name": "launch queue full (blocked)", "pid": HOST_PID,
                        "tid": HOST_TID, "ts": t0 + host, "dur": stall, "args": {}})
        d = min(RUNTIME_US, host / 4)
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch" if n > 1 else "cudaLaunchKernel",
                    "pid": HOST_PID, "tid": HOST_TID, "ts": sub - d, "dur": d, "args": {"correlation": corr}})
        evs.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": HOST_PID, "tid": HOST_TID,
                    "ts": sub - d})
        evs.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": GPU_PID, "tid": STREAM,
                    "ts": float(tl.gpu_start[k]) * us, "bp": "e"})
        for _ in range(n):
            evs.append({"ph": "X", "cat": "kernel", "name": p.kernel_names[k], "pid": GPU_PID, "tid": STREAM,
                        "ts": float(tl.gpu_start[k]) * us, "dur": float(p.gpu_s[k]) * us,
                        "args": {"correlation": corr, "stream": STREAM, "device": 0,
                                 "launchsim.op_class": classes[k] if k < len(classes) else "elementwise"}})
            k += 1
    if p.host_tail_s > 0:
        t = float(tl.submit[-1]) * us
        evs.append({"ph": "X", "cat": "cpu_op", "name": "host tail", "pid": HOST_PID, "tid": HOST_TID,
                    "ts": t, "dur": p.host_tail_s * us, "args": {}})
    return {"traceEvents": evs, "displayTimeUnit": "ms", "schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": gpu_name}] if gpu_name else [],
            "otherData": {"launchsim": info or {}, "step": step.label}}


def write_chrome_trace(path: str | Path, tl: Timeline, step: Step, info: dict | None = None,
                       gpu_name: str = "") -> Path:
    return write_json(path, chrome_trace(tl, step, info, gpu_name))
