"""CUDA-graph host costs: replay() and capture + instantiate time against the number of nodes.

Timed with host clocks only (no profiler: this runs in the timing process). The device-side gaps
between kernels are measured with CUDA events in calibration/child_timing.py (`event_gaps`).
torch is imported inside functions only.
"""

from __future__ import annotations

import time

from .microbench import _linfit, _pct


def graph_costs(sizes=(1, 10, 100, 300, 1000), reps=200):
    """Host cost of replay() vs nodes; capture + instantiate wall time vs nodes."""
    import torch

    x = torch.zeros(1, device="cuda")
    pts = []
    for n in sizes:
        cap = []
        for _ in range(3):
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            t0 = time.perf_counter()
            with torch.cuda.graph(g):
                for _ in range(n):
                    x.add_(1.0)
            torch.cuda.synchronize()
            cap.append((time.perf_counter() - t0) * 1e3)
        for _ in range(5):
            g.replay()
        torch.cuda.synchronize()
        host = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            g.replay()
            host.append((time.perf_counter_ns() - t0) / 1e3)
            torch.cuda.synchronize()
        pts.append({"nodes": n, "replay_host": _pct(host), "capture_ms": sorted(cap)[1]})
    a, b = _linfit([p["nodes"] for p in pts], [p["replay_host"]["p50"] for p in pts])
    ca, cb = _linfit([p["nodes"] for p in pts], [p["capture_ms"] for p in pts])
    return {"points": pts, "replay_fixed_us": a, "replay_per_node_us": b,
            "capture_fixed_ms": ca, "capture_per_node_ms": cb}
