"""Plotly figures shared by reports: the two-lane CPU/GPU timeline and line/bar helpers."""

from __future__ import annotations

import plotly.graph_objects as go

from .timeline import Timeline


def timeline_figure(tl: Timeline, launches: int = 18, title: str = "") -> go.Figure:
    """CPU lane: host work per launch (and queue stalls); GPU lane: kernels; first `launches` launches."""
    p = tl.plan
    n = min(launches, p.launches)
    k_end = int(p.kernels_per_launch[:n].sum())
    us = 1e6
    cpu0 = tl.cpu_start[:n] * us
    cpu_w = p.host_s[:n] * us
    fig = go.Figure()
    fig.add_trace(go.Bar(
        y=["CPU"] * n, x=cpu_w, base=cpu0, orientation="h", name="CPU: build + submit launch",
        marker_color="#4C78A8", text=p.launch_labels[:n], hovertemplate="%{text}<br>%{base:.2f}–%{x:.2f} µs",
    ))
    st = tl.stall[:n] * us
    if st.sum() > 0:
        fig.add_trace(go.Bar(y=["CPU"] * n, x=st, base=(tl.submit[:n] - tl.stall[:n]) * us, orientation="h",
                             name="CPU: blocked on full queue", marker_color="#E45756"))
    g0 = tl.gpu_start[:k_end] * us
    gw = (tl.gpu_end[:k_end] - tl.gpu_start[:k_end]) * us
    fig.add_trace(go.Bar(
        y=["GPU"] * k_end, x=gw, base=g0, orientation="h", name="GPU: kernel", marker_color="#54A24B",
        text=p.kernel_names[:k_end], hovertemplate="%{text}<br>start %{base:.2f} µs, %{x:.2f} µs",
    ))
    fig.update_layout(title=title or f"First {n} launches: gaps on the GPU lane are idle time",
                      barmode="overlay", xaxis_title="time in step (µs)", height=300,
                      yaxis=dict(categoryorder="array", categoryarray=["GPU", "CPU"]))
    return fig


def lines_figure(series: dict[str, tuple[list, list]], title: str, xtitle: str, ytitle: str,
                 log_x: bool = False, dash: dict[str, str] | None = None) -> go.Figure:
    fig = go.Figure()
    for name, (xs, ys) in series.items():
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=name,
                                 line=dict(dash=(dash or {}).get(name, "solid"))))
    fig.update_layout(title=title, xaxis_title=xtitle, yaxis_title=ytitle, height=450)
    if log_x:
        fig.update_xaxes(type="log")
    return fig


def bars_figure(labels: list[str], values: list[float], title: str, ytitle: str) -> go.Figure:
    fig = go.Figure(go.Bar(x=labels, y=values, text=[f"{v:g}" for v in values], textposition="outside"))
    fig.update_layout(title=title, yaxis_title=ytitle, height=400)
    return fig
