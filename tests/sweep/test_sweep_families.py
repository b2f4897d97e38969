"""Budgets cost O(1) per point: points that differ only in their budget are one family, evaluated once (in a
worker) and expanded in the parent; the family's rows equal evaluate_point's, and the writers that encode a
family once (cache lines, results.json text, results.csv) write the same text as the per-row encoders."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as hs

from simulator.common.jsonfile import indented
from simulator.model.models import load_model
from simulator.report.html import write_csv
from simulator.studies.sweep import rows_json, summarize_rows, write_rows_csv
from simulator.sweep.grid import CACHE_FILE, budget_template, cache_line, evaluate_point, fill_budget, load_cache, \
    point_for, run_points

QWEN = load_model("qwen3-0.6b")
MiB = 1 << 20


def pts(budgets, graphs=("full", "none"), **kw):
    # one set of value objects per graph mode, as build_points makes them: the points of a family share them
    out = []
    for g in graphs:
        sizes, ds, dw = (4, 8), (3, 8), (0.5, 0.5)
        out += [point_for(QWEN, "datasheet-h200", fusion="fused", graph=g, layout="L", sizes=sizes, distribution="d",
                          dist_sizes=ds, dist_weights=dw, budget_bytes=b, ctx=512, **kw) for b in budgets]
    return out


def test_family_keys_with_routing_fields(tmp_path):
    points = pts([1, 2 * MiB], graphs=("full",), attention_backend="fa3", prefill_sizes=(8, 16))
    run = run_points(points, tmp_path, workers=1, progress=False)
    assert run.family == [0, 0] and run.keys == [p.key() for p in points]
    assert set(load_cache(tmp_path)) == set(run.keys)


def test_family_rows_equal_evaluate_point(tmp_path):
    budgets = [1, 8 * MiB, 64 * MiB, 1 << 30, 3 * MiB]
    points = pts(budgets)
    run = run_points(points, tmp_path, workers=1, chunk=1, progress=False)
    assert run.rows == [evaluate_point(p) for p in points]
    assert [r["budget_bytes"] for r in run.rows] == budgets * 2
    assert run.family == [0] * 5 + [1] * 5  # two families: one evaluation each
    assert run.step_evals == sum(r["step_evals"] for r in run.rows)
    lines = (tmp_path / CACHE_FILE).read_text().splitlines(keepends=True)
    assert sorted(lines) == sorted(cache_line(k, r) for k, r in zip(run.keys, run.rows))
    assert run.keys == [p.key() for p in points]
    assert set(load_cache(tmp_path)) == set(run.keys)  # the family-made keys are the points' own
    again = run_points(points, tmp_path, workers=2, progress=False)  # all from the cache: no family
    assert again.rows == run.rows and again.family == [-1] * 10


def test_summary_budget_cell():
    rows = run_points(pts([MiB, 1 << 30], graphs=("full",)), None, workers=1, progress=False).rows
    (s,) = summarize_rows(rows)
    assert s["budgets"] == f"1MiB:{'ok' if rows[0]['fits_budget'] else 'OVER'} 1024MiB:ok"


def test_budget_cell_lists_few_checks_and_runs_of_many():
    from simulator.studies.sweep import budget_cell

    few = ["64MiB:OVER", "128MiB:ok"]
    assert budget_cell(few) == "64MiB:OVER 128MiB:ok"
    many = [f"{m}MiB:{'ok' if m >= 100 else 'OVER'}" for m in range(64, 140, 4)] + ["8MiB:OVER"]
    assert budget_cell(many) == "64MiB..96MiB:OVER (9) 100MiB..136MiB:ok (10) 8MiB:OVER"


values = hs.one_of(hs.none(), hs.booleans(), hs.integers(-10**12, 10**12), hs.text(max_size=6),
                   hs.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=60, deadline=None)
@given(base=hs.dictionaries(hs.sampled_from(["a", "b,c", 'q"', "x\ny", "z"]), values, max_size=4),
       budgets=hs.lists(hs.one_of(hs.integers(0, 1 << 40), hs.floats(0, 1e12)), min_size=1, max_size=5),
       cached=hs.lists(hs.booleans(), min_size=5, max_size=5))
def test_family_writers_equal_per_row_encoders(tmp_path_factory, base, budgets, cached):
    rows, family = [], []
    for i, b in enumerate(budgets):
        r = {"model": "m", "budget_bytes": 0, **base, "graph_bytes": 5.0, "fits_budget": False}
        r["budget_bytes"], r["fits_budget"] = b, bool(5.0 <= b)
        rows.append(r)
        family.append(-1 if cached[i] else 0)
    d = tmp_path_factory.mktemp("w")
    assert rows_json(rows, family) == indented(rows)
    write_csv(d / "a.csv", rows)
    write_rows_csv(d / "b.csv", rows, family)
    assert (d / "a.csv").read_bytes() == (d / "b.csv").read_bytes()
    tpl = budget_template(rows[0], json.dumps)
    for r in rows:
        t = fill_budget(tpl, r) if tpl is not None else None
        if t is not None:
            assert t == json.dumps(r)
        elif tpl is not None:
            assert type(r["budget_bytes"]) is not int  # only int budgets are filled in
