"""Charts and tables people can read (issue 22, item 6) and report/JSON writing linear in points (issue 24):
1-2-5 log ticks with plain labels, numbers without scientific notation (0 as 0), lanes of thousands of kernels
drawn as merged spans or a busy-share strip, long titles wrapped, vertical lines as one trace."""

from __future__ import annotations

import json
import re
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.common.jsonfile import write_json
from simulator.report import charts
from simulator.report import figjson as fj
from simulator.report.html import human, table_html, wrap_title


def test_log_ticks_are_1_2_5_with_plain_labels():
    assert charts.log_ticks([1, 512]) == [1, 2, 5, 10, 20, 50, 100, 200, 500]
    assert [charts.tick_text(t) for t in charts.log_ticks([0.009, 2.1])] == \
        ["0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2"]
    assert charts.log_ticks([2.3, 8]) == [3, 4, 5, 6, 8]  # a narrow span gets finer ticks, never just one
    assert charts.tick_text(20000) == "20,000"
    fig = charts.lines_figure({"a": ([1, 8, 64, 512], [1, 2, 3, 4])}, "t", "batch", "ms", log_x=True)
    ax = fig["layout"]["xaxis"]
    assert ax["type"] == "log" and list(ax["ticktext"]) == ["1", "2", "5", "10", "20", "50", "100", "200", "500"]


@given(st.floats(1e-6, 1e6), st.floats(1.01, 1e4))
@settings(max_examples=80, deadline=None)
def test_log_ticks_cover_the_range_and_stay_few(lo, ratio):
    t = charts.log_ticks([lo, lo * ratio])
    assert 1 <= len(t) <= 12 and t == sorted(t)
    assert all(lo / 1.005 <= x <= lo * ratio * 1.005 for x in t)  # (ends rounded to 3 digits: within 0.5 %)


@pytest.mark.parametrize("v,want", [(5.809e-13, "0"), (0.0, "0"), (10290.4, "10,290"), (1.029e4, "10,290"),
                                    (5.075, "5.075"), (0.000123, "0.000123"), (126.6329, "126.6"), (True, "yes"),
                                    (False, "no"), (None, ""), (7, "7"), (float("nan"), "–"), (-0.1358, "-0.1358")])
def test_numbers_for_people(v, want):
    assert human(v) == want


def test_table_has_no_scientific_notation_or_python_literals():
    t = table_html([{"a": 1.029e4, "b": 5.809e-13, "c": True, "d": None}, {"a": 2.0, "e": "x"}])
    assert not re.search(r"\de[+-]\d", t) and "True" not in t and "None" not in t
    assert "<th>e</th>" in t  # a key first seen in a later row is a column too
    cut = table_html([{"i": i} for i in range(10)], "rows", limit=3, rest="results.csv")
    assert cut.count("<tr>") == 4 and "the first 3 of 10 rows; all of them in results.csv" in cut


def test_merge_spans_hand_case():
    s = np.array([0.0, 1.0, 1.5, 10.0])
    e = np.array([1.0, 1.4, 3.0, 11.0])
    s0, s1, n = charts.merge_spans(s, e, 0.2)
    assert s0.tolist() == [0.0, 10.0] and s1.tolist() == [3.0, 11.0] and n.tolist() == [3, 1]
    t = np.array([0.0, 1.2, 3.0, 10.5, 20.0])
    assert charts.busy_before(s, e, t).tolist() == [0.0, 1.2, 2.9, 2.9 + 0.5, 3.9]


def _lane(starts, widths):
    fig = fj.figure()
    s = np.asarray(starts, dtype=float)
    charts._lane(fig, "GPU", s, s + np.asarray(widths, dtype=float), ["k"] * len(s), "GPU: kernel", "#54A24B",
                 "kernel")
    return fig


def test_busy_lane_of_thousands_of_kernels_is_one_solid_span():
    # 6,368 back-to-back kernels 1.7 us wide (gaps 0.3 us): no white band of outlines, one span
    fig = _lane(np.arange(6368) * 2.0, [1.7] * 6368)
    (bar,) = fig["data"]
    assert len(bar["x"]) == 1 and bar["marker"]["line"]["width"] == 0 and bar["x"][0] == pytest.approx(6367 * 2.0 + 1.7)


def test_launch_bound_lane_is_shaded_by_busy_share():
    # kernels 3 us wide every 10 us: real gaps, thousands of them -> a strip whose shade is the busy share (30 %)
    fig = _lane(np.arange(5000) * 10.0, [3.0] * 5000)
    (bar,) = fig["data"]
    assert len(bar["x"]) == charts.DENSITY_BINS
    alphas = [float(c.rsplit(",", 1)[1].rstrip(")")) for c in bar["marker"]["color"]]
    assert np.mean(alphas) == pytest.approx(0.3, abs=0.01)


def test_few_kernels_keep_their_bars_and_labels():
    fig = _lane([0, 5, 9], [2, 2, 2])
    assert len(fig["data"][0]["x"]) == 3 and list(fig["data"][0]["text"]) == ["k", "k", "k"]


def test_vlines_are_one_trace_and_fast():
    fig = fj.figure()
    t0 = time.perf_counter()
    charts.vlines(fig, list(range(694)), 0, 1, "budgets", labels=[f"b{i}" for i in range(694)])
    assert time.perf_counter() - t0 < 2.0 and len(fig["data"]) == 1 and not fig["layout"].get("shapes")
    assert len(fig["data"][0]["x"]) == 3 * 694


def test_long_titles_wrap():
    t = "qwen3-0.6b: step time and its CPU/GPU split across batch sizes (launch-bound where the dotted host line"
    assert all(len(x) <= 95 for x in wrap_title(t * 2).split("<br>"))


def test_write_json_rows_one_a_line_and_linear(tmp_path):
    def rows(n):
        return {"rows": [{"i": i, "x": i / 7, "nan": float("nan") if i == 5 else 1.0} for i in range(n)], "k": 1}

    t = []
    for n in (20_000, 40_000):
        t0 = time.perf_counter()
        write_json(tmp_path / f"{n}.json", rows(n))
        t.append(time.perf_counter() - t0)
    back = json.loads((tmp_path / "40000.json").read_text())
    assert back["rows"][5]["nan"] is None and back["rows"][7]["x"] == 1.0 and back["k"] == 1
    assert (tmp_path / "40000.json").read_text().count("\n") >= 40_000  # a row a line
    assert t[1] < 4 * t[0] + 0.2  # doubling the rows does not quadruple the time
