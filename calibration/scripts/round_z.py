"""Round z on one H200 (issue 20): transformers' attention block over a static cache by size, op by op: repeat_kv's
strided copy of K (and V) to every query head, and SDPA over the repeated heads under the boolean mask.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_z --out FILE.json [--quick]

Run from the repository root. Why: `--impl hf` full graphs are over-predicted at long static caches and large
batches (round x ctx 4096 b32 +7-9 %, round y ctx 2048 b32 +5.5 %), where those two ops dominate the step (for
llama3-8b b32 over 2176 slots the repeat_kv line, recipes.STRIDED_COPY_US, gives 41 ms of a 57.6 ms prediction).
The copy line is two points of round c (1.2 M and 9.4 M elements) and one check at 168 M; the masked attention over
repeated heads is priced by the GQA table at rep x the keys. Neither was measured at 100 M+ elements.

One timing process (forbid_profiler, canary at start and end), the tables' method (calibration/tables.py
`graph_op_us`: per-op device us in a replayed graph), rotating over distinct caches (>= 256 MB in all):
- `repeat_kv`: k[:, :, None].expand(B, kv, rep, S, d).reshape(B, kv * rep, S, d) of bf16 k[B, kv, S, d] (what
  transformers' repeat_kv launches: aten's strided elementwise copy);
- `sdpa`: F.scaled_dot_product_attention(q[B, H, 1, d], K[B, H, S, d], V, attn_mask=bool[B, 1, 1, S]) over the
  repeated K/V (the call's mask conversion, cuDNN's kernel and its split-KV reduce where it splits: the whole call);
- `copy`: a plain contiguous copy of the repeated tensor's bytes (the copy curve, beside it).
"""

from __future__ import annotations

import argparse
import math
import time

from calibration.scripts import round_h as H

# (kv heads, rep, head_dim) of the decoders the hf rows measure: llama3-8b / mistral / qwen3-4b, qwen3-0.6b,
# qwen2-1.5b, gemma-2-2b, llama-3.2-1b
SHAPES = ((8, 4, 128), (8, 2, 128), (2, 6, 128), (4, 2, 256), (8, 4, 64))
SLOTS = (640, 2176, 4224)
BATCHES = (1, 8, 32, 64)
MAX_BYTES = 1.2e9  # the repeated tensor's bytes at most
ROT_BYTES = 256e6


def _point(torch, F, graph_op_us, B, kv, rep, S, d):
    H_ = kv * rep
    out_bytes = B * H_ * S * d * 2
    n = int(max(1, min(8, math.ceil(ROT_BYTES / out_bytes))))
    ks = [torch.randn(B, kv, S, d, device="cuda", dtype=torch.bfloat16) for _ in range(n)]
    reps = max(n, 4)

    def rkv(k):
        return k[:, :, None, :, :].expand(B, kv, rep, S, d).reshape(B, H_, S, d)

    cp_us = graph_op_us([lambda k=ks[i % n]: rkv(k) for i in range(reps)], reps=5)
    big = [rkv(k) for k in ks]
    del ks
    q = torch.randn(B, H_, 1, d, device="cuda", dtype=torch.bfloat16)
    mask = torch.ones(B, 1, 1, S, device="cuda", dtype=torch.bool)
    mask[..., -8:] = False  # the unwritten slots of a static cache
    sd_us = graph_op_us([lambda K=big[i % n]: F.scaled_dot_product_attention(q, K, K, attn_mask=mask)
                         for i in range(reps)], reps=5)
    dst = [torch.empty_like(x) for x in big]
    plain = graph_op_us([lambda x=big[i % n], y=dst[i % n]: y.copy_(x) for i in range(reps)], reps=5)
    del big, dst
    return {"batch": B, "kv_heads": kv, "rep": rep, "heads": H_, "slots": S, "head_dim": d, "elements": out_bytes // 2,
            "out_bytes": out_bytes, "rotating": n, "repeat_kv_us": cp_us, "sdpa_us": sd_us, "copy_us": plain}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F

    from calibration.hygiene import canary, forbid_profiler
    from calibration.tables import graph_op_us

    forbid_profiler()
    torch.set_grad_enabled(False)
    H.warm_host()
    t0 = time.time()
    res = {"kind": "launchsim-round-z-attention-block", "quick": a.quick, "environment": H.env(),
           "canary_start": canary(), "points": [], "errors": []}
    shapes, slots, batches = (SHAPES[:1], SLOTS[:1], (1, 8)) if a.quick else (SHAPES, SLOTS, BATCHES)
    for kv, rep, d in shapes:
        for S in slots:
            for B in batches:
                if B * kv * rep * S * d * 2 > MAX_BYTES:
                    continue
                try:
                    p = _point(torch, F, graph_op_us, B, kv, rep, S, d)
                    res["points"].append(p)
                    H.log(f"b{B} kv{kv} x{rep} S{S} d{d} {p['elements'] / 1e6:.1f} M el: repeat_kv "
                          f"{p['repeat_kv_us']:.2f} us, sdpa {p['sdpa_us']:.2f} us, copy {p['copy_us']:.2f} us")
                except Exception as e:  # noqa: BLE001
                    res["errors"].append({"what": f"b{B} kv{kv} x{rep} S{S} d{d}", "error": H.err(e)})
                torch.cuda.empty_cache()
    return H.finish_points(res, a.out, t0)


if __name__ == "__main__":
    raise SystemExit(main())
