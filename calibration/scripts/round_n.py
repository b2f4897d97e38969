"""Round n on one H200 (issue 20): what one more CUDA-graph boundary costs on the device, by what the graphs hold.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_n --out FILE.json [--quick]

Run from the repository root. Round m found the reference decoder's step cut into 29 graphs with no eager op
between them (`chain`) 0.4-0.65 ms slower than one graph, 14-20 us a boundary, while the same cut with attention
eager between the graphs (`piecewise`) costs 3-5 us a boundary, and round l's tiny-kernel graphs 1.1 us. This
round times one graph boundary against the graphs' content. For each kind of content (two different graphs A and
B of the same kind), one timing process (forbid_profiler, canaries at start and end), CUDA events over `COUNT`
iterations queued behind a sleep kernel (device us per iteration, 7 repetitions):

- `AB`: one graph holding A's and B's ops (one boundary an iteration, AB -> AB);
- `A,B`: A and B as two graphs replayed in turn (two boundaries an iteration);
- `A,e,B`: A, an eager tiny kernel, B (the piecewise pattern), beside `e` alone;
- `A,B shared`: A and B captured into one memory pool.

`A,B` - `AB` is what one more boundary costs (the ops are the same). Kinds: tiny (1-element adds), gemm (bf16
F.linear at decode shapes), wide (elementwise over 64 MB, many CTAs), sdpa (decode attention), norm (an RMSNorm's
ops on one row), layer (norm, GEMM, SiLU, GEMM: a decoder-like piece), and layer_sdpa (layer with SDPA at its end).
`cycles`: k distinct graphs (k = 1..64, tiny or layer content, separate buffers) replayed in turn, against one
graph holding all k contents, with and without an eager tiny kernel after each: what a boundary costs as the
number of distinct graphs in flight grows (round m's 29- and 57-graph steps against its 3- and 5-graph 2-layer
check). `--quick`: 3 repetitions (a pipeline check; not kept).
"""

from __future__ import annotations

import argparse
import sys
import time

from calibration.scripts import round_h as H

COUNT = 100
HOLD = 60_000_000


def queued(fn, count, reps):
    from calibration.hygiene import queued_with_host
    from calibration.microbench import _pct

    dev, host, hold = queued_with_host(fn, count, reps, HOLD)
    return {"device_us": _pct(dev), "host_issue_us": _pct(host), "host_ahead": max(host) < min(hold)}


def capture(fns, pool=None):
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            for f in fns:
                f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool):
        for f in fns:
            f()
    torch.cuda.synchronize()
    g.replay()
    torch.cuda.synchronize()
    return g


def kinds(only=None):
    """name -> (ops of A, ops of B): two different op lists of one kind (different buffers)."""
    import torch
    import torch.nn.functional as F

    bf = torch.bfloat16
    dev = "cuda"

    def tiny():
        x = torch.zeros(1, device=dev)
        return [lambda: x.add_(1.0)] * 8

    def gemm():
        x = torch.randn(1, 1024, device=dev, dtype=bf)
        w1 = torch.randn(3072, 1024, device=dev, dtype=bf)
        w2 = torch.randn(1024, 3072, device=dev, dtype=bf)
        st = {}

        def a():
            st["h"] = F.linear(x, w1)

        def b():
            st["o"] = F.linear(st["h"], w2)
        return [a, b] * 2

    def wide():
        x = torch.randn(16 * 1024 * 1024, device=dev)
        return [lambda: x.mul_(1.0)] * 2

    def sdpa():
        q = torch.randn(1, 16, 1, 128, device=dev, dtype=bf)
        k = torch.randn(1, 8, 512, 128, device=dev, dtype=bf)
        v = torch.randn(1, 8, 512, 128, device=dev, dtype=bf)
        st = {}

        def a():
            st["a"] = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        return [a]

    def norm():
        x = torch.randn(1, 1024, device=dev, dtype=bf)
        w = torch.randn(1024, device=dev, dtype=bf)
        st = {}

        def a():
            h = x.float()
            r = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
            st["n"] = (h * r).to(bf) * w
        return [a]

    def layer():
        g = gemm()
        return norm() + [g[0], _silu(), g[1]]

    def _silu():
        y = torch.randn(1, 3072, device=dev, dtype=bf)
        return lambda: F.silu(y)

    def layer_sdpa():
        return layer() + sdpa()

    makers = {"tiny": tiny, "gemm": gemm, "wide": wide, "sdpa": sdpa, "norm": norm, "layer": layer,
              "layer_sdpa": layer_sdpa}
    return {k: (f(), f()) for k, f in makers.items() if only is None or k in only}


CYCLE = (1, 2, 4, 8, 16, 32, 64)


