"""Round l on one H200 (issue 20): the device latency of a CUDA-graph replay, in a busy stream and an idle one.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_l --out DIR [--quick]

Run from the repository root. Why: the profile's `graph_launch_latency_us` (8.34 us) is a 1-node graph's event time
on an idle GPU minus one node (calibration/build_profile.py), and the engine puts it before the first node of every
graph replay. A piecewise step replays 29 graphs (qwen3-0.6b), so launchsim puts 0.24 ms there, while round j
measured piecewise steps only 0.09-0.16 ms over their full-graph twins. The idle-GPU figure holds the host's own
replay call (the event before it has already run when the host submits), which the engine already charges as
host time (`graph_launch_fixed_us`). This round separates the two. One timing process (forbid_profiler, canary at
start and end), CUDA events and host clocks only:

- `busy`: patterns issued `count` times behind a sleep kernel that holds the stream (so they queue and run back to
  back: calibration/hygiene.py `queued_device_us`'s method), device us per pattern, 7 repetitions: a graph of n
  tiny nodes alone (n = 1..128), a tiny eager kernel alone, graph + tiny eager, two different graphs alternating,
  and graph + SDPA decode attention (eager, the call piecewise graphs leave outside) against SDPA alone. Each
  record holds the host time to issue the run and the hold's device time, so a run the host did not stay ahead of
  is visible (`host_ahead`).
- `idle`: one call on an idle GPU between events: `st.record(); synchronize; t0; call; t1; en.record()`, for no
  call (the base), a tiny eager kernel and graphs of n nodes; per call the event time over the base and the host
  time of the call (t1 - t0), 200 repetitions, percentiles.
- `legacy`: the profile's own figure by its own method (calibration/child_timing.py `graph_device`, 1 node).

`--quick`: fewer sizes and repetitions (a pipeline check; not kept). The summary is printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

NODES = (1, 2, 4, 8, 16, 32, 64, 128)
HOLD = 40_000_000  # sleep-kernel cycles (~20 ms at the H200's clock): longer than any run's host issue time


def _pct(xs):
    from calibration.microbench import _pct as p

    return p(xs)


def _graph(fns):
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in fns:
            f()
    g.replay()
    g.replay()
    torch.cuda.synchronize()
    return g


def busy(pattern, count, reps):
    """Device us per `pattern()` queued `count` times behind a sleep kernel; host issue time and the hold's."""
    from calibration.hygiene import queued_with_host

    dev, host, hold = queued_with_host(pattern, count, reps, HOLD)
    return {"count": count, "device_us_per": _pct(dev), "host_issue_us": _pct(host), "hold_us": _pct(hold),
            "host_ahead": max(host) < min(hold)}


def idle(call, reps):
    """Event us of one call on an idle GPU over the no-call base, and its host time."""
    import torch

    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    pc = time.perf_counter

    def one(fn):
        torch.cuda.synchronize()
        st.record()
        torch.cuda.synchronize()
        t0 = pc()
        if fn is not None:
            fn()
        t1 = pc()
        en.record()
        en.synchronize()
        return st.elapsed_time(en) * 1e3, (t1 - t0) * 1e6

    for _ in range(10):
        one(None)
        one(call)
    base, ev, host = [], [], []
    for _ in range(reps):  # interleaved, so a host drift moves both
        b, _ = one(None)
        e, h = one(call)
        base.append(b)
        ev.append(e)
        host.append(h)
    over = sorted(e - b for e, b in zip(ev, base))
    return {"base_event_us": _pct(base), "event_us": _pct(ev), "event_over_base_us": _pct(over),
            "host_call_us": _pct(host)}


