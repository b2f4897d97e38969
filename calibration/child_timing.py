"""Timing process: every timed figure of a calibration round, in a process that never profiles.

    python3 -m calibration.child_timing --out DIR [--quick]

`hygiene.forbid_profiler()` runs first, so any profiler call here raises; a canary is timed at the
start and at the end and compared (`hygiene.check_canary`): a run whose host drifted more than the
tolerance exits 3 with `canary.ok = false` in its output. Writes DIR/timing.json:
- microbenchmarks (environment, ceilings, host cost per launch path, graph replay host/device cost,
  compiled-call host cost, kernel tables), all with CUDA events or host clocks only;
- `gaps`: the per-kernel device cost of eager and graph streams relative to the tables, by events:
  a table figure is the per-node time of identical back-to-back nodes in a replayed graph; a cycle
  of different decode kernels costs `graph_node_us` more per node inside a graph and
  `eager_gap_us` more per kernel in an eager stream whose launch queue is full;
- decode rows of the reference decoder (fusion none / packed / compiled with dynamic=True and
  False), graph none, full and piecewise, each in two regimes: *isolated* (synchronise, one step,
  synchronise; wall clock) and *pipelined* (steps back to back, the host runs ahead; wall clock per
  step over a run of steps), plus the host issue time and the graph replay's device time by events;
- the same for Hugging Face transformers' Qwen3ForCausalLM (eager and full graph).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from .hygiene import canary, check_canary, forbid_profiler, queued_device_us, exit_code
from .microbench import _pct
from .jsonio import dump as _dump


def event_gaps(n: int = 240) -> dict:
    """Eager and graph per-kernel costs of a decode-like cycle relative to identical-node graph times."""
    import torch
    import torch.nn.functional as F

    from .tables import graph_op_us

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
    ident = [graph_op_us([fn] * 32, reps=7) for fn in cyc]
    seq = [cyc[i % len(cyc)] for i in range(n)]
    s_id = sum(ident[i % len(cyc)] for i in range(n))
    # the whole cycle (one call of the lambda) queued behind a sleep kernel: µs per cycle
    eager = queued_device_us(lambda: [fn() for fn in seq], 1, reps=7, hold_cycles=20_000_000)
    het_graph = graph_op_us(seq, reps=9) * n
    tiny = torch.zeros(1, device="cuda")
    tiny_graph = graph_op_us([lambda: tiny.add_(1.0)] * 300, reps=9)
    tiny_eager = queued_device_us(lambda: tiny.add_(1.0), 300, reps=7, hold_cycles=20_000_000)
    e50 = _pct(eager)["p50"]
    return {"cycle_kernels": n, "cycle_identical_sum_us": s_id, "cycle_graph_us": het_graph,
            "cycle_eager_us": _pct(eager), "graph_node_us": (het_graph - s_id) / n,
            "eager_gap_us": (e50 - s_id) / n, "tiny_graph_node_us": tiny_graph,
            "tiny_eager_us": _pct(tiny_eager), "identical_us": ident}


def graph_device(sizes=(1, 100, 1000)) -> dict:
    """Device time of a replayed graph of n tiny nodes (events), and of sync+replay+sync (wall)."""
    import torch

    x = torch.zeros(1, device="cuda")
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for n in sizes:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x.add_(1.0)
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            for _ in range(n):
                x.add_(1.0)
        for _ in range(3):
            g.replay()
        ev, wall = [], []
        for _ in range(50):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            st.record()
            g.replay()
            en.record()
            torch.cuda.synchronize()
            wall.append((time.perf_counter() - t0) * 1e6)
            ev.append(st.elapsed_time(en) * 1e3)
        out.append({"nodes": n, "event_us": _pct(ev), "isolated_wall_us": _pct(wall)})
        del g
    return {"points": out}


def _isolated(fn, n):
    import torch

    pc = time.perf_counter
    host, step = [], []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = pc()
        fn()
        t1 = pc()
        torch.cuda.synchronize()
        t2 = pc()
        host.append((t1 - t0) * 1e3)
        step.append((t2 - t0) * 1e3)
    return {"step_ms": _pct(step), "host_ms": _pct(host)}


def _pipelined(fn, steps, rounds=3):
    import torch

    per = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        torch.cuda.synchronize()
        per.append((time.perf_counter() - t0) * 1e3 / steps)
    return {"step_ms": _pct(per), "steps": steps}


def _device_ms(fn, n=10):
    import torch

    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        st.record()
        fn()
        en.record()
        en.synchronize()
        out.append(st.elapsed_time(en))
    return _pct(out)


def measure_runner(r, graphs=("full",), n_eager=12, n_graph=25, eager_pipe=8, graph_pipe=20):
    """Both regimes for eager and each graph mode of one configured runner."""
    import torch

    row = {}
    for _ in range(3):
        r.step()
    torch.cuda.synchronize()
    row["eager"] = {"isolated": _isolated(r.step, n_eager), "pipelined": _pipelined(r.step, eager_pipe)}
    for mode in graphs:
        t0 = time.perf_counter()
        if mode == "full":
            r.capture(warmup=2)
        else:
            r.capture(warmup=2, mode=mode)
        torch.cuda.synchronize()
        cap = time.perf_counter() - t0
        for _ in range(3):
            r.replay()
        row[mode] = {"isolated": _isolated(r.replay, n_graph), "pipelined": _pipelined(r.replay, graph_pipe),
                     "device_ms": _device_ms(r.replay), "capture_s_with_warmup": cap}
        r.release()
    return row


def decode_grid(quick):
    if quick:
        return [(m, b, 512) for m in ("qwen3-0.6b", "llama3-8b") for b in (1, 64)]
    out = []
    for m in ("qwen3-0.6b", "llama3-8b"):
        for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512):
            for c in (128, 512, 2048):
                if b * c <= (131072 if m == "llama3-8b" else 262144):
                    out.append((m, b, c))
    return out


COMPILED = (("qwen3-0.6b", 1, False), ("qwen3-0.6b", 16, False), ("qwen3-0.6b", 16, True),
            ("qwen3-0.6b", 64, True))


def decode_rows(res, save, quick, log, compiled=True):
    import torch

    from .reference_decoder import Runner, make_cache, make_weights, model_spec

    rows = res.setdefault("rows", [])
    cur = w = None
    for name, b, c in decode_grid(quick):
        if name != cur:
            w = None
            torch.cuda.empty_cache()
            cur, w = name, make_weights(model_spec(name, quick))
        m = model_spec(name, quick)
        cache = make_cache(m, b, c)
        for f in ("none", "packed"):
            t0 = time.time()
            graphs = ("full",)  # piecewise replays are not timed: SDPA's output cannot be pinned to the
            # address the next piece graph was captured with (an illegal access at batch 256 on the H200)
            try:
                row = {"model": name, "fusion": f, "batch": b, "ctx": c,
                       **measure_runner(Runner(m, f, b, c, weights=w, cache=cache), graphs)}
            except Exception as e:  # noqa: BLE001  (recorded; one bad config must not lose the round)
                row = {"model": name, "fusion": f, "batch": b, "ctx": c, "error": f"{type(e).__name__}: {e}"[:300]}
            rows.append(row)
            save()
            if "eager" in row:
                log(f"{name:11s} {f:7s} b{b:<4d} c{c:<5d} eager {row['eager']['isolated']['step_ms']['p50']:7.2f}/"
                    f"{row['eager']['pipelined']['step_ms']['p50']:7.2f} ms graph "
                    f"{row['full']['isolated']['step_ms']['p50']:6.3f}/{row['full']['pipelined']['step_ms']['p50']:6.3f}"
                    f" ms ({time.time() - t0:.1f}s)")
            else:
                log(f"ERROR {name} {f} b{b} c{c}: {row['error']}")
        del cache
    w = None
    torch.cuda.empty_cache()
    for name, b, dyn in (() if not compiled else COMPILED[:2] if quick else COMPILED):
        m = model_spec(name, quick)
        try:
            t0 = time.time()
            r = Runner(m, "compiled", b, 512, weights=make_weights(m), dynamic=dyn)
            r.step()
            torch.cuda.synchronize()
            comp = time.time() - t0
            row = {"model": name, "fusion": "compiled", "dynamic": dyn, "batch": b, "ctx": 512,
                   "compile_s_warm_cache": comp, **measure_runner(r, ("full",))}
            log(f"compiled {name} b{b} {'dynamic' if dyn else 'static'}: compile {comp:.1f}s eager "
                f"{row['eager']['isolated']['step_ms']['p50']:.3f} ms graph {row['full']['isolated']['step_ms']['p50']:.3f} ms")
        except Exception as e:  # noqa: BLE001
            row = {"model": name, "fusion": "compiled", "dynamic": dyn, "batch": b, "ctx": 512,
                   "error": f"{type(e).__name__}: {e}"[:300]}
            log(f"ERROR compiled {name} b{b}: {row['error']}")
        rows.append(row)
        save()
        torch.cuda.empty_cache()


def hf_rows(res, save, log):
    import torch

    from .hf_decoder import HFRunner

    out = res.setdefault("hf", [])
    for b in (1, 8):
        try:
            r = HFRunner("qwen3-0.6b", b, 512, room=512)
            row = {"model": "qwen3-0.6b", "impl": "transformers", "batch": b, "ctx": 512, "max_cache_len": r.max_len,
                   **measure_runner(r, ("full",), n_eager=15, n_graph=30, eager_pipe=10, graph_pipe=20)}
            log(f"HF qwen3-0.6b b{b}: eager {row['eager']['isolated']['step_ms']['p50']:.2f} ms graph "
                f"{row['full']['isolated']['step_ms']['p50']:.3f} ms")
            del r
        except Exception as e:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            row = {"batch": b, "error": f"{type(e).__name__}: {e}"[:400]}
        out.append(row)
        save()
        torch.cuda.empty_cache()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-compiled", action="store_true",
                    help="skip the compiled decode rows (they compile in this process unless a counts job warmed "
                         "the Inductor cache first)")
    a = ap.parse_args(argv)
    import torch

    from . import microbench as mb
    from . import streams as st
    from . import tables as tb

    forbid_profiler()
    log = lambda s: print(s, flush=True)  # noqa: E731
    path = os.path.join(a.out, "timing.json")
    res = {"kind": "launchsim-timing", "quick": a.quick, "date": time.strftime("%Y-%m-%d"),
           "environment": mb.environment()}

    def save():
        _dump(res, path)

    torch.zeros(1, device="cuda")
    res["canary_start"] = canary()
    log(f"[timing] canary start: {res['canary_start']['host_tiny_op_us']['p50']:.2f} us")
    q = a.quick
    steps = [
        ("ceilings", mb.ceilings),
        ("host", lambda: mb.host_costs(1000 if q else 4000)),
        ("gaps", event_gaps),
        ("graph", lambda: st.graph_costs((1, 10, 100, 1000) if q else (1, 10, 100, 300, 1000))),
        ("graph_device", graph_device),
        ("compiled", lambda: mb.compiled_costs((1, 16) if q else (1, 4, 16, 48))),
        ("compiled_extern", lambda: mb.compiled_extern_costs((1, 8) if q else (1, 4, 16))),
        ("curves", lambda: tb.curves(q)),
        ("gemm", lambda: tb.gemm_tables(tb.gemm_shapes()[:3] if q else tb.gemm_shapes(),
                                        (1, 64, 1024) if q else tb.M_GRID)),
        ("attention", lambda: tb.attention_tables([(16, 8, 128), (32, 8, 128)], (1, 64) if q else tb.ATT_BATCH,
                                                  (128, 8192) if q else tb.ATT_CTX)),
    ]
    for name, fn in steps:
        t1 = time.time()
        try:
            res[name] = fn()
        except Exception as e:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            res[name] = {"error": f"{type(e).__name__}: {e}"}
        log(f"[timing] {name}: {time.time() - t1:.1f}s")
        save()
    decode_rows(res, save, q, log, compiled=not a.no_compiled)
    hf_rows(res, save, log)
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    save()
    c = res["canary"]
    log(f"[timing] canary end: {c['host_end_us']:.2f} us (start {c['host_start_us']:.2f}, ratio {c['ratio']:.3f}, "
        f"tolerance {c['tolerance']:.2f}): {'OK' if c['ok'] else 'FAILED'}")
    return exit_code(c)


if __name__ == "__main__":
    sys.exit(main())
