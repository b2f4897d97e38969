"""Round m on one H200 (issue 20): where a piecewise step's extra time over its full graph goes.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_m --out FILE.json [--quick]

Run from the repository root. Round j measured the reference decoder's piecewise steps 0.09-0.16 ms over their
full-graph twins; with round l's graph-launch latency (1.1 us a replay in a busy stream) launchsim puts 0.03-0.05
ms there. This round splits the difference on the real decoder (calibration/reference_decoder.py, fusion none,
ctx 512; qwen3-0.6b and llama3-8b at batch 1, 8, 64), one timing process (forbid_profiler, canaries at start and
end and around every row), four ways to run the same step:

- `full`: one graph of the whole step;
- `chain`: the piece list of `decode_pieces` with each attention call captured together with the piece before it
  (layers + 1 graphs, no eager op): the graph boundaries alone;
- `split`: every piece and every attention call its own graph (2 x layers + 1 graphs, no eager op);
- `piecewise`: Runner's own piecewise mode (layers + 1 graphs, attention eager between them), as round j timed it.

Each by CUDA events over `STEPS` steps queued behind a sleep kernel (device ms per step, the host far ahead;
`host_ahead` says whether it was), 7 repetitions, and by wall clock per step over 20 steps back to back
(calibration/child_timing.py `_pipelined`). `--quick`: 2 layers, qwen3-0.6b b1 (a pipeline check; not kept).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

from calibration.scripts import round_h as H

STEPS = 5
HOLD = 60_000_000  # sleep-kernel cycles, ~30 ms: longer than issuing STEPS piecewise steps


def grid(quick: bool):
    if quick:
        return [("qwen3-0.6b", 1)]
    return [(m, b) for m in ("qwen3-0.6b", "llama3-8b") for b in (1, 8, 64)]


def queued(fn, reps=7):
    from calibration.hygiene import queued_with_host
    from calibration.microbench import _pct

    dev_us, host_us, hold_us = queued_with_host(fn, STEPS, reps, HOLD)
    dev, host, hold = ([x / 1e3 for x in xs] for xs in (dev_us, host_us, hold_us))  # this round's unit: ms
    return {"device_ms": _pct(dev), "host_issue_ms": _pct(host), "hold_ms": _pct(hold),
            "host_ahead": max(host) < min(hold)}


def capture_groups(fns, groups, pool):
    """Capture each group of fns (indices) as one graph after a warm-up on a side stream; a replay function."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            for f in fns:
                f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graphs = []
    for idx in groups:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            for i in idx:
                fns[i]()
        graphs.append(g)
    torch.cuda.synchronize()

    def replay():
        for g in graphs:
            g.replay()
    return replay, len(graphs)


def row(name, b, quick, w, cache):
    import torch

    from calibration.child_timing import _pipelined
    from calibration.reference_decoder import Runner, model_spec

    m = model_spec(name, quick)
    r = Runner(m, "none", b, 512, weights=w, cache=cache)
    out = {"model": name, "fusion": "none", "batch": b, "ctx": 512, "layers": m.num_hidden_layers}
    for _ in range(3):
        r.step()
    torch.cuda.synchronize()
    variants = {}
    r.capture(warmup=2)
    variants["full"] = (r.replay, 1)
    fns, _ = r._piece_list()
    n = len(fns)  # p_first, (p_attn, p_mid) x (layers - 1), p_attn, p_last
    pool = torch.cuda.graph_pool_handle()
    chain = [[i, i + 1] for i in range(0, n - 1, 2)] + [[n - 1]]
    variants["chain"] = capture_groups(fns, chain, pool)
    fns2, _ = r._piece_list()
    variants["split"] = capture_groups(fns2, [[i] for i in range(n)], torch.cuda.graph_pool_handle())
    r2 = Runner(m, "none", b, 512, weights=w, cache=cache)
    graphs = r2.capture(warmup=2, mode="piecewise")
    variants["piecewise"] = (r2.replay, len(graphs))
    for k, (fn, g) in variants.items():
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        out[k] = {"graphs": g, "queued": queued(fn), "pipelined": _pipelined(fn, 20)}
    r.release()
    r2.release()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    import torch

    from calibration.hygiene import canary, check_canary, exit_code, forbid_profiler
    from calibration.reference_decoder import make_cache, make_weights, model_spec

    forbid_profiler()
    torch.set_grad_enabled(False)
    H.warm_host()
    t0 = time.time()
    res = {"kind": "launchsim-round-m-piecewise", "quick": a.quick, "environment": H.env(), "canary_start": canary(),
           "steps": STEPS, "hold_cycles": HOLD, "rows": [], "errors": []}
    cur = w = None
    for name, b in grid(a.quick):
        m = model_spec(name, a.quick)
        if name != cur:
            w = None
            torch.cuda.empty_cache()
            cur, w = name, make_weights(m)
        cache = make_cache(m, b, 512)
        try:
            c0 = canary(1500)
            rec = row(name, b, a.quick, w, cache)
            c1 = canary(1500)
            rec["canary_before_us"], rec["canary_after_us"] = c0["host_tiny_op_us"]["p50"], c1["host_tiny_op_us"]["p50"]
            res["rows"].append(rec)
            H.log(f"{name} b{b}: " + ", ".join(
                f"{k} {rec[k]['queued']['device_ms']['p50']:.3f} ms dev / {rec[k]['pipelined']['step_ms']['p50']:.3f}"
                f" wall ({rec[k]['graphs']} graphs{'' if rec[k]['queued']['host_ahead'] else ', host NOT ahead'})"
                for k in ("full", "chain", "split", "piecewise")))
        except Exception as e:  # noqa: BLE001 (recorded; one bad configuration must not lose the round)
            traceback.print_exc()
            res["errors"].append({"what": f"{name} b{b}", "error": H.err(e)})
        del cache
        H.dump(res, a.out)
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    H.dump(res, a.out)
    H.log(f"[summary] canary {res['canary']}; {len(res['rows'])} rows, {len(res['errors'])} errors, "
          f"{res['wall_s']:.0f} s")
    return exit_code(res["canary"])


if __name__ == "__main__":
    sys.exit(main())
