"""launchsim's figures for the reference-decoder rows of the H100 calibration round (calibration/measured/h100-calib,
calibration.round on an H100: qwen3-0.6b and llama3-8b, fusion none/packed, batch 1-512, ctx 128-2048), eager and
full graph, under a given profile.

    python -m calibration.scripts.h100_calib_predict --profile PROFILE_OR_PATH --out FILE

`predicted_h100sxm_shipped.json` there: the h100-sxm profile as shipped before round ab changed its GEMM derivation
(the profile file of commit 9c8b85c), computed after the run.
"""
import argparse
import json
import os

from simulator.engine.predict import simulate
from simulator.model.costs import CostModel
from simulator.model.models import PRESETS
from simulator.model.profile import load_profile
from simulator.model.workload import build_step, decode

CALIB = os.path.join(os.path.dirname(__file__), "..", "measured", "h100-calib", "timing.json")


def predict_rows(cm) -> list[dict]:
    out = []
    for r in json.load(open(CALIB))["rows"]:
        st = build_step(PRESETS[r["model"]], decode(r["batch"], r["ctx"] - 1), r["fusion"], "reference")
        p = {"model": r["model"], "fusion": r["fusion"], "batch": r["batch"], "ctx": r["ctx"]}
        for mode, key in (("none", "eager_ms"), ("full", "full_ms")):
            res, _ = simulate(st, cm, mode)
            p[key] = round(res.step_s * 1e3, 4)
        out.append(p)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="h100-sxm")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rows = predict_rows(CostModel(load_profile(a.profile)))
    with open(a.out, "w") as f:
        json.dump({"kind": "launchsim-h100-calib-predictions", "profile": a.profile, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
