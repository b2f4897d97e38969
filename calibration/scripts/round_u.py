"""Round u on one H200 (issue 20): aten's elementwise kernels by launch variant (contiguous / broadcast / strided)
and size, over decode row counts.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_u --out FILE.json [--quick]

Run from the repository root. Why: round f's CUPTI traces of transformers' decoders show an elementwise op change
kernel with the row count, not only its time: at one row every operand of `w * x` (weight [H] x x[1, H]) or of a
chunk of a packed projection is contiguous, aten launches `vectorized_elementwise_kernel` (0.96-1.15 us); at 8 rows
the same op has a broadcast or strided operand and runs `elementwise_kernel` with an offset calculator (2.3-2.8
us). The byte curves (calibration/tables.py `curves`) price a mix of both at every size. One timing process
(forbid_profiler, canary at start and end), the tables' method (`graph_op_us`: per-op device us in a replayed graph
of identical nodes), each variant as the decoders run it:

- `vec_bf16`: a[T, H] * b[T, H], bf16, contiguous (residual adds, silu * up of separate projections);
- `vec_f32_unary`: f.pow(2) over fp32 [T, H] (the norm's pow; rsqrt and add-eps are this kernel on [T, 1]);
- `bcast_row`: w[H] * x[T, H], bf16 (the norm's weight; contiguous at T = 1);
- `bcast_col`: f[T, H] * r[T, 1], fp32 (the norm's x * rsqrt(var); broadcast at every T);
- `rope`: q[T, heads, 1, hd] * cos[T, 1, 1, hd], bf16 (rotary's mul_cos / mul_sin on the transposed view);
- `strided`: g * u with g, u = y.chunk(2, -1) of y[T, 2H], bf16 (a packed gate/up's halves; contiguous at T = 1);
- `copy_f32`: x.to(float32) of bf16 [T, H] (the norm's upcast), `copy_bf16` its downcast.
T over decode rows 1..1024, H over the supported families' widths. `--quick`: a few points (not kept).
`--names`: a separate, profiled process (no timing in it): the kernel aten launches for each variant at T 1, 2, 8
and 64 (H 3072; rope phi3's heads), by torch.profiler, so the variant a recipe op is given can be checked by name.
"""

from __future__ import annotations

import argparse

from calibration.scripts import round_h as H

ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
WIDTHS = (1024, 2048, 3072, 4096, 8192, 14336)
HEADS = ((16, 128), (32, 96), (32, 128))  # (heads, head_dim) for rope: qwen3-0.6b, phi3, llama
VARIANTS = ("vec_bf16", "vec_f32_unary", "bcast_row", "bcast_col", "strided", "copy_f32", "copy_bf16")


def _fns(torch, v, T, W):
    bf, f32 = torch.bfloat16, torch.float32
    if v == "vec_bf16":
        a, b = torch.randn(T, W, device="cuda", dtype=bf), torch.randn(T, W, device="cuda", dtype=bf)
        return (lambda: a * b), 6 * T * W
    if v == "vec_f32_unary":
        f = torch.randn(T, W, device="cuda", dtype=f32)
        return (lambda: f.pow(2)), 8 * T * W
    if v == "bcast_row":
        w, x = torch.randn(W, device="cuda", dtype=bf), torch.randn(T, 1, W, device="cuda", dtype=bf)
        return (lambda: w * x), 4 * T * W + 2 * W
    if v == "bcast_col":
        f, r = torch.randn(T, 1, W, device="cuda", dtype=f32), torch.randn(T, 1, 1, device="cuda", dtype=f32)
        return (lambda: f * r), 8 * T * W + 4 * T
    if v == "strided":
        y = torch.randn(T, 1, 2 * W, device="cuda", dtype=bf)
        g, u = y.chunk(2, -1)
        return (lambda: g * u), 6 * T * W
    if v == "copy_f32":
        x = torch.randn(T, 1, W, device="cuda", dtype=bf)
        return (lambda: x.to(f32)), 6 * T * W
    if v == "copy_bf16":
        f = torch.randn(T, 1, W, device="cuda", dtype=f32)
        return (lambda: f.to(bf)), 6 * T * W
    raise ValueError(v)


def _rope(torch, T, heads, hd):
    bf = torch.bfloat16
    q = torch.randn(T, 1, heads, hd, device="cuda", dtype=bf).transpose(1, 2)  # [T, heads, 1, hd], strided
    c = torch.randn(T, 1, 1, hd, device="cuda", dtype=bf)
    return (lambda: q * c), 4 * T * heads * hd + 2 * T * hd


def names(torch, out: str) -> int:
    from torch.profiler import ProfilerActivity, profile

    torch.set_grad_enabled(False)
    res = {"kind": "launchsim-round-u-names", "environment": H.env(), "names": []}
    for v in VARIANTS + ("rope",):
        for T in (1, 2, 8, 64):
            fn, _ = _rope(torch, T, 32, 96) if v == "rope" else _fns(torch, v, T, 3072)
            fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            ks = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
            res["names"].append({"variant": v, "rows": T, "kernels": ks})
            H.log(f"names {v} T{T}: {[k[:60] for k in ks]}")
    H.dump(res, out)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--names", action="store_true", help="profiled process: kernel names only, no timing")
    a = ap.parse_args(argv)
    import torch

    if a.names:
        return names(torch, a.out)

    from calibration.tables import graph_op_us

    rows_, widths = ((1, 8), (1024, 3072)) if a.quick else (ROWS, WIDTHS)
    res, t0 = H.start_points("launchsim-round-u-elementwise", a.quick, rows=list(rows_), widths=list(widths),
                             heads=[list(h) for h in HEADS])

    def point(v, T, W, make):
        try:
            fn, nbytes = make()
            us = graph_op_us([fn] * 32, reps=7)
            res["points"].append({"variant": v, "rows": T, "width": W, "bytes": nbytes, "us": us})
        except Exception as e:  # noqa: BLE001
            res["errors"].append({"what": f"{v} {T}x{W}", "error": H.err(e)})

    for v in VARIANTS:
        for T in rows_:
            for W in widths:
                point(v, T, W, lambda v=v, T=T, W=W: _fns(torch, v, T, W))
        H.log(f"{v}: " + " ".join(f"{p['rows']}x{p['width']}:{p['us']:.2f}" for p in res["points"]
                                  if p["variant"] == v and p["width"] == widths[0]))
    for hh, hd in HEADS[:1] if a.quick else HEADS:
        for T in rows_:
            point("rope", T, hh * hd, lambda T=T, hh=hh, hd=hd: _rope(torch, T, hh, hd))
    H.log("rope: " + " ".join(f"{p['rows']}x{p['width']}:{p['us']:.2f}" for p in res["points"] if p["variant"] == "rope"))
    return H.finish_points(res, a.out, t0)


if __name__ == "__main__":
    raise SystemExit(main())
