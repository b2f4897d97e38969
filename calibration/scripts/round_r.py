"""Round r on one H200 (issue 20): CUPTI kernel timelines of the reference decoder's full-graph step.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_r --out FILE.json [--quick]

Run from the repository root. Why: the reference decoder's llama3-8b full-graph rows are predicted 3-7 % fast
(round j, calibration/validation/lofo.md; worst packed b16 -7.4 %) while qwen3-0.6b's are within 2 %: which kernels
take the time launchsim does not price needs their durations inside the replay. One profiled process (a trace,
never timed, no canary): calibration/reference_decoder.py Runner, ctx 512, one full CUDA graph per configuration
(llama3-8b none and packed at batch 1, 16, 64; qwen3-0.6b none at batch 16 as a control), 3 replays under
torch.profiler, the last replay's kernels (name, start, duration, gap before: round_o.kernels_of_replays).
`--quick`: qwen3-0.6b 2 layers b1 (a pipeline check).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

from calibration.scripts import round_h as H


def grid(quick: bool):
    if quick:
        return [("qwen3-0.6b", "none", 1)]
    return [("llama3-8b", f, b) for f in ("none", "packed") for b in (1, 16, 64)] + [("qwen3-0.6b", "none", 16)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    import torch

    from calibration.reference_decoder import Runner, make_cache, make_weights, model_spec
    from calibration.scripts.round_o import kernels_of_replays

    torch.set_grad_enabled(False)
    t0 = time.time()
    res = {"kind": "launchsim-round-r-reference-timeline", "quick": a.quick, "environment": H.env(), "ctx": 512,
           "rows": [], "errors": []}
    cur = w = None
    for name, fusion, b in grid(a.quick):
        try:
            m = model_spec(name, a.quick)
            if name != cur:
                w = None
                torch.cuda.empty_cache()
                cur, w = name, make_weights(m)
            r = Runner(m, fusion, b, 512, weights=w, cache=make_cache(m, b, 512))
            for _ in range(3):
                r.step()
            g = r.capture(warmup=2)
            for _ in range(3):
                g.replay()
            last = kernels_of_replays(g, 3)[-1]
            span = last[-1]["ts"] + last[-1]["dur"] - last[0]["ts"]
            res["rows"].append({"model": name, "fusion": fusion, "batch": b, "layers": m.num_hidden_layers,
                                "kernels": len(last), "span_us": span, "kernel_sum_us": sum(k["dur"] for k in last),
                                "timeline": last})
            H.log(f"{name} {fusion} b{b}: {len(last)} kernels, span {span:.1f} us, kernels "
                  f"{res['rows'][-1]['kernel_sum_us']:.1f} us")
            r.release()
            del r, g
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            res["errors"].append({"what": f"{name} {fusion} b{b}", "error": H.err(e)})
        H.dump(res, a.out)
    res["wall_s"] = time.time() - t0
    H.dump(res, a.out)
    H.log(f"[summary] {len(res['rows'])} rows, {len(res['errors'])} errors, {res['wall_s']:.0f} s")
    return 0 if not res["errors"] else 3


if __name__ == "__main__":
    sys.exit(main())
