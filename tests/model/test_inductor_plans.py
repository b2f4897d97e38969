"""compile_ops' plan memo (simulator/model/inductor.py `_Plan`): a list whose scheduler-relevant sizes are a
memoised plan's scaled by one factor reuses the plan's decisions; the kernels it gives must be exactly those a
fresh schedule of that list gives, for every implementation, family, batch, context, mixed batch and dynamic."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.model import inductor as I
from simulator.model.kernels import LaunchPath as P
from simulator.model.kernels import Op, OpClass
from simulator.model.models import PRESETS, load_model
from simulator.model.workload import StepShape, build_step, decode
from tests.paths import ROOT

HF = ROOT / "calibration" / "configs" / "hf"
DENSE = sorted(n for n, m in PRESETS.items() if not m.is_moe)
CONFIGS = sorted(p.name for p in HF.glob("*.json"))


def fresh(ops, dynamic, **kw):
    I.clear_plans()
    return I.compile_ops(ops, dynamic, **kw)


def _eager(model, shape, impl):
    return build_step(model, shape, "none", impl).ops


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DENSE + CONFIGS), st.sampled_from(["reference", "hf"]), st.booleans(),
       st.lists(st.integers(1, 300), min_size=2, max_size=4), st.sampled_from([64, 511, 1024]),
       st.integers(0, 2), st.integers(2, 4))
def test_reused_plan_equals_a_fresh_schedule(name, impl, dynamic, batches, ctx, prefill, layers):
    model = PRESETS[name] if name in PRESETS else load_model(str(HF / name))
    model = replace(model, num_hidden_layers=layers)
    if impl == "hf":
        prefill = 0  # hf models decode steps only
    I.clear_plans()
    for b in batches:
        shape = StepShape(decode_seqs=b, ctx=ctx, prefill_seqs=1 if prefill else 0, prefill_len=16 * prefill)
        ops = _eager(model, shape, impl)
        got = I.compile_ops(ops, dynamic)  # reuses the previous batch's plan where it fits
        plans = dict(I._PLANS)
        assert got == fresh(ops, dynamic), (name, impl, b)
        I._PLANS.clear()
        I._PLANS.update(plans)


def test_batches_of_one_step_share_one_plan():
    """The sweep's case: the reference qwen3-0.6b decode step at every batch is scheduled once per op-list structure:
    two here, batches 1-8 (cuDNN's split-KV reduce in every layer: batch x 8 kv heads <= 64, 1,025 keys) and 9 up
    (none); each plan serves every batch of its structure."""
    m = PRESETS["qwen3-0.6b"]
    I.clear_plans()
    plans = []
    for group in ((1, 2, 3, 8), (9, 16, 64, 255, 512)):
        first = _eager(m, decode(group[0], 1024), "reference")
        I.compile_ops(first, False)
        (plan,) = [p for p in I._PLANS.values() if p not in plans]
        plans.append(plan)
        for b in group[1:]:
            ops = _eager(m, decode(b, 1024), "reference")
            assert plan.fits(ops)
            I.compile_ops(ops, False)
            assert list(I._PLANS.values()) == plans


def _ew(name, elems):
    return Op(name, OpClass.ELEMENTWISE, P.EAGER_ELEMENTWISE, float(elems), float(4 * elems))


def _red(name, elems):
    return Op(name, OpClass.REDUCTION, P.EAGER_REDUCTION, float(elems), float(6 * elems))


def test_sizes_that_change_a_decision_do_not_reuse_the_plan():
    """Two reductions fuse when their numel and rnumel match: at sizes where they stop matching (not one common
    factor), the plan does not fit and the list is scheduled again (two kernels, not one)."""
    reads = [(), (0,)]
    same = [_red("a.x", 64), _red("b.y", 64)]
    other = [_red("a.x", 64), _red("b.y", 48)]
    I.clear_plans()
    assert len(I.compile_ops(same, False, reads=reads)) == 1
    (plan,) = I._PLANS.values()
    assert not plan.fits(tuple(other))
    assert len(I.compile_ops(other, False, reads=reads)) == 2 == len(fresh(other, False, reads=reads))
    scaled = [_red("a.x", 192), _red("b.y", 192)]
    I.clear_plans()
    I.compile_ops(same, False, reads=reads)
    (plan,) = I._PLANS.values()
    assert plan.fits(tuple(scaled))
    assert I.compile_ops(scaled, False, reads=reads) == fresh(scaled, False, reads=reads)


def test_non_integer_sizes_are_never_reused():
    ops = [_red("n.mean", 10), _ew("n.mul", 2.5)]
    I.clear_plans()
    I.compile_ops(ops, False, reads=[(), (0,)])
    (plan,) = I._PLANS.values()
    assert plan.flops is None and not plan.fits(tuple(ops))


@pytest.mark.parametrize("b", [1, 16])
def test_threshold_tests_are_made_again_at_each_size(b):
    """What a plan cannot carry over (GEMM m > 1 materializing the rotary broadcast copy, rows > 1 for the
    persistent threshold) is tested at each list's own sizes: batch 16 after a batch-1 plan, and the reverse."""
    m = replace(PRESETS["qwen3-0.6b"], num_hidden_layers=2)
    other = 17 - b
    I.clear_plans()
    I.compile_ops(_eager(m, decode(other, 512), "reference"), False)
    ops = _eager(m, decode(b, 512), "reference")
    got = I.compile_ops(ops, False)
    assert got == fresh(ops, False)
    assert any(o.name.endswith("expand_copy") for o in got) == (b > 1)
