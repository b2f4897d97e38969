"""The sweep report's budget lines, set in one layout update, are the shapes and annotations that one
`add_vline` per budget made (the figure JSON is compared whole)."""

from __future__ import annotations

import plotly.graph_objects as go

from simulator.studies.sweep import budget_lines


def _fig() -> go.Figure:
    f = go.Figure()
    f.add_trace(go.Scatter(x=[1, 2], y=[3, 4], mode="markers", name="vllm"))
    return f


def test_same_figure_as_add_vline():
    xs = [64.0, 256.0, 1000.5, 1024.0, 4096.0]
    old = _fig()
    for x in xs:
        old.add_vline(x=x, line_dash="dash", annotation_text=f"budget {x:g} MiB")
    new = _fig()
    budget_lines(new, xs)
    assert new.to_plotly_json() == old.to_plotly_json()
    assert len(new.layout.shapes) == len(xs) and new.layout.annotations[2].text == "budget 1000.5 MiB"


def test_no_budgets():
    f = _fig()
    budget_lines(f, [])
    assert f.to_plotly_json() == _fig().to_plotly_json()
