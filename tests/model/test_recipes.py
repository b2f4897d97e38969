"""Implementations as recipes (simulator/model/recipes.py, workload.build_step's impl): hand-computed kernels per
layer for each family x impl, the hf recipe against round c's measured traces of transformers' Qwen3-0.6B, the
cache options, and the refusals."""

import json
from pathlib import Path

import pytest

from simulator.model import recipes as R
from simulator.model.models import PRESETS, load_model
from simulator.model.workload import StepShape, WorkloadError, build_step, decode, kernels_per_layer

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "calibration" / "configs" / "hf"

# Hand counts, one kernel per entry (simulator/model/recipes.py docstring):
RMS, GEMMA_NORM, ROPE = 8, 10, 5  # RMSNorm kernels; Gemma's norm; one rotate_half RoPE
MLP = 5  # gate, act, up, mul, down (packed: 4)


def hf_static(norms, norm_k, qk_norm, gemms_attn, rope_cats, repeat_kv, split):
    # norms x norm, q/k/v GEMMs, qk-norm, RoPE q + k (+ phi3's cats), StaticCache update 5, repeat_kv 2,
    # SDPA mask 3, attention (+ cuDNN split-KV reduce: only over > 512 keys, so none at ctx 128), o_proj, 2 residual
    # adds, MLP
    return (norms * norm_k + gemms_attn + (2 * norm_k if qk_norm else 0) + 2 * ROPE + rope_cats + 5
            + (2 if repeat_kv else 0) + 3 + 1 + split + 1 + 2)


EXPECTED = {  # name: (reference none, reference packed, hf static, hf dynamic, fused), batch 1, ctx 128
    # llama-3.2-1b: 32 heads / 8 kv: repeat_kv; batch 1 x 32 heads <= 64 but 129 keys: cuDNN does not split
    "llama-3.2-1b": (2 * RMS + 3 + 2 * ROPE + 2 + 1 + 1 + 2 + MLP, None,
                     hf_static(2, RMS, False, 3, 0, True, 0) + MLP, None, 9),
    "qwen2-1.5b": (40, None, 48, None, 9),  # as llama: the q/k/v bias is the GEMM's epilogue, no kernel
    "qwen3-4b": (40 + 2 * RMS, None, hf_static(2, RMS, True, 3, 0, True, 0) + MLP, None, 9),
    "mistral-7b-v0.3": (40, None, 48, None, 9),  # sliding_window null in v0.3
    # phi3: packed qkv (1 GEMM) and gate_up (MLP 4), a cat per RoPE, 32 kv heads = 32 heads: no repeat_kv
    "phi-3-mini-4k": (40, None, hf_static(2, RMS, False, 1, 2, False, 0) + MLP - 1, None, 9),
    # gemma2: 4 Gemma norms a layer; fused: 2 more RMSNorm kernels than 9
    "gemma-2-2b": (4 * GEMMA_NORM + 3 + 2 * ROPE + 2 + 1 + 1 + 2 + MLP, None,
                   hf_static(4, GEMMA_NORM, False, 3, 0, True, 0) + MLP, None, 11),
    # gemma3 (gemma-3-1b: 4 heads, 1 kv head): 4 Gemma norms + q/k-norm, no repeat_kv copy (one kv head: a view);
    # the third layer slides (window 512 > 129 keys: not full, the index_copy_ path); reference: + q/k-norm 20
    "gemma-3-1b": (6 * GEMMA_NORM + 3 + 2 * ROPE + 2 + 1 + 1 + 2 + MLP, None,
                   hf_static(4, GEMMA_NORM, True, 3, 0, False, 0) + MLP, None, 11),
}


def dynamic_of(static, repeat_kv):
    return static - 5 - (2 if repeat_kv else 0) - 3 + 2  # cache update, repeat_kv and mask -> two cats


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_kernels_per_layer_by_family_and_impl(name):
    m = load_model(str(CONFIGS / f"{name}.json"))
    ref, packed, hf_s, hf_d, fused = EXPECTED[name]
    rep = m.num_attention_heads > m.num_key_value_heads > 1  # a repeat_kv copy (one kv head: a view)
    packed = ref - 3 if packed is None else packed  # q/k/v -> 1 GEMM, gate/up -> 1 GEMM
    hf_d = dynamic_of(hf_s, rep) if hf_d is None else hf_d
    assert kernels_per_layer(m, "none", "reference") == ref
    assert kernels_per_layer(m, "packed", "reference") == packed
    assert kernels_per_layer(m, "none", "hf") == hf_s
    assert kernels_per_layer(m, "none", "hf", cache="dynamic") == hf_d
    assert kernels_per_layer(m, "fused", "fused") == fused


