"""Architecture families (simulator/model/families.py): recognition, refusal, each config field's effect on a step,
the ignored-fields list, and the MoE / shape config hardening (issue 20 item 2, issue 22 item 8)."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from simulator.model import families as F
from simulator.model.models import PRESETS, ModelError, family_info, ignored_config_fields, load_model
from simulator.model.workload import build_step, decode

CONFIGS = Path(__file__).resolve().parents[2] / "calibration" / "configs" / "hf"
EXPECTED_FAMILY = {"gemma-2-2b": "gemma2", "llama-3.2-1b": "llama", "llama3-8b": "llama", "mistral-7b-v0.3": "mistral",
                   "phi-3-mini-4k": "phi3", "qwen2-1.5b": "qwen2", "qwen3-0.6b": "qwen3", "qwen3-4b": "qwen3",
                   "gemma-3-1b": "gemma3"}

BASE = {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 32, "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 8192}


def write(tmp_path, cfg, name="config.json"):
    p = tmp_path / name
    p.write_text(json.dumps(cfg, indent=1))
    return str(p)


def load(tmp_path, cfg, **kw):
    return load_model(write(tmp_path, cfg), **kw)


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.json")), ids=lambda p: p.stem)
def test_published_configs_are_recognised(path):
    m = load_model(str(path))
    assert m.family == EXPECTED_FAMILY[path.stem] and not m.family_assumed
    cfg = json.loads(path.read_text())
    ignored = set(ignored_config_fields(m))
    assert "rms_norm_eps" in ignored and not ignored & {"hidden_size", "num_hidden_layers", "model_type"}
    assert ignored <= set(cfg)  # only fields the config has


def test_config_of_a_preset_builds_the_presets_step():
    m = load_model(str(CONFIGS / "qwen3-0.6b.json"))
    p = PRESETS["qwen3-0.6b"]
    assert m.params == p.params
    for impl, fusion in (("reference", "none"), ("hf", "none"), ("fused", "fused")):
        assert build_step(m, decode(4, 256), fusion, impl).ops == build_step(p, decode(4, 256), fusion, impl).ops


def test_family_differences_of_the_published_configs():
    g = load_model(str(CONFIGS / "gemma-2-2b.json"))
    assert (g.norm_kind, g.sandwich_norms, g.activation, g.final_logit_softcap, g.embed_scale_kernels) == \
        ("gemma", True, "gelu_pytorch_tanh", 30.0, 1)
    assert g.sliding_window == 4096 and g.layer_sliding[:4] == (True, False, True, False)
    assert "attn_logit_softcapping" in ignored_config_fields(g)  # SDPA does not apply it: listed, not silent
    q2 = load_model(str(CONFIGS / "qwen2-1.5b.json"))
    assert q2.qkv_bias and not q2.o_bias and q2.tie_word_embeddings and not q2.sliding_window
    assert "sliding_window" in ignored_config_fields(q2)  # use_sliding_window false
    phi = load_model(str(CONFIGS / "phi-3-mini-4k.json"))
    assert phi.packed_qkv and phi.packed_gate_up and phi.rope_pass_cat and phi.sliding_window == 2047
    assert load_model(str(CONFIGS / "llama-3.2-1b.json")).tie_word_embeddings


@pytest.mark.parametrize("cfg", [{"model_type": "falcon"}, {"architectures": ["GPT2LMHeadModel"]}, {}],
                         ids=["model_type", "architectures", "none"])
def test_unknown_family_is_refused_in_one_line_unless_assumed(tmp_path, cfg):
    p = write(tmp_path, {**BASE, **cfg})
    with pytest.raises(ModelError) as e:
        load_model(p)
    msg = str(e.value)
    assert "\n" not in msg and "unknown architecture family" in msg
    assert all(f in msg for f in F.SUPPORTED) and "assume_family" in msg
    m = load_model(p, assume_family="llama")
    assert m.family == "llama" and m.family_assumed
    info = family_info(m)
    assert info["family_assumed"] and "assume_family" in info["note"] and info["family"] == "llama"
    assert info["config_model_type"] == (cfg.get("model_type") or (cfg.get("architectures") or [""])[0])
    with pytest.raises(ModelError, match="assume_family 'gpt'"):
        load_model(p, assume_family="gpt")


def test_cli_exit_2_for_an_unknown_family(tmp_path, capsys):
    from tests.conftest import cli_error

    err = cli_error(capsys, ["predict", "--model", write(tmp_path, {**BASE, "model_type": "falcon"})])
    assert "falcon" in err and "model_type" in err


def test_architectures_alone_name_the_family(tmp_path):
    assert load(tmp_path, {**BASE, "architectures": ["Qwen2ForCausalLM"]}).family == "qwen2"
    assert load(tmp_path, {**BASE, "model_type": "gemma3_text"}).rope_sets == 2


# -- every field that changes a step changes the built step ----------------------------------------------------------
LLAMA = {**BASE, "model_type": "llama"}
FIELD_CASES = [
    # (base config, field, value): the step at (batch 2, ctx 600) must differ for some implementation
    (LLAMA, "hidden_size", 512), (LLAMA, "num_hidden_layers", 5), (LLAMA, "num_attention_heads", 16),
    (LLAMA, "num_key_value_heads", 4), (LLAMA, "head_dim", 64), (LLAMA, "intermediate_size", 1024),
    (LLAMA, "vocab_size", 2000), (LLAMA, "attention_bias", True), (LLAMA, "mlp_bias", True),
    (LLAMA, "hidden_act", "gelu_pytorch_tanh"), (LLAMA, "model_type", "qwen3"), (LLAMA, "model_type", "gemma2"),
    (LLAMA, "partial_rotary_factor", 0.5),
    ({**BASE, "model_type": "mistral"}, "sliding_window", 256),
    ({**BASE, "model_type": "phi3"}, "sliding_window", 256),
    ({**BASE, "model_type": "qwen2", "sliding_window": 256, "max_window_layers": 2}, "use_sliding_window", True),
    ({**BASE, "model_type": "qwen2", "sliding_window": 256, "use_sliding_window": True}, "max_window_layers", 2),
    ({**BASE, "model_type": "gemma2", "sliding_window": 4096}, "sliding_window", 256),
    ({**BASE, "model_type": "gemma2"}, "final_logit_softcapping", 30.0),
    ({**BASE, "model_type": "gemma2", "sliding_window": 256}, "layer_types", ["full_attention"] * 4),
    ({**BASE, "model_type": "gemma3_text", "sliding_window": 256}, "sliding_window_pattern", 2),
    ({**BASE, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64},
     "num_experts_per_tok", 4),
    ({**BASE, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64},
     "moe_intermediate_size", 128),
    ({**BASE, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64},
     "norm_topk_prob", True),
]


def _steps(m):
    out = []
    for fusion, impl, kw in (("none", "reference", {}), ("none", "hf", {}), ("none", "hf", {"cache": "dynamic"}),
                             ("fused", "fused", {})):
        out.append(build_step(m, decode(2, 600), fusion, impl, **kw).ops)
    return out


@pytest.mark.parametrize("base,field,value", FIELD_CASES, ids=lambda x: x if isinstance(x, str) else None)
def test_every_step_changing_field_changes_the_step(tmp_path, base, field, value):
    a = load(tmp_path, base)
    b = load(tmp_path, {**base, field: value})
    assert field not in ignored_config_fields(b)
    assert _steps(a) != _steps(b)


def test_a_field_read_without_effect_changes_no_step_and_is_listed(tmp_path):
    a = load(tmp_path, LLAMA)
    for field, value in (("rms_norm_eps", 1e-5), ("rope_theta", 5e5), ("bos_token_id", 3), ("some_new_field", 1)):
        b = load(tmp_path, {**LLAMA, field: value})
        assert field in ignored_config_fields(b) and _steps(a) == _steps(b)


def test_every_config_field_is_consumed_or_listed(tmp_path):
    for path in CONFIGS.glob("*.json"):
        cfg = json.loads(path.read_text())
        m = load_model(str(path))
        listed = set(ignored_config_fields(m))
        assert set(cfg) <= F._CONSUMED | listed


def test_sliding_window_limits_the_keys_a_sliding_layer_reads(tmp_path):
    m = load(tmp_path, {**BASE, "model_type": "gemma2", "sliding_window": 256})
    for impl, kw, full in (("reference", {}, 1001), ("hf", {"cache": "dynamic"}, 1001), ("hf", {}, 1001)):
        st = build_step(m, decode(1, 1000), "none" if impl != "fused" else "fused", impl, **kw)
        ctx = [o.dim("sdpa_keys") or o.dim("ctx") for o in st.ops if o.name == "attention"]
        assert ctx == [256, full, 256, full]  # gemma2: even layers slide


# -- hardening -------------------------------------------------------------------------------------------------------
MOE = {**BASE, "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64}


@pytest.mark.parametrize("change,field", [
    ({"num_experts": 0}, "num_experts"), ({"num_experts": None}, "num_experts"), ({"num_experts": []}, "num_experts"),
    ({"num_experts": False}, "num_experts"), ({"num_experts": True}, "num_experts"),
    ({"moe_intermediate_size": 0}, "moe_intermediate_size"), ({"num_local_experts": 4}, "num_local_experts"),
    ({"num_experts_per_tok": True}, "num_experts_per_tok"), ({"moe_intermediate_size": True}, "moe_intermediate_size"),
    ({"shared_expert_intermediate_size": False}, "shared_expert_intermediate_size"),
    ({"num_experts": 8.0}, "num_experts"),
])
def test_moe_config_hardening(tmp_path, change, field):
    with pytest.raises(ModelError) as e:
        load(tmp_path, {**MOE, **change})
    assert f"field '{field}'" in str(e.value) and "\n" not in str(e.value)


def test_moe_agreeing_counts_and_mixtral_renormalises(tmp_path):
    m = load(tmp_path, {**MOE, "num_local_experts": 8})
    assert m.num_experts == 8 and not m.norm_topk_prob
    mx = load(tmp_path, {**BASE, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2})
    assert mx.is_moe and mx.norm_topk_prob and mx.moe_intermediate_size == BASE["intermediate_size"]
    with pytest.raises(ModelError, match="Mixture-of-Experts"):
        load(tmp_path, {**BASE, "model_type": "mixtral"})
    with pytest.raises(ModelError, match="no experts"):
        load(tmp_path, {**BASE, "model_type": "llama", "num_experts": 8, "num_experts_per_tok": 2})


@pytest.mark.parametrize("change,field", [
    ({"num_attention_heads": 7, "head_dim": None, "num_key_value_heads": 7}, "num_attention_heads"),
    ({"attention_bias": 1}, "attention_bias"), ({"hidden_act": "relu2"}, "hidden_act"),
    ({"final_logit_softcapping": True}, "final_logit_softcapping"),
    ({"model_type": "mistral", "sliding_window": True}, "sliding_window"),
    ({"model_type": "gemma2", "layer_types": ["full_attention"]}, "layer_types"),
    ({"layer_types": ["linear_attention"] * 4}, "layer_types"),
    ({"partial_rotary_factor": 0.3}, "partial_rotary_factor"),
    ({"rope_scaling": {"rope_type": "longrope"}}, "rope_scaling"),
    ({"use_sliding_window": "yes"}, "use_sliding_window"),
])
def test_bad_family_fields_are_refused_in_one_line(tmp_path, change, field):
    cfg = {k: v for k, v in {**LLAMA, **change}.items() if v is not None}
    with pytest.raises(ModelError) as e:
        load(tmp_path, cfg)
    assert f"field '{field}'" in str(e.value) and "\n" not in str(e.value)


def test_presets_are_llama_or_qwen3_with_no_family_extras():
    from simulator.model.recipes import family_extras

    for m in PRESETS.values():
        assert not family_extras(m) and m.family in ("llama", "qwen3", "qwen3_moe") and not m.ignored_fields
        assert m.qk_norm == m.family.startswith("qwen3")
        assert replace(m) == m
