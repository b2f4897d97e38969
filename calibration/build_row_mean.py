"""The profile's `device.tables.row_mean` from round t (calibration/scripts/round_t.py), and its held-out check.

Round t timed aten's `x.mean(-1, keepdim=True)` over fp32 x[rows, cols] (RMSNorm's mean in eager code) in the tables'
method (per-op us in a replayed graph of identical nodes, one timing process, canary at start and end). The table:
the rows that are powers of two (1..8192) at every measured row length (the grid's and the held-out lengths, all
measured at those rows). Kept out of it, and used to check its reading rule (simulator/model/tables.row_mean): the
rows that are not powers of two (3, 6, 12, 24, 48, 96, 384), at every length; and each length left out in turn
(`check`).

Breaks, from the data: a grid length where the kernel at row counts 16..1024 takes, in the median, under 0.6x the
previous length's time is where aten changes launch (it splits a row across warps once a thread would reduce 256 or more
values: at row length 8192 for every row count). aten's block is `step_below_rows` = 16 rows at most (512 threads,
a warp a row), the largest power of two <= rows below that: the rows rule the held-out rows check.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from simulator.model.tables import row_mean

STEP_BELOW_ROWS = 16  # aten reduce: block height = largest power of two <= rows, at most 512 threads / 32 lanes
BREAK_RATIO = 0.6


def _pow2(r: int) -> bool:
    return r > 0 and r & (r - 1) == 0


def points(timing: dict) -> dict[tuple[int, int], float]:
    """Every measured (rows, cols) -> us of round t (grid and held-out)."""
    g = timing["grid"]
    out = {(r, c): u for r, line in zip(g["rows"], g["us"]) for c, u in zip(g["cols"], line) if u is not None}
    out.update({(p["rows"], p["cols"]): p["us"] for p in timing["held_out"] if p["us"] is not None})
    return out


def breaks_of(rows: list[int], cols: list[int], us: list[list[float]]) -> list[int]:
    """Grid lengths where row counts 16..1024 take, in the median, under BREAK_RATIO x the previous length's time."""
    mid = [i for i, r in enumerate(rows) if 16 <= r <= 1024]
    return [cols[j] for j in range(1, len(cols))
            if mid and statistics.median(us[i][j] / us[i][j - 1] for i in mid) < BREAK_RATIO]


def table(pts: dict[tuple[int, int], float], cols_out: set[int] = frozenset()) -> dict:
    """The row_mean section (profile.RowMeanTable's fields) from measured points: rows that are powers of two and
    measured at every kept length; `cols_out`: lengths left out (the leave-one-length-out check)."""
    rows = sorted({r for r, _ in pts if _pow2(r)})
    cols = sorted({c for r, c in pts if _pow2(r) and c not in cols_out})
    cols = [c for c in cols if all((r, c) in pts for r in rows)]
    us = [[round(pts[(r, c)], 4) for c in cols] for r in rows]
    return {"rows": rows, "cols": cols, "us": us, "breaks": breaks_of(rows, cols, us), "step_below_rows": STEP_BELOW_ROWS}


def read(t: dict, r: int, c: int) -> float | None:
    return row_mean(r, c, t["rows"], t["cols"], t["us"], t["breaks"], t["step_below_rows"])


def check(pts: dict[tuple[int, int], float]) -> dict:
    """The reading rule on points no table value is: held-out rows (not powers of two) against the full table;
    each inner length left out in turn (read from its neighbours) at the power-of-two rows. MAPE and worst, %."""
    full = table(pts)
    held = [(r, c, u, read(full, r, c)) for (r, c), u in sorted(pts.items()) if not _pow2(r) and c in full["cols"]]
    loo = []
    for c in full["cols"][1:-1]:
        t = table(pts, {c})
        if c in t["breaks"] or any(b not in t["cols"] for b in full["breaks"]):
            continue
        loo += [(r, c, pts[(r, c)], read(t, r, c)) for r in full["rows"]]
    if any(b in full["cols"] for b in full["breaks"]):  # a break left out cannot be read from its neighbours
        loo = [x for x in loo if x[1] not in full["breaks"]]

    def summary(xs):
        e = [abs(p / u - 1) * 100 for _, _, u, p in xs if p is not None]
        worst = max(xs, key=lambda x: abs(x[3] / x[2] - 1) if x[3] is not None else 0)
        return {"n": len(e), "mape_pct": round(statistics.mean(e), 2), "worst_pct": round(max(e), 1),
                "worst_at": {"rows": worst[0], "cols": worst[1], "measured_us": round(worst[2], 2),
                             "read_us": round(worst[3], 2)}}

    return {"held_out_rows": summary(held), "leave_one_length_out": summary(loo)}


def section(round_dir: Path, source: str) -> dict:
    timing = json.loads((round_dir / "timing.json").read_text())
    pts = points(timing)
    t = table(pts)
    c = check(pts)
    h, lo = c["held_out_rows"], c["leave_one_length_out"]
    t["source"] = (f"{source} (calibration/scripts/round_t.py, calibration/build_row_mean.py: {len(t['rows'])} rows x "
                   f"{len(t['cols'])} lengths; canary {timing['canary']['host_start_us']:.2f} -> "
                   f"{timing['canary']['host_end_us']:.2f} us; held-out rows MAPE {h['mape_pct']} % (worst "
                   f"{h['worst_pct']} %), leave-one-length-out {lo['mape_pct']} % (worst {lo['worst_pct']} %))")
    return t


def add_row_mean(p: dict, round_dir: Path, source: str) -> None:
    """Put round t's table into profile dict `p` (device.tables.row_mean)."""
    p["device"]["tables"]["row_mean"] = section(round_dir, source)


def main(argv=None) -> int:
    """Print the held-out check of a round-t folder: python -m calibration.build_row_mean [DIR]."""
    argv = sys.argv[1:] if argv is None else argv
    d = Path(argv[0]) if argv else Path(__file__).parent / "measured" / "h200-round-t"
    pts = points(json.loads((d / "timing.json").read_text()))
    t = table(pts)
    print(f"row_mean table: rows {t['rows'][0]}..{t['rows'][-1]} ({len(t['rows'])}), cols {t['cols'][0]}.."
          f"{t['cols'][-1]} ({len(t['cols'])}), breaks {t['breaks']}")
    print(json.dumps(check(pts), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
