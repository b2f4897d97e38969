"""costs.py: Inductor's kernels (`triton_poi:` / `triton_per:` / `triton_red:` on the compiled path) priced by the
profile's measured Triton curves (device.tables.triton_*), every other op by its class's curve, and the batched
pricing paths (`prime`, `prime_column`) bitwise equal to `gpu_s` for them."""

from __future__ import annotations

import copy
import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.setup import resolve
from simulator.model.costs import CostModel
from simulator.model.kernels import LaunchPath, Op, OpClass
from simulator.model.profile import parse_profile

US = 1e-6


def _curve(us):
    return {"bytes": [1e3, 1e6, 1e9], "us": list(us)}


def _model(with_triton=True) -> CostModel:
    """A fresh CostModel (its memos empty) of the test profile."""
    return CostModel(_profile(with_triton))


@functools.cache
def _profile(with_triton: bool):
    """h200 with hand-set curves (parsed once: ~70 ms a parse, and the property tests take fresh cost models per
    example; a CostModel keeps its memos to itself and never writes its profile)."""
    p, _, _ = resolve("h200")
    raw = copy.deepcopy(p.model_dump(mode="json"))
    t = raw["device"]["tables"]
    t["elementwise"], t["reduction"] = _curve((4.0, 8.0, 400.0)), _curve((5.0, 9.0, 500.0))
    for k in ("triton_pointwise", "triton_reduction", "triton_reduction_loop"):
        t.pop(k, None)
    if with_triton:
        t["triton_pointwise"], t["triton_reduction"] = _curve((1.0, 2.0, 100.0)), _curve((1.5, 3.0, 150.0))
        t["triton_reduction_loop"] = {"bytes": [1e4, 1e6, 1e9], "us": [2.5, 5.0, 250.0]}  # a grid that starts higher
    return parse_profile(raw)


def _op(name, cls, path=LaunchPath.COMPILED, nbytes=1e6):
    return Op(name, cls, path, 0.0, nbytes, (("numel", 10),))


def test_each_triton_kind_takes_its_curve_at_a_grid_point():
    cm = _model()
    assert cm.gpu_s(_op("triton_poi:silu+mul", OpClass.ELEMENTWISE)) == pytest.approx(2.0 * US, rel=1e-12)
    assert cm.gpu_s(_op("triton_poi:cat", OpClass.COPY)) == pytest.approx(2.0 * US, rel=1e-12)
    assert cm.gpu_s(_op("triton_per:norm", OpClass.REDUCTION)) == pytest.approx(3.0 * US, rel=1e-12)
    assert cm.gpu_s(_op("triton_red:norm", OpClass.REDUCTION)) == pytest.approx(5.0 * US, rel=1e-12)


def test_ops_that_are_not_inductors_kernels_keep_their_class_curve():
    cm = _model()
    assert cm.gpu_s(_op("mul", OpClass.ELEMENTWISE, LaunchPath.EAGER_ELEMENTWISE)) == pytest.approx(8.0 * US)
    # a trace kernel's name (underscore, no colon) and a colon name on the eager path are not Inductor's pass output
    assert cm.gpu_s(_op("triton_poi_fused_mul_0", OpClass.ELEMENTWISE)) == pytest.approx(8.0 * US)
    assert cm.gpu_s(_op("triton_per:norm", OpClass.REDUCTION, LaunchPath.EAGER_REDUCTION)) == pytest.approx(9.0 * US)


def test_a_profile_without_triton_curves_prices_them_as_before():
    cm = _model(with_triton=False)
    assert cm.gpu_s(_op("triton_poi:silu+mul", OpClass.ELEMENTWISE)) == pytest.approx(8.0 * US)
    assert cm.gpu_s(_op("triton_per:norm", OpClass.REDUCTION)) == pytest.approx(9.0 * US)


def test_looped_reductions_fall_back_to_the_persistent_curve():
    p, _, _ = resolve("h200")
    raw = copy.deepcopy(p.model_dump(mode="json"))
    raw["device"]["tables"]["triton_reduction"] = _curve((1.5, 3.0, 150.0))
    raw["device"]["tables"].pop("triton_reduction_loop", None)
    cm = CostModel(parse_profile(raw))
    assert cm.gpu_s(_op("triton_red:norm", OpClass.REDUCTION)) == pytest.approx(3.0 * US)


_NAMES = st.sampled_from([("triton_poi:a", OpClass.ELEMENTWISE, LaunchPath.COMPILED),
                          ("triton_poi:c", OpClass.COPY, LaunchPath.COMPILED),
                          ("triton_per:n", OpClass.REDUCTION, LaunchPath.COMPILED),
                          ("triton_red:n", OpClass.REDUCTION, LaunchPath.COMPILED),
                          ("mul", OpClass.ELEMENTWISE, LaunchPath.EAGER_ELEMENTWISE),
                          ("mean", OpClass.REDUCTION, LaunchPath.EAGER_REDUCTION)])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_NAMES, st.floats(min_value=1.0, max_value=1e12)), min_size=1, max_size=12))
def test_prime_is_gpu_s_bitwise_for_triton_and_eager_ops(items):
    ops = [_op(n, c, p, b) for (n, c, p), b in items]
    fresh = _model()
    want = [fresh.gpu_s(o) for o in ops]
    got, _ = _model().prime(ops)
    assert got == want


@settings(max_examples=40, deadline=None)
@given(_NAMES, st.lists(st.floats(min_value=1.0, max_value=1e12), min_size=1, max_size=8))
def test_prime_column_is_gpu_s_bitwise(name, sizes):
    n, c, p = name
    ops = [_op(n, c, p, b) for b in sizes]
    want = [_model().gpu_s(o) for o in ops]
    got, _ = _model().prime_column(ops[0], lambda f: [o.bytes for o in ops] if f == "bytes" else None,
                                   lambda j: ops[j], len(ops))
    assert got == want


def test_triton_curves_clamp_below_their_grid_and_refuse_above():
    """tables.POLICIES["triton_curve.bytes"]: below the smallest measured kernel the floor (a looped reduction of a
    4096-wide row at batch 1 is smaller than round i's smallest, one row of 8192); above the grid the roofline; the
    eager curves refuse both sides (roofline), as before."""
    from simulator.model.tables import CLAMP, POLICIES, REFUSE

    assert POLICIES["triton_curve.bytes"] == (CLAMP, REFUSE)
    cm = _model()
    # a looped reduction below its own grid takes the persistent points (costs._looped_curve), clamped at their floor
    assert cm.gpu_s(_op("triton_red:norm", OpClass.REDUCTION, nbytes=10.0)) == pytest.approx(1.5 * US, rel=1e-12)
    assert cm.gpu_s(_op("triton_red:norm", OpClass.REDUCTION, nbytes=1e4)) == pytest.approx(2.5 * US, rel=1e-12)
    assert 1.5 * US < cm.gpu_s(_op("triton_red:norm", OpClass.REDUCTION, nbytes=3e3)) < 2.5 * US
    big = _op("triton_poi:a", OpClass.ELEMENTWISE, nbytes=1e12)
    assert cm.gpu_s(big) == cm.roofline_s(big)
    small = _op("mul", OpClass.ELEMENTWISE, LaunchPath.EAGER_ELEMENTWISE, nbytes=10.0)
    assert cm.gpu_s(small) == cm.roofline_s(small)
    got, _ = _model().prime([_op("triton_red:norm", OpClass.REDUCTION, nbytes=10.0), small])
    assert got == [cm.gpu_s(_op("triton_red:norm", OpClass.REDUCTION, nbytes=10.0)), cm.gpu_s(small)]