def test_reference_is_todays_decoder_for_the_presets():
    """impl None and impl 'reference' give the op lists the goldens were made with (fused: the fused impl)."""
    for m in PRESETS.values():
        for fusion in ("none", "packed", "compiled", "fused"):
            if m.is_moe and fusion == "compiled":
                continue
            impl = "fused" if fusion == "fused" else "reference"
            a = build_step(m, decode(3, 300), fusion)
            assert a.ops == build_step(m, decode(3, 300), fusion, impl).ops
    assert kernels_per_layer(PRESETS["qwen3-0.6b"], "none") == 56


def test_hf_recipe_equals_the_measured_traces_position_by_position():
    from calibration.build_recipes import FIT, ROUND_C, compare

    for trace, model, cache, batch, ctx, slots in FIT:
        r = compare(ROUND_C / trace, PRESETS[model], cache, batch, ctx, slots)
        assert r["layer_equal"] and r["preamble_equal"] and r["tail_equal"], (trace, r["first_layer_mismatch"])


def test_hf_step_kernels_equal_the_measured_counts():
    """Kernels per step (split-K reduce kernels counted from the GEMM tables, as the engine does) equal
    counts_hf.json's for every traced (cache, batch)."""
    from simulator.model.costs import CostModel
    from simulator.model.profile import load_profile

    cm = CostModel(load_profile("h200"))
    rows = json.loads((ROOT / "calibration/measured/h200-round-c/counts_hf.json").read_text())["hf"]
    assert len(rows) == 4
    for r in rows:
        st = build_step(PRESETS[r["model"]], decode(r["batch"], r["ctx"] + 4), "none", "hf", cache=r["cache"],
                        max_cache_len=r["max_cache_len"])
        assert cm.step_kernels(st.ops) == r["kernels"]


def test_static_cache_attends_over_every_slot_dynamic_over_ctx():
    m = PRESETS["qwen3-0.6b"]
    st = build_step(m, decode(2, 500), "none", "hf", cache="static", max_cache_len=1024)
    att = [o for o in st.ops if o.name == "attention"]
    assert {o.dim("sdpa_keys") for o in att} == {1024} and {o.dim("sdpa_kv_heads") for o in att} == {16}  # repeat_kv
    # priced as the GQA kernel over rep x the keys: the same K/V bytes (recipes.attention_op)
    assert {o.dim("kv_heads") for o in att} == {8} and {o.dim("ctx") for o in att} == {2048}
    assert att[0].bytes > 2 * 16 * 1024 * 128 * 2 * 2  # but reading every repeated head's K and V
    rep = [o for o in st.ops if o.name == "repeat_kv_k"]
    assert rep and rep[0].flops == 2 * 16 * 1024 * 128
    dy = build_step(m, decode(2, 500), "none", "hf", cache="dynamic")
    att = [o for o in dy.ops if o.name == "attention"]
    assert {o.dim("ctx") for o in att} == {501} and {o.dim("kv_heads") for o in att} == {8}  # enable_gqa
    assert not any(o.dim("sdpa_kv_heads") for o in att)
    cat = [o for o in dy.ops if o.name == "cache.cat_k"]
    assert cat[0].flops == 2 * 8 * 501 * 128
    small = build_step(m, decode(2, 500), "none", "hf", cache="static")  # default: ctx + 1 slots
    assert {(o.dim("sdpa_keys") or o.dim("ctx")) for o in small.ops if o.name == "attention"} == {501}


def test_cudnn_split_rule():
    m = PRESETS["qwen3-0.6b"]  # 16 heads, 8 kv heads
    for cache, batch, ctx, split in (("static", 1, 600, True), ("static", 4, 600, True), ("static", 8, 600, False),
                                     ("dynamic", 8, 600, True), ("dynamic", 16, 600, False),
                                     ("dynamic", 1, 512, True), ("dynamic", 1, 511, False),  # 513 / 512 keys
                                     ("static", 1, 100, False)):
        st = build_step(m, decode(batch, ctx), "none", "hf", cache=cache)
        assert any(o.name == "attention.split_kv_reduce" for o in st.ops) == split, (cache, batch, ctx)


