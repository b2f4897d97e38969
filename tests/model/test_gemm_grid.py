"""The profile's GEMM grid (profile.GemmGrid, round k): schema, lookup order, the fallback's use of it, the H100
derivation and the builder from a round folder. Synthetic grids on top of the shipped profile's own sections."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from simulator.model.costs import CostModel
from simulator.model.gemm_model import GemmFallback, grid_tables
from simulator.model.kernels import LaunchPath, Op, OpClass
from simulator.model.profile import ProfileError, parse_profile, profile_path

M = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def _raw() -> dict:
    return json.loads(profile_path("h200").read_text())


def _grid(shapes, us=None, kernels=True) -> dict:
    us = us or [[3.0 + i + 0.01 * j for j in range(len(M))] for i in range(len(shapes))]
    g = {"m": list(M), "shapes": [list(s) for s in shapes], "us": us, "source": "test"}
    if kernels:
        g["kernels"] = [[2 if j < 3 else 1 for j in range(len(M))] for _ in shapes]
    return g


def _with(grid) -> dict:
    raw = _raw()
    raw["device"]["tables"].pop("gemm_grid", None)
    raw["device"]["tables"]["gemm_grid"] = grid
    return raw


def _gemm(m, n, k):
    return Op("g", OpClass.GEMM, LaunchPath.EAGER_GEMM, 2.0 * m * n * k, 2.0 * (m * k + n * k + m * n),
              (("k", k), ("m", m), ("n", n)))


def test_a_grid_row_prices_its_shape_exactly_and_counts_its_kernels():
    cm = CostModel(parse_profile(_with(_grid([(1792, 2560), (2560, 1792)]))))
    t = cm.gemm_table(1792, 2560)
    assert t.us == [3.0 + 0.01 * j for j in range(len(M))] and t.m == list(M)
    assert cm.gpu_s(_gemm(8, 1792, 2560)) == pytest.approx(3.03e-6, rel=1e-12)  # m = 8 is grid point 3
    assert [cm.gemm_kernels(_gemm(m, 1792, 2560)) for m in (1, 4, 8, 1024)] == [2, 2, 1, 1]
    assert cm.gemm_table(2560, 1792).us[0] == 4.0


def test_the_fit_tables_win_over_the_grid_and_a_missing_shape_stays_missing():
    raw = _raw()
    t0 = raw["device"]["tables"]["gemm"][0]
    shape = (t0["n"], t0["k"])
    cm = CostModel(parse_profile(_with(_grid([shape, (1792, 2560)], us=[[999.0] * len(M), [5.0] * len(M)]))))
    assert cm.gemm_table(*shape).us == t0["us"]  # the table, not the grid's 999 us
    assert cm.gemm_table(1793, 2561) is None  # neither holds it: the fallback prices it
    plain = CostModel(parse_profile(_with(None) | {}))
    assert cm.gpu_s(_gemm(4, *shape)) == plain.gpu_s(_gemm(4, *shape))


def test_the_fallback_reads_the_grid_rows_as_neighbours():
    raw = _with(_grid([(1792, 2560)], us=[[50.0] * len(M)]))
    cm = CostModel(parse_profile(raw))
    fb = cm.gemm_fallback
    assert any((t.n, t.k) == (1792, 2560) for t in fb.tables)
    base = _raw()
    base["device"]["tables"].pop("gemm_grid", None)
    plain = CostModel(parse_profile(base))
    # a shape next to the grid row: its nearest neighbour is that row (50 us, far slower than any table)
    assert cm.gpu_s(_gemm(1, 1800, 2560)) > 2 * plain.gpu_s(_gemm(1, 1800, 2560))
    ref = GemmFallback(list(plain.profile.device.tables.gemm) + list(grid_tables(cm.profile.device.tables.gemm_grid)
                                                                        .values()), cm.peak_flops, cm.bw)
    assert cm.gpu_s(_gemm(1, 1800, 2560)) == ref.time_s(1800, 2560, 1)


@pytest.mark.parametrize("edit, words", [
    (lambda g: g["us"].pop(), "len(shapes) rows"),
    (lambda g: g["us"][0].pop(), "len(shapes) rows"),
    (lambda g: g["us"][1].__setitem__(3, -1.0), "gemm_grid.us[1][3]"),
    (lambda g: g["us"][0].__setitem__(0, float("inf")), "gemm_grid.us[0][0]"),
    (lambda g: g["us"][0].__setitem__(1, float("nan")), "gemm_grid.us[0][1]"),
    (lambda g: g["shapes"].__setitem__(1, g["shapes"][0]), "distinct"),
    (lambda g: g["m"].reverse(), "strictly increasing"),
    (lambda g: g["kernels"][0].__setitem__(0, 0), "gemm_grid.kernels[0][0]"),
    (lambda g: g.__setitem__("extra", 1), "extra"),
])
def test_a_bad_grid_is_one_line_naming_the_field(edit, words):
    g = _grid([(1792, 2560), (2560, 1792)])
    edit(g)
    with pytest.raises(ProfileError) as e:
        parse_profile(_with(g), "p.json")
    msg = str(e.value)
    assert "gemm_grid" in msg and words in msg and "\n" not in msg.strip()


def test_h100_derivation_moves_each_gemm_points_bytes_at_the_h100s_bandwidth():
    """derive_h100: a bandwidth-bound GEMM point adds its bytes (A, B, C once, bf16) x (1/bw_H100 - 1/bw_H200);
    grid rows and tables alike; the fastest point of a weight-streaming shape moves too (it reads the weight)."""
    from calibration.build_profile import derive_h100

    raw = _with(_grid([(4096, 4096)], us=[[10.0 + j for j in range(len(M))]], kernels=False))
    raw["device"]["tables"]["gemm"].append({"n": 4095, "k": 4096, "m": list(M), "us": [10.0 + j for j in range(len(M))]})
    d = raw["device"]
    bw200 = d["hbm_tbps"] * d["bw_efficiency"] * 1e12
    for copy_tbps, bw100 in ((None, bw200 * 3.35 / 4.8), (3.0, 3.0e12)):
        q = derive_h100(copy.deepcopy(raw), copy_tbps=copy_tbps, copy_source="test")
        table = next(t for t in q["device"]["tables"]["gemm"] if (t["n"], t["k"]) == (4095, 4096))
        got = q["device"]["tables"]["gemm_grid"]["us"][0]
        assert got == pytest.approx(table["us"], rel=1e-3)  # as a table of (almost) that shape is
        moved = 2.0 * (1 * 4096 + 4096 * 4096 + 1 * 4096)  # m = 1
        assert got[0] == pytest.approx(10.0 + moved * (1 / bw100 - 1 / bw200) * 1e6, rel=1e-12)
        assert got[0] > 10.0 + 2.0  # 33.6 MB at ~0.1 ns/B more: ~3.4 us (the old rule left the fastest point)
        if copy_tbps:
            assert q["device"]["bw_efficiency"] == pytest.approx(3.0 / 3.35)
            assert "measured: test" in q["device"]["source"]


def test_builder_reads_timing_and_counts(tmp_path: Path):
    from calibration.build_gemm_grid import grid_section

    rows = [{"n": n, "k": k, "m": list(M), "graph_us": [4.0 + n / 1e4] * len(M)} for n, k in ((256, 512), (512, 256))]
    (tmp_path / "timing.json").write_text(json.dumps(
        {"m": list(M), "gemm": rows, "canary": {"host_start_us": 7.0, "host_end_us": 7.2}}))
    calls = {f"{n},{k},{m}": [["nvjet", 1.0]] * (2 if n == 256 and m == 1 else 1) for n, k in ((256, 512), (512, 256))
             for m in M}
    with gzip.open(tmp_path / "counts.json.gz", "wt") as f:
        json.dump({"calls": calls}, f)
    g = grid_section(tmp_path, "here")
    assert g["shapes"] == [[256, 512], [512, 256]] and g["kernels"][0][:2] == [2, 1] and g["kernels"][1][0] == 1
    assert "7.00 -> 7.20" in g["source"]
    del calls["512,256,1024"]  # a shape the counts process did not reach: no counts at all, never a guess
    with gzip.open(tmp_path / "counts.json.gz", "wt") as f:
        json.dump({"calls": calls}, f)
    assert grid_section(tmp_path, "here")["kernels"] is None
    parse_profile(_with(grid_section(tmp_path, "here")))
