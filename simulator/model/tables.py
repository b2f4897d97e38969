"""One reader for every measured 1-D table the cost model interpolates, with an explicit out-of-range policy.

`loglog(x, xs, ys, below=..., above=...)`: y(x) linear in log-log space between neighbouring grid points (kernel
time is close to a power law in bytes and tokens between neighbouring points, so this is exact for both the flat
small-kernel floor and the linear bandwidth-bound tail). Where x or any grid value is <= 0 (no logarithm) it
interpolates linearly instead. `linear(...)`: plain linear interpolation, same policies.

What happens outside the grid is named by the caller, separately below the first point and above the last:
- `CLAMP`: the end point's value (x moved onto the grid's end);
- `EXTRAPOLATE`: the end segment's slope carried on from the end point (in log-log for `loglog`, linear for
  `linear`);
- `REFUSE`: None (the caller then uses another model, e.g. the roofline).
A table of one point is that point's value wherever the policy does not refuse.

The policy of each table (callers pass it; `POLICIES` names them, tests pin them):
- costs.py, `tables.gemm` (time by m, per (n, k)): refuse both sides (roofline outside the measured m);
- costs.py, `tables.elementwise/reduction/memcopy/embedding` (time by bytes): refuse both sides (roofline);
- costs.py, `tables.triton_pointwise/triton_reduction/triton_reduction_loop` (time by bytes): clamp below (their
  smallest measured sizes are the launch-bound floor, flat within a few tenths of a us: a smaller kernel is no
  faster), refuse above (roofline);
- dtype.py, `tables.gemm_fp8` (time by m): refuse both sides (roofline);
- dtype.py, `tables.fp8_quant` (time by m within one k, then by k between the two nearest k): refuse both sides;
- moe.py, `tables.grouped_gemm` (time by tokens per expert within each experts row, then by experts): clamp
  both sides (the grid spans the decode range; outside it the nearest measured figure);
- moe.py, `tables.moe_routing` (time by batch): clamp both sides;
- engine/startup.py, `graph_memory[model].capture_s` (seconds by batch, linear): clamp below, extrapolate above.
- costs.py, `tables.row_mean` (`row_mean`: time by rows, then by row length; 2-D): rows below the table's step are
  read at the grid row <= rows (aten's block), above it linear, extrapolated above the grid (more rows: more
  waves); row length linear within one segment between launch breaks, extrapolated up to the next break (each
  segment is one launch, time linear in the row length), refused outside the grid (the byte curve then).
Each reader was written on its own before this module (three `_loglog`s and startup's `_interp`); their outputs
are bit-identical to this one's on every finite positive table (tests/model/test_tables.py pins both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

Policy = Literal["clamp", "extrapolate", "refuse"]
CLAMP: Policy = "clamp"
EXTRAPOLATE: Policy = "extrapolate"
REFUSE: Policy = "refuse"
_POLICIES = (CLAMP, EXTRAPOLATE, REFUSE)

# table -> (below the first point, above the last point); see the module docstring
POLICIES: dict[str, tuple[Policy, Policy]] = {
    "gemm.m": (REFUSE, REFUSE),
    "curve.bytes": (REFUSE, REFUSE),
    "triton_curve.bytes": (CLAMP, REFUSE),
    "gemm_fp8.m": (REFUSE, REFUSE),
    "fp8_quant.m": (REFUSE, REFUSE),
    "fp8_quant.k": (REFUSE, REFUSE),
    "grouped_gemm.tokens_per_expert": (CLAMP, CLAMP),
    "grouped_gemm.experts": (CLAMP, CLAMP),
    "moe_routing.batch": (CLAMP, CLAMP),
    "graph_memory.capture_s": (CLAMP, EXTRAPOLATE),
    "row_mean.rows": (CLAMP, EXTRAPOLATE),
    "row_mean.cols": (REFUSE, REFUSE),
    "roll.bytes": (CLAMP, EXTRAPOLATE),  # round w: launch-bound below 0.5 MB, 0.92 TB/s flat from 16 MB to 1.6 GB
}


def _check(policy: str) -> None:
    if policy not in _POLICIES:
        raise ValueError(f"unknown table policy {policy!r}: use one of {', '.join(_POLICIES)}")


def _outside(x: float, xs: Sequence[float], below: Policy, above: Policy) -> tuple[str, float]:
    """('in' | 'refuse' | 'extrapolate' | 'clamp', x moved onto the grid where clamped)."""
    _check(below)
    _check(above)
    if x < xs[0]:
        return below, float(xs[0]) if below == CLAMP else x
    if x > xs[-1]:
        return above, float(xs[-1]) if above == CLAMP else x
    return "in", x


def loglog(x: float, xs: Sequence[float], ys: Sequence[float], *, below: Policy, above: Policy) -> float | None:
    """y(x) by log-log interpolation over the grid (xs ascending, ys one per xs); outside it as `below`/`above`
    say (module docstring). Linear instead of log-log where x or any grid value is <= 0."""
    where, x = _outside(x, xs, below, above)
    if where == REFUSE:
        return None
    if len(xs) == 1:
        return float(ys[0])
    positive = x > 0 and min(xs) > 0 and min(ys) > 0
    if where == EXTRAPOLATE:
        e, o = (0, 1) if x < xs[0] else (-1, -2)  # the end point and its neighbour
        if not positive:
            return float(ys[e] + (ys[e] - ys[o]) / (xs[e] - xs[o]) * (x - xs[e]))
        slope = (np.log(ys[e]) - np.log(ys[o])) / (np.log(xs[e]) - np.log(xs[o]))
        return float(np.exp(np.log(ys[e]) + slope * (np.log(x) - np.log(xs[e]))))
    if not positive:
        return float(np.interp(x, xs, ys))
    return float(np.exp(np.interp(np.log(x), np.log(xs), np.log(ys))))


def _line(x: float, x0: float, x1: float, y0: float, y1: float) -> float:
    return float(y0 + (y1 - y0) * (x - x0) / (x1 - x0))


def linear(x: float, xs: Sequence[float], ys: Sequence[float], *, below: Policy, above: Policy) -> float | None:
    """y(x) by linear interpolation over the grid; outside it as `below`/`above` say (module docstring)."""
    where, x = _outside(x, xs, below, above)
    if where == REFUSE:
        return None
    if len(xs) == 1:
        return float(ys[0])
    if where == EXTRAPOLATE:
        e, o = (0, 1) if x < xs[0] else (-1, -2)  # the end point and its neighbour
        return float(ys[e] + (ys[e] - ys[o]) / (xs[e] - xs[o]) * (x - xs[e]))
    if x <= xs[0]:
        return float(ys[0])
    for i in range(1, len(xs)):
        if x <= xs[i]:
            return _line(x, xs[i - 1], xs[i], ys[i - 1], ys[i])
    return float(ys[-1])  # unreachable: x <= xs[-1] here


def row_mean(rows: float, cols: float, grid_rows: Sequence[int], grid_cols: Sequence[int],
             us: Sequence[Sequence[float]], breaks: Sequence[int], step_below_rows: int) -> float | None:
    """A 2-D table by (rows, row length) read as POLICIES["row_mean.*"] say (module docstring): None outside the
    grid's row lengths. The segment of `cols` is the grid cols between the breaks around it; within it `linear`,
    carried on to the next break (EXTRAPOLATE) above its last point. Rows below `step_below_rows`: the grid row
    <= rows; else `linear` over the grid rows (only the two around `rows` are read)."""
    r_below, r_above = POLICIES["row_mean.rows"]
    c_below, c_above = POLICIES["row_mean.cols"]
    if cols < grid_cols[0] or cols > grid_cols[-1]:  # REFUSE both sides (POLICIES pins it)
        return None
    lo = max([b for b in breaks if b <= cols], default=grid_cols[0])
    hi = min([b for b in breaks if b > cols], default=None)
    idx = [j for j, c in enumerate(grid_cols) if c >= lo and (hi is None or c < hi)]
    seg = [grid_cols[j] for j in idx]
    above = c_above if hi is None else EXTRAPOLATE

    def at_row(i: int) -> float | None:
        return linear(cols, seg, [us[i][j] for j in idx], below=c_below, above=above)

    if rows < step_below_rows:  # aten's block: the grid row <= rows
        return at_row(max([k for k, r in enumerate(grid_rows) if r <= rows], default=0))
    n = len(grid_rows)
    k = next((i for i in range(1, n) if rows <= grid_rows[i]), n - 1)  # the grid rows k-1, k around rows
    a, b = at_row(k - 1), at_row(k)
    if a is None or b is None:
        return None
    return linear(rows, [grid_rows[k - 1], grid_rows[k]], [a, b], below=r_below, above=r_above)


__all__ = ["CLAMP", "EXTRAPOLATE", "POLICIES", "REFUSE", "Policy", "linear", "loglog", "row_mean"]
