"""Speculative decoding: the acceptance model, verify-step shapes (StepShape.q_len), verify-attention costs from
q_len tables (and the refusal without them), and the draft's steps (simulator/model/spec.py)."""

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from simulator.model.costs import CostError, CostModel
from simulator.model.kernels import OpClass
from simulator.model.models import PRESETS
from simulator.model.profile import load_profile, parse_profile
from simulator.model.spec import (Acceptance, SpecError, closed_form, draft_for, draft_loop, draft_step,
                                  kv_slots_per_step)
from simulator.model.workload import StepShape, WorkloadError, build_step, decode

QWEN = PRESETS["qwen3-0.6b"]
Q8 = PRESETS["qwen3-8b"]


# -- acceptance ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("a,k,want", [
    (0.0, 3, 1.0),  # nothing accepted: the target's own token only
    (1.0, 3, 4.0),  # all accepted: k + 1
    (0.5, 1, 1.5),  # 1 + 0.5
    (0.5, 2, 1.75),  # 1 + 0.5 + 0.25 = (1 - 0.125) / 0.5
    (0.8, 3, 2.952),  # 1 + 0.8 + 0.64 + 0.512
    (0.6, 4, 2.3056),  # 1 + 0.6 + 0.36 + 0.216 + 0.1296
])
def test_tokens_per_step_hand_computed(a, k, want):
    assert math.isclose(Acceptance.constant(a, k).tokens_per_step, want, rel_tol=1e-12)
    assert math.isclose(closed_form(a, k), want, rel_tol=1e-12)


@given(a=st.floats(0.0, 0.999999), k=st.integers(0, 16))
def test_closed_form_equals_sum(a, k):
    assert math.isclose(Acceptance.constant(a, k).tokens_per_step, (1 - a ** (k + 1)) / (1 - a), rel_tol=1e-9)


def test_a_to_one_limit():
    for k in (1, 2, 4, 8):
        assert closed_form(1.0, k) == k + 1
        assert math.isclose(closed_form(1 - 1e-9, k), k + 1, rel_tol=1e-6)


def test_per_position_hand_computed():
    acc = Acceptance.per_position([0.9, 0.5, 0.2], k=3)
    # 1 + 0.9 + 0.9*0.5 + 0.9*0.5*0.2 = 1 + 0.9 + 0.45 + 0.09
    assert math.isclose(acc.tokens_per_step, 2.44)
    assert np.allclose(acc.marginal, [0.9, 0.45, 0.09])
    back = Acceptance.from_marginal([0.9, 0.45, 0.09])
    assert np.allclose(back.probs, [0.9, 0.5, 0.2])
    assert Acceptance.parse("0.9,0.5,0.2", 3) == acc
    assert Acceptance.parse(0.7, 2) == Acceptance.parse("0.7", 2) == Acceptance((0.7, 0.7))


@pytest.mark.parametrize("bad,needle", [
    (1.5, "probability in"), (-0.1, "probability in"), (float("nan"), "probability in"),
    ("0.5,x", "neither a probability"), ([0.5, 0.5], "2 per-position probabilities for spec_tokens 3"),
])
def test_acceptance_refusals(bad, needle):
    with pytest.raises(SpecError, match=needle):
        Acceptance.parse(bad, 3)
    with pytest.raises(SpecError, match="non-increasing"):
        Acceptance.from_marginal([0.5, 0.6])


def test_draws_seeded_and_bounded():
    acc = Acceptance.constant(0.7, 3)
    a = acc.draw(50_000, np.random.default_rng(7))
    b = acc.draw(50_000, np.random.default_rng(7))
    assert np.array_equal(a, b)
    assert a.min() >= 1 and a.max() <= 4
    # mean within 4 standard errors of the closed form (seeded: deterministic)
    se = a.std() / math.sqrt(a.size)
    assert abs(a.mean() - closed_form(0.7, 3)) < 4 * se
    assert (Acceptance.constant(0.0, 3).draw(100, np.random.default_rng(1)) == 1).all()
    assert (Acceptance.constant(1.0, 3).draw(100, np.random.default_rng(1)) == 4).all()
    # the distribution: P(tokens = j + 1) = a^j (1 - a) for j < k, a^k for j = k
    counts = np.bincount(a, minlength=5)[1:] / a.size
    want = [0.3, 0.7 * 0.3, 0.49 * 0.3, 0.343]
    assert np.allclose(counts, want, atol=0.01)