def test_gemma_softcap_embed_scale_and_sliding_layers():
    g = load_model(str(CONFIGS / "gemma-2-2b.json"))
    st = build_step(g, decode(1, 5000), "none", "hf", cache="dynamic")
    names = [o.name for o in st.ops if o.launches_kernel]
    assert names[-3:] == ["logit_softcap.div", "logit_softcap.tanh", "logit_softcap.mul"]
    assert names[1] == "embed_scale.mul"
    ctx = [o.dim("sdpa_keys") or o.dim("ctx") for o in st.ops if o.name == "attention"]
    assert ctx == [4096, 5001] * 13  # 26 layers alternate, window 4096
    static = build_step(g, decode(1, 5000), "none", "hf")
    assert sum(n.startswith("sliding_mask.") for n in (o.name for o in static.ops)) == 12


def test_refusals_are_one_line():
    from dataclasses import replace

    from simulator.model.parallel import shard

    m = PRESETS["qwen3-0.6b"]
    cases = [
        (lambda: build_step(m, decode(1, 8), "packed", "hf"), "fusion levels are none, compiled"),
        (lambda: build_step(m, decode(1, 8), "fused", "reference"), "fusion levels are none, packed, compiled"),
        (lambda: build_step(m, decode(1, 8), "none", "fused"), "fusion levels are fused"),
        (lambda: build_step(m, decode(1, 8), "none", "trtllm"), "unknown implementation"),
        (lambda: build_step(m, decode(1, 8), "none", "vllm"), "fusion levels are fused"),
        (lambda: build_step(m, decode(1, 8), "none", "hf", cache="paged"), "unknown cache"),
        (lambda: build_step(m, decode(1, 8), "none", "reference", cache="dynamic"), "options of implementation"),
        (lambda: build_step(m, decode(1, 8), "none", "hf", max_cache_len=4), "smaller than"),
        (lambda: build_step(m, decode(1, 8), "none", "hf", cache="dynamic", max_cache_len=64), "static cache"),
        (lambda: build_step(m, StepShape(1, 8, 1, 16), "none", "hf"), "decode steps only"),
        (lambda: build_step(replace(m, weight_dtype="fp8"), decode(1, 8), "none", "hf"), "bf16 only"),
        (lambda: build_step(shard(PRESETS["llama3-8b"], 2), decode(1, 8), "none", "hf"), "one GPU"),
    ]
    for fn, needle in cases:
        with pytest.raises(WorkloadError) as e:
            fn()
        assert needle in str(e.value) and "\n" not in str(e.value)


def test_reference_compiled_of_other_families_is_the_pass_over_their_none_list():
    """Reference `compiled` = Inductor's pass over the family's `none` list (no longer refused for Gemma & co.).
    Hand count of a gemma2 layer (each run of pointwise/reduction ops between two externs is one kernel, sizes
    matching): 7 GEMMs + attention + RoPE-q, RoPE-k + K-cache write, V-cache write, GELU-tanh x up + two norm
    kernels (post-attention norm + residual add + pre-MLP norm after o_proj; post-MLP norm + residual add + the next
    input norm after down_proj) = 14; the final soft-capping (3 eager kernels) is one kernel after lm_head."""
    from dataclasses import replace

    g = load_model(str(CONFIGS / "gemma-2-2b.json"))
    assert kernels_per_layer(g, "compiled", "reference") == 14
    st = build_step(replace(g, num_hidden_layers=2), decode(1, 8), "compiled", "reference")
    names = [o.name for o in st.ops]
    assert names[-2:] == ["lm_head", "triton_poi:logit_softcap"]
    assert "triton_red:post_attn_norm+residual_add+post_norm" in names
    assert "triton_poi:gelu_pytorch_tanh+mul" in names


