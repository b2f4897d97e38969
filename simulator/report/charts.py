"""Plotly figures shared by reports, as plain JSON dicts (report/figjson.py): the two-lane CPU/GPU timeline and
line/bar/panel helpers."""

from __future__ import annotations

import math

import numpy as np

from simulator.engine.timeline import Timeline
from simulator.report import figjson as fj

# A lane with more bars than this is drawn as merged spans (`merge_spans`) without outlines: thousands of bars a
# few µs wide, each with a 1 px white outline, render as a white band however busy the lane is. Adjacent bars
# merge: gaps up to MERGE_GAP_US, or 1/SPAN_PIXELS of the lane's extent (a tenth of a pixel at full width),
# whichever is larger; real idle time (a launch-bound GPU waiting ~10 µs per kernel) stays visible as gaps.
# If the merged spans are still more than MERGE_AT (a launch-bound lane: thousands of short kernels with real gaps),
# the lane becomes a strip of DENSITY_BINS bins shaded by the share of each bin that is busy: plotly draws a bar at
# least a pixel wide, so thousands of sub-pixel bars would paint an idle-ish lane solid.
MERGE_AT = 300
MERGE_GAP_US = 1.0
SPAN_PIXELS = 20000
DENSITY_BINS = 1200


def busy_before(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Busy time before each instant of `t` for non-overlapping intervals sorted by start."""
    length = end - start
    cum = np.concatenate(([0.0], np.cumsum(length)))
    k = np.searchsorted(start, t, side="right")  # intervals starting at or before t
    partial = np.clip(t - start[np.maximum(k - 1, 0)], 0.0, length[np.maximum(k - 1, 0)])
    return np.where(k > 0, cum[np.maximum(k - 1, 0)] + partial, 0.0)


def _hex_rgba(color: str, alpha: float) -> str:
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha:.3f})"


def merge_spans(start: np.ndarray, end: np.ndarray, min_gap: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge intervals (sorted by start) whose gap to the previous one's end is at most `min_gap`:
    (span starts, span ends, intervals per span). Busy time inside a span is the sum of its intervals' lengths."""
    if start.size == 0:
        return start, end, np.zeros(0, dtype=int)
    reach = np.maximum.accumulate(end)
    new = np.empty(start.size, dtype=bool)
    new[0] = True
    new[1:] = start[1:] - reach[:-1] > min_gap
    idx = np.flatnonzero(new)
    last = np.append(idx[1:], start.size) - 1
    return start[idx], reach[last], np.diff(np.append(idx, start.size))


def _lane(fig: dict, lane: str, start: np.ndarray, end: np.ndarray, labels, name: str, color: str,
          what: str) -> None:
    """One lane: a bar per interval when few (outlined, labelled), else merged spans without outlines. (Widths
    go as arrays, typed arrays in the JSON; bases as lists: plotly's `base` validator makes lists of arrays.)"""
    if start.size <= MERGE_AT:
        fj.add_trace(fig, fj.trace(
            "bar", y=[lane] * start.size, x=end - start, base=start.tolist(), orientation="h", name=name,
            marker=dict(color=color, line=dict(color="white", width=1 if start.size <= 60 else 0)),
            text=list(labels), textposition="none", hovertemplate="%{text}<br>from %{base:.2f} µs, %{x:.2f} µs"))
        return
    extent = float(end.max() - start.min()) if start.size else 0.0
    s0, s1, count = merge_spans(start, end, max(MERGE_GAP_US, extent / SPAN_PIXELS))
    if s0.size > MERGE_AT:
        order = np.argsort(start, kind="stable")
        edges = np.linspace(float(start.min()), float(end.max()), DENSITY_BINS + 1)
        busy = np.diff(busy_before(start[order], end[order], edges))
        share = np.clip(busy / np.diff(edges), 0.0, 1.0)
        fj.add_trace(fig, fj.trace(
            "bar", y=[lane] * DENSITY_BINS, x=np.diff(edges), base=edges[:-1].tolist(), orientation="h",
            name=f"{name} (shade: busy share of each {extent / DENSITY_BINS:.3g} µs)",
            marker=dict(color=[_hex_rgba(color, a) for a in share], line=dict(width=0)),
            text=[f"{100 * a:.0f}% busy ({what}s)" for a in share], textposition="none",
            hovertemplate="%{text}<br>from %{base:.1f} µs"))
        return
    busy = np.add.reduceat(end - start, np.append(0, np.cumsum(count)[:-1])) if count.size else count
    text = [f"{c} {what}{'s' if c != 1 else ''}, busy {b:.1f} of {w:.1f} µs" for c, b, w in zip(count, busy, s1 - s0)]
    fj.add_trace(fig, fj.trace(
        "bar", y=[lane] * s0.size, x=s1 - s0, base=s0.tolist(), orientation="h", name=f"{name} (adjacent ones merged)",
        marker=dict(color=color, line=dict(width=0)), text=text, textposition="none",
        hovertemplate="%{text}<br>from %{base:.2f} µs"))


def timeline_figure(tl: Timeline, launches: int = 18, title: str = "") -> dict:
    """CPU lane: host work per launch (and queue stalls); GPU lane: kernels; first `launches` launches.
    Lanes of more than MERGE_AT bars are drawn as merged spans, so a busy lane looks busy at any zoom."""
    p = tl.plan
    n = min(launches, p.launches)
    k_end = int(p.kernels_per_launch[:n].sum())
    us = 1e6
    cpu0 = tl.cpu_start[:n] * us
    cpu_w = p.host_s[:n] * us
    fig = fj.figure()
    _lane(fig, "CPU", cpu0, cpu0 + cpu_w, p.launch_labels[:n], "CPU: build + submit launch", "#4C78A8", "launch")
    st = tl.stall[:n] * us
    keep = st > 1e-6  # a stall under a picosecond is float noise of the submit times, not a full queue
    if keep.any():
        s0 = ((tl.submit[:n] - tl.stall[:n]) * us)[keep]
        _lane(fig, "CPU", s0, s0 + st[keep], ["blocked"] * int(keep.sum()), "CPU: blocked on full queue",
              "#E45756", "stall")
    g0 = tl.gpu_start[:k_end] * us
    g1 = tl.gpu_end[:k_end] * us
    _lane(fig, "GPU", g0, g1, p.kernel_names[:k_end], "GPU: kernel", "#54A24B", "kernel")
    fj.update_layout(fig, title=title or f"First {n} launches: gaps on the GPU lane are idle time",
                     barmode="overlay", xaxis=dict(title="time in step (µs)"), height=300,
                     yaxis=dict(categoryorder="array", categoryarray=["GPU", "CPU"]))
    return fig


_BASE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#EECA3B", "#9D755D", "#FF9DA6",
         "#222222"]
