"""Round z on one H200 (issue 20): transformers' attention block over a static cache by size, op by op: repeat_kv's
strided copy of K (and V) to every query head, and SDPA over the repeated heads under the boolean mask.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_z --out FILE.json [--quick]
    python3 -m calibration.scripts.round_z --compare FILE.json     # CPU only: launchsim's prices of the same ops

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
  repeated K and V (two distinct tensors: `z_kv_aliased.json`, a first run that passed K as V, read one tensor twice
  and ran faster from L2; kept as the record, not used) (the call's mask conversion, cuDNN's kernel and its split-KV reduce where it splits: the whole call);
- `copy`: a plain contiguous copy of the repeated tensor's bytes (the copy curve, beside it).
"""

from __future__ import annotations

import argparse
import math

from calibration.scripts import round_h as H

# (kv heads, rep, head_dim) of the decoders the hf rows measure: llama3-8b / mistral / qwen3-4b, qwen3-0.6b,
# qwen2-1.5b, gemma-2-2b, llama-3.2-1b
SHAPES = ((8, 4, 128), (8, 2, 128), (2, 6, 128), (4, 2, 256), (8, 4, 64))
SLOTS = (640, 2176, 4224)
BATCHES = (1, 8, 32, 64)
MAX_BYTES = 1.2e9  # the repeated tensor's bytes at most (K and V each)
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
    vs = [rkv(torch.randn_like(k)) for k in ks]  # V apart from K: a kernel reading one tensor twice hits L2
    del ks
    q = torch.randn(B, H_, 1, d, device="cuda", dtype=torch.bfloat16)
    mask = torch.ones(B, 1, 1, S, device="cuda", dtype=torch.bool)
    mask[..., -8:] = False  # the unwritten slots of a static cache
    sd_us = graph_op_us([lambda K=big[i % n], V=vs[i % n]: F.scaled_dot_product_attention(q, K, V, attn_mask=mask)
                         for i in range(reps)], reps=5)
    del vs
    dst = [torch.empty_like(x) for x in big]
    plain = graph_op_us([lambda x=big[i % n], y=dst[i % n]: y.copy_(x) for i in range(reps)], reps=5)
    del big, dst
    return {"batch": B, "kv_heads": kv, "rep": rep, "heads": H_, "slots": S, "head_dim": d, "elements": out_bytes // 2,
            "out_bytes": out_bytes, "rotating": n, "repeat_kv_us": cp_us, "sdpa_us": sd_us, "copy_us": plain}


# the decoder of calibration/configs/hf each (kv heads, rep, head_dim) is, for launchsim's prices of the same ops
DECODER = {(8, 4, 128): "llama3-8b", (8, 2, 128): "qwen3-0.6b", (2, 6, 128): "qwen2-1.5b", (4, 2, 256): "gemma-2-2b",
           (8, 4, 64): "llama-3.2-1b"}


def compare(path: str) -> list[dict]:
    """Each point against launchsim's `hf` recipe (profile h200) at the same (batch, slots): the per-layer GPU time
    of its repeat_kv_k op (recipes.STRIDED_COPY_US) and of the SDPA call's ops (mask conversion, attention, split-KV
    reduce); prints one line a point and the MAPEs."""
    import json
    import statistics

    from simulator.model.costs import CostModel
    from simulator.model.models import load_model
    from simulator.model.profile import load_profile
    from simulator.model.workload import build_step, decode

    cm = CostModel(load_profile("h200"))
    with open(path) as f:
        d = json.load(f)
    out = []
    for p in d["points"]:
        name = DECODER[(p["kv_heads"], p["rep"], p["head_dim"])]
        m = load_model(f"calibration/configs/hf/{name}.json")
        st = build_step(m, decode(p["batch"], p["slots"] - 128), "none", "hf", max_cache_len=p["slots"])
        L = m.num_hidden_layers
        cp = sum(cm.gpu_s(o) for o in st.ops if o.name == "repeat_kv_k") / L * 1e6
        at = sum(cm.gpu_s(o) for o in st.ops if o.name in ("attention", "attention.split_kv_reduce")
                 or o.name.startswith("sdpa.mask")) / L * 1e6
        r = {"decoder": name, "batch": p["batch"], "slots": p["slots"], "elements": p["elements"],
             "repeat_kv_us": p["repeat_kv_us"], "repeat_kv_pred_us": cp, "sdpa_us": p["sdpa_us"], "sdpa_pred_us": at}
        out.append(r)
        H.log(f"{name:14s} b{p['batch']:<3d} S{p['slots']:<5d} {p['elements'] / 1e6:7.1f} M  repeat_kv "
              f"{p['repeat_kv_us']:8.2f} / {cp:8.2f} us ({100 * (cp / p['repeat_kv_us'] - 1):+6.1f} %)  sdpa "
              f"{p['sdpa_us']:8.2f} / {at:8.2f} us ({100 * (at / p['sdpa_us'] - 1):+6.1f} %)")
    for k in ("repeat_kv", "sdpa"):
        e = [abs(r[f"{k}_pred_us"] / r[f"{k}_us"] - 1) * 100 for r in out]
        H.log(f"[compare] {k}: MAPE {statistics.fmean(e):.1f} % over {len(e)} points (measured / launchsim)")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--compare", metavar="FILE.json")
    a = ap.parse_args(argv)
    if a.compare:
        compare(a.compare)
        return 0
    if not a.out:
        ap.error("--out is required (or --compare FILE.json)")
    import torch
    import torch.nn.functional as F

    from calibration.tables import graph_op_us

    res, t0 = H.start_points("launchsim-round-z-attention-block", a.quick)
    shapes, slots, batches = (SHAPES[:1], SLOTS[:1], (1, 8)) if a.quick else (SHAPES, SLOTS, BATCHES)
    for kv, rep, d in shapes:
        for S in slots:
            for B in batches:
                if B * kv * rep * S * d * 2 > MAX_BYTES:
                    continue
                H.add_point(res, f"b{B} kv{kv} x{rep} S{S} d{d}",
                            lambda B=B, kv=kv, rep=rep, S=S, d=d: _point(torch, F, graph_op_us, B, kv, rep, S, d),
                            lambda p, B=B, kv=kv, rep=rep, S=S, d=d: (
                                f"b{B} kv{kv} x{rep} S{S} d{d} {p['elements'] / 1e6:.1f} M el: repeat_kv "
                                f"{p['repeat_kv_us']:.2f} us, sdpa {p['sdpa_us']:.2f} us, copy {p['copy_us']:.2f} us"))
    return H.finish_points(res, a.out, t0)


if __name__ == "__main__":
    raise SystemExit(main())
