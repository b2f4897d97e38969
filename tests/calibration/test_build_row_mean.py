"""calibration/build_row_mean.py: round t's points -> the profile's row_mean table, its breaks from the data, and the
held-out check of the reading rule on the committed measurements."""

import json
from pathlib import Path

from calibration import build_row_mean as B
from simulator.model.profile import RowMeanTable, load_profile

ROUND_T = Path(__file__).resolve().parents[2] / "calibration" / "measured" / "h200-round-t"


def test_breaks_from_a_median_drop():
    rows = [1, 16, 64, 256]
    cols = [100, 200, 300]
    us = [[1.0, 1.1, 1.2], [2.0, 4.0, 1.5], [2.0, 4.0, 3.0], [2.0, 4.0, 1.0]]
    assert B.breaks_of(rows, cols, us) == [300]  # rows 16..1024: median ratio 1.5/4 < 0.6 (row 1 not counted)
    us[1][2] = us[3][2] = 3.0
    assert B.breaks_of(rows, cols, us) == []


def test_table_from_points_keeps_powers_of_two_measured_everywhere():
    pts = {(r, c): float(r + c) for r in (1, 2, 3, 4) for c in (10, 20)}
    pts[(4, 30)] = 1.0  # a length not measured at every kept row: dropped
    t = B.table(pts)
    assert t["rows"] == [1, 2, 4] and t["cols"] == [10, 20]
    assert t["us"] == [[11.0, 21.0], [12.0, 22.0], [14.0, 24.0]]
    RowMeanTable(**t)  # a valid profile section


def test_committed_round_t_table_and_its_held_out_check():
    timing = json.loads((ROUND_T / "timing.json").read_text())
    pts = B.points(timing)
    t = B.table(pts)
    assert t["breaks"] == [8192]  # aten splits a row across warps from 8192 (round t, every row count)
    c = B.check(pts)
    assert c["held_out_rows"]["n"] >= 150 and c["held_out_rows"]["mape_pct"] < 2.0
    assert c["leave_one_length_out"]["n"] >= 300 and c["leave_one_length_out"]["mape_pct"] < 3.0
    shipped = load_profile("h200").device.tables.row_mean
    assert shipped.rows == t["rows"] and shipped.cols == t["cols"] and shipped.us == t["us"]