def cycle(nodes_kind, k, tiny, reps):
    """k distinct graphs of one kind replayed in a cycle against one graph holding all k contents."""
    made = kinds_one(nodes_kind, k)
    graphs = [capture(f) for f in made]
    one = capture([op for f in made for op in f])
    n = max(1, 256 // k)  # >= 256 replays a run
    t_cycle = queued(lambda: [g.replay() for g in graphs], n, reps)
    t_eager = queued(lambda: [(g.replay(), tiny()) for g in graphs], n, reps)
    t_one = queued(one.replay, n, reps)
    e = queued(tiny, 256, reps)["device_us"]["p50"]
    c, ce, o = (t["device_us"]["p50"] for t in (t_cycle, t_eager, t_one))
    return {"nodes_kind": nodes_kind, "graphs": k, "ops_per_graph": len(made[0]), "cycle": t_cycle,
            "cycle_eager": t_eager, "one_graph": t_one, "eager_tiny_us": e,
            "per_graph_boundary_us": (c - o) / k, "per_graph_boundary_after_eager_us": (ce - o) / k - e}


def kinds_one(name, k):
    out = []
    for _ in range(k):
        out.append(kinds((name,))[name][0])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    import torch

    from calibration.hygiene import canary, check_canary, exit_code, forbid_profiler

    forbid_profiler()
    torch.set_grad_enabled(False)
    H.warm_host()
    t0 = time.time()
    reps = 3 if a.quick else 7
    res = {"kind": "launchsim-round-n-graph-boundary", "quick": a.quick, "environment": H.env(),
           "canary_start": canary(), "count": COUNT, "hold_cycles": HOLD, "rows": [], "cycles": [], "errors": []}
    x = torch.zeros(1, device="cuda")
    tiny = lambda: x.add_(2.0)  # noqa: E731
    res["eager_tiny"] = queued(tiny, COUNT, reps)
    for name, (fa, fb) in kinds().items():
        try:
            ga, gb, gab = capture(fa), capture(fb), capture(fa + fb)
            pool = torch.cuda.graph_pool_handle()
            sa, sb = capture(fa, pool), capture(fb, pool)
            ops = len(fa)
            rec = {"kind": name, "ops_a": ops, "ops_b": len(fb)}
            rec["AB"] = queued(gab.replay, COUNT, reps)
            rec["A,B"] = queued(lambda: (ga.replay(), gb.replay()), COUNT, reps)
            rec["A,e,B"] = queued(lambda: (ga.replay(), tiny(), gb.replay()), COUNT, reps)
            rec["A,B shared"] = queued(lambda: (sa.replay(), sb.replay()), COUNT, reps)
            rec["A"] = queued(ga.replay, COUNT, reps)
            p = {k: rec[k]["device_us"]["p50"] for k in ("AB", "A,B", "A,e,B", "A,B shared", "A")}
            e = res["eager_tiny"]["device_us"]["p50"]
            rec["boundary_us"] = p["A,B"] - p["AB"]
            rec["boundary_after_eager_us"] = p["A,e,B"] - e - p["AB"]
            res["rows"].append(rec)
            H.log(f"{name:11s} AB {p['AB']:8.2f}  A,B {p['A,B']:8.2f}  A,e,B {p['A,e,B']:8.2f}  shared "
                  f"{p['A,B shared']:8.2f}  A {p['A']:8.2f} us | one more boundary {rec['boundary_us']:+.2f} us, "
                  f"with an eager kernel between {rec['boundary_after_eager_us']:+.2f} us"
                  + ("" if all(rec[k]["host_ahead"] for k in p) else "  (host NOT ahead in some run)"))
            del ga, gb, gab, sa, sb
        except Exception as exc:  # noqa: BLE001 (recorded; one kind must not lose the round)
            res["errors"].append({"what": name, "error": H.err(exc)})
            H.log(f"{name}: {H.err(exc)}")
    for nodes_kind in ("tiny", "layer"):
        for k in CYCLE:
            try:
                res["cycles"].append(cycle(nodes_kind, k, tiny, reps))
                c = res["cycles"][-1]
                H.log(f"cycle of {k:3d} distinct {nodes_kind} graphs: {c['per_graph_boundary_us']:+.2f} us a boundary, "
                      f"{c['per_graph_boundary_after_eager_us']:+.2f} us with an eager kernel between")
            except Exception as exc:  # noqa: BLE001
                res["errors"].append({"what": f"cycle {nodes_kind} {k}", "error": H.err(exc)})
                H.log(f"cycle {nodes_kind} {k}: {H.err(exc)}")
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    H.dump(res, a.out)
    H.log(f"[summary] canary {res['canary']}; eager tiny {res['eager_tiny']['device_us']['p50']:.2f} us; "
          f"{len(res['rows'])} kinds, {len(res['errors'])} errors, {res['wall_s']:.0f} s")
    return exit_code(res["canary"])


if __name__ == "__main__":
    sys.exit(main())
