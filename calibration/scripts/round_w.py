"""Round w on one H200 (issue 20): aten's `roll` of a KV cache (transformers' StaticSlidingWindowLayer once its
window is full) by size, and the index_put_ that follows it.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_w --out FILE.json [--quick]

Run from the repository root. Why: a sliding layer whose window is full rolls its whole K and V cache by one slot
every decode step (`keys.roll(-1, dims=-2)`, then the new token written by index_put_ with a one-element index
tensor). Round g's gemma-3-1b trace timed `roll_cuda_kernel` at 1.96 us (0.5 MB) and 6.4 us (4.2 MB): about 0.66
TB/s, a third of what the copy curve gives those sizes; round v's Phi-3-mini at ctx 2048 (window 2047) runs 27 / 42
/ 85 ms eager at batch 1 / 8 / 32 where the copy curve prices those rolls (25-805 MB an op) at 0.5-12 ms a step.

One timing process (forbid_profiler, canary at start and end), the tables' method (calibration/tables.py
`graph_op_us`: per-op device us in a replayed graph), rotating over enough distinct caches (>= 256 MB in all, as the
decoder reads a different layer's cache each time) that small rolls miss L2 like the step's do:
- `roll`: x.roll(-1, dims=-2) of bf16 x[B, kv, S, d], for the families' sliding shapes (kv, S, d) and batches;
- `index_put`: y[:, :, idx] = k with idx = a one-element cuda long tensor, k [B, kv, 1, d] (the step's write);
- `copy`: y.copy_(x) of the same tensors (the plain copy the curve is, beside it).
"""

from __future__ import annotations

import argparse
import math

from calibration.scripts import round_h as H

SHAPES = ((1, 512, 256), (4, 4096, 256), (8, 4096, 128), (32, 2047, 96))  # gemma-3-1b, gemma-2-2b, mistral-like, phi3
BATCHES = (1, 2, 4, 8, 16, 32, 64)
MAX_BYTES = 1.3e9  # one tensor's bytes at most
ROT_BYTES = 256e6


def _point(torch, graph_op_us, B, kv, S, d):
    nbytes = B * kv * S * d * 2
    n = int(max(1, min(16, math.ceil(ROT_BYTES / nbytes))))
    xs = [torch.randn(B, kv, S, d, device="cuda", dtype=torch.bfloat16) for _ in range(n)]
    k = torch.randn(B, kv, 1, d, device="cuda", dtype=torch.bfloat16)
    idx = torch.tensor([-1], dtype=torch.long, device="cuda")
    reps = max(n, 4)
    roll = graph_op_us([lambda x=xs[i % n]: x.roll(-1, dims=-2) for i in range(reps)], reps=5)
    ys = [x.roll(-1, dims=-2) for x in xs]
    put = graph_op_us([lambda y=ys[i % n]: y.__setitem__((slice(None), slice(None), idx), k) for i in range(reps)],
                      reps=5)
    cp = graph_op_us([lambda x=xs[i % n], y=ys[i % n]: y.copy_(x) for i in range(reps)], reps=5)
    del xs, ys
    return {"batch": B, "kv_heads": kv, "slots": S, "head_dim": d, "tensor_bytes": nbytes, "rotating": n,
            "roll_us": roll, "index_put_us": put, "copy_us": cp}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    import torch

    from calibration.tables import graph_op_us

    res, t0 = H.start_points("launchsim-round-w-roll", a.quick)
    shapes, batches = (SHAPES[:1], (1, 8)) if a.quick else (SHAPES, BATCHES)
    for kv, S, d in shapes:
        for B in batches:
            if B * kv * S * d * 2 > MAX_BYTES:
                continue
            H.add_point(res, f"b{B} kv{kv} S{S} d{d}",
                        lambda B=B, kv=kv, S=S, d=d: _point(torch, graph_op_us, B, kv, S, d),
                        lambda p, B=B, kv=kv, S=S, d=d: (
                            f"roll b{B} kv{kv} S{S} d{d} {p['tensor_bytes'] / 1e6:.1f} MB: roll {p['roll_us']:.2f} us "
                            f"({2 * p['tensor_bytes'] / p['roll_us'] / 1e6:.2f} TB/s), copy {p['copy_us']:.2f} us, "
                            f"index_put {p['index_put_us']:.2f} us"))
    return H.finish_points(res, a.out, t0)


if __name__ == "__main__":
    raise SystemExit(main())
