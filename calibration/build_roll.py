"""The profile's `device.tables.roll` from round w (calibration/scripts/round_w.py), and its held-out check.

A full sliding window's cache step in transformers rolls the layer's whole K and V cache (`keys.roll(-1, dims=-2)`):
aten's `roll_cuda_kernel`, about 0.92 TB/s (bytes read + written) from 16 MB on, a fifth of a plain copy of the same
tensor. The curve: round w's roll times by bytes read + written (2 x the tensor's bytes), the median where shapes
share a size; read by simulator/model/costs.py for ops marked `ROLL` (recipes.py: the hf recipe's `cache.roll_k`
and `cache.roll_v`), clamped below the grid and extrapolated above it (tables.POLICIES "roll.bytes").

    python -m calibration.build_roll [DIR]     # leave-one-point-out check of the reading rule on round w's points
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from simulator.model.tables import POLICIES, loglog

ROUND_W = Path(__file__).resolve().parent / "measured" / "h200-round-w"


def points(round_dir: Path = ROUND_W) -> list[tuple[float, float]]:
    d = json.loads((round_dir / "round_w.json").read_text())
    return [(2.0 * p["tensor_bytes"], p["roll_us"]) for p in d["points"]]


def curve(pts: list[tuple[float, float]]) -> dict:
    by: dict[float, list[float]] = {}
    for b, u in pts:
        by.setdefault(b, []).append(u)
    xs = sorted(by)
    return {"bytes": xs, "us": [statistics.median(by[b]) for b in xs]}


def add_roll(p: dict, round_dir: Path, source: str) -> None:
    """Put round w's roll curve into profile dict `p` (device.tables.roll)."""
    p["device"]["tables"]["roll"] = curve(points(round_dir))
    p["device"]["source"] = (p["device"].get("source", "") + f"; roll curve: {source} "
                             "(calibration/scripts/round_w.py, calibration/build_roll.py)").lstrip("; ")


def held_out(round_dir: Path = ROUND_W) -> list[dict]:
    """Each measured size left out in turn, read from the curve of the others."""
    pts = points(round_dir)
    c = curve(pts)
    lo, hi = POLICIES["roll.bytes"]
    out = []
    for i, b in enumerate(c["bytes"]):
        if i in (0, len(c["bytes"]) - 1):
            continue  # the ends: a clamp or an extrapolation, not the reading rule inside the grid
        xs = c["bytes"][:i] + c["bytes"][i + 1:]
        ys = c["us"][:i] + c["us"][i + 1:]
        v = loglog(b, xs, ys, below=lo, above=hi)
        out.append({"bytes": b, "measured_us": c["us"][i], "read_us": v, "error": (v / c["us"][i] - 1) * 100})
    return out


def main(argv=None) -> int:
    d = Path((argv or sys.argv[1:] or [str(ROUND_W)])[0])
    rows = held_out(d)
    for r in rows:
        print(f"{r['bytes'] / 1e6:10.2f} MB  measured {r['measured_us']:9.2f} us  read {r['read_us']:9.2f} us  "
              f"{r['error']:+6.1f} %")
    print(f"leave-one-size-out: {len(rows)} sizes, MAPE {statistics.fmean(abs(r['error']) for r in rows):.2f} %, "
          f"worst {max(abs(r['error']) for r in rows):.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
