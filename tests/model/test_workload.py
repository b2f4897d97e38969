"""Workload builder: kernel counts per fusion level, shapes, configs, bad input."""

import json
from collections import Counter
from dataclasses import replace

import pytest

from simulator.model.kernels import OpClass
from simulator.model.models import PRESETS, ModelError, load_model
from simulator.model.workload import FUSION_LEVELS, StepShape, WorkloadError, build_step, decode, kernels_per_layer, toy_step

QWEN = PRESETS["qwen3-0.6b"]
LLAMA = PRESETS["llama3-8b"]


def test_qwen3_eager_step_matches_seed_count():
    """The seed counted ~1617 kernel-launching aten calls in a Qwen3-0.6B HF eager decode step; the
    H200 profiler counted 1615 kernels (calibration/measured/h200-decode.json), 28 of them cuBLAS
    split-K reduce kernels that the profile's GEMM table records."""
    from simulator.model.costs import CostModel
    from simulator.model.profile import load_profile

    # the reference decoder at ctx 512 attends 512 keys (its new token written at slot 511): launchsim's decode(1, 511);
    # one key more and cuDNN adds its split-KV reduce (+28: test_reference_sdpa_split_kv_reduce)
    s = build_step(QWEN, decode(1, 511), "none")
    assert s.kernels == 1587
    assert CostModel(load_profile("h200")).step_kernels(s.ops) == 1615
    assert abs(1615 - 1617) / 1617 < 0.01
    # per layer: 4 RMSNorms x 8 kernels, 7 linears, 2x5 RoPE, 2 cache writes, attention, 2 adds, silu, mul
    # (the attention output's contiguous() launches nothing at one query per sequence)
    assert kernels_per_layer(QWEN, "none") == 4 * 8 + 7 + 10 + 2 + 1 + 2 + 2
    names = Counter(o.name.rsplit(".", 1)[-1] for o in s.kernel_ops())
    # 113 RMSNorms (4 per layer x 28 + final) each with one pow and one mean
    assert names["pow"] == 113 and names["mean"] == 113
    # 197 linears: 7 per layer + lm_head (the rotary matmul is counted separately)
    gemms = [o for o in s.kernel_ops() if o.op_class is OpClass.GEMM and not o.name.startswith("rotary")]
    assert len(gemms) == 197


@pytest.mark.parametrize("model,level,expect", [
    (QWEN, "packed", 56 - 3), (LLAMA, "none", 56 - 16), (LLAMA, "packed", 40 - 3),
    # compiled = Inductor's pass over `none` (measured, calibration/validation/inductor.md section 1): qwen3 static
    # 14 launches a layer (k-norm + RoPE-k + K-cache write one kernel), llama 14 (no q/k-norm)
    (QWEN, "compiled", 14), (LLAMA, "compiled", 14), (QWEN, "fused", 9), (LLAMA, "fused", 9),
])
def test_kernels_per_layer(model, level, expect):
    assert kernels_per_layer(model, level) == expect


@pytest.mark.parametrize("model,expect", [(QWEN, 15), (LLAMA, 14)])
def test_compiled_dynamic_kernels_per_layer(model, expect):
    """dynamic=True (measured): the reference's qwen3 k-norm no longer takes the cache write as its epilogue, +1
    launch a layer; llama has no reduction feeding a scatter and launches the same 14."""
    assert kernels_per_layer(model, "compiled", compile_dynamic=True) == expect


def test_compiled_in_issue_range_and_fusion_monotone():
    for m in (QWEN, LLAMA):
        counts = [build_step(m, decode(8, 512), f).kernels for f in FUSION_LEVELS]
        assert counts == sorted(counts, reverse=True)
        assert 12 <= kernels_per_layer(m, "compiled") <= 16


def test_gemm_flops_and_bytes():
    s = build_step(LLAMA, decode(4, 128), "fused")
    qkv = next(o for o in s.ops if o.name == "qkv_proj")
    m, n, k = 4, 4096 + 2 * 1024, 4096
    assert qkv.flops == 2 * m * n * k
    assert qkv.bytes == 2 * (m * k + n * k + m * n)
    lm = next(o for o in s.ops if o.name == "lm_head")
    assert lm.dim("n") == 128256 and lm.dim("m") == 4


def test_attention_bytes_scale_with_context():
    a1 = next(o for o in build_step(LLAMA, decode(2, 1000), "fused").ops if o.op_class is OpClass.ATTENTION)
    a2 = next(o for o in build_step(LLAMA, decode(2, 2000), "fused").ops if o.op_class is OpClass.ATTENTION)
    kv = 2 * 8 * 128 * 2  # K and V, kv_heads x head_dim, bf16
    assert a2.bytes - a1.bytes == 2 * 1000 * kv
    assert a1.flops == 4 * 32 * 128 * 2 * 1001  # 1000 past keys + the step's own
    assert a1.dim("ctx") == 1001  # the attention table's ctx axis counts keys attended


def test_mixed_step_tokens():
    s = build_step(LLAMA, StepShape(decode_seqs=3, ctx=100, prefill_seqs=2, prefill_len=50), "fused")
    assert s.tokens == 103
    qkv = next(o for o in s.ops if o.name == "qkv_proj")
    assert qkv.dim("m") == 103
    assert next(o for o in s.ops if o.name == "lm_head").dim("m") == 5