def test_hf_compiled_uses_the_inductor_pass_or_refuses():
    m = PRESETS["qwen3-0.6b"]
    try:
        from simulator.model.inductor import compile_ops  # noqa: F401  (helper "inductor"'s module)
    except ImportError:
        with pytest.raises(WorkloadError, match="Inductor"):
            build_step(m, decode(1, 8), "compiled", "hf")
        return
    st = build_step(m, decode(1, 8), "compiled", "hf")
    assert 0 < st.kernels < build_step(m, decode(1, 8), "none", "hf").kernels


def test_recipes_state_their_source_versions():
    assert set(R.RECIPES) == set(R.IMPLS)
    assert "transformers 5.17" in R.RECIPES["hf"].source and "torch 2.11" in R.RECIPES["hf"].source
    for impl, r in R.RECIPES.items():
        assert r.fusions == R.FUSIONS_OF[impl] and r.measured


def test_bias_adds_bytes_not_kernels(tmp_path):
    base = json.loads((CONFIGS / "qwen2-1.5b.json").read_text())
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**base, "model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    nob = load_model(str(p))
    q2 = load_model(str(CONFIGS / "qwen2-1.5b.json"))
    a, b = (build_step(x, decode(4, 64), "none", "hf") for x in (nob, q2))
    assert a.kernels == b.kernels
    qa = next(o for o in a.ops if o.name == "q_proj")
    qb = next(o for o in b.ops if o.name == "q_proj")
    assert qb.bytes - qa.bytes == 2 * q2.q_dim and qb.dim("bias") == 1


def test_layer_tiling_is_skipped_where_sliding_layers_differ():
    from simulator.engine.plan import build_plan
    from simulator.engine.tiling import tiled_plan
    from simulator.model.costs import CostModel
    from simulator.model.profile import load_profile
    from simulator.model.workload import layers_repeat

    g = load_model(str(CONFIGS / "gemma-2-2b.json"))
    assert layers_repeat(g, decode(1, 100)) and not layers_repeat(g, decode(1, 5000))
    cm = CostModel(load_profile("h200"))
    for ctx in (100, 5000):
        a = tiled_plan(g, decode(2, ctx), "none", cm, "none")
        b = build_plan(build_step(g, decode(2, ctx), "none"), cm, "none")
        assert list(a.gpu_s) == list(b.gpu_s) and a.kernels == b.kernels


@pytest.mark.skipif(not (ROOT / "calibration/measured/h200-round-f/hf_timing.json").is_file(), reason="no round f")
def test_python_and_cudnn_plan_constants_are_the_round_f_fit():
    from calibration.validate_impl import python_per_call_fit

    fit = python_per_call_fit()
    assert abs(fit["python_us_per_call"] - R.PYTHON_US_PER_CALL) < 0.1
    assert abs(fit["cudnn_plan_ms"] - R.CUDNN_PLAN_MS) < 0.1
    st = build_step(PRESETS["qwen3-0.6b"], decode(1, 64), "none", "hf")
    py = [o for o in st.ops if o.name.startswith("python.")]
    assert len(py) == 28 + 2 and not any(o.launches_kernel for o in py)
    calls = sum(1 for o in st.ops if not o.name.startswith("python."))
    assert abs(sum(o.fixed_host_s for o in py) - calls * R.PYTHON_US_PER_CALL * 1e-6) < 1e-12
    dy = build_step(PRESETS["qwen3-0.6b"], decode(1, 64), "none", "hf", cache="dynamic")
    assert [o.fixed_host_s for o in dy.ops if o.name == "sdpa.cudnn_plan"] == [R.CUDNN_PLAN_MS * 1e-3]


from hypothesis import given, settings
from hypothesis import strategies as st

FAMILY_TYPES = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text")


@settings(max_examples=40, deadline=None)
@given(mt=st.sampled_from(FAMILY_TYPES), kv=st.sampled_from((1, 2, 4, 8)), rep=st.sampled_from((1, 2, 4)),
       hd=st.sampled_from((32, 64, 128)), layers=st.integers(1, 6), batch=st.integers(1, 40),
       ctx=st.integers(1, 3000), window=st.sampled_from((None, 64, 512)))
