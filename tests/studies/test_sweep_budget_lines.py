"""The sweep report's budget lines, appended to the figure dict's layout at once, are the shapes and annotations
that one plotly `add_vline` per budget made (the figures' JSON, as the report writes it, is compared whole)."""

from __future__ import annotations

import json

import plotly.graph_objects as go

from simulator.report import figjson as fj
from simulator.studies.sweep import budget_lines


def _fig() -> go.Figure:
    f = go.Figure()
    f.add_trace(go.Scatter(x=[1, 2], y=[3, 4], mode="markers", name="vllm"))
    return f


def _dict_fig() -> dict:
    return fj.figure(fj.trace("scatter", x=[1, 2], y=[3, 4], mode="markers", name="vllm"))


def _json(fig) -> dict:
    d = fj.to_dict(fig)
    return {k: json.loads(fj.figure_json(v)) for k, v in d.items()}


def test_same_figure_as_add_vline():
    xs = [64.0, 256.0, 1000.5, 1024.0, 4096.0]
    old = _fig()
    for x in xs:
        old.add_vline(x=x, line_dash="dash", annotation_text=f"budget {x:g} MiB")
    new = _dict_fig()
    budget_lines(new, xs)
    assert _json(new) == _json(old)
    assert len(new["layout"]["shapes"]) == len(xs) and new["layout"]["annotations"][2]["text"] == "budget 1000.5 MiB"


def test_no_budgets():
    f = _dict_fig()
    budget_lines(f, [])
    assert _json(f) == _json(_fig()) and f == _dict_fig()
