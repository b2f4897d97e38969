"""Round s on one H200 (issue 20): aten's row mean (RMSNorm's `mean`) by rows and row length.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_s --out FILE.json [--quick]

Run from the repository root. Why: round r found RMSNorm's `x.mean(-1, keepdim=True)` over fp32 rows of 4096 at
9.3 us a kernel at batch 16 where the bytes-only reduction curve prices 2.9 us: aten picks the reduction's launch
by rows and row length. One timing process (forbid_profiler, canary at start and end): per-op device us of
`x.mean(-1, keepdim=True)` for fp32 x[rows, L], in a replayed graph of 32 identical nodes (calibration/tables.py
`graph_op_us`, the tables' method), rows 1..1024, L over the hidden sizes of the supported families.
`--quick`: 2 x 2 points (a pipeline check; not kept).
"""

from __future__ import annotations

import argparse
import sys
import time

from calibration.scripts import round_h as H

ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
COLS = (896, 1024, 1536, 2048, 2304, 2560, 3072, 3584, 4096, 5120, 8192)


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
    rows_, cols_ = ((1, 16), (1024, 4096)) if a.quick else (ROWS, COLS)
    res = {"kind": "launchsim-round-s-row-mean", "quick": a.quick, "environment": H.env(), "canary_start": canary(),
           "rows": list(rows_), "cols": list(cols_), "us": [], "errors": []}
    for r in rows_:
        line = []
        for c in cols_:
            try:
                x = torch.randn(r, c, device="cuda", dtype=torch.float32)
                line.append(graph_op_us([lambda x=x: x.mean(-1, keepdim=True)] * 32, reps=7))
                del x
            except Exception as e:  # noqa: BLE001
                res["errors"].append({"what": f"{r}x{c}", "error": H.err(e)})
                line.append(None)
        res["us"].append(line)
        H.log(f"rows {r:5d}: " + " ".join(f"{c}:{u:.2f}" for c, u in zip(cols_, line) if u is not None))
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    H.dump(res, a.out)
    H.log(f"[summary] canary {res['canary']}; {len(res['errors'])} errors, {res['wall_s']:.0f} s")
    return exit_code(res["canary"])


if __name__ == "__main__":
    sys.exit(main())
