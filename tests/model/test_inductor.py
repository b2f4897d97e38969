"""Inductor as a fusion model (simulator/model/inductor.py): hand-built op lists with their exact fused
output, properties over random op graphs, and the reference decoder against Inductor's measured kernels
(calibration/measured/h200-round-a: torch 2.11 on the H200, qwen3-0.6b, 28 layers, batch 1 and 16,
dynamic False and True)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.model.costs import CostModel
from simulator.model.inductor import DYNAMIC_WRAPPER_EXTRA_US, InductorError, compile_ops, infer_reads
from simulator.model.kernels import LaunchPath as P
from simulator.model.kernels import Op, OpClass
from simulator.model.models import PRESETS
from simulator.model.profile import load_profile
from simulator.model.workload import build_step, decode
from tests.paths import ROOT

QWEN = PRESETS["qwen3-0.6b"]
LLAMA = PRESETS["llama3-8b"]
MEASURED = ROOT / "calibration" / "measured" / "h200-round-a"


def ew(name, elems, in_b=2, out_b=2, cls=OpClass.ELEMENTWISE):
    return Op(name, cls, P.EAGER_ELEMENTWISE, float(elems), float(elems * (in_b + out_b)))


def red(name, elems, in_b, out_b):
    return Op(name, OpClass.REDUCTION, P.EAGER_REDUCTION, float(elems), float(elems * (in_b + out_b)))


def gemm(name, m, n, k):
    return Op(name, OpClass.GEMM, P.EAGER_GEMM, 2.0 * m * n * k, 2.0 * (m * k + n * k + m * n),
              (("k", k), ("m", m), ("n", n)))


def view(name):
    return Op(name, OpClass.VIEW, P.EAGER_VIEW)


def kernels(ops):
    return sum(o.launches_kernel for o in ops)


# -- hand-built lists, exact output ----------------------------------------------------------------
def test_pointwise_chain_is_one_kernel_reading_inputs_writing_the_output():
    a, b = ew("a", 100), ew("b", 100)
    (k,) = compile_ops([a, b], dynamic=False, reads=[(), (0,)])
    # a reads a graph input (400/2 = 200 bytes), b's output is the graph output (200); a's output stays in registers
    assert k == Op("triton_poi:a+b", OpClass.ELEMENTWISE, P.COMPILED, 200.0, 400.0,
                   (("numel", 100), ("persistent", 0), ("rnumel", 0)))


def test_extern_breaks_fusion_and_keeps_its_place():
    a, g, b = ew("a", 100), gemm("g", 10, 10, 10), ew("b", 100)
    out = compile_ops([a, g, b], dynamic=False, reads=[(), (0,), (1,)])
    assert [o.name for o in out] == ["triton_poi:a", "g", "triton_poi:b"]
    assert out[1] == replace(g, path=P.COMPILED_EXTERN)
    assert out[0].bytes == 400.0  # reads its input (200), writes the GEMM's input (200)
    assert out[2].bytes == 2 * 10 * 10 + 200.0  # reads the GEMM's 10x10 bf16 output, writes its own


def test_rmsnorm_is_one_persistent_reduction_and_views_vanish():
    """HF RMSNorm (8 eager kernels) on 4 rows x 8 cols before a GEMM: one Triton reduction."""
    E, rows = 32, 4
    ops = [view("n.view"), ew("n.to_fp32", E, 2, 4, OpClass.COPY), ew("n.pow", E, 4, 4), red("n.mean", E, 4, 4 / 8),
           ew("n.add_eps", rows, 4, 4), ew("n.rsqrt", rows, 4, 4), ew("n.mul", E, 4 + 4 / 8, 4),
           ew("n.to_bf16", E, 4, 2, OpClass.COPY), ew("n.mul_weight", E, 2, 2), view("x.view"), gemm("g", rows, 8, 8)]
    reads = [(), (), (1,), (2,), (3,), (4,), (5, 1), (6,), (7,), (), (8,)]
    out = compile_ops(ops, dynamic=False, reads=reads)
    assert [o.name for o in out] == ["triton_per:n", "g"]
    k = out[0]
    assert k.op_class is OpClass.REDUCTION and k.path is P.COMPILED
    assert dict(k.shape) == {"numel": 32, "rnumel": 8, "persistent": 1}
    assert k.flops == sum(o.flops for o in ops[1:9])
    # reads the input (to_fp32's 192 bytes over one input and one output: 96), writes mul_weight's output (64)
    assert k.bytes == 96.0 + 64.0
    # the same list named as workload.py names it infers the same reads
    assert compile_ops(ops, dynamic=False) == out


def test_size_mismatch_does_not_fuse():
    a, g, b = ew("a", 100), gemm("g", 10, 10, 10), ew("b", 50)
    out = compile_ops([a, g, b], dynamic=False, reads=[(), (0,), (0,)])
    # b reads only a, so it is launched as soon as a is done, before the GEMM
    assert [o.name for o in out] == ["triton_poi:a", "triton_poi:b", "g"]


def test_no_fusion_through_an_extern_cycle():
    """c reads p and the GEMM of p: fusing p and c would make their kernel wait for itself."""
    p, g, c = ew("p", 100), gemm("g", 10, 10, 10), ew("c", 100)
    out = compile_ops([p, g, c], dynamic=False, reads=[(), (0,), (0, 1)])
    assert [o.name for o in out] == ["triton_poi:p", "g", "triton_poi:c"]


def test_scatter_store_fuses_with_its_producers_and_dynamic_splits_the_reduction():
    """k-norm (a reduction), RoPE-k (pointwise) and the KV-cache index_copy_ (a scatter store)."""
    E = 32
    ops = [gemm("k_proj", 4, 8, 8), red("k_norm.mean", E, 2, 4 / 8), ew("rope_k.mul", E, 4, 2),
           Op("cache_write_k", OpClass.COPY, P.EAGER_COPY, E, E * 4.0)]
    reads = [(), (0,), (1, 0), (2,)]
    static = compile_ops(ops, dynamic=False, reads=reads)
    assert [o.name for o in static] == ["k_proj", "triton_red:k_norm+rope_k+cache_write_k"]
    dyn = compile_ops(ops, dynamic=True, reads=reads)
    assert [o.name for o in dyn] == ["k_proj", "triton_red:k_norm", "triton_poi:rope_k+cache_write_k"]
    assert all(o.dim("dynamic") == 1 for o in dyn if o.path is P.COMPILED)
    assert sum(o.flops for o in static) == sum(o.flops for o in dyn) == sum(o.flops for o in ops)


def test_cache_write_of_an_extern_output_is_its_own_kernel():
    ops = [gemm("v_proj", 4, 8, 8), Op("cache_write_v", OpClass.COPY, P.EAGER_COPY, 32.0, 128.0)]
    out = compile_ops(ops, dynamic=False)
    assert [(o.name, o.op_class, o.path) for o in out] == [
        ("v_proj", OpClass.GEMM, P.COMPILED_EXTERN), ("triton_poi:cache_write_v", OpClass.COPY, P.COMPILED)]
    assert out[1].bytes == 2 * 4 * 8 + 64.0  # reads the GEMM's output, writes the cache rows


def test_embedding_gather_fuses_into_the_following_pointwise():
    e = Op("embedding", OpClass.EMBEDDING, P.EAGER_EMBEDDING, 0.0, 100.0)
    x = ew("x", 50)
    out = compile_ops([e, x, gemm("g", 5, 10, 10)], dynamic=False, reads=[(), (0,), (1,)])
    assert [o.name for o in out] == ["triton_poi:embedding+x", "g"]
    assert out[0].bytes == 100.0 + 100.0  # the gathered rows in, x's output (200 / 2) out


def test_reused_value_reading_many_buffers_is_stored_not_recomputed():
    """Inductor's realize_reads_threshold (4): a value with two readers whose body reads five buffers gets
    a buffer; the reader that cannot join its kernel (a GEMM of the first reader in between) reads it."""
    def case(sources):
        src = [ew(f"s{i}", 100) for i in range(sources)]
        t, a, g, c = ew("t", 100, 2 * sources, 2), ew("a", 100), gemm("g", 10, 10, 10), ew("c", 100, 16, 2)
        n = sources
        return compile_ops(src + [t, a, g, c], dynamic=False,
                           reads=[()] * n + [tuple(range(n)), (n,), (n + 1,), (n, n + 2)])

    five = case(5)
    assert [o.name for o in five] == ["triton_poi:s0+s1+s2+s3+s4+t+a", "g", "triton_poi:c"]
    # c reads t's buffer (t's 1200 bytes over 5 inputs + output: 200), the GEMM output (200), writes 600
    # (c's 1800 bytes over its 2 inputs + output)
    assert five[-1].bytes == 200.0 + 200.0 + 600.0
    four = case(4)
    assert [o.name for o in four] == ["triton_poi:s0+s1+s2+s3+t+a", "g", "triton_poi:c"]
    # below the threshold c recomputes t from the four sources (200 bytes each) instead of reading a buffer
    assert four[-1].bytes == 4 * 200.0 + 200.0 + 600.0


def test_hf_style_attention_inputs_with_a_feeds_table():
    """transformers' Qwen3 attention (static cache, SDPA): besides the cache writes, repeat_kv copies of the whole
    K and V caches and an attention-mask build feed SDPA. The copies read the cache the scatter wrote (another
    index: they cannot join it) and share no read with each other: one kernel each; the mask (fill, fill,
    where on no listed input) is one kernel, launched first since it waits for nothing."""
    B, KV, hd, ctx, G = 1, 2, 8, 16, 2
    E, C = B * KV * hd, B * KV * hd * ctx * G
    ops = [gemm("k_proj", B, KV * hd, 32), red("k_norm.mean", E, 2, 4 / hd), ew("k_norm.add_eps", E // hd, 4, 4),
           ew("k_norm.mul_weight", E), view("rope_k.slice"), ew("rope_k.mul_cos", E), ew("rope_k.add", E),
           Op("cache_write_k", OpClass.COPY, P.EAGER_COPY, E, E * 4.0), gemm("v_proj", B, KV * hd, 32),
           Op("cache_write_v", OpClass.COPY, P.EAGER_COPY, E, E * 4.0),
           ew("repeat_k", C, 2, 2, OpClass.COPY), ew("repeat_v", C, 2, 2, OpClass.COPY),
           ew("mask.fill", ctx, 0, 1), ew("mask.fill_pad", ctx, 1, 1), ew("mask.where", ctx, 1, 2),
           Op("attention", OpClass.ATTENTION, P.EAGER_ATTENTION, 1.0, 1.0, (("batch", B), ("head_dim", hd), ("heads", 4)))]
    feeds = {"repeat_k": ("cache_write_k",), "repeat_v": ("cache_write_v",), "mask": (),
             "attention": ("cache_write_k", "repeat_k", "repeat_v", "mask")}
    out = compile_ops(ops, dynamic=False, feeds=feeds)
    assert [o.name for o in out] == [
        "triton_poi:mask", "k_proj", "triton_per:k_norm+rope_k+cache_write_k", "triton_poi:repeat_k", "v_proj",
        "triton_poi:cache_write_v", "triton_poi:repeat_v", "attention"]
    with pytest.raises(InductorError, match="not both"):
        compile_ops(ops, dynamic=False, feeds=feeds, reads=[()] * len(ops))


def test_hf_recipe_names_are_wired_by_default():
    """recipes.py's hf layer names (StaticCache: cache.arange / pos_add / pos_add_ then index_copy_k / _v; repeat_kv;
    SDPA's mask), as Inductor compiled transformers 5.17 (round f): the in-place position add_ is stored back by
    its own kernel (measured `triton_poi_fused_add_copy_`), K's scatter joins k-norm + RoPE-k, V's is its own
    kernel (the two share the position read but, storing into mutated buffers, stay apart), each repeat_kv copy
    one kernel, the mask one kernel."""
    B, KV, hd, slots = 1, 2, 8, 16
    E, C = B * KV * hd, B * KV * 2 * hd * slots
    ops = [gemm("k_proj", B, KV * hd, 32), red("k_norm.mean", E, 2, 4 / hd), ew("k_norm.add_eps", E // hd, 4, 4),
           ew("k_norm.mul_weight", E), gemm("v_proj", B, KV * hd, 32), view("rope.unsqueeze"),
           ew("rope_k.mul_cos", E), ew("rope_k.add", E),
           ew("cache.arange", 1, 0, 8), ew("cache.pos_add", 1, 8, 8), ew("cache.pos_add_", 1, 8, 8),
           Op("cache.index_copy_k", OpClass.COPY, P.EAGER_COPY, E, E * 4.0),
           Op("cache.index_copy_v", OpClass.COPY, P.EAGER_COPY, E, E * 4.0),
           view("repeat_kv_k.expand"), ew("repeat_kv_k", C, 1, 2, OpClass.COPY),
           view("repeat_kv_v.expand"), ew("repeat_kv_v", C, 1, 2, OpClass.COPY),
           ew("sdpa.mask_fill", 1, 0, 2), ew("sdpa.mask_fill", 1, 0, 2), ew("sdpa.mask_where", slots, 1, 2),
           Op("attention", OpClass.ATTENTION, P.EAGER_ATTENTION, 1.0, 1.0, (("batch", B), ("head_dim", hd), ("heads", 4)))]
    R = infer_reads(ops)
    i = {o.name: n for n, o in enumerate(ops)}
    assert R[i["cache.index_copy_k"]] == (i["rope_k.add"], i["cache.pos_add_"])
    assert R[i["cache.index_copy_v"]] == (i["v_proj"], i["cache.pos_add_"])
    assert R[i["cache.arange"]] == ()
    assert R[i["attention"]] == (i["repeat_kv_k"], i["repeat_kv_v"], i["sdpa.mask_where"])
    assert [o.name for o in compile_ops(ops, dynamic=False)] == [
        "triton_poi:cache", "triton_poi:sdpa", "k_proj", "triton_per:k_norm+rope_k+cache", "triton_poi:repeat_kv_k",
        "v_proj", "triton_poi:cache", "triton_poi:repeat_kv_v", "attention"]
    # a transformers list (it has an input_layernorm) launches the same kernels with dynamic=True: the
    # dynamic sizes never reach the StaticCache's tensors (marked static) or the module's parameters
    hf = [ew("input_layernorm.mul_weight", E)] + ops
    assert compile_ops(hf, dynamic=True) == tuple(replace(o, shape=tuple(sorted(dict(o.shape, dynamic=1).items())))
                                                  if o.path is P.COMPILED else o for o in compile_ops(hf, dynamic=False))
    assert [o.name for o in compile_ops(hf, dynamic=True, dynamic_inputs=True)].count("triton_per:k_norm") == 1


def test_graph_break_keeps_the_op_eager_and_splits_the_regions():
    a, c = ew("a", 100), ew("c", 100)
    b = Op("b", OpClass.ELEMENTWISE, P.EAGER_ELEMENTWISE, 100.0, 400.0, (("graph_break", 1),))
    out = compile_ops([a, b, c], dynamic=False, reads=[(), (0,), (1,)])
    assert [o.name for o in out] == ["triton_poi:a", "b", "triton_poi:c"] and out[1] is b


def test_horizontal_fusion_needs_a_common_read_of_equal_size():
    """Two independent kernels reading the same GEMM output: one kernel when their sizes match; two when the
    sizes differ, when they read slices of it (a split view: other indices), or when they share no read."""
    g = gemm("g", 4, 16, 8)
    def two(n_b, split=False, share=True):
        ops = [g] + ([view("g2.split")] if split else []) + [gemm("h", 4, 16, 8), ew("a", 64), ew("b", n_b)]
        o = len(ops) - 4
        reads = [()] * (o + 2) + [(0,), ((0,) if share else (o + 1,))]
        return [x.name for x in compile_ops(ops, dynamic=False, reads=reads) if x.path is P.COMPILED]
    assert two(64) == ["triton_poi:a+b"]
    assert two(32) == ["triton_poi:a", "triton_poi:b"]
    assert two(64, split=True) == ["triton_poi:a", "triton_poi:b"]
    assert two(64, share=False) == ["triton_poi:a", "triton_poi:b"]


def test_kernels_storing_into_mutated_buffers_do_not_fuse_horizontally():
    """Measured (round f, transformers llama3-8b): the K and V cache writes both read the cache position and have
    equal sizes, yet stay two kernels. So with MHA (RoPE-q and RoPE-k + K cache write equal in size, both reading
    cos/sin) the pass keeps 14 kernels per layer, as with GQA (not measured)."""
    g = gemm("g", 4, 16, 8)
    ops = [g, gemm("h", 4, 16, 8), Op("cache_write_k", OpClass.COPY, P.EAGER_COPY, 64.0, 256.0),
           Op("cache_write_v", OpClass.COPY, P.EAGER_COPY, 64.0, 256.0)]
    out = compile_ops(ops, dynamic=False, reads=[(), (), (0,), (0,)])
    assert [o.name for o in out if o.path is P.COMPILED] == ["triton_poi:cache_write_k", "triton_poi:cache_write_v"]
    mha = replace(LLAMA, num_key_value_heads=LLAMA.num_attention_heads)
    assert _per_layer(mha, False) == 14


def test_opaque_ops_pass_through_unchanged():
    quant = Op("fp8_quant.absmax.norm", OpClass.REDUCTION, P.EAGER_REDUCTION, 32.0, 64.0, (("quant", 1),))
    fixed = Op("traced", OpClass.ELEMENTWISE, P.EAGER_ELEMENTWISE, fixed_gpu_s=1e-6)
    assert compile_ops([quant, fixed], dynamic=False) == (quant, fixed)


def test_bad_reads_are_refused_naming_the_op():
    with pytest.raises(InductorError, match=r"reads\[1\] \(b\)"):
        compile_ops([ew("a", 1), ew("b", 1)], dynamic=False, reads=[(), (1,)])
    with pytest.raises(InductorError, match="2 entries for 1 ops"):
        compile_ops([ew("a", 1)], dynamic=False, reads=[(), ()])


# -- properties -------------------------------------------------------------------------------------
_CLASSES = [OpClass.ELEMENTWISE, OpClass.COPY, OpClass.REDUCTION, OpClass.GEMM, OpClass.ATTENTION, OpClass.VIEW,
            OpClass.EMBEDDING]


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 14))
    ops, reads = [], []
    for i in range(n):
        cls = draw(st.sampled_from(_CLASSES))
        elems = draw(st.sampled_from([8, 16, 64]))
        name = draw(st.sampled_from(["a", "b", "cache_write_k", "x.y", "n.mean"])) + f"{i}"
        if cls is OpClass.VIEW:
            ops.append(view(name))
        elif cls is OpClass.GEMM:
            ops.append(gemm(name, draw(st.sampled_from([1, 4])), elems, 8))
        elif cls is OpClass.ATTENTION:
            ops.append(Op(name, cls, P.EAGER_ATTENTION, 4.0 * elems, 10.0 * elems,
                          (("batch", 1), ("head_dim", 8), ("heads", 2), ("q_len", 1))))
        else:
            ops.append(Op(name, cls, P.EAGER_ELEMENTWISE, float(elems), float(elems * draw(st.sampled_from([3, 4, 6])))))
        prior = [j for j in range(i) if ops[j].op_class is not OpClass.VIEW]
        reads.append(() if cls is OpClass.VIEW or not prior else
                     tuple(sorted(set(draw(st.lists(st.sampled_from(prior), max_size=3))))))
    return ops, reads


@settings(max_examples=300, deadline=None)
@given(graphs(), st.booleans(), st.booleans())
def test_fusion_never_adds_work_or_reorders_externs(g, dynamic, named):
    ops, reads = g
    out = compile_ops(ops, dynamic=dynamic, reads=None if named else reads)
    assert kernels(out) <= kernels(ops)
    assert not any(o.op_class is OpClass.VIEW for o in out)
    ext = [o for o in ops if o.op_class in (OpClass.GEMM, OpClass.ATTENTION)]
    assert [o for o in out if o.op_class in (OpClass.GEMM, OpClass.ATTENTION)] == \
        [replace(o, path=P.COMPILED_EXTERN) for o in ext]
    assert sum(o.flops for o in out) == pytest.approx(sum(o.flops for o in ops))
    assert sum(o.bytes for o in out) <= sum(o.bytes for o in ops) * (1 + 1e-12)
    assert all(o.bytes >= 0 for o in out)
    assert compile_ops(ops, dynamic=dynamic, reads=None if named else reads) == out  # pure


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("fusion", ["none", "packed"])
def test_fusion_properties_on_every_preset_step(name, fusion):
    """The same properties on whole decode steps (3 layers) of every preset, MoE included (its routing ops and
    grouped GEMMs are table-priced: kept as they are), batches 1 and 48, a mixed prefill batch too."""
    from simulator.model.workload import StepShape

    m = replace(PRESETS[name], num_hidden_layers=3)
    for shape in (decode(1, 256), decode(48, 256), StepShape(decode_seqs=3, ctx=64, prefill_seqs=1, prefill_len=16)):
        ops = build_step(m, shape, fusion).ops
        for dyn in (False, True):
            out = compile_ops(ops, dynamic=dyn)
            assert kernels(out) < kernels(ops)
            assert [o.name for o in out if o.op_class in (OpClass.GEMM, OpClass.ATTENTION)] == \
                [o.name for o in ops if o.op_class in (OpClass.GEMM, OpClass.ATTENTION)]
            assert sum(o.flops for o in out) == pytest.approx(sum(o.flops for o in ops))
            assert sum(o.bytes for o in out) < sum(o.bytes for o in ops)


# -- the reference decoder against Inductor's measured kernels ---------------------
def _per_layer(model, fusion_or_dynamic, batch=1):
    def count(layers):
        m = replace(model, num_hidden_layers=layers)
        ops = build_step(m, decode(batch, 511), "none").ops  # the reference decoder at ctx 512: 512 keys
        return kernels(compile_ops(ops, dynamic=fusion_or_dynamic))
    return count(3) - count(2)


def test_reference_compiled_level_is_the_pass_over_none():
    """build_step(..., "compiled") of the reference is compile_ops of its `none` list (the hand table it replaced
    counted qwen3's split-K reduce of down_proj as a Triton 'k_norm': 452 where Inductor launches 424); llama3-8b's
    layer in Inductor's order (measured: each fused kernel right after the GEMM it reads)."""
    m = replace(LLAMA, num_hidden_layers=2)
    for dyn in (False, True):
        for mm, b in ((m, 1), (replace(QWEN, num_hidden_layers=2), 16)):
            assert build_step(mm, decode(b, 512), "compiled", compile_dynamic=dyn).ops == \
                compile_ops(build_step(mm, decode(b, 512), "none").ops, dynamic=dyn)
    mine = build_step(m, decode(1, 511), "compiled").ops[-16:]  # layer 1, final norm, lm_head (512 keys)
    assert [o.name for o in mine] == [
        "triton_red:residual_add+input_norm", "q_proj", "triton_poi:rope_q", "k_proj",
        "triton_poi:rope_k+cache_write_k", "v_proj", "triton_poi:cache_write_v", "attention", "o_proj",
        "triton_red:residual_add+post_norm", "gate_proj", "up_proj", "triton_poi:silu+mul", "down_proj",
        "triton_red:residual_add+final_norm", "lm_head"]
    assert {o.path for o in mine} == {P.COMPILED, P.COMPILED_EXTERN}
    assert _per_layer(LLAMA, False) == _per_layer(LLAMA, True) == 14
    assert _per_layer(QWEN, False) == 14 and _per_layer(QWEN, True) == 15


def _measured(name):
    rows = json.loads((MEASURED / name).read_text())["rows"]
    return rows[0]


@pytest.mark.parametrize("batch,dyn,fname", [(1, False, "compiled_qwen3-0.6b_b1_static.json"),
                                             (1, True, "compiled_qwen3-0.6b_b1_dyn.json"),
                                             (16, False, "compiled_qwen3-0.6b_b16_static.json"),
                                             (16, True, "compiled_qwen3-0.6b_b16_dyn.json")])
def test_reference_step_matches_inductors_measured_kernels(batch, dyn, fname):
    """Every kernel of the measured step is accounted for: Triton kernels one to one with the pass's COMPILED
    ops (per kind: persistent/looped reduction, pointwise), extern kernels with its GEMM/attention/copy ops
    plus the split-K reduce kernels the profile's GEMM table records (CostModel.step_kernels)."""
    row = _measured(fname)
    assert (row["batch"], row["dynamic"], row["ctx"]) == (batch, dyn, 512)
    # the reference decoder at ctx 512 attends 512 keys (its token written at slot 511): decode(batch, 511)
    ops = compile_ops(build_step(QWEN, decode(batch, 511), "none").ops, dynamic=dyn)
    assert CostModel(load_profile("h200")).step_kernels(ops) == row["kernels"]
    seq = [n for n, _ in row["sequence"]]
    for tag in ("per", "red", "poi"):  # batch 16 static: the first norm (it gathers the embedding) is looped
        measured = sum(n.startswith(f"triton_{tag}_") for n in seq)
        mine = sum(o.name.startswith(f"triton_{tag}:") for o in ops)
        assert mine == measured, tag
    # the order too: between the second and third attention kernels (a whole layer's tail and the next's head)
    def kind(n: str) -> str:
        for t in ("per", "red", "poi"):
            if n.startswith(f"triton_{t}_") or n.startswith(f"triton_{t}:"):
                return t
        return "attn" if "sdpa" in n or n == "attention" else "extern"

    meas_k = [kind(n) for n in seq if "splitKreduce" not in n]
    mine_k = [kind(o.name) for o in ops]
    def span(ks):
        at = [i for i, k in enumerate(ks) if k == "attn"]
        return ks[at[1]:at[2]]
    assert span(mine_k) == span(meas_k)
    splitk = sum("splitKreduce" in n for n in seq)
    gemm_like = [o for o in ops if o.path is P.COMPILED_EXTERN and o.op_class is not OpClass.ATTENTION]
    assert len(gemm_like) + splitk == row["kinds"]["gemm"] + row["kinds"].get("other", 0)
    assert sum(o.op_class is OpClass.ATTENTION for o in ops) == row["kinds"]["attention"]


ROUND_F = ROOT / "calibration" / "measured" / "h200-round-f"


def _kind(n: str) -> str:
    low = n.lower()
    for t in ("per", "red", "poi"):
        if n.startswith(f"triton_{t}"):
            return t
    if "splitkreduce" in low:
        return "splitK"
    if any(t in low for t in ("gemm", "gemv", "cutlass", "nvjet", "xmma")):
        return "gemm"
    if any(t in low for t in ("flash", "fmha", "attention", "sdpa", "cudnn")):
        return "attn"
    return "other"


def _round_f_rows():
    rows = []
    for impl in ("ref", "hf"):
        for name in ("qwen3-0.6b", "llama3-8b"):
            for r in json.loads((ROUND_F / f"compile_counts_{impl}_{name}.json").read_text())["rows"]:
                rows.append(pytest.param(r, id=f"{impl}-{name}-{'dyn' if r['dynamic'] else 'static'}-b{r['batch']}"))
    return rows


@pytest.mark.parametrize("row", _round_f_rows())
def test_round_f_inductor_kernels_of_the_reference_and_transformers(row):
    """Round f (2 layers, ctx 512, torch 2.11 / transformers 5.17): every measured kernel by kind against the pass
    on the reference `none` list and on the hf recipe (StaticCache of ctx + 128 slots). 15 of 16 rows exact; the
    miss: transformers qwen3-0.6b at batch 64 launches an aten copy for the rotary bmm's expanded operand that
    transformers llama3-8b at batch 64 does not (the pass predicts none for either; not explained)."""
    from collections import Counter

    impl, name, dyn, B = row["impl"], row["model"], row["dynamic"], row["batch"]
    if impl == "ref":
        m = replace(PRESETS[name], num_hidden_layers=2)
        # the reference decoder at ctx c attends c keys (its token at slot c - 1): decode(B, c - 1)
        ops = compile_ops(build_step(m, decode(B, row["ctx"] - 1), "none").ops, dynamic=dyn)
    else:
        from simulator.model.models import load_model

        m = replace(load_model(str(ROOT / "calibration" / "configs" / "hf" / f"{name}.json")), num_hidden_layers=2)
        ops = build_step(m, decode(B, row["ctx"]), "compiled", "hf", cache="static",
                         max_cache_len=row["ctx"] + 128, compile_dynamic=dyn).ops
    cm = CostModel(load_profile("h200"))
    mine = Counter("attn" if o.op_class is OpClass.ATTENTION or o.name == "attention.split_kv_reduce" else
                   o.name.split(":")[0][len("triton_"):] if o.path is P.COMPILED else
                   "gemm" if o.op_class is OpClass.GEMM else "other" for o in ops if o.launches_kernel)
    mine["splitK"] = cm.step_kernels(ops) - kernels(ops)
    measured = Counter()
    for n, c in row["names"].items():
        measured[_kind(n)] += c
    miss = Counter({"other": 1}) if (impl, name, B) == ("hf", "qwen3-0.6b", 64) else Counter()
    assert +mine == +(measured - miss) and measured - mine == miss
    assert cm.step_kernels(ops) == row["kernels"] - sum(miss.values())


def test_dynamic_wrapper_cost_traces_to_the_measured_host_times():
    """h200-round-b/timing.json, qwen3-0.6b batch 16 compiled eager (isolated host ms, p50), with the kernel
    counts of the same round: what dynamic=True costs per launch beyond its extra kernels."""
    rows = json.loads((ROOT / "calibration/measured/h200-round-b/timing.json").read_text())["rows"]
    host = {r["dynamic"]: r["eager"]["isolated"]["host_ms"]["p50"] for r in rows
            if r.get("fusion") == "compiled" and r["batch"] == 16}
    n = {d: json.loads((ROOT / f"calibration/measured/h200-round-b/compiled_qwen3-0.6b_b16_{t}.json").read_text())
         ["rows"][0]["kernels"] for d, t in ((False, "static"), (True, "dyn"))}
    extra_us = (host[True] - n[True] * host[False] / n[False]) / n[True] * 1000
    assert DYNAMIC_WRAPPER_EXTRA_US == pytest.approx(extra_us, rel=1e-4)
    assert 1.0 < DYNAMIC_WRAPPER_EXTRA_US < 1.5


def test_infer_reads_wires_the_reference_layer():
    ops = build_step(replace(QWEN, num_hidden_layers=1), decode(1, 512), "none").ops
    R = infer_reads(ops)
    idx = {o.name: i for i, o in enumerate(ops)}  # the last op of each name (one layer: unique enough)
    assert R[idx["attention"]] == tuple(sorted((idx["rope_q.add"], idx["cache_write_k"], idx["cache_write_v"])))
    assert R[idx["cache_write_v"]] == (idx["v_proj"],)
    assert R[idx["rope_k.mul_cos"]] == tuple(sorted((idx["k_norm.mul_weight"], idx["rotary.sin_cast"])))
    assert R[idx["down_proj"]] == (idx["mul"],)
    assert all(R[i] == () for i, o in enumerate(ops) if o.op_class is OpClass.VIEW)


@pytest.mark.parametrize("name,B", [("qwen3-0.6b", 64), ("llama3-8b", 64), ("qwen3-0.6b", 1)])
def test_repeat_kv_kernel_moves_the_whole_cache_once_and_every_repeated_slot(name, B):
    """transformers' repeat_kv under torch.compile (StaticCache, bool mask: no enable_gqa) is a Triton copy that reads
    every K (V) slot of the cache once and writes it to each of the rep query heads: bytes = B x kv x slots x hd x 2
    (read) + B x H x slots x hd x 2 (write), hand-computed. Before, the pass took the output as wide as its one
    listed input and missed the cache read: half these bytes (qwen3-0.6b b64: 126 MB of 252)."""
    from simulator.model.models import load_model

    m = replace(load_model(str(ROOT / "calibration" / "configs" / "hf" / f"{name}.json")), num_hidden_layers=2)
    slots = 512 + 128
    ops = build_step(m, decode(B, 512), "compiled", "hf", cache="static", max_cache_len=slots,
                     compile_dynamic=False).ops
    rep = [o for o in ops if o.name.startswith("triton_poi:repeat_kv")]
    H, KV, hd = m.num_attention_heads, m.num_key_value_heads, m.head_dim
    assert len(rep) == 4  # K and V, 2 layers
    want = B * KV * slots * hd * 2 + B * H * slots * hd * 2
    assert all(o.bytes == want for o in rep), (rep[0].bytes, want)
    assert {o.op_class for o in rep} == {OpClass.COPY}


def test_dynamic_cache_cat_reads_the_past_keys():
    """DynamicCache's cat (torch.cat([past, new])) under the pass: a copy of the past keys and the new one into a
    buffer of ctx + 1 keys; RoPE-k inlines into it. Hand-computed bytes: k_proj's output (16 x 2) + the eager cat's
    read (144 x 2: the cache, as the eager op counts it) + its output (144 x 2) = 608, not the new token alone."""
    ops = [gemm("k_proj", 1, 16, 32), ew("rope_k.mul_cos", 16), ew("rope_k.add", 16),
           ew("cache.cat_k", 16 * 9, 2, 2, OpClass.COPY),
           Op("attention", OpClass.ATTENTION, P.EAGER_ATTENTION, 1.0, 1.0, (("batch", 1), ("head_dim", 8), ("heads", 2)))]
    cat = [o for o in compile_ops(ops, dynamic=False) if "cache" in o.name]
    assert len(cat) == 1 and cat[0].bytes == 16 * 2 + 16 * 9 * 2 + 16 * 9 * 2


def test_compiled_verify_block_parts_stay_inside_the_measured_block():
    """A transformers verify step (q_len 3, StaticCache of 1536 slots): eager, repeat_kv and SDPA's mask kernels are
    parts of the profile's measured hf_static block and cost nothing beside it. Compiled, the Triton kernels made of
    those parts alone keep the part key, so the block is not priced twice; their launches stay."""
    from simulator.model.models import load_model

    m = replace(load_model(str(ROOT / "calibration" / "configs" / "hf" / "qwen3-0.6b.json")), num_hidden_layers=2)
    shape = replace(decode(8, 512), q_len=3)
    cm = CostModel(load_profile("h200"))
    ops = build_step(m, shape, "compiled", "hf", cache="static", max_cache_len=1536, compile_dynamic=False).ops
    parts = [o for o in ops if o.dim("verify_part")]
    assert {o.name for o in parts} >= {"triton_poi:repeat_kv_k", "triton_poi:repeat_kv_v"}
    assert all(o.path is P.COMPILED and cm.hf_verify_covered(o) and cm.gpu_s(o) == 0.0 for o in parts)
    assert not any(o.dim("verify_part") for o in ops if o.op_class is OpClass.GEMM)
