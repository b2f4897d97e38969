"""simulator/model/tables.py: the one table reader and its out-of-range policies.

The four readers it replaced are copied here verbatim (`_legacy_*`, as they stood at commit a247b85) so the
unification is pinned bit for bit: every caller's output inside, below and above its table equals what the old
reader gave (or None where the old caller refused)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simulator.model import dtype, moe
from simulator.model.costs import US, CostModel
from simulator.model.kernels import LaunchPath, Op, OpClass
from simulator.model.profile import load_profile
from simulator.model.tables import CLAMP, EXTRAPOLATE, POLICIES, REFUSE, linear, loglog


# -- the old readers, verbatim ------------------------------------------------------------------------------
def _legacy_costs(x, xs, ys):  # simulator/model/costs.py _loglog
    if len(xs) == 1:
        return float(ys[0])
    if x <= 0 or min(xs) <= 0 or min(ys) <= 0:
        return float(np.interp(x, xs, ys))
    return float(np.exp(np.interp(np.log(x), np.log(xs), np.log(ys))))


def _legacy_moe(x, xs, ys):  # simulator/model/moe.py _loglog
    if len(xs) == 1:
        return float(ys[0])
    x = min(max(x, xs[0]), xs[-1])
    return float(np.exp(np.interp(np.log(x), np.log(xs), np.log(ys))))


def _legacy_dtype(x, xs, ys):  # simulator/model/dtype.py _loglog
    if len(xs) == 1:
        return float(ys[0])
    return float(np.exp(np.interp(np.log(x), np.log(xs), np.log(ys))))


def _legacy_interp(xs, ys, x):  # simulator/engine/startup.py _interp
    if len(xs) == 1 or x <= xs[0]:
        return float(ys[0])
    for i in range(1, len(xs)):
        if x <= xs[i]:
            return float(ys[i - 1] + (ys[i] - ys[i - 1]) * (x - xs[i - 1]) / (xs[i] - xs[i - 1]))
    return float(ys[-1] + (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) * (x - xs[-1]))


@st.composite
def grids(draw, n_min=1):
    n = draw(st.integers(n_min, 8))
    xs = [float(v) for v in sorted(set(draw(st.lists(st.integers(1, 10 ** 9), min_size=n, max_size=n))))]
    ys = draw(st.lists(st.floats(1e-3, 1e6), min_size=len(xs), max_size=len(xs)))
    return xs, ys


# -- exact hand-computed cases ------------------------------------------------------------------------------
def test_loglog_power_law_exact():
    """y = 2 x on (1, 2), (4, 8): log-log is exact on a power law, inside and extrapolated."""
    xs, ys = [1.0, 4.0], [2.0, 8.0]
    assert loglog(2.0, xs, ys, below=REFUSE, above=REFUSE) == pytest.approx(4.0, rel=1e-12)
    assert loglog(16.0, xs, ys, below=REFUSE, above=EXTRAPOLATE) == pytest.approx(32.0, rel=1e-12)
    assert loglog(0.25, xs, ys, below=EXTRAPOLATE, above=REFUSE) == pytest.approx(0.5, rel=1e-12)
    # y = x^2 on (1, 1), (2, 4): slope 2 in log-log carried to x = 8 -> 64
    assert loglog(8.0, [1.0, 2.0], [1.0, 4.0], below=CLAMP, above=EXTRAPOLATE) == pytest.approx(64.0, rel=1e-12)


def test_policies_outside():
    xs, ys = [2.0, 4.0, 8.0], [3.0, 5.0, 9.0]
    assert loglog(1.0, xs, ys, below=REFUSE, above=CLAMP) is None
    assert loglog(9.0, xs, ys, below=CLAMP, above=REFUSE) is None
    assert loglog(1.0, xs, ys, below=CLAMP, above=REFUSE) == pytest.approx(3.0, rel=1e-12)
    assert loglog(100.0, xs, ys, below=REFUSE, above=CLAMP) == pytest.approx(9.0, rel=1e-12)
    # the grid's end points are inside under every policy
    for p in (CLAMP, EXTRAPOLATE, REFUSE):
        assert loglog(2.0, xs, ys, below=p, above=p) == pytest.approx(3.0, rel=1e-12)
        assert loglog(8.0, xs, ys, below=p, above=p) == pytest.approx(9.0, rel=1e-12)
    # linear: (4, 5) -> (8, 9) is y = x + 1, carried on above; clamp below
    assert linear(10.0, xs, ys, below=CLAMP, above=EXTRAPOLATE) == 11.0
    assert linear(0.0, xs, ys, below=CLAMP, above=EXTRAPOLATE) == 3.0
    assert linear(3.0, xs, ys, below=REFUSE, above=REFUSE) == 4.0
    assert linear(0.0, xs, ys, below=EXTRAPOLATE, above=REFUSE) == 1.0  # (2, 3) -> (4, 5) is y = x + 1


def test_one_point_and_linear_fallback():
    assert loglog(5.0, [3.0], [7.0], below=CLAMP, above=CLAMP) == 7.0
    assert loglog(5.0, [3.0], [7.0], below=CLAMP, above=REFUSE) is None
    assert loglog(3.0, [3.0], [7.0], below=REFUSE, above=REFUSE) == 7.0
    # a zero in the grid: no logarithm, linear interpolation
    assert loglog(1.5, [1.0, 2.0], [0.0, 4.0], below=REFUSE, above=REFUSE) == 2.0
    assert loglog(3.0, [1.0, 2.0], [0.0, 4.0], below=REFUSE, above=EXTRAPOLATE) == 8.0


def test_unknown_policy_refused():
    with pytest.raises(ValueError, match="unknown table policy"):
        loglog(1.0, [1.0, 2.0], [1.0, 2.0], below="nearest", above=CLAMP)  # type: ignore[arg-type]


# -- bit-identical to the old readers -----------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(grids(), st.floats(1e-4, 1e10))
def test_same_bits_as_old_readers(g, x):
    xs, ys = g
    inside = xs[0] <= x <= xs[-1]
    # costs.py and dtype.py callers refused outside the grid; moe.py clamped
    want_refuse = _legacy_costs(x, xs, ys) if inside else None
    assert loglog(x, xs, ys, below=REFUSE, above=REFUSE) == want_refuse
    assert loglog(x, xs, ys, below=CLAMP, above=CLAMP) == _legacy_moe(x, xs, ys)
    if inside:
        assert loglog(x, xs, ys, below=REFUSE, above=REFUSE) == _legacy_dtype(x, xs, ys)
    assert linear(x, xs, ys, below=CLAMP, above=EXTRAPOLATE) == _legacy_interp(xs, ys, x)


@settings(max_examples=200, deadline=None)
@given(grids(n_min=2), st.floats(1e-4, 1e10))
def test_extrapolate_continues_the_end_segment(g, x):
    """Outside the grid, log y is linear in log x with the end segment's slope (a power law through the end)."""
    xs, ys = g
    if len(xs) < 2:
        return
    if xs[0] <= x <= xs[-1]:
        assert loglog(x, xs, ys, below=EXTRAPOLATE, above=EXTRAPOLATE) == _legacy_costs(x, xs, ys)
        return
    e, o = (0, 1) if x < xs[0] else (-1, -2)
    slope = (math.log(ys[e]) - math.log(ys[o])) / (math.log(xs[e]) - math.log(xs[o]))
    want = math.log(ys[e]) + slope * (math.log(x) - math.log(xs[e]))
    assume(abs(want) < 600)  # a representable float
    v = loglog(x, xs, ys, below=EXTRAPOLATE, above=EXTRAPOLATE)
    assert v is not None and v > 0
    assert math.log(v) == pytest.approx(want, rel=1e-9, abs=1e-9)


