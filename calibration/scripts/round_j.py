"""Round j on one H200 (issue 20): the reference decoder's full and piecewise CUDA graphs timed again, clean.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_j --out FILE.json [--quick] [--deadline S]

Run from the repository root. The issue's "the reference decoder keeps its graph and piecewise rows within 3 %" was
judged on round a's piecewise rows (another machine, no end canary). This is one timing process (forbid_profiler, a
canary at its start and end and before / after every row) of calibration/reference_decoder.py, qwen3-0.6b and
llama3-8b, fusion none and packed, batch 1-64, ctx 512 (qwen3-0.6b also 2048), each row measured by
calibration/child_timing.py `measure_runner` with graphs full and piecewise: the same format as round a/b's
timing.json rows (eager, full, piecewise: isolated and pipelined), so calibration/validate_impl.py scores it as it
scores them. `--quick`: 2 layers, batch 1 and 8, qwen3-0.6b only (a pipeline check; its figures are not kept).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

from calibration.scripts import round_h as H


def grid(quick: bool):
    if quick:
        return [("qwen3-0.6b", b, 512) for b in (1, 8)]
    out = [("qwen3-0.6b", b, c) for c in (512, 2048) for b in (1, 2, 4, 8, 16, 32, 64)]
    return out + [("llama3-8b", b, 512) for b in (1, 2, 4, 8, 16, 32, 64)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=500.0)
    a = ap.parse_args(argv)
    import torch

    from calibration.child_timing import measure_runner
    from calibration.hygiene import canary, check_canary, exit_code, forbid_profiler
    from calibration.reference_decoder import Runner, make_cache, make_weights, model_spec

    forbid_profiler()
    torch.set_grad_enabled(False)
    H.warm_host()
    t0 = time.time()
    res = {"kind": "launchsim-round-j-timing", "quick": a.quick, "environment": H.env(), "canary_start": canary(),
           "rows": [], "errors": []}
    H.dump(res, a.out)
    cur = w = None
    for name, b, c in grid(a.quick):
        if time.time() - t0 > a.deadline - 25:
            res["errors"].append({"what": f"{name} b{b} c{c} and later", "error": "deadline"})
            break
        m = model_spec(name, a.quick)
        if name != cur:
            w = None
            torch.cuda.empty_cache()
            cur, w = name, make_weights(m)
        cache = make_cache(m, b, c)
        for f in ("none", "packed"):
            try:
                c0 = canary(1500)
                row = {"model": name, "fusion": f, "batch": b, "ctx": c, "layers": m.num_hidden_layers,
                       **measure_runner(Runner(m, f, b, c, weights=w, cache=cache), ("full", "piecewise"))}
                c1 = canary(1500)
                row["canary_before_us"] = c0["host_tiny_op_us"]["p50"]
                row["canary_after_us"] = c1["host_tiny_op_us"]["p50"]
            except Exception as e:  # noqa: BLE001 (recorded; one bad configuration must not lose the round)
                traceback.print_exc()
                row = {"model": name, "fusion": f, "batch": b, "ctx": c, "error": H.err(e)}
            res["rows"].append(row)
            H.dump(res, a.out)
            if "full" in row:
                H.log(f"{name} {f} b{b} c{c}: eager {row['eager']['isolated']['step_ms']['p50']:.2f} full "
                      f"{row['full']['isolated']['step_ms']['p50']:.3f} piecewise "
                      f"{row['piecewise']['isolated']['step_ms']['p50']:.3f} ms (canary {row['canary_before_us']:.2f}"
                      f" -> {row['canary_after_us']:.2f} us)")
        del cache
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    H.dump(res, a.out)
    H.log(f"[canary] {res['canary']}; {len(res['rows'])} rows in {res['wall_s']:.0f} s")
    return exit_code(res["canary"])


if __name__ == "__main__":
    sys.exit(main())
