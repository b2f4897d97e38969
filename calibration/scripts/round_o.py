"""Round o on one H200 (issue 20): the kernel timeline inside a replayed CUDA graph of a torch.compile'd decoder.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_o --out FILE.json [--quick]

Run from the repository root. Why: transformers' decoder compiled by Inductor and replayed as one full graph is
predicted 10-12 % fast at batch 64 (calibration/validation/inductor.md, round f's 2-layer rows) while its kernel
sum is within 4 % of CUPTI's: the graph holds 73 us (qwen3-0.6b) and 143 us (llama3-8b) more than its kernels at
b64 and 36-42 us at b1, where launchsim's node gaps put ~13 us. Which kernels wait, and for how long, needs the
kernels' start and end inside the replay, which round f did not keep (compile_counts_*.json has names, counts
and the sum only).

One profiled process (a trace, never timed; nothing here is a timing figure): round f's compiled runners
(calibration/scripts/round_f.py `_compiled_runner`: 2 layers, ctx 512, dynamic=False), impl hf and ref, qwen3-0.6b
and llama3-8b, batch 1 and 64; each compiled step captured as one full CUDA graph (after warm-ups), then 3
replays under torch.profiler; for the last replay every kernel's name, start and duration (CUPTI, us), and the
gap before it (its start minus the previous kernel's end). `--quick`: hf qwen3-0.6b b1 only (a pipeline check).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback

from calibration.scripts import round_h as H


def grid(quick: bool):
    if quick:
        return [("hf", "qwen3-0.6b", 1)]
    return [(impl, m, b) for impl in ("hf", "ref") for m in ("qwen3-0.6b", "llama3-8b") for b in (1, 64)]


def kernels_of_replays(g, n: int) -> list[list[dict]]:
    """Kernels of each of `n` graph replays, in start order: name, ts, dur (us, CUPTI)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            g.replay()
            torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(path)
    with open(path) as f:
        evs = json.load(f)["traceEvents"]
    os.unlink(path)
    ks = sorted((e for e in evs if e.get("cat") == "kernel"), key=lambda e: float(e["ts"]))
    if not ks or len(ks) % n:
        raise RuntimeError(f"{len(ks)} kernels over {n} replays: not a whole number per replay")
    per = len(ks) // n
    out = []
    for i in range(n):
        rows, prev_end = [], None
        for e in ks[i * per:(i + 1) * per]:
            ts, dur = float(e["ts"]), float(e["dur"])
            rows.append({"name": e["name"], "ts": ts, "dur": dur,
                         "gap_before": None if prev_end is None else ts - prev_end,
                         "grid": e.get("args", {}).get("grid"), "block": e.get("args", {}).get("block")})
            prev_end = ts + dur
        out.append(rows)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    import torch

    from calibration.reference_decoder import warm_then_capture
    from calibration.scripts.round_f import _compiled_runner, free

    torch.set_grad_enabled(False)
    t0 = time.time()
    res = {"kind": "launchsim-round-o-graph-timeline", "quick": a.quick, "environment": H.env(), "layers": 2,
           "ctx": 512, "dynamic": False, "rows": [], "errors": []}
    fcs: dict = {}
    for impl, name, b in grid(a.quick):
        try:
            fc = fcs.setdefault((impl, name), {})
            step, holder = _compiled_runner(impl, name, b, False, fc)
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            g, _ = warm_then_capture(step, 2)
            for _ in range(3):
                g.replay()
            reps = kernels_of_replays(g, 3)
            last = reps[-1]
            span = last[-1]["ts"] + last[-1]["dur"] - last[0]["ts"]
            ksum = sum(k["dur"] for k in last)
            gaps = [k["gap_before"] for k in last[1:]]
            res["rows"].append({"impl": impl, "model": name, "batch": b, "kernels": len(last), "span_us": span,
                                "kernel_sum_us": ksum, "gap_sum_us": sum(gaps),
                                "replay_spans_us": [r[-1]["ts"] + r[-1]["dur"] - r[0]["ts"] for r in reps],
                                "timeline": last})
            top = sorted(last[1:], key=lambda k: -k["gap_before"])[:3]
            H.log(f"{impl} {name} b{b}: {len(last)} kernels, span {span:.1f} us, kernels {ksum:.1f} us, gaps "
                  f"{sum(gaps):.1f} us; largest gaps " + "; ".join(f"{k['gap_before']:.1f} us before "
                                                                    f"{k['name'][:60]}" for k in top))
            del g, step, holder
            free()
        except Exception as e:  # noqa: BLE001 (recorded; one configuration must not lose the round)
            traceback.print_exc()
            res["errors"].append({"what": f"{impl} {name} b{b}", "error": H.err(e)})
        H.dump(res, a.out)
    res["wall_s"] = time.time() - t0
    H.dump(res, a.out)
    H.log(f"[summary] {len(res['rows'])} rows, {len(res['errors'])} errors, {res['wall_s']:.0f} s")
    return 0 if not res["errors"] else 3


if __name__ == "__main__":
    sys.exit(main())