def test_kv_slots():
    assert kv_slots_per_step(0) == 1 and kv_slots_per_step(3) == 4


# -- verify step shapes ---------------------------------------------------------------------------------------------

def test_q_len_one_is_plain_decode():
    a, b = build_step(QWEN, decode(8, 512), "fused"), build_step(QWEN, StepShape(8, 512, q_len=1), "fused")
    assert a.ops == b.ops and a.label == b.label


def test_verify_shape_hand_computed():
    B, ctx, k = 4, 100, 3
    s = StepShape(decode_seqs=B, ctx=ctx, q_len=k + 1, padding=4)
    assert s.tokens == 4 * 4 + 4 and s.attn_tokens == 16 and s.seqs == 4
    st_ = build_step(QWEN, s, "fused")
    att = next(o for o in st_.ops if o.op_class is OpClass.ATTENTION)
    assert att.dim("q_len") == 4 and att.dim("ctx") == ctx + 4 and att.dim("batch") == 4 and att.dim("verify") == 1
    H, hd, KV = QWEN.num_attention_heads, QWEN.head_dim, QWEN.num_key_value_heads
    # query i of a sequence sees ctx + i + 1 keys: 4 * 100 + (1 + 2 + 3 + 4) = 410 pairs per sequence
    assert att.flops == 4.0 * H * hd * B * 410
    assert att.bytes == 2 * KV * hd * 2 * B * (ctx + 4) + 2 * 16 * H * hd * 2
    lm = next(o for o in st_.ops if o.name == "lm_head")
    assert lm.dim("m") == 16 + 4  # logits for every verified token and each padding row
    qkv = next(o for o in st_.ops if o.name == "qkv_proj")
    assert qkv.dim("m") == 20


def test_verify_refusals():
    with pytest.raises(WorkloadError, match="q_len"):
        build_step(QWEN, StepShape(2, 100, q_len=0), "fused")
    with pytest.raises(WorkloadError, match="mixed with prefill"):
        build_step(QWEN, StepShape(2, 100, prefill_seqs=1, prefill_len=8, q_len=3), "fused")
    with pytest.raises(WorkloadError, match=r"\+4 new"):
        build_step(QWEN, StepShape(2, QWEN.max_position_embeddings - 3, q_len=4), "fused")


# -- verify attention costs -----------------------------------------------------------------------------------------

def test_profile_without_q_len_table_refuses():
    raw = load_profile("h200").model_dump()
    raw["device"]["tables"]["attention"] = [t for t in raw["device"]["tables"]["attention"] if t["q_len"] == 1]
    cm = CostModel(parse_profile(raw, "h200-decode-only"))
    op = next(o for o in build_step(QWEN, StepShape(4, 1000, q_len=3), "fused").ops if o.op_class is OpClass.ATTENTION)
    with pytest.raises(CostError, match="no verify-attention table for q_len 3"):
        cm.gpu_s(op)
    # plain decode still costs from the q_len-1 table
    dec = next(o for o in build_step(QWEN, decode(4, 1000), "fused").ops if o.op_class is OpClass.ATTENTION)
    assert cm.gpu_s(dec) > 0


def _with_q_tables(qs_us):
    prof = load_profile("h200")
    raw = prof.model_dump()
    raw["device"]["tables"]["attention"] = [t for t in raw["device"]["tables"]["attention"] if t["q_len"] == 1]
    for q, us in qs_us.items():
        raw["device"]["tables"]["attention"].append(
            {"heads": 16, "kv_heads": 8, "head_dim": 128, "q_len": q, "batch": [1, 8], "ctx": [128, 2048],
             "us": us})
    return CostModel(parse_profile(raw, "test"))