_DASHES = ["solid", "dash", "dot", "dashdot"]


def log_ticks(values, lo: float | None = None, hi: float | None = None) -> list[float]:
    """Tick values 1, 2, 5, 10, 20, 50, ... (times powers of ten) covering the positive `values` (or [lo, hi]);
    at most about 12 of them: spans of many decades keep only the powers of ten (then every other one); a span
    too narrow for three of them uses 1, 1.5, 2, 3, 4, 5, 6, 8."""
    v = [float(x) for x in values if x is not None and isinstance(x, (int, float)) and x > 0 and math.isfinite(x)]
    lo = lo if lo is not None else (min(v) if v else 1.0)
    hi = hi if hi is not None else (max(v) if v else 10.0)
    e0, e1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    def within(mult):
        ts = [m * 10.0 ** e for e in range(e0, e1 + 1) for m in mult]
        return [t for t in ts if lo / 1.0001 <= t <= hi * 1.0001]

    fine = within((1, 1.5, 2, 3, 4, 5, 6, 8))
    if len(within((1, 2, 5))) < 3 and len(fine) <= 12:
        # a span inside one step of that sequence: its ends, to 3 significant digits
        return fine or sorted({float(f"{lo:.3g}"), float(f"{hi:.3g}")})
    for mult in ((1, 2, 5), (1,)):
        ticks = within(mult) or [10.0 ** e0]
        if len(ticks) <= 12:
            return ticks
    step = math.ceil(len(ticks) / 12)
    return ticks[::step]