def run(quick: bool) -> dict:
    import torch
    import torch.nn.functional as F

    from calibration.child_timing import graph_device
    from calibration.hygiene import canary, check_canary, forbid_profiler
    from calibration.scripts import round_h as H

    forbid_profiler()
    torch.set_grad_enabled(False)
    H.warm_host()
    t0 = time.time()
    res: dict = {"kind": "launchsim-round-l-graph-latency", "quick": quick, "environment": H.env(),
                 "canary_start": canary(), "hold_cycles": HOLD, "busy": [], "idle": [], "errors": []}
    nodes = (1, 8, 64) if quick else NODES
    reps = 3 if quick else 7
    x = torch.zeros(1, device="cuda")
    y = torch.zeros(1, device="cuda")
    tiny = lambda: x.add_(1.0)  # noqa: E731
    graphs = {n: _graph([tiny] * n) for n in nodes}
    others = {n: _graph([lambda: y.add_(1.0)] * n) for n in nodes}
    bf = torch.bfloat16
    sdpa_shapes = {"b1": (1, 16, 8, 512), "b16": (16, 16, 8, 512)}  # qwen3-0.6b decode: heads 16/8, ctx 512
    sdpa = {}
    for key, (b, hq, hk, ctx) in sdpa_shapes.items():
        q = torch.randn(b, hq, 1, 128, device="cuda", dtype=bf)
        k = torch.randn(b, hk, ctx, 128, device="cuda", dtype=bf)
        v = torch.randn(b, hk, ctx, 128, device="cuda", dtype=bf)
        sdpa[key] = (lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))

    def rec(kind, what, n, fn, count):
        try:
            r = busy(fn, count, reps) if kind == "busy" else idle(fn, 40 if quick else 200)
            res[kind].append({"what": what, "nodes": n, **r})
        except Exception as e:  # noqa: BLE001 (recorded; one pattern must not lose the round)
            res["errors"].append({"what": f"{kind} {what} n={n}", "error": f"{type(e).__name__}: {e}"})

    rec("busy", "tiny", 0, tiny, 400)
    for key, fn in sdpa.items():
        rec("busy", f"sdpa_{key}", 0, fn, 200)
    for n in nodes:
        g, h = graphs[n], others[n]
        rec("busy", "graph", n, g.replay, 200)
        rec("busy", "graph+tiny", n, lambda g=g: (g.replay(), tiny()), 200)
        rec("busy", "graph+other", n, lambda g=g, h=h: (g.replay(), h.replay()), 100)
        for key, fn in sdpa.items():
            rec("busy", f"graph+sdpa_{key}", n, lambda g=g, fn=fn: (g.replay(), fn()), 200)
    rec("idle", "tiny", 0, tiny, 0)
    for n in nodes:
        rec("idle", "graph", n, graphs[n].replay, 0)
    res["legacy"] = graph_device(sizes=(1,))
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    return res


def summary(res: dict) -> None:
    busy_by = {(r["what"], r["nodes"]): r["device_us_per"]["p50"] for r in res["busy"]}
    print(f"[summary] canary {res['canary']['host_start_us']:.2f} -> {res['canary']['host_end_us']:.2f} us "
          f"ok={res['canary']['ok']}; {len(res['errors'])} errors; {res['wall_s']:.0f} s")
    print(f"[summary] host ahead in every busy run: {all(r['host_ahead'] for r in res['busy'])}")
    t = busy_by.get(("tiny", 0), float("nan"))
    print(f"busy tiny eager {t:.3f} us/kernel; " + ", ".join(
        f"{w} {v:.2f}" for (w, n), v in busy_by.items() if n == 0 and w != "tiny"))
    for n in sorted({n for (_, n) in busy_by if n}):
        row = {w: v for (w, m), v in busy_by.items() if m == n}
        print(f"n={n:4d} " + "  ".join(f"{w} {v:.2f}" for w, v in row.items()))
    for r in res["idle"]:
        print(f"idle {r['what']} n={r['nodes']}: event over base p50 {r['event_over_base_us']['p50']:.2f} us, "
              f"host call p50 {r['host_call_us']['p50']:.2f} us")
    p = res["legacy"]["points"][0]
    print(f"legacy 1-node graph event p50 {p['event_us']['p50']:.2f} us")
    for e in res["errors"]:
        print("error:", e)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    res = run(a.quick)
    path = os.path.join(a.out, "timing.json")
    with open(path + ".tmp", "w") as f:
        json.dump(res, f, indent=1)
    os.replace(path + ".tmp", path)
    summary(res)
    return 0 if res["canary"]["ok"] and not res["errors"] else 3


if __name__ == "__main__":
    sys.exit(main())
