"""kernels.TRITON_LIKE: the `fused` recipe's hand-fused kernels are priced by the profile's Triton curves of their kind
(persistent reduction for add-RMSNorm and the q/k-norm + RoPE + cache-write kernel, pointwise for SiLU-and-mul),
every other op by its class's curve, and a profile without Triton curves keeps the class curves (round ab)."""

import pytest

import dataclasses

from simulator.model.costs import _BELOW, REFUSE, CostModel, _interp_curve
from simulator.model.kernels import TRITON_LIKE, LaunchPath, OpClass
from simulator.model.models import PRESETS
from simulator.model.profile import load_profile
from simulator.model.workload import build_step, decode


@pytest.fixture(scope="module")
def cm():
    return CostModel(load_profile("h200"))


def _fused_ops(batch=8):
    st = build_step(PRESETS["qwen3-0.6b"], decode(batch, 511), "fused", "fused")
    return {o.name: o for o in st.ops}


@pytest.mark.parametrize("name,curve", [("fused_add_rmsnorm", "triton_per"), ("fused_rope_cache_write", "triton_per"),
                                        ("silu_and_mul", "triton_poi"), ("final_add_rmsnorm", "triton_per")])
def test_fused_kernels_read_the_triton_curve_of_their_kind(cm, name, curve):
    op = _fused_ops()[name]
    assert op.path is LaunchPath.CUSTOM_OP and op.dim(TRITON_LIKE) == 1
    assert cm.curve_key(op) == curve
    c = cm._curves[curve]
    assert cm.gpu_s(op) == pytest.approx(_interp_curve(c, op.bytes, _BELOW.get(curve, REFUSE)) * 1e-6, rel=1e-12)


def test_eager_and_unmarked_custom_ops_keep_their_class_curve(cm):
    st = build_step(PRESETS["qwen3-0.6b"], decode(8, 511), "none", "reference")
    for o in st.ops:
        if o.op_class in (OpClass.ELEMENTWISE, OpClass.REDUCTION):
            assert not o.dim(TRITON_LIKE)
            assert cm.curve_key(o) in (o.op_class, "triton_poi", "triton_per", "triton_red")
            if o.path is not LaunchPath.COMPILED:
                assert cm.curve_key(o) == o.op_class


def test_a_profile_without_triton_curves_prices_them_by_class():
    cm = CostModel(load_profile("datasheet-h200"))
    op = _fused_ops()["fused_add_rmsnorm"]
    assert "triton_per" not in cm._curves
    assert cm.curve_key(op) is OpClass.REDUCTION


def test_the_triton_pricing_makes_the_fused_kernels_cheaper_than_torchs_reduction_at_decode_sizes(cm):
    op = _fused_ops(1)["fused_add_rmsnorm"]
    unmarked = dataclasses.replace(op, shape=tuple((k, v) for k, v in op.shape if k != TRITON_LIKE))
    assert cm.curve_key(unmarked) is OpClass.REDUCTION
    assert cm.gpu_s(op) < cm.gpu_s(unmarked)  # 1.6 us against torch's 2.1 us floor (the H200's round i and round b curves)
