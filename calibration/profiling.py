"""torch.profiler helpers: GPU kernel events of a callable (CUPTI timestamps, µs) and counts.

Events are read back from the profiler's Chrome trace (category `kernel`, `gpu_memset`,
`gpu_memcpy`), which is stable across torch versions. torch is imported inside functions only.
"""

from __future__ import annotations

import json
import os
import tempfile


def _trace(fn, path=None):
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    own = path is None
    if own:
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
    prof.export_chrome_trace(path)
    with open(path) as f:
        data = json.load(f)
    if own:
        os.unlink(path)
    evs = data.get("traceEvents", data) if isinstance(data, dict) else data
    return evs


def kernel_events(fn, path=None, cats=("kernel",)):
    """GPU events of `fn` in start order: dicts with name, ts, dur (µs), cat."""
    evs = _trace(fn, path)
    out = [{"name": e.get("name", ""), "ts": float(e["ts"]), "dur": float(e.get("dur", 0.0)), "cat": e.get("cat")}
           for e in evs if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in cats]
    return sorted(out, key=lambda e: e["ts"])


def count_kernels(fn):
    """Kernels, memsets and memcpys `fn` puts on the GPU, plus kernel names with counts."""
    ev = kernel_events(fn, cats=("kernel", "gpu_memset", "gpu_memcpy"))
    names: dict[str, int] = {}
    for e in ev:
        if e["cat"] == "kernel":
            names[e["name"][:90]] = names.get(e["name"][:90], 0) + 1
    k = [e for e in ev if e["cat"] == "kernel"]
    return {"kernels": len(k), "memsets": sum(e["cat"] == "gpu_memset" for e in ev),
            "memcpys": sum(e["cat"] == "gpu_memcpy" for e in ev), "names": names,
            "kernel_us": sum(e["dur"] for e in k)}
