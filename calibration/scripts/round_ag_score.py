"""Round ag: the figures committed before measuring (predicted_<profile>.json) against the reference decoder with a
LoRA adapter timed on the device (time_ag.json, counts_ag.json), per row and by mode; and the adapter's own cost
(a rank r row less the rank 0 row of the same model, fusion and batch), predicted against measured.

    python -m calibration.scripts.round_ag_score [--dir calibration/measured/round-ag] [--profile h100-sxm]
        [--predicted FILE] [--rows-out NAME]

Eager figures are the median over fast-host passes (both canaries <= round g's FAST_CANARY_US), else over all
passes (said per row). Writes rows_ag.json beside the inputs and prints the table calibration/validation/lora.md
holds.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from . import round_g as G

HERE = Path(__file__).resolve().parents[1] / "measured" / "round-ag"
KEY = ("model", "fusion", "lora_rank", "batch")


def measured_rows(d: Path) -> list[dict]:
    t = json.loads((d / "time_ag.json").read_text())
    counts = {}
    if (d / "counts_ag.json").exists():
        for r in json.loads((d / "counts_ag.json").read_text())["rows"]:
            counts[tuple(r[k] for k in KEY)] = (r.get("last_step") or {}).get("kernels")
    out = []
    for r in t["rows"]:
        passes = r.get("passes", [])
        fast = [p["median"] for p in passes if max(p["canary_before"]["host_us"], p["canary_after"]["host_us"])
                <= G.FAST_CANARY_US]
        row = {k: r[k] for k in KEY}
        row.update(kernels=counts.get(tuple(r[k] for k in KEY)),
                   eager_ms=statistics.median(fast or [p["median"] for p in passes]) if passes else None,
                   eager_host="fast" if fast else "all passes",
                   canary_us=[p["canary_before"]["host_us"] for p in passes],
                   full_ms=(r.get("full_ms") or {}).get("median"),
                   # compiled rows: the SDPA cut cannot reach inside the compiled function (one piece): not a
                   # piecewise step, left out
                   piecewise_ms=None if r["fusion"] == "compiled" else (r.get("piecewise_ms") or {}).get("median"))
        out.append(row)
    return out


def score(d: Path, profile: str, predicted: Path | None = None, out_name: str = "rows_ag.json") -> dict:
    """`predicted`: the figures to score (default d/predicted_<profile>.json, those committed before measuring)."""
    from ..validate_fused import _err, _mape

    meas = measured_rows(d)
    pred = {tuple(r[k] for k in KEY): r
            for r in json.loads((predicted or d / f"predicted_{profile}.json").read_text())["rows"]}
    rows = []
    for m in meas:
        p = pred[tuple(m[k] for k in KEY)]
        row = {**m, "predicted": {f: p.get(f) for f in ("kernels", "eager_ms", "full_ms", "piecewise_ms")}}
        for f in ("kernels", "eager_ms", "full_ms", "piecewise_ms"):
            row[f + "_err"] = _err(p.get(f), m.get(f))
        rows.append(row)
    # the adapter's own cost: rank r less rank 0 of the same model, fusion and batch
    base = {(r["model"], r["fusion"], r["batch"]): r for r in rows if r["lora_rank"] == 0}
    delta = []
    for r in rows:
        b = base.get((r["model"], r["fusion"], r["batch"]))
        if r["lora_rank"] == 0 or b is None:
            continue
        for f in ("eager_ms", "full_ms"):
            if r.get(f) and b.get(f) and r["predicted"][f] and b["predicted"][f]:
                delta.append({**{k: r[k] for k in KEY}, "mode": f[:-3], "measured_ms": r[f] - b[f],
                              "predicted_ms": r["predicted"][f] - b["predicted"][f]})
    summary = {}
    for f in ("kernels", "eager_ms", "full_ms", "piecewise_ms"):
        subsets = [("all", rows), ("lora", [r for r in rows if r["lora_rank"]]),
                   ("rank0", [r for r in rows if not r["lora_rank"]])]
        if f == "eager_ms":  # the rows with fast-host passes (the profile's host state), and their adapter rows
            subsets += [("fast-host", [r for r in rows if r["eager_host"] == "fast"]),
                        ("lora-fast-host", [r for r in rows if r["eager_host"] == "fast" and r["lora_rank"]])]
        for sub, rs in subsets:
            errs = [r[f + "_err"] for r in rs if r[f + "_err"] is not None]
            summary[f"{f}:{sub}"] = {"mape": _mape(errs), "rows": len(errs),
                                     "worst": max(errs, key=abs) if errs else None}
    out = {"kind": "launchsim-round-ag-rows", "profile": profile, "rows": rows, "adapter_cost": delta,
           "summary": summary}
    (d / out_name).write_text(json.dumps(out, indent=1))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=str(HERE))
    ap.add_argument("--profile", default="h100-sxm")
    ap.add_argument("--predicted", default=None, help="predictions to score (default DIR/predicted_<profile>.json)")
    ap.add_argument("--rows-out", default="rows_ag.json", help="file name of the scored rows, written in DIR")
    a = ap.parse_args(argv)
    out = score(Path(a.dir), a.profile, Path(a.predicted) if a.predicted else None, a.rows_out)
    print(f"profile {a.profile}: MAPE % (rows, worst %)")
    for k, v in out["summary"].items():
        if v["rows"]:
            print(f"  {k:22s} {v['mape']:6.2f}  ({v['rows']}, {v['worst']:+.1f})")
    print("rows: model fusion rank batch | kernels meas/pred | eager ms meas/pred err | full ms meas/pred err | "
          "piecewise ms meas/pred err")
    for r in out["rows"]:
        p = r["predicted"]

        def f(x):
            return "-" if x is None else f"{x:.3f}"

        def e(x):
            return "-" if x is None else f"{x:+.1f}%"
        print(f"  {r['model']:14s} {r['fusion']:8s} r{r['lora_rank']:<3d} b{r['batch']:<3d} | {r['kernels']}/"
              f"{p['kernels']} | {f(r['eager_ms'])}/{f(p['eager_ms'])} {e(r['eager_ms_err'])} | {f(r['full_ms'])}/"
              f"{f(p['full_ms'])} {e(r['full_ms_err'])} | {f(r['piecewise_ms'])}/{f(p['piecewise_ms'])} "
              f"{e(r['piecewise_ms_err'])}")
    print("adapter cost (rank r less rank 0), ms measured / predicted:")
    for x in out["adapter_cost"]:
        print(f"  {x['model']:14s} {x['fusion']:8s} r{x['lora_rank']:<3d} b{x['batch']:<3d} {x['mode']:6s} "
              f"{x['measured_ms']:.3f} / {x['predicted_ms']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