def test_static_minus_dynamic_is_the_cache_and_mask_kernels(tmp_path_factory, mt, kv, rep, hd, layers, batch, ctx,
                                                             window):
    """For any family and shape: per layer, hf static launches its 5 cache-update (4 where a sliding window is
    full) + 3 mask kernels (+ 2 repeat_kv copies when heads > kv heads > 1) where dynamic launches 2 cats; the cuDNN
    split kernel and the sliding keys follow the batch x SDPA heads and keys rule and the window."""
    heads = kv * rep
    cfg = {"model_type": mt, "hidden_size": heads * hd, "num_hidden_layers": layers, "num_attention_heads": heads,
           "num_key_value_heads": kv, "head_dim": hd, "intermediate_size": 256, "vocab_size": 512,
           "max_position_embeddings": 1 << 16}
    if window:
        cfg["sliding_window"] = window  # absent: the config class's default (gemma2/3: 4096)
    p = tmp_path_factory.mktemp("c") / "config.json"
    p.write_text(json.dumps(cfg))
    m = load_model(str(p))
    s = build_step(m, decode(batch, ctx), "none", "hf", cache="static")
    d = build_step(m, decode(batch, ctx), "none", "hf", cache="dynamic")
    split_s = sum(o.name == "attention.split_kv_reduce" for o in s.ops)
    split_d = sum(o.name == "attention.split_kv_reduce" for o in d.ops)
    keys = [min(ctx + 1, m.sliding_window) if m.sliding_at(i) else ctx + 1 for i in range(layers)]
    big = sum(k > R.CUDNN_SPLIT_MIN_KEYS for k in keys)  # cuDNN splits only over more than one KV block
    assert split_s == big * (batch * (heads if rep > 1 else kv) <= R.CUDNN_SPLIT_MAX)
    assert split_d == big * (batch * kv <= R.CUDNN_SPLIT_MAX)
    kinds = {m.sliding_at(i) for i in range(layers)}
    mask_pre = (7 if False in kinds else 0) + (12 if True in kinds else 0)
    # a sliding layer whose window is full rolls its cache: 4 update kernels instead of 5; one kv head: repeat_kv
    # is a view
    rolls = sum(m.sliding_at(i) and ctx >= keys[i] for i in range(layers))
    per_layer = 5 + 3 + (2 if rep > 1 and kv > 1 else 0) - 2
    assert s.kernels - d.kernels == layers * per_layer - rolls + mask_pre + split_s - split_d
    for step, keys in ((s, ctx + 1), (d, ctx + 1)):
        ctxs = [o.dim("sdpa_keys") or o.dim("ctx") for o in step.ops if o.name == "attention"]
        assert ctxs == [min(keys, m.sliding_window) if m.sliding_at(i) else keys for i in range(layers)]


ROUND_F = ROOT / "calibration" / "measured" / "h200-round-f"


@pytest.mark.skipif(not (ROUND_F / "counts_hf.json").is_file(), reason="round f not in this checkout")
def test_hf_recipe_equals_round_f_held_out_traces():
    """Every family round f traced (held out: the recipe was fitted on qwen3-0.6b only), batch 1: preamble, each
    layer (a pair of layers for gemma2's alternation) and tail equal kernel by kernel."""
    from calibration.build_recipes import compare

    rows = json.loads((ROUND_F / "counts_hf.json").read_text())["rows"]
    seen = set()
    for r in rows:
        if r.get("trace") and r["batch"] == 1:
            m = load_model(str(CONFIGS / f"{r['model']}.json"))
            static = r["cache"] == "static"  # round f's dynamic steps let transformers derive the positions
            c = compare(ROUND_F / r["trace"], m, r["cache"], 1, r["ctx"], r["ctx"] + 128 if static else None,
                        "given" if static else "computed")
            assert c["layer_equal"] and c["preamble_equal"] and c["tail_equal"], (r["model"], r["cache"], c)
            seen.add(m.family)
    assert {"llama", "qwen2", "qwen3", "phi3", "gemma2", "mistral"} <= seen


