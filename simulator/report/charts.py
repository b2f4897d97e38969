"""Plotly figures shared by reports: the two-lane CPU/GPU timeline and line/bar helpers."""

from __future__ import annotations

import plotly.graph_objects as go

from simulator.engine.timeline import Timeline


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
        marker=dict(color="#4C78A8", line=dict(color="white", width=1)), text=p.launch_labels[:n],
        textposition="none", hovertemplate="%{text}<br>from %{base:.2f} µs, %{x:.2f} µs",
    ))
    st = tl.stall[:n] * us
    if st.sum() > 0:
        fig.add_trace(go.Bar(y=["CPU"] * n, x=st, base=(tl.submit[:n] - tl.stall[:n]) * us, orientation="h",
                             name="CPU: blocked on full queue", marker_color="#E45756"))
    g0 = tl.gpu_start[:k_end] * us
    gw = (tl.gpu_end[:k_end] - tl.gpu_start[:k_end]) * us
    fig.add_trace(go.Bar(
        y=["GPU"] * k_end, x=gw, base=g0, orientation="h", name="GPU: kernel",
        marker=dict(color="#54A24B", line=dict(color="white", width=1)), text=p.kernel_names[:k_end],
        textposition="none", hovertemplate="%{text}<br>start %{base:.2f} µs, %{x:.2f} µs",
    ))
    fig.update_layout(title=title or f"First {n} launches: gaps on the GPU lane are idle time",
                      barmode="overlay", xaxis_title="time in step (µs)", height=300,
                      yaxis=dict(categoryorder="array", categoryarray=["GPU", "CPU"]))
    return fig


_BASE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#EECA3B", "#9D755D", "#FF9DA6",
         "#222222"]
_DASHES = ["solid", "dash", "dot", "dashdot"]


def palette(n: int) -> list[str]:
    """n distinguishable colours: a 10-colour qualitative palette, then evenly spaced hues at alternating
    lightness (every colour distinct for any n)."""
    if n <= len(_BASE):
        return _BASE[:n]
    import colorsys

    out = []
    for i in range(n):
        h = (i * 0.618033988749895) % 1.0  # golden-ratio hue steps keep neighbours apart
        light = (0.38, 0.55, 0.7)[i % 3]
        r, g, b = colorsys.hls_to_rgb(h, light, 0.75)
        out.append(f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}")
    return out


def series_style(names: list[str]) -> dict[str, dict]:
    """A distinct colour per series and, beyond ten series, a dash pattern too (distinguishable in greyscale)."""
    cols = palette(len(names))
    many = len(names) > len(_BASE)
    return {nm: {"color": cols[i], "dash": _DASHES[(i // 3) % len(_DASHES)] if many else "solid"}
            for i, nm in enumerate(names)}


def lines_figure(series: dict[str, tuple[list, list]], title: str, xtitle: str, ytitle: str,
                 log_x: bool = False, dash: dict[str, str] | None = None) -> go.Figure:
    fig = go.Figure()
    style = series_style(list(series))
    for name, (xs, ys) in series.items():
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=name,
                                 line=dict(color=style[name]["color"],
                                           dash=(dash or {}).get(name, style[name]["dash"]))))
    fig.update_layout(title=title, xaxis_title=xtitle, yaxis_title=ytitle, height=450)
    if log_x:
        fig.update_xaxes(type="log")
    return fig


def bars_figure(labels: list[str], values: list[float], title: str, ytitle: str) -> go.Figure:
    fig = go.Figure(go.Bar(x=labels, y=values, text=[f"{v:g}" for v in values], textposition="outside"))
    fig.update_layout(title=title, yaxis_title=ytitle, height=400)
    return fig


def panels_figure(panels: dict[str, dict[str, tuple]], title: str, xtitle: str, ytitle: str,
                  log_x: bool = False, dash: dict[str, str] | None = None, cols: int = 2) -> go.Figure:
    """One subplot per panel, each with named series; series of the same name share a colour.
    A series is (xs, ys) or (xs, ys, lo, hi): lo/hi draw an error bar from lo to hi at each point."""
    from plotly.subplots import make_subplots

    names = list(panels)
    rows = (len(names) + cols - 1) // cols
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=names, shared_xaxes=True)
    all_names = list(dict.fromkeys(s for p in panels.values() for s in p))
    style = series_style(all_names)
    colours: dict[str, str] = {}
    for i, name in enumerate(names):
        r, c = i // cols + 1, i % cols + 1
        for sname, ser in panels[name].items():
            xs, ys = ser[0], ser[1]
            err = None
            if len(ser) == 4 and all(v is not None for v in ser[2] + ser[3]):
                err = dict(type="data", symmetric=False, array=[h - y for y, h in zip(ys, ser[3])],
                           arrayminus=[y - lo for y, lo in zip(ys, ser[2])], thickness=1)
            first = sname not in colours
            colours.setdefault(sname, style[sname]["color"])
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=sname, legendgroup=sname, error_y=err,
                                     showlegend=first, line=dict(color=colours[sname],
                                                                 dash=(dash or {}).get(sname, style[sname]["dash"]))),
                          row=r, col=c)
        fig.update_xaxes(title_text=xtitle, type="log" if log_x else "linear", row=r, col=c)
        fig.update_yaxes(title_text=ytitle, row=r, col=c)
    fig.update_layout(title=title, height=380 * rows)
    return fig
