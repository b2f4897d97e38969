"""GPU-stream microbenchmarks: gaps between back-to-back kernels and CUDA-graph costs.

- `gaps`: torch.profiler (CUPTI) timestamps of back-to-back tiny kernels, eager with the stream held
  busy by a sleep kernel (so launches queue up) and inside a replayed CUDA graph; `hetero_gaps` the
  same for a decode-like cycle of different small kernels (what the profile uses).
- `graph_costs`: host time of replay() for graphs of 1..1000 nodes; capture + instantiate wall time.
torch is imported inside functions only.
"""

from __future__ import annotations

import time

from .microbench import _linfit, _pct


def gaps():
    """Stream gap between back-to-back eager kernels and per-node cost in a replayed graph."""
    import torch

    from .profiling import kernel_events

    x = torch.zeros(1, device="cuda")
    N = 300

    def eager():
        torch.cuda._sleep(20_000_000)  # hold the stream so the following launches queue up
        for _ in range(N):
            x.add_(1.0)

    for _ in range(2):
        eager()
    torch.cuda.synchronize()
    ev = [e for e in kernel_events(eager) if "sleep" not in e["name"]]
    eg = [b["ts"] - (a["ts"] + a["dur"]) for a, b in zip(ev, ev[1:])]
    dur_e = [e["dur"] for e in ev]
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x.add_(1.0)
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        for _ in range(N):
            x.add_(1.0)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    gv = kernel_events(lambda: g.replay())
    gg = [b["ts"] - (a["ts"] + a["dur"]) for a, b in zip(gv, gv[1:])]
    dur_g = [e["dur"] for e in gv]
    # event-timed total per node in a replayed graph (what the tables' per-kernel figures include)
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    tot = []
    for _ in range(20):
        st.record()
        g.replay()
        en.record()
        en.synchronize()
        tot.append(st.elapsed_time(en) * 1e3 / N)
    res = {"eager_gap": _pct(eg), "eager_kernel_dur": _pct(dur_e), "graph_gap": _pct(gg),
           "graph_kernel_dur": _pct(dur_g), "graph_per_node_total": _pct(tot), "n_eager": len(ev),
           "n_graph": len(gv)}
    res.update(hetero_gaps())
    return res


def hetero_gaps(n=240):
    """As `gaps`, for a decode-like cycle of different small kernels (a different kernel each
    node costs more than the same one repeated): gaps in eager (queue full) and in a graph."""
    import torch
    import torch.nn.functional as F

    from .profiling import kernel_events

    bf = torch.bfloat16
    a = torch.randn(1, 1024, device="cuda", dtype=bf)
    f = torch.randn(1, 1024, device="cuda")
    r = torch.randn(1, 1, device="cuda")
    q = torch.randn(1, 16, 1, 128, device="cuda", dtype=bf)
    cs = torch.randn(1, 1, 1, 128, device="cuda", dtype=bf)
    w = torch.randn(1024, 1024, device="cuda", dtype=bf)
    cyc = [lambda: a.to(torch.float32), lambda: f.pow(2), lambda: f.mean(-1, keepdim=True), lambda: r + 1e-6,
           lambda: torch.rsqrt(r), lambda: f * r, lambda: f.to(bf), lambda: a * a, lambda: F.linear(a, w),
           lambda: q.transpose(1, 2) * cs, lambda: torch.cat((q, q), -1), lambda: F.silu(a)]
    seq = [cyc[i % len(cyc)] for i in range(n)]

    def eager():
        torch.cuda._sleep(20_000_000)
        for fn in seq:
            fn()

    eager()
    torch.cuda.synchronize()
    ev = [e for e in kernel_events(eager) if "sleep" not in e["name"]]
    eg = [b["ts"] - (x["ts"] + x["dur"]) for x, b in zip(ev, ev[1:])]
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for fn in seq:
            fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for fn in seq:
            fn()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    gv = kernel_events(lambda: g.replay())
    gg = [b["ts"] - (x["ts"] + x["dur"]) for x, b in zip(gv, gv[1:])]
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    tot = []
    for _ in range(20):
        st.record()
        g.replay()
        en.record()
        en.synchronize()
        tot.append(st.elapsed_time(en) * 1e3)
    return {"hetero_eager_gap": _pct(eg), "hetero_graph_gap": _pct(gg),
            "hetero_graph_kernel_sum_us": sum(x["dur"] for x in gv), "hetero_graph_nodes": len(gv),
            "hetero_graph_total_us": _pct(tot), "hetero_eager_kernel_sum_us": sum(x["dur"] for x in ev)}


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
