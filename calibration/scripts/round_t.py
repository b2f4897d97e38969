"""Round t on one H200 (issue 20): aten's row mean by rows and row length, the grid a table is built from, plus
held-out points, plus the RMSNorm chain in its decoder context.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_t --out FILE.json [--quick]

Run from the repository root. Why: round s showed `x.mean(-1, keepdim=True)` over fp32 x[rows, L] (RMSNorm's mean)
is priced by rows and row length, not bytes (aten's reduce picks block height by the largest power of two <= rows,
up to 16 rows a block, and a warp per row reduces L / 32 values each), and that aten switches launch somewhere in
5120 < L <= 8192. One timing process (forbid_profiler, canary at start and end), the tables' method
(calibration/tables.py `graph_op_us`: per-op device us in a replayed graph of identical nodes):

- `grid`: rows at powers of two 1..8192 x L over the hidden sizes of the supported families and the head dims of
  their q/k-norms (64..16384): what `device.tables.row_mean` is built from.
- `held_out`: rows not a power of two (3, 6, 12, 24, 48, 96, 384) at every L, and L between grid points: what the
  table's reading rule (step in rows below 16, linear between grid points) is checked on.
- `chain`: the reference decoder's RMSNorm as it runs (to fp32, pow, mean, add eps, rsqrt, mul, to bf16, mul by
  weight; each on the previous one's output), 8 norms of 8 kernels in one graph: us per norm, and per kernel of
  each kind in isolation at the same (rows, L) (the kernels' own graphs), so in-context cost can be compared with
  the sum of its parts.
`--quick`: a few points of each (a pipeline check; not kept).
"""

from __future__ import annotations

import argparse
import time

from calibration.scripts import round_h as H

ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
COLS = (64, 128, 256, 512, 1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192, 12288, 16384)
HELD_ROWS = (3, 6, 12, 24, 48, 96, 384)
HELD_COLS = (896, 1536, 2304, 2560, 3584, 3840, 4608, 5376, 5632, 6656, 7680, 10240)
CHAIN = ((1, 1024), (16, 1024), (64, 1024), (1, 4096), (16, 4096), (64, 4096), (256, 4096), (16, 2048))


def _mean_us(torch, graph_op_us, r, c):
    x = torch.randn(r, c, device="cuda", dtype=torch.float32)
    n = 32 if r * c <= (1 << 22) else 8
    return graph_op_us([lambda x=x: x.mean(-1, keepdim=True)] * n, reps=7)


def _chain(torch, graph_op_us, r, c):
    """us per RMSNorm of 8 chained norms in one graph, and each of its kernels alone (16 identical nodes)."""
    bf = torch.bfloat16
    x0 = torch.randn(r, c, device="cuda", dtype=bf)
    w = torch.randn(c, device="cuda", dtype=bf)
    state = {}

    def norm():
        h = state.get("h", x0)
        f = h.to(torch.float32)
        v = f.pow(2).mean(-1, keepdim=True)
        y = f * torch.rsqrt(v + 1e-6)
        state["h"] = w * y.to(bf)

    def run8():
        state.clear()
        for _ in range(8):
            norm()

    whole = graph_op_us([run8], reps=7) / 8
    f = x0.to(torch.float32)
    v = f.pow(2).mean(-1, keepdim=True)
    y = f * torch.rsqrt(v + 1e-6)
    yb = y.to(bf)
    parts = {
        "to_fp32": lambda: x0.to(torch.float32), "pow": lambda: f.pow(2), "mean": lambda: f.mean(-1, keepdim=True),
        "add_eps": lambda: v + 1e-6, "rsqrt": lambda: torch.rsqrt(v), "mul": lambda: f * v,
        "to_bf16": lambda: y.to(bf), "mul_weight": lambda: w * yb,
    }
    alone = {k: graph_op_us([fn] * 16, reps=7) for k, fn in parts.items()}
    return {"rows": r, "cols": c, "norm_us": whole, "parts_us": alone, "parts_sum_us": sum(alone.values())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    import torch

    from calibration.hygiene import canary, check_canary, exit_code, forbid_profiler
    from calibration.tables import graph_op_us

    forbid_profiler()
    torch.set_grad_enabled(False)
    H.warm_host()
    t0 = time.time()
    rows_, cols_ = ((1, 16), (1024, 8192)) if a.quick else (ROWS, COLS)
    hr, hc = ((12,), (5632,)) if a.quick else (HELD_ROWS, HELD_COLS)
    res = {"kind": "launchsim-round-t-row-mean", "quick": a.quick, "environment": H.env(), "canary_start": canary(),
           "grid": {"rows": list(rows_), "cols": list(cols_), "us": []},
           "held_out": [], "chain": [], "errors": []}

    def point(r, c):
        try:
            return _mean_us(torch, graph_op_us, r, c)
        except Exception as e:  # noqa: BLE001
            res["errors"].append({"what": f"mean {r}x{c}", "error": H.err(e)})
            return None

    for r in rows_:
        line = [point(r, c) for c in cols_]
        res["grid"]["us"].append(line)
        H.log(f"grid rows {r:5d}: " + " ".join(f"{c}:{u:.2f}" for c, u in zip(cols_, line) if u is not None))
    for r in rows_ + hr:
        for c in (cols_ if r in hr else ()) + hc:
            res["held_out"].append({"rows": r, "cols": c, "us": point(r, c)})
    H.log(f"held out: {len(res['held_out'])} points")
    for r, c in (CHAIN[:2] if a.quick else CHAIN):
        try:
            ch = _chain(torch, graph_op_us, r, c)
            res["chain"].append(ch)
            H.log(f"chain {r}x{c}: norm {ch['norm_us']:.2f} us, parts sum {ch['parts_sum_us']:.2f} us: "
                  + " ".join(f"{k}:{u:.2f}" for k, u in ch["parts_us"].items()))
        except Exception as e:  # noqa: BLE001
            res["errors"].append({"what": f"chain {r}x{c}", "error": H.err(e)})
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    H.dump(res, a.out)
    H.log(f"[summary] canary {res['canary']}; {len(res['errors'])} errors, {res['wall_s']:.0f} s")
    return exit_code(res["canary"])


if __name__ == "__main__":
    raise SystemExit(main())