def tick_text(t: float) -> str:
    """A tick label as people write it: 0.01, 0.5, 2, 20, 500, 1,000, 20,000 (no exponent, no SI suffix)."""
    if t >= 1 and float(t).is_integer():
        return f"{t:,.0f}"
    return f"{t:.{max(1, -math.floor(math.log10(t)) + 1)}f}".rstrip("0").rstrip(".")


def log_axis(fig: dict, axis: str, values, **where) -> None:
    """Make `axis` ("x" or "y") logarithmic with 1-2-5 ticks over `values`, labelled with plain numbers, and no
    minor labels (plotly's default labels the 2 and 5 of each decade with bare digits that read as wrong values)."""
    ticks = log_ticks(values)
    upd = dict(type="log", tickmode="array", tickvals=ticks, ticktext=[tick_text(t) for t in ticks])
    fj.update_axes(fig, axis, **where, **upd)


def vlines(fig: dict, xs, y0: float, y1: float, name: str, color: str = "#E45756", dash: str = "dot",
           labels=None, label_at_most: int = 12) -> None:
    """Vertical lines at `xs` from y0 to y1 as ONE trace (None-separated segments): add_vline per line costs
    quadratic time in the number of shapes (694 budgets never finish). With at most `label_at_most` lines each
    gets a text label at its top; more lines: the labels are hover text only."""
    xs = list(xs)
    if not xs:
        return
    px, py, tx = [], [], []
    for i, x in enumerate(xs):
        px += [x, x, None]
        py += [y0, y1, None]
        t = labels[i] if labels is not None else f"{x:g}"
        tx += [t, t, None]
    fj.add_trace(fig, fj.trace("scatter", x=px, y=py, mode="lines", name=name,
                               line=dict(color=color, dash=dash, width=1), hovertext=tx, hoverinfo="text"))
    if labels is not None and len(xs) <= label_at_most:
        fj.add_trace(fig, fj.trace("scatter", x=xs, y=[y1] * len(xs), mode="text", text=list(labels),
                                   textposition="top center", showlegend=False, hoverinfo="skip"))


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
                 log_x: bool = False, dash: dict[str, str] | None = None) -> dict:
    fig = fj.figure()
    style = series_style(list(series))
    for name, (xs, ys) in series.items():
        fj.add_trace(fig, fj.trace("scatter", x=xs, y=ys, mode="lines+markers", name=name,
                                   line=dict(color=style[name]["color"],
                                             dash=(dash or {}).get(name, style[name]["dash"]))))
    fj.update_layout(fig, title=title, xaxis=dict(title=xtitle), yaxis=dict(title=ytitle), height=450)
    if log_x:
        log_axis(fig, "x", [x for xs, _ in series.values() for x in xs])
    return fig


def bars_figure(labels: list[str], values: list[float], title: str, ytitle: str) -> dict:
    from simulator.report.numbers import human

    return fj.figure(fj.trace("bar", x=labels, y=values, text=[human(float(v)) for v in values],
                              textposition="outside"), title=title, yaxis=dict(title=ytitle), height=400)


def panels_figure(panels: dict[str, dict[str, tuple]], title: str, xtitle: str, ytitle: str,
                  log_x: bool = False, dash: dict[str, str] | None = None, cols: int = 2) -> dict:
    """One subplot per panel, each with named series; series of the same name share a colour.
    A series is (xs, ys) or (xs, ys, lo, hi): lo/hi draw an error bar from lo to hi at each point."""
    names = list(panels)
    rows = (len(names) + cols - 1) // cols
    fig = fj.subplots(rows=rows, cols=cols, subplot_titles=names, shared_xaxes=True)
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
            fj.add_trace(fig, fj.trace("scatter", x=xs, y=ys, mode="lines+markers", name=sname, legendgroup=sname,
                                       error_y=err, showlegend=first,
                                       line=dict(color=colours[sname], dash=(dash or {}).get(sname,
                                                                                            style[sname]["dash"]))),
                         row=r, col=c, cols=cols)
        fj.update_axes(fig, "x", row=r, col=c, cols=cols, title=xtitle)
        if log_x:
            log_axis(fig, "x", [x for ser in panels[name].values() for x in ser[0]], row=r, col=c, cols=cols)
        fj.update_axes(fig, "y", row=r, col=c, cols=cols, title=ytitle)
    fj.update_layout(fig, title=title, height=380 * rows)
    return fig
