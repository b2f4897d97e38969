"""Round af: h100-sxm's figures committed before the run (predicted_before_h100sxm.json) against round ab's fused
decoder timed again on a fresh H100 (calibration/measured/h100-round-af), and that machine against round ab's.

    python -m calibration.scripts.round_af_score [--dir calibration/measured/h100-round-af]

Combines the timing processes (time_af*.json) and the counts process (counts_ab.json) with round_ab's own combine
(in a temporary folder, under the names it reads), writes rows_af.json beside them, prints MAPEs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "measured"


def _mape(xs: list[float]) -> float:
    return round(sum(abs(x) for x in xs) / len(xs), 2)


def main(argv=None) -> int:
    from .round_ab import combine

    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=str(HERE / "h100-round-af"))
    a = ap.parse_args(argv)
    d = Path(a.dir)
    with tempfile.TemporaryDirectory() as t:
        for i, f in enumerate(sorted(d.glob("time_af*.json")), 1):
            shutil.copy(f, Path(t) / f"time_ab{i}.json")
        shutil.copy(d / "counts_ab.json", Path(t) / "counts_ab.json")
        combine(t)
        shutil.copy(Path(t) / "rows_ab.json", d / "rows_af.json")
    meas = json.loads((d / "rows_af.json").read_text())
    key = lambda r: (r["model"], r["batch"], r["keys"])  # noqa: E731
    pred = {key(r): r for r in json.loads((d / "predicted_before_h100sxm.json").read_text())["rows"]}
    ab = {key(r): r for r in json.loads((HERE / "h100-round-ab" / "rows_ab.json").read_text())["rows"]}
    print("processes (canary start -> end us): " + "; ".join(
        f"{p['canary_start_us']:.2f} -> {p['canary_end_us']:.2f}" for p in meas["processes"]))
    for f in ("full", "piecewise", "kernels"):
        mk = f if f == "kernels" else f + "_ms"
        errs = [(pred[key(r)][mk] / r[mk] - 1) * 100 for r in meas["rows"] if r.get(mk)]
        print(f"h100-sxm vs round af {f}: MAPE {_mape(errs)} % over {len(errs)} rows, worst {max(errs, key=abs):+.1f} %")
    diff = [(r["full_ms"] / ab[key(r)]["full_ms"] - 1) * 100 for r in meas["rows"]]
    print(f"round af vs round ab measured full graph: mean |diff| {_mape(diff)} %, largest {max(diff, key=abs):+.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
