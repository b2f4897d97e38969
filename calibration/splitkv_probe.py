"""When does SDPA launch a split-KV combine kernel at decode? (simulator/traces/retarget.py SPLITKV_MAX_WITH)

    python -m calibration.splitkv_probe --out FILE.json

q [B, H, 1, 128] against K/V [B, KV, S, 128], bf16, the default SDPA backend, two call forms: a boolean mask
[B, 1, 1, S] with K/V expanded to every query head (transformers' static cache + repeat_kv: cuDNN) and
enable_gqa without a mask (the dynamic cache). Counts the kernels of one call (torch.profiler, counts only, no
timing) per (form, H, KV, S, B), and the host tiny-op canary 3 times (calibration/hygiene.py). Measured on the
H200: calibration/measured/h200-traces/splitkv_probe.json. torch is imported lazily; needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import sys


def count(B: int, H: int, KV: int, S: int, mask: bool) -> list[str]:
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    q = torch.randn(B, H, 1, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(B, KV, S, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    kw = dict(attn_mask=torch.ones(B, 1, 1, S, device="cuda", dtype=torch.bool)) if mask else dict(enable_gqa=KV != H)
    for _ in range(3):
        F.scaled_dot_product_attention(q, k, v, **kw)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        F.scaled_dot_product_attention(q, k, v, **kw)
        torch.cuda.synchronize()
    return [e.name for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    from .hygiene import canary, require_gpu

    require_gpu("calibration.splitkv_probe")
    import torch

    runs = [canary(3000)["host_tiny_op_us"]["p50"] for _ in range(3)]
    rows = []
    for mask, H, KV in ((True, 16, 16), (False, 16, 8), (True, 32, 32), (False, 32, 8)):
        for S in (576, 1024, 4096):
            for B in (1, 2, 4, 6, 8, 12, 16, 24, 32):
                ks = count(B, H, KV, S, mask)
                split = any("reduction" in n.lower() or "combine" in n.lower() for n in ks)
                rows.append({"mask": mask, "H": H, "KV": KV, "S": S, "B": B, "n": len(ks), "split": split,
                             "names": ks})
                print(f"mask {mask} H {H} KV {KV} S {S} B {B}: {len(ks)} kernels split {split} B*KV {B * KV}",
                      flush=True)
    with open(a.out, "w") as f:
        json.dump({"kind": "splitkv-probe", "canary_runs_us": runs, "torch": torch.__version__,
                   "cudnn": torch.backends.cudnn.version(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
