"""Round ag: launchsim's figures for round ag's rows (the reference decoder with a LoRA adapter, lora_rank), written
and committed before the rows were measured (calibration/scripts/round_ag.py).

    python -m calibration.scripts.round_ag_predict [--profile h100-sxm] [--out FILE] [--after WHY] [--rows unseen]
        [--host-canary-us US]
    # default FILE: calibration/measured/round-ag/predicted_<profile>.json

`--host-canary-us`: the profile's host lane moved to a machine whose tiny-op canary is US (model/profile.py
`host_scaled`, what `launchsim predict --host-canary-us` does), e.g. the mean of a timing process's start and end
canaries.

Per row (the step attends `keys` keys: launchsim's ctx = keys - 1): kernels per step, the eager step on the profile's
fast host, the full graph and the piecewise graph; fusion compiled as vLLM's torch.compile (dynamic=False).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess

from simulator.engine.plan import PlanError
from simulator.engine.predict import simulate
from simulator.model.costs import CostModel
from simulator.model.profile import host_scaled, load_profile
from simulator.model.workload import build_step, decode

from calibration.scripts.round_ag import KEYS, ROW_SETS, ROWS, label, spec


def predict_rows(cm, rows=ROWS) -> list[dict]:
    out = []
    for name, layers, fusion, ranks, batches in rows:
        m = spec(name, layers)
        for r in ranks:
            for b in batches:
                st = build_step(m, decode(b, KEYS - 1), fusion, lora_rank=r)
                row = {"model": label(name, layers), "fusion": fusion, "lora_rank": r, "batch": b, "keys": KEYS,
                       "ctx": KEYS - 1}
                e, _ = simulate(st, cm, "none")
                row["kernels"], row["eager_ms"] = e.kernels, round(e.step_s * 1e3, 4)
                for mode in ("full", "piecewise"):
                    try:
                        res, _ = simulate(st, cm, mode)
                    except PlanError as x:
                        row[f"{mode}_refused"] = str(x)[:100]
                        continue
                    row[f"{mode}_ms"] = round(res.step_s * 1e3, 4)
                out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="h100-sxm")
    ap.add_argument("--out", default=None)
    ap.add_argument("--after", default=None, help="made after the rows were measured: say why (stored as `after`)")
    ap.add_argument("--rows", choices=tuple(ROW_SETS), default="ag", help="the row set (round_ag.ROW_SETS)")
    ap.add_argument("--host-canary-us", type=float, default=None, help="move the host lane to this canary (us)")
    a = ap.parse_args()
    out = a.out or f"calibration/measured/round-ag/predicted_{a.profile}.json"
    prof = load_profile(a.profile)
    if a.host_canary_us is not None:
        prof = host_scaled(prof, a.host_canary_us)
    rows = predict_rows(CostModel(prof), ROW_SETS[a.rows])
    for r in rows:
        print(r)
    commit = subprocess.check_output(["git", "rev-parse", "HEAD"], text=True).strip()
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"kind": "launchsim-round-ag-predictions", "made_before_measuring": a.after is None,
                   **({"after": a.after} if a.after else {}), "commit": commit, "profile": a.profile,
                   "impl": "reference", "row_set": a.rows,
                   **({"host_canary_us": a.host_canary_us} if a.host_canary_us is not None else {}), "rows": rows},
                  f, indent=1)


if __name__ == "__main__":
    main()
