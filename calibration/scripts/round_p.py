"""Round p on one H200 (issue 20): decode attention as transformers' StaticCache hands it to SDPA (q_len 1).

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_p --out FILE.json [--quick]

Run from the repository root. Why: at q_len 1 transformers' sdpa_attention_forward repeats K/V to every query head
(repeat_kv: `use_gqa_in_sdpa` is False under StaticCache's boolean mask) and SDPA runs over all H heads and every
cache slot under a boolean mask [B, 1, 1, slots] expanded over the batch (round g's probe). launchsim priced that
kernel from the GQA decode table at rep x the slots (simulator/model/recipes.py `attention_op`): right at batch 1-8,
16-17 % fast at batch 64 (round o: cuDNN's kernel 98.6 us a layer for qwen3-0.6b at 640 slots against 82.5 priced;
llama3-8b 183 against 155). This round measures the kernel itself.

One timing process (forbid_profiler, canary at start and end): for each (heads, head_dim) of the families the
configs name after repeat_kv, batch 1..64 and slots 320..4224, per-call device us of
`F.scaled_dot_product_attention(q[B, H, 1, d], k[B, H, slots, d], v[B, H, slots, d], attn_mask=bool[B, 1, 1,
slots] (stride 0 over B), scale=d**-0.5)` in a replayed CUDA graph of UNITS calls rotating over enough K/V copies to
exceed L2 (round g's method), 5 replays (p50 and min). The keys valid under the mask are slots - 128 (the cache's
room). `--quick`: one shape, two batches, one slot count (a pipeline check; not kept).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback

from calibration.scripts import round_h as H

SHAPES = ((16, 128), (32, 128), (12, 128), (8, 256), (32, 64), (4, 256))  # (heads after repeat_kv, head_dim)
BATCHES = (1, 2, 4, 8, 16, 32, 64)
SLOTS = (320, 640, 1152, 2176, 4224)
ROOM = 128
UNITS = 8
ROT_BYTES = 256 << 20


def timed(fn, units):
    import torch

    from calibration.microbench import _pct

    fn(0)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for u in range(units):
            fn(u)
    g.replay()
    torch.cuda.synchronize()
    xs = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        xs.append(a.elapsed_time(b) * 1e3 / units)
    del g
    return _pct(xs)["p50"], min(xs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=400.0)
    a = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F

    from calibration.hygiene import canary, check_canary, exit_code, forbid_profiler

    forbid_profiler()
    torch.set_grad_enabled(False)
    H.warm_host()
    t0 = time.time()
    res = {"kind": "launchsim-round-p-hf-repeated-attention", "quick": a.quick, "environment": H.env(),
           "canary_start": canary(), "units": UNITS, "room": ROOM, "rows": [], "errors": []}
    shapes = SHAPES[:1] if a.quick else SHAPES
    batches = (1, 64) if a.quick else BATCHES
    slots_ = (640,) if a.quick else SLOTS
    bf = torch.bfloat16
    for heads, hd in shapes:
        for S in slots_:
            for B in batches:
                if time.time() - t0 > a.deadline:
                    res["errors"].append({"what": f"h{heads} d{hd} S{S} b{B} and later", "error": "deadline"})
                    break
                kv_bytes = 2 * B * heads * S * hd * 2
                sets = max(2, min(16, -(-ROT_BYTES // kv_bytes)))
                try:
                    K = [torch.randn(B, heads, S, hd, device="cuda", dtype=bf) for _ in range(sets)]
                    V = [torch.randn(B, heads, S, hd, device="cuda", dtype=bf) for _ in range(sets)]
                    Q = [torch.randn(B, heads, 1, hd, device="cuda", dtype=bf) for _ in range(sets)]
                    m = (torch.arange(S, device="cuda") < S - ROOM)[None, None, None, :].expand(B, 1, 1, S)
                    scale = hd ** -0.5

                    def call(u, K=K, V=V, Q=Q, m=m, sets=sets, scale=scale):
                        return F.scaled_dot_product_attention(Q[u % sets], K[u % sets], V[u % sets], attn_mask=m,
                                                              dropout_p=0.0, scale=scale, is_causal=False)
                    p50, mn = timed(call, UNITS)
                    res["rows"].append({"heads": heads, "head_dim": hd, "batch": B, "slots": S, "valid_keys": S - ROOM,
                                        "kv_sets": sets, "us": p50, "us_min": mn, "mask_stride": list(m.stride())})
                    del K, V, Q, m
                except Exception as e:  # noqa: BLE001 (recorded; one point must not lose the round)
                    traceback.print_exc()
                    res["errors"].append({"what": f"h{heads} d{hd} S{S} b{B}", "error": H.err(e)})
                torch.cuda.empty_cache()
            H.dump(res, a.out)
        H.log(f"h{heads} d{hd}: " + ", ".join(f"b{r['batch']}/S{r['slots']} {r['us']:.1f}" for r in res["rows"]
                                               if r["heads"] == heads and r["head_dim"] == hd and r["slots"] == 640))
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    H.dump(res, a.out)
    H.log(f"[summary] canary {res['canary']}; {len(res['rows'])} rows, {len(res['errors'])} errors, "
          f"{res['wall_s']:.0f} s")
    return exit_code(res["canary"])


if __name__ == "__main__":
    sys.exit(main())
