"""Round ab: launchsim's predictions for round ab's rows (the `fused` implementation against a decoder launching
its kernel list from real fused kernels, calibration/fused_decoder.py), written and committed before the rows were
measured (calibration/scripts/round_ab.py).

    python -m calibration.scripts.round_ab_predict [--out FILE]
    # default FILE: calibration/measured/h200-round-ab/predicted_before.json

Per row (batch, keys: the step attends `keys` keys, launchsim's ctx = keys - 1): kernels per step, eager step on the
profile's (fast) host, full graph, piecewise graph; implementation and fusion `fused`, profile h200. Per fused
kernel alone: the cost model's GPU time of that op in the fused step of `tokens` sequences.
"""
import argparse
import json
import os
import subprocess

from simulator.engine.plan import PlanError
from simulator.engine.predict import simulate
from simulator.model.costs import CostModel
from simulator.model.profile import load_profile
from simulator.model.workload import build_step, decode

from calibration.scripts.round_ab import GRID, KERNEL_SHAPES, KERNEL_TOKENS, MODELS, spec

KERNEL_OPS = ("fused_add_rmsnorm", "silu_and_mul", "fused_rope_cache_write")


def predict_rows(cm) -> list[dict]:
    out = []
    for name in MODELS:
        m = spec(name)
        for k, bs in GRID:
            for b in bs:
                st = build_step(m, decode(b, k - 1), "fused", "fused")
                r = {"model": name, "batch": b, "keys": k, "ctx": k - 1}
                e, _ = simulate(st, cm, "none")
                r["kernels"], r["eager_ms"] = e.kernels, round(e.step_s * 1e3, 4)
                for mode in ("full", "piecewise"):
                    try:
                        res, _ = simulate(st, cm, mode)
                    except PlanError as x:
                        r[f"{mode}_refused"] = str(x)[:100]
                        continue
                    r[f"{mode}_ms"] = round(res.step_s * 1e3, 4)
                out.append(r)
    return out


def predict_kernels(cm) -> list[dict]:
    out = []
    for name in KERNEL_SHAPES:
        m = spec(name, layers=1)
        for T in KERNEL_TOKENS:
            st = build_step(m, decode(T, 63), "fused", "fused")
            for kname in KERNEL_OPS:
                op = next(o for o in st.ops if o.name == kname)
                out.append({"model": name, "kernel": kname, "tokens": T, "device_us": round(cm.gpu_s(op) * 1e6, 4)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="calibration/measured/h100-round-ab/predicted_h200.json")
    ap.add_argument("--profile", default="h200")
    a = ap.parse_args()
    cm = CostModel(load_profile(a.profile))
    rows, kern = predict_rows(cm), predict_kernels(cm)
    for r in rows + kern:
        print(r)
    commit = subprocess.check_output(["git", "rev-parse", "HEAD"], text=True).strip()
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"kind": "launchsim-round-ab-predictions", "made_before_measuring": True, "commit": commit,
                   "profile": a.profile, "impl": "fused", "fusion": "fused", "rows": rows, "kernels_alone": kern},
                  f, indent=1)


if __name__ == "__main__":
    main()