def _att(q, b, ctx):
    # keys = ctx + q, so ask for ctx - q to land on a table point
    st_ = build_step(QWEN, StepShape(b, ctx - q, q_len=q), "fused")
    return next(o for o in st_.ops if o.op_class is OpClass.ATTENTION)


def test_q_len_table_lookup_and_interpolation():
    cm = _with_q_tables({2: [[10.0, 20.0], [30.0, 40.0]], 4: [[14.0, 24.0], [34.0, 44.0]]})
    assert math.isclose(cm.gpu_s(_att(2, 1, 128)), 10e-6)
    assert math.isclose(cm.gpu_s(_att(4, 8, 2048)), 44e-6)
    # q_len 3: halfway between the q_len 2 and 4 tables at the same (batch, ctx) point
    assert math.isclose(cm.gpu_s(_att(3, 8, 128)), 32e-6)
    with pytest.raises(CostError, match="measured q_len 2, 4"):
        cm.gpu_s(_att(5, 1, 128))


# -- the draft ------------------------------------------------------------------------------------------------------

def test_eagle_and_mtp_heads():
    from dataclasses import replace

    one = build_step(replace(Q8, num_hidden_layers=1), decode(8, 1024), "fused")
    e = draft_for(Q8, "eagle")
    assert e.model.num_hidden_layers == 1 and e.model.hidden_size == Q8.hidden_size and e.is_head
    es = draft_step(e, 8, 1024, "fused")
    assert es.kernels == one.kernels + 2  # cat + fc (2 hidden -> hidden)
    fc = next(o for o in es.ops if o.name == "draft.fc")
    assert (fc.dim("m"), fc.dim("n"), fc.dim("k")) == (8, Q8.hidden_size, 2 * Q8.hidden_size)
    m = draft_step(draft_for(Q8, "mtp"), 8, 1024, "fused")
    assert m.kernels == one.kernels + 4  # enorm, hnorm, cat, eh_proj


def test_draft_loop_shape():
    e = draft_for(Q8, "eagle")
    loop = draft_loop(e, 3, 8, 1024, "fused")
    assert [n for _, n in loop] == [1, 2]
    first = loop[0][0]
    assert first.tokens == 8 * 4  # the 1 + k verified tokens of each sequence
    assert next(o for o in first.ops if o.name == "lm_head").dim("m") == 8  # logits at the last accepted token only
    assert loop[1][0].tokens == 8
    assert [n for _, n in draft_loop(e, 1, 8, 1024, "fused")] == [1] and draft_loop(e, 0, 8, 1024, "fused") == []


def test_draft_model_and_refusals():
    d = draft_for(Q8, "qwen3-0.6b")
    assert d.kind == "model" and d.model.name == "qwen3-0.6b" and not d.is_head
    with pytest.raises(SpecError, match="vocabulary"):
        draft_for(Q8, "llama3-8b")
    with pytest.raises(SpecError, match="draft must be"):
        draft_for(Q8, " ")


def test_breakeven_acceptance():
    from simulator.model.spec import breakeven_acceptance

    assert breakeven_acceptance(3, 0.9) == 0.0 and breakeven_acceptance(3, 4.5) is None
    # cost ratio 1.75 at k = 2: 1 + a + a^2 = 1.75 -> a = 0.5
    assert math.isclose(breakeven_acceptance(2, 1.75), 0.5, abs_tol=1e-9)
    # cost ratio 1.5 at k = 1: 1 + a = 1.5
    assert math.isclose(breakeven_acceptance(1, 1.5), 0.5, abs_tol=1e-9)
    for k, r in ((3, 2.2), (4, 1.3)):
        assert math.isclose(closed_form(breakeven_acceptance(k, r), k), r, rel_tol=1e-9)