def test_views_cost_host_time_but_launch_nothing():
    s = build_step(QWEN, decode(1, 64), "none")
    views = [o for o in s.ops if o.op_class is OpClass.VIEW]
    assert views and all(not o.launches_kernel for o in views)
    assert s.host_calls == s.kernels + len(views)


@pytest.mark.parametrize("shape,msg", [
    (decode(0, 10), "batch"), (decode(1, 0), "context"), (decode(1, 41000), "max_position_embeddings"),
])
def test_bad_shapes(shape, msg):
    with pytest.raises(WorkloadError, match=msg):
        build_step(QWEN, shape, "none")


def test_unknown_fusion():
    with pytest.raises(WorkloadError, match="fusion"):
        build_step(QWEN, decode(1, 1), "turbo")


def test_toy_step():
    s = toy_step(32, 9, 6e-6, 3e-6)
    assert s.kernels == 288
    with pytest.raises(WorkloadError):
        toy_step(0, 9, 6e-6, 3e-6)


def test_hf_config_roundtrip(tmp_path):
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024,
           "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
           "intermediate_size": 3072, "vocab_size": 151936, "tie_word_embeddings": True,
           "max_position_embeddings": 40960}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = load_model(str(p))
    assert m.qk_norm and m.tie_word_embeddings
    assert build_step(m, decode(1, 64), "none").kernels == build_step(QWEN, decode(1, 64), "none").kernels
    # Qwen3-0.6B has ~0.6B parameters (0.44B without the tied 155M embedding)
    assert 0.55e9 < m.params < 0.65e9


def test_bad_configs(tmp_path):
    with pytest.raises(ModelError, match="unknown model"):
        load_model("gpt-9")
    p = tmp_path / "c.json"
    p.write_text("{\"hidden_size\": 10,")
    with pytest.raises(ModelError, match="not valid JSON"):
        load_model(str(p))
    p.write_text(json.dumps({"hidden_size": 10}))
    with pytest.raises(ModelError, match="missing field"):
        load_model(str(p))
    p.write_text(json.dumps({"hidden_size": -1, "num_hidden_layers": 1, "num_attention_heads": 1,
                             "intermediate_size": 1, "vocab_size": 1}))
    with pytest.raises(ModelError, match="hidden_size"):
        load_model(str(p))


@pytest.mark.parametrize("model,batch,ctx,level,split", [
    # the reference decoder's SDPA (cuDNN) adds its split-KV reduce while batch x kv heads <= 64 and keys > 512
    (QWEN, 1, 511, "none", False),    # 512 keys: not split (round i: the reference decoder at ctx 512, 424 compiled)
    (QWEN, 1, 512, "none", True),     # 513 keys (round h/i: the independent decoder at b1, 2 cuDNN kernels a layer)
    (QWEN, 8, 1024, "none", True),    # 8 x 8 kv heads = 64
    (QWEN, 9, 1024, "none", False),   # 72 > 64
    (QWEN, 1, 512, "packed", True),
    (QWEN, 1, 512, "compiled", True),  # an opaque kernel inside the SDPA call: kept by Inductor's pass
    (QWEN, 1, 512, "fused", False),   # vLLM-style custom attention: not SDPA
    (LLAMA, 8, 2048, "none", True),   # llama3-8b: 8 kv heads
])
def test_reference_sdpa_split_kv_reduce(model, batch, ctx, level, split):
    s = build_step(model, decode(batch, ctx), level)
    n = sum(1 for o in s.ops if o.name == "attention.split_kv_reduce")
    assert n == (model.num_hidden_layers if split else 0)
    if split:  # a kernel in the count, no cost of its own: its time and launch are inside the SDPA figures
        o = next(o for o in s.ops if o.name == "attention.split_kv_reduce")
        assert o.launches_kernel and o.fixed_gpu_s == 0.0 and o.fixed_host_s == 0.0


def test_split_kv_reduce_is_not_added_to_mixed_steps():
    s = build_step(QWEN, StepShape(decode_seqs=1, ctx=1024, prefill_seqs=1, prefill_len=64), "none")
    assert not any(o.name == "attention.split_kv_reduce" for o in s.ops)


def test_split_kv_reduce_runs_eager_with_the_attention_in_a_piecewise_graph():
    """A piecewise graph leaves the attention call eager between its pieces; cuDNN's split-KV reduce is launched by that
    call (Op.in_attention), so it is an eager launch right after the attention's, not a node of the next piece."""
    from simulator.engine.plan import build_plan
    from simulator.model.costs import CostModel
    from simulator.model.profile import load_profile

    m = replace(QWEN, num_hidden_layers=2)
    st = build_step(m, decode(1, 1024), "none")
    split = next(o for o in st.ops if o.name == "attention.split_kv_reduce")
    assert split.in_attention and not any(o.in_attention for o in st.ops if o.name == "o_proj")
    pl = build_plan(st, CostModel(load_profile("h200")), "piecewise")
    labels = list(pl.launch_labels)
    at = [i for i, n in enumerate(labels) if n == "attention"]
    assert len(at) == 2 and all(labels[i + 1] == "attention.split_kv_reduce" for i in at)
    assert sum(n.startswith("graph replay") for n in labels) == 3  # pieces: before, between and after the attentions
    assert pl.kernels_per_launch.sum() == st.kernels
