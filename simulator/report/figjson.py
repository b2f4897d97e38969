"""Plotly figures as plain JSON dicts, {"data": [trace, ...], "layout": {...}}, built and written without plotly.

Building go.Figure objects (importing plotly.graph_objects, validating every property) cost a report-writing
process 0.2-0.4 s. `figure_json` of `to_dict(fig)` is, parsed, the JSON plotly's `to_html` wrote for the same
figure built of go objects: plotly's default template ("plotly", from its package data) in the layout, numpy
arrays as plotly.js typed arrays (what plotly's `to_dict` makes of arrays under data-array properties such as x
and y; a property whose validator turns an array into a list, such as a bar's `base`, is given a list), NaN and
Infinity as null, `<`, `>` and `/` escaped; only the order of keys may differ. Builders: `figure`, `trace`,
`add_trace`, `update_layout`, `update_axes`, `subplots` (plotly's `make_subplots` grid: top-left first, no
secondary axes). Plotly's own figures (anything with `to_dict`) are written as they serialise themselves.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

_SKIP = ("geojson", "layer", "layers", "range")  # keys plotly never turns into typed arrays
_SHORT = {"int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2", "int32": "i4", "uint32": "u4",
          "float32": "f4", "float64": "f8"}
_SWAP = (("<", "\\u003c"), (">", "\\u003e"), ("/", "\\u002f"))


def plotly_dir() -> Path:
    """plotly's package folder, found without importing plotly (its package data: plotly.min.js, templates)."""
    from importlib.util import find_spec

    spec = find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("plotly is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def default_template() -> dict:
    """The template plotly puts in every figure's layout (`plotly.io.templates.default`, "plotly")."""
    return json.loads((plotly_dir() / "package_data" / "templates" / "plotly.json").read_text(encoding="utf-8"))


def figure(*traces: dict, **layout) -> dict:
    """A figure of `traces` (dicts from `trace`) and `layout` (nested dicts; a string title becomes {"text": ...})."""
    fig: dict = {"data": list(traces), "layout": {}}
    update_layout(fig, **layout)
    return fig


def trace(kind: str, **props) -> dict:
    """A trace of type `kind` ("bar", "scatter"): `props` without those given as None (plotly leaves them unset)."""
    out = {k: v for k, v in props.items() if v is not None}
    out["type"] = kind
    return out


def _titled(key: str, v):
    return {"text": v} if key == "title" and isinstance(v, str) else v


def _merge(into: dict, upd: dict) -> None:
    """plotly's update: nested dicts merge key by key, anything else (lists too) replaces."""
    for k, v in upd.items():
        v = _titled(k, v)
        if v is None:  # plotly: setting None unsets
            into.pop(k, None)
        elif isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = _copy(v)


def _copy(v):
    if isinstance(v, dict):
        return {k: _copy(_titled(k, x)) for k, x in v.items() if x is not None}
    return v


def update_layout(fig: dict, **upd) -> dict:
    """Merge `upd` into the figure's layout (as `go.Figure.update_layout` with nested dicts)."""
    _merge(fig["layout"], upd)
    return fig


def axis_name(axis: str, n: int) -> str:
    """The layout key of axis `axis` ("x" or "y") number n (1: "xaxis", 2: "xaxis2", ...)."""
    return f"{axis}axis{n if n > 1 else ''}"


def axis_ref(axis: str, n: int) -> str:
    """How a trace or an anchor names axis `axis` ("x" or "y") number n (1: "x", 2: "x2", ...)."""
    return f"{axis}{n if n > 1 else ''}"


def cell_axes(row: int, col: int, cols: int) -> int:
    """The axis number of subplot (row, col) of a `subplots` grid of `cols` columns (rows from the top)."""
    return (row - 1) * cols + col


def add_trace(fig: dict, tr: dict, row: int | None = None, col: int | None = None, cols: int = 1) -> dict:
    """Append `tr`; with (row, col) of a `subplots` grid of `cols` columns, on that subplot's axes."""
    if row is not None and col is not None:
        n = cell_axes(row, col, cols)
        tr = {**tr, "xaxis": axis_ref("x", n), "yaxis": axis_ref("y", n)}
    fig["data"].append(tr)
    return fig


def update_axes(fig: dict, axis: str, row: int | None = None, col: int | None = None, cols: int = 1,
                **upd) -> dict:
    """Merge `upd` into axis `axis` ("x" or "y") of subplot (row, col), or into every such axis of the layout
    (plotly's `update_xaxes` / `update_yaxes`: without row and col, the first axis, which plotly's layout always
    has, and each numbered one the layout sets, in number order)."""
    lay = fig["layout"]
    if row is not None and col is not None:
        keys = [axis_name(axis, cell_axes(row, col, cols))]
    else:
        nums = {1} | {int(k[5:]) for k in lay if k.startswith(f"{axis}axis") and k[5:].isdigit()}
        keys = [axis_name(axis, n) for n in sorted(nums)]
    for k in keys:
        _merge(lay.setdefault(k, {}), upd)
    return fig


def subplots(rows: int, cols: int, shared_xaxes: bool = False, vertical_spacing: float | None = None,
             subplot_titles: list[str] | None = None) -> dict:
    """An empty figure laid out as plotly's `make_subplots(rows, cols, shared_xaxes=..., vertical_spacing=...,
    subplot_titles=...)` lays it out (top-left start, default horizontal spacing, one x/y pair per cell, numbered
    row by row from the top): the same axis domains, shared-x `matches` and subplot-title annotations."""
    hs = 0.2 / cols
    vs = vertical_spacing if vertical_spacing is not None else (0.5 if subplot_titles is not None else 0.3) / rows
    widths = [(1.0 - hs * (cols - 1)) / cols] * cols
    heights = [(1.0 - vs * (rows - 1)) / rows] * rows
    row_seq = range(rows)[::-1]
    grid = [[(sum(widths[:c]) + c * hs, sum(heights[:r]) + r * vs) for c in range(cols)] for r in row_seq]
    lay: dict = {}
    domains = []
    for r in range(rows):
        for c in range(cols):
            x_dom = [max(0.0, grid[r][c][0]), min(1.0, grid[r][c][0] + widths[c])]
            y_dom = [max(0.0, grid[r][c][1]), min(1.0, grid[r][c][1] + heights[-1 - r])]
            domains.append((x_dom, y_dom))
            n = r * cols + c + 1
            lay[axis_name("x", n)] = {"domain": x_dom, "anchor": axis_ref("y", n)}
            lay[axis_name("y", n)] = {"domain": y_dom, "anchor": axis_ref("x", n)}
    if shared_xaxes:  # each column's axes match its bottom one, whose tick labels are the only ones shown
        for c in range(cols):
            first = axis_ref("x", (rows - 1) * cols + c + 1)
            for r in range(rows - 2, -1, -1):
                ax = lay[axis_name("x", r * cols + c + 1)]
                ax["matches"] = first
                ax["showticklabels"] = False
    notes = []
    for text, (x_dom, y_dom) in zip(subplot_titles or [], domains):
        if text:
            notes.append({"y": y_dom[1], "xref": "paper", "x": sum(x_dom) / 2.0, "yref": "paper", "text": text,
                          "showarrow": False, "font": {"size": 16}, "xanchor": "center", "yanchor": "bottom"})
    lay["annotations"] = notes
    return {"data": [], "layout": lay}


def typed_array(v):
    """A numpy array as plotly.js's typed-array spec ({"dtype", "bdata"}: what plotly's `to_dict` makes of it),
    64-bit integers narrowed to the smallest type that holds them; arrays of other kinds (and empty ones) as is."""
    import numpy as np

    if v.size == 0:
        return v
    v = np.ascontiguousarray(v)
    dtype = str(v.dtype)
    if dtype in ("int64", "uint64"):
        lo, hi = v.min(), v.max()
        bounds = (((-128, 127, "int8"), (-32768, 32767, "int16"), (-2147483648, 2147483647, "int32"))
                  if dtype == "int64" else ((0, 255, "uint8"), (0, 65535, "uint16"), (0, 4294967295, "uint32")))
        for a, b, t in bounds:
            if lo >= a and hi <= b:
                v = v.astype(t)
                break
        else:
            return v
    short = _SHORT.get(str(v.dtype))
    if short is None:
        return v
    out = {"dtype": short, "bdata": base64.b64encode(v).decode("ascii")}
    if v.ndim > 1:
        out["shape"] = str(v.shape)[1:-1]
    return out


def _arrays(obj) -> None:
    """numpy arrays inside dicts (at any depth, lists included) to typed arrays, in place: plotly's
    `convert_to_base64`, which `to_dict` runs."""
    import sys

    np = sys.modules.get("numpy")
    if np is None:
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in _SKIP:
                continue
            if isinstance(v, np.ndarray):
                obj[k] = typed_array(v)
            elif isinstance(v, (dict, list, tuple)):
                _arrays(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            if isinstance(v, (dict, list, tuple)):
                _arrays(v)


def to_dict(fig, template: dict | None = None) -> dict:
    """The figure as plotly serialises it: a plotly figure's own `to_dict`; a dict figure copied (the caller's
    stays as built) with `template` (default: plotly's default template) first in its layout unless it sets one,
    and its numpy arrays as typed arrays."""
    if not isinstance(fig, dict):
        return fig.to_dict()
    lay = fig.get("layout") or {}
    if "template" not in lay:
        lay = {"template": default_template() if template is None else template, **lay}
    out = {"data": _deep(list(fig.get("data") or [])), "layout": _deep(lay)}
    _arrays(out)
    return out


def _deep(v):
    """A copy of nested dicts and lists (their other values shared)."""
    if isinstance(v, dict):
        return {k: _deep(x) if isinstance(x, (dict, list)) else x for k, x in v.items()}
    return [_deep(x) if isinstance(x, (dict, list)) else x for x in v]


def _default(o):
    """What json cannot write, as plotly's encoder writes it: numpy arrays and scalars as lists and numbers,
    plotly objects by their `to_plotly_json`."""
    if hasattr(o, "to_plotly_json"):
        return o.to_plotly_json()
    if hasattr(o, "tolist"):  # numpy arrays and scalars (item() of a scalar is its tolist())
        return o.tolist()
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


def _strict(const: str):
    return None if const in ("Infinity", "-Infinity", "NaN") else const


def figure_json(obj) -> str:
    """`obj` (a figure's data list or layout dict, from `to_dict`) as plotly's `to_json_plotly` writes it: compact,
    NaN and Infinity as null, then <, > and / as \\u escapes (safe inside a <script>)."""
    s = json.dumps(obj, separators=(",", ":"), default=_default)
    if "NaN" in s or "Infinity" in s:
        s = json.dumps(json.loads(s, parse_constant=_strict), separators=(",", ":"))
    for a, b in _SWAP:
        if a in s:
            s = s.replace(a, b)
    return s
