"""Round af: h100-sxm's figures committed before the run (predicted_before_h100sxm.json) against round ab's fused
decoder timed again on a fresh H100 (calibration/measured/h100-round-af), and that machine against round ab's.

    python -m calibration.scripts.round_af_score [--dir calibration/measured/h100-round-af]

Combines the timing processes (time_af*.json) and the counts process (counts_ab.json) with round_ab's own combine,
writes rows_af.json beside them, prints MAPEs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "measured"


def main(argv=None) -> int:
    from ..validate_fused import _err, _mape
    from .round_ab import combine

    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=str(HERE / "h100-round-af"))
    a = ap.parse_args(argv)
    d = Path(a.dir)
    meas = combine(d, prefix="time_af", out_name="rows_af.json")
    key = lambda r: (r["model"], r["batch"], r["keys"])  # noqa: E731
    pred = {key(r): r for r in json.loads((d / "predicted_before_h100sxm.json").read_text())["rows"]}
    ab = {key(r): r for r in json.loads((HERE / "h100-round-ab" / "rows_ab.json").read_text())["rows"]}
    print("processes (canary start -> end us): " + "; ".join(
        f"{p['canary_start_us']:.2f} -> {p['canary_end_us']:.2f}" for p in meas["processes"]))
    for f in ("full", "piecewise", "kernels"):
        mk = f if f == "kernels" else f + "_ms"
        errs = [_err(pred[key(r)][mk], r[mk]) for r in meas["rows"] if r.get(mk)]
        print(f"h100-sxm vs round af {f}: MAPE {_mape(errs)} % over {len(errs)} rows, worst {max(errs, key=abs):+.1f} %")
    diff = [_err(r["full_ms"], ab[key(r)]["full_ms"]) for r in meas["rows"]]
    print(f"round af vs round ab measured full graph: mean |diff| {_mape(diff)} %, largest {max(diff, key=abs):+.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