@pytest.mark.parametrize("impl,cache", [("reference", "static"), ("hf", "static"), ("hf", "dynamic")])
def test_setup_tiling_equals_the_whole_build_for_sliding_models(impl, cache):
    """StepSetup's tiled lowering (engine/tiling.tiled_lower) gives the whole step's plan, also where gemma2's
    sliding layers read fewer keys than its full ones (no tiling there: workload.layers_repeat)."""
    from simulator.engine.plan import lower
    from simulator.engine.setup import StepSetup
    from simulator.engine.tiling import tiled_lower

    g = load_model(str(CONFIGS / "gemma-2-2b.json"))
    kw = {"cache": cache} if impl == "hf" else {}
    su = StepSetup.of(g, "h200", "none", impl=impl, **kw)
    for ctx in (100, 5000):
        a = tiled_lower(su, decode(2, ctx), "none")
        b = lower(su.build(decode(2, ctx)), su.costs, "none")
        assert list(a.gpu_s) == list(b.gpu_s) and list(a.host_s) == list(b.host_s) and a.kernels == b.kernels


ROUND_G = ROOT / "calibration" / "measured" / "h200-round-g"


@pytest.mark.skipif(not (ROUND_G / "counts_gemma.json").is_file(), reason="round g not in this checkout")
def test_gemma3_recipe_equals_round_g_traces_kernel_by_kernel():
    """Gemma-3-1b (transformers 5.17, StaticCache of 640 slots, ctx 512 = its 512-token window), batch 1 and 8:
    the whole step equals the trace kernel by kernel, and kernels per step (+ split-K reduces) are the 2400
    measured. Hand count: preamble 41 (embedding, scale mul, causal mask 7, sliding mask 12, two rotary set-ups 10
    each); a sliding layer 89 = 6 Gemma norms 60 + q/k/v 3 + RoPE 10 + full-window cache update 4 (roll k, roll v,
    index_put_ k, index_put_ v) + SDPA mask 3 + attention 1 (512 keys: no split) + o_proj + 2 residual adds + MLP 5;
    a full layer 91 (cache update 5, split-KV reduce over 640 keys); tail 11; split-K reduces of down_proj 26."""
    from calibration.build_recipes import compare_step
    from simulator.model.costs import CostModel
    from simulator.model.profile import load_profile

    m = load_model(str(CONFIGS / "gemma-3-1b.json"))
    assert [m.sliding_at(i) for i in range(12)] == [True] * 5 + [False] + [True] * 5 + [False]
    sliding = 6 * GEMMA_NORM + 3 + 2 * ROPE + 4 + 3 + 1 + 1 + 2 + MLP
    full = sliding - 4 + 5 + 1
    assert (sliding, full) == (89, 91)
    cm = CostModel(load_profile("h200"))
    for r in json.loads((ROUND_G / "counts_gemma.json").read_text())["rows"]:
        c = compare_step(ROUND_G / r["trace"], m, "static", r["batch"], r["ctx"], r["max_cache_len"])
        assert c["equal"], c
        st = build_step(m, decode(r["batch"], r["ctx"]), "none", "hf", max_cache_len=r["max_cache_len"])
        assert st.kernels == 41 + 22 * sliding + 4 * full + 11 == c["measured"]
        assert cm.step_kernels(st.ops) == r["last_step"]["kernels"] == 2400


def test_sliding_window_full_rolls_the_cache():
    """A sliding layer whose window is full rolls its cache (4 kernels: roll k/v, index_put_ k/v) instead of the
    index_copy_ update (5); below its window it writes in place as gemma2 does (round f)."""
    m = load_model(str(CONFIGS / "gemma-3-1b.json"))
    one = replace_layers(m, 1)  # layer 0 slides
    full = [o.name for o in build_step(one, decode(1, 512), "none", "hf", max_cache_len=640).ops]
    part = [o.name for o in build_step(one, decode(1, 300), "none", "hf", max_cache_len=640).ops]
    assert [n for n in full if n.startswith("cache.")] == ["cache.roll_k", "cache.roll_v", "cache.index_put_k",
                                                          "cache.index_put_v"]
    assert [n for n in part if n.startswith("cache.")] == ["cache.arange", "cache.pos_add", "cache.index_copy_k",
                                                          "cache.index_copy_v", "cache.pos_add_"]
    roll = next(o for o in build_step(one, decode(4, 512), "none", "hf", max_cache_len=640).ops
                if o.name == "cache.roll_k")
    assert roll.bytes == 2 * 4 * 1 * 512 * 256 * 2  # reads and writes the whole window: B x kv x 512 x 256 x bf16


def replace_layers(m, n):
    from dataclasses import replace

    return replace(m, num_hidden_layers=n)