# -- every caller keeps its behaviour (shipped h200 tables) -------------------------------------------------
@pytest.fixture(scope="module")
def h200():
    return load_profile("h200")


def _gemm(n, k, m):
    return Op("g", OpClass.GEMM, LaunchPath.EAGER_GEMM, 2.0 * m * n * k, 2.0 * (m * k + n * k + m * n),
              (("m", m), ("n", n), ("k", k)))


def test_costs_gemm_and_curves_refuse_outside(h200):
    cm = CostModel(h200)
    t = h200.device.tables.gemm[1]
    for m in (t.m[0], 3, 100, t.m[-1]):
        assert cm.table_s(_gemm(t.n, t.k, m)) == _legacy_costs(m, t.m, t.us) * US
    assert cm.table_s(_gemm(t.n, t.k, t.m[-1] + 1)) is None
    c = h200.device.tables.elementwise
    for b in (c.bytes[0], 1e5, 3.3e6, c.bytes[-1]):
        op = Op("e", OpClass.ELEMENTWISE, LaunchPath.EAGER_ELEMENTWISE, 0.0, b)
        assert cm.table_s(op) == _legacy_costs(b, c.bytes, c.us) * US
    for b in (c.bytes[0] / 2, c.bytes[-1] * 2):
        assert cm.table_s(Op("e", OpClass.ELEMENTWISE, LaunchPath.EAGER_ELEMENTWISE, 0.0, b)) is None


def test_dtype_fp8_refuses_outside(h200):
    tb = h200.device.tables
    g = tb.gemm_fp8[0]
    for m in (1, 3, 700, g.m[-1]):
        assert dtype.fp8_gemm_us(tb, g.n, g.k, m) == _legacy_dtype(m, g.m, g.us)
    assert dtype.fp8_gemm_us(tb, g.n, g.k, g.m[-1] + 1) is None
    r = sorted(tb.fp8_quant, key=lambda r: r.k)
    assert dtype.quant_us(tb, 1, 100, r[0].k) == _legacy_dtype(100, r[0].m, r[0].absmax_us)
    a, c = _legacy_dtype(100, r[0].m, r[0].scale_cast_us), _legacy_dtype(100, r[1].m, r[1].scale_cast_us)
    k = (r[0].k + r[1].k) // 2
    assert dtype.quant_us(tb, 2, 100, k) == _legacy_dtype(k, [r[0].k, r[1].k], [a, c])
    assert dtype.quant_us(tb, 1, r[0].m[-1] + 1, r[0].k) is None
    assert dtype.quant_us(tb, 1, 100, r[-1].k + 1) is None


def test_moe_clamps_outside(h200):
    tb = h200.device.tables
    g = tb.grouped_gemm[0]
    for experts, tokens in ((3.5, 2.5), (0.5, 0.25), (1e3, 1e4), (g.experts[-1], g.tokens_per_expert[0])):
        col = [_legacy_moe(tokens, g.tokens_per_expert, row) for row in g.us]
        assert moe.grouped_gemm_us(tb, g.n, g.k, experts, tokens) == _legacy_moe(experts, g.experts, col)
    r = tb.moe_routing
    for b in (1, 3, 1000, 5000):
        assert moe.routing_us(tb, "topk", b) == _legacy_moe(b, r.batch, r.topk_us)


def test_policies_named_for_every_table():
    assert POLICIES["gemm.m"] == POLICIES["curve.bytes"] == POLICIES["gemm_fp8.m"] == (REFUSE, REFUSE)
    assert POLICIES["grouped_gemm.experts"] == POLICIES["moe_routing.batch"] == (CLAMP, CLAMP)
    assert POLICIES["graph_memory.capture_s"] == (CLAMP, EXTRAPOLATE)