def test_heads_on_an_moe_target():
    moe = PRESETS["qwen3-30b-a3b"]
    e, m = draft_for(moe, "eagle"), draft_for(moe, "mtp")
    assert not e.model.is_moe and e.model.intermediate_size == moe.intermediate_size
    assert m.model.is_moe and m.model.num_hidden_layers == 1
    assert draft_step(e, 4, 512, "fused").kernels < draft_step(m, 4, 512, "fused").kernels


def test_steps_to_finish():
    from simulator.model.spec import steps_to_finish

    rng = np.random.default_rng(3)
    # a = 1: every step emits k + 1 tokens: ceil(out / (k + 1)); a = 0: one token a step
    assert steps_to_finish([1, 4, 5, 9, 0], Acceptance.constant(1.0, 3), rng).tolist() == [1, 1, 2, 3, 0]
    assert steps_to_finish([7, 130], Acceptance.constant(0.0, 3), rng).tolist() == [7, 130]
    acc = Acceptance.constant(0.7, 3)
    a = steps_to_finish(np.full(20_000, 200), acc, np.random.default_rng(5))
    b = steps_to_finish(np.full(20_000, 200), acc, np.random.default_rng(5))
    assert np.array_equal(a, b)
    # renewal: steps ~ output / E[tokens per step]
    assert abs(a.mean() - 200 / closed_form(0.7, 3)) < 1.0
    assert (a >= 200 / 4).all() and (a <= 200).all()


def test_shipped_h200_has_verify_tables():
    """simulator/profiles/h200.json carries round g's in-place q_len 2-8 SDPA tables in both layouts
    (calibration/build_spec.py `inplace_tables`) beside the q_len-1 decode table."""
    att = load_profile("h200").device.tables.attention
    for lay in ("reference", "hf_static"):
        qs = sorted({t.q_len for t in att if t.heads == 16 and t.q_len > 1 and t.layout == lay})
        assert qs == [2, 3, 4, 5, 6, 7, 8], lay
    assert sorted({t.q_len for t in att if t.heads == 16 and t.q_len == 1}) == [1]


def test_draft_model_of_a_sharded_target():
    from simulator.model.parallel import shard, tp_of

    t = shard(Q8, 2)
    d = draft_for(t, "qwen3-0.6b")
    assert tp_of(d.model) == 2 and d.model.num_attention_heads == 8
    h = draft_for(t, "eagle")
    assert tp_of(h.model) == 2 and h.model.num_hidden_layers == 1


def test_verify_attention_outside_the_grid_scales_the_measured_kernel():
    """Above the measured (batch, ctx) grid the verify kernel's time scales with batch and context from the grid's
    edge (never the roofline, which prices this split-KV kernel several times too fast); below it, the first point."""
    from simulator.model.costs import CostModel
    from simulator.model.kernels import LaunchPath, Op, OpClass
    from simulator.model.profile import load_profile

    cm = CostModel(load_profile("h200"))
    t = next(x for x in cm.profile.device.tables.attention if x.q_len == 4 and x.layout == "reference")

    def op(b, c):
        return Op("attn", OpClass.ATTENTION, LaunchPath.EAGER_ATTENTION, 1.0, 1.0,
                  (("batch", b), ("ctx", c), ("heads", t.heads), ("kv_heads", t.kv_heads), ("head_dim", t.head_dim),
                   ("q_len", 4), ("verify", 1)))

    B, C = t.batch[-1], t.ctx[-1]
    edge = cm.verify_attention_s(op(B, C))
    assert cm.verify_attention_s(op(2 * B, C)) == pytest.approx(2 * edge, rel=1e-12)
    assert cm.verify_attention_s(op(B, 3 * C)) == pytest.approx(3 * edge, rel=1e-12)
    assert cm.verify_attention_s(op(t.batch[0], t.ctx[0] // 2)) == pytest.approx(
        cm.verify_attention_s(op(t.batch[0], t.ctx[0])), rel=1e-12)
