"""FP8 and Mixture-of-Experts (simulator/model/dtype.py, moe.py): weight and KV bytes per GPU by hand, the expected
active experts by hand, the fp8 tables exact at their grid points and free of held-out M, the kernels fp8 adds per
fusion level, config.json MoE fields, refusals, and the CLI / scenario field end to end."""

import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simulator.cli import app
from simulator.model.costs import CostModel
from simulator.model.dtype import fp8_gemm_us, quant_us, with_dtype
from simulator.model.models import PRESETS, ModelError, load_model
from simulator.model.moe import expected_active_experts
from simulator.model.parallel import ParallelError, shard
from simulator.model.profile import load_profile
from simulator.model.workload import WorkloadError, build_step, decode

from tests.conftest import cli_error
from tests.paths import ROOT

runner = CliRunner()
RAW = ROOT / "calibration/measured/h200-round-d/moe_fp8.json"


def test_fp8_weight_bytes_qwen3_06b_by_hand():
    # per layer: q/k/v 1024 x (2048 + 2 x 1024), o 2048 x 1024, gate/up/down 3 x 1024 x 3072 -> 1 byte each
    linear = 28 * (1024 * (2048 + 2 * 1024) + 2048 * 1024 + 3 * 1024 * 3072)
    # 2 norms + q/k norms per layer, tied embedding once, final norm -> bf16
    other = 28 * (2 * 1024 + 2 * 128) + 151936 * 1024 + 1024
    m = with_dtype(PRESETS["qwen3-0.6b"], "fp8")
    assert m.weight_bytes == linear * 1 + other * 2 == 751_697_920
    assert PRESETS["qwen3-0.6b"].weight_bytes == (linear + other) * 2
    assert m.kv_bytes_per_token() == 2 * 28 * 8 * 128 * 2  # KV stays bf16 without --kv-dtype
    assert with_dtype(PRESETS["qwen3-0.6b"], "fp8", "fp8").kv_bytes_per_token() == 2 * 28 * 8 * 128


def test_fp8_memory_per_gpu_llama3_8b_tp2_by_hand():
    m = shard(with_dtype(PRESETS["llama3-8b"], "fp8", "fp8"), 2)
    q, kv, inter, vocab = 16 * 128, 4 * 128, 14336 // 2, 128256 // 2  # 128256 is a multiple of 64: no padding
    linear = 32 * (4096 * (q + 2 * kv) + q * 4096 + 3 * 4096 * inter)
    other = 32 * 2 * 4096 + 2 * vocab * 4096 + 4096  # untied embedding + lm_head shards, norms
    assert m.weight_bytes == linear + 2 * other == 4_540_866_560
    assert m.kv_bytes_per_token() == 2 * 32 * kv * 1 == 32_768


def test_qwen3_30b_a3b_counts_every_expert():
    m = PRESETS["qwen3-30b-a3b"]
    linear = 48 * (2048 * (4096 + 2 * 512) + 4096 * 2048 + 128 * 3 * 2048 * 768)
    other = 48 * (2 * 2048 + 2 * 128 + 2048 * 128) + 2 * 151936 * 2048 + 2048  # router 2048 x 128 stays bf16
    assert m.params == linear + other == 30_532_122_624  # published: 30.5B
    assert m.weight_bytes == 2 * (linear + other)
    assert with_dtype(m, "fp8").weight_bytes == linear + 2 * other == 31_167_246_336


def test_expected_active_experts_by_hand():
    assert expected_active_experts(128, 8, 1) == pytest.approx(8.0)
    assert expected_active_experts(128, 8, 2) == pytest.approx(128 * (1 - (120 / 128) ** 2)) == pytest.approx(15.5)
    assert expected_active_experts(8, 2, 3) == pytest.approx(8 * (1 - 0.75 ** 3))  # 4.625


@settings(max_examples=60, deadline=None)
@given(E=st.integers(1, 256), data=st.data())
def test_expected_active_experts_bounds(E, data):
    k = data.draw(st.integers(1, E))
    B = data.draw(st.integers(1, 4096))
    a, a2 = expected_active_experts(E, k, B), expected_active_experts(E, k, B + 1)
    assert k - 1e-9 <= a <= E + 1e-9 and a2 >= a - 1e-9  # at least one token's k experts; never more than E
    assert B * k / a >= 1 - 1e-9  # tokens per active expert


def test_fp8_table_exact_at_grid_and_free_of_held_out():
    raw = json.loads(RAW.read_text())
    held = set(raw["fp8_gemm"]["held_out_m"])
    t = load_profile("h200").device.tables
    assert len(t.gemm_fp8) == len(raw["fp8_gemm"]["rows"])
    for g, r in zip(sorted(t.gemm_fp8, key=lambda g: (g.n, g.k)), sorted(raw["fp8_gemm"]["rows"], key=lambda r: (r["n"], r["k"]))):
        assert not held & set(g.m)
        for m, us in zip(r["m"], r["fp8_tensor_us"]):
            if m not in held:
                assert fp8_gemm_us(t, r["n"], r["k"], m) == pytest.approx(us, rel=1e-12)
    q = t.fp8_quant[0]
    for m, a, s in zip(q.m, q.absmax_us, q.scale_cast_us):
        assert quant_us(t, 1, m, q.k) == pytest.approx(a) and quant_us(t, 2, m, q.k) == pytest.approx(s)


def test_fp8_kernels_per_fusion_level():
    base, fp8 = PRESETS["qwen3-0.6b"], with_dtype(PRESETS["qwen3-0.6b"], "fp8")
    extra = {f: build_step(fp8, decode(8, 512), f).kernels - build_step(base, decode(8, 512), f).kernels
             for f in ("none", "packed", "compiled", "fused")}
    # 4 quantized inputs per layer (qkv, o, gate/up, down) x (abs-max + scale/cast) unfused; fused: only o_proj's
    assert extra == {"none": 28 * 8, "packed": 28 * 8, "compiled": 28 * 8, "fused": 28 * 1}
    st_ = build_step(fp8, decode(8, 512), "fused")
    fp8_gemms = {o.name for o in st_.ops if o.dim("fp8")}
    assert fp8_gemms == {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}  # lm_head stays bf16


def test_fp8_gemm_time_from_table_and_faster_for_large_weights():
    cm = CostModel(load_profile("h200"))
    l8 = with_dtype(PRESETS["llama3-8b"], "fp8")
    ops = {o.name: o for o in build_step(l8, decode(64, 512), "fused").ops}
    bf = {o.name: o for o in build_step(PRESETS["llama3-8b"], decode(64, 512), "fused").ops}
    assert cm.gpu_s(ops["down_proj"]) == pytest.approx(fp8_gemm_us(cm.profile.device.tables, 4096, 14336, 64) * 1e-6)
    # a shape without an fp8 table (qwen3-8b's down_proj 12288 -> 4096): roofline at twice the bf16 peak
    op = next(o for o in build_step(with_dtype(PRESETS["qwen3-8b"], "fp8"), decode(64, 512), "fused").ops
              if o.name == "down_proj")
    assert fp8_gemm_us(cm.profile.device.tables, 4096, 12288, 64) is None and cm.gpu_s(op) == cm.roofline_s(op)
    assert cm.gpu_s(ops["down_proj"]) < cm.gpu_s(bf["down_proj"])  # measured: 4096 x 14336 fp8 beats bf16


def test_moe_config_json_and_refusals(tmp_path):
    cfg = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
           "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
           "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
           "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 151936,
           "tie_word_embeddings": False, "max_position_embeddings": 40960}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    m = load_model(str(p))
    assert m.params == PRESETS["qwen3-30b-a3b"].params and m.is_moe and m.norm_topk_prob
    for k, v in (("mlp_only_layers", [0]), ("decoder_sparse_step", 2), ("n_routed_experts", 64),
                 ("num_experts_per_tok", 129)):
        p.write_text(json.dumps({**cfg, k: v}))
        with pytest.raises(ModelError, match=k):
            load_model(str(p))
    with pytest.raises(WorkloadError, match="compiled"):
        build_step(PRESETS["qwen3-30b-a3b"], decode(1, 128), "compiled")
    with pytest.raises(ParallelError, match="Mixture-of-Experts"):
        shard(PRESETS["qwen3-30b-a3b"], 2)


def test_moe_block_kernels():
    m = replace(PRESETS["qwen3-30b-a3b"], num_hidden_layers=1)
    two = replace(m, num_hidden_layers=2)
    per_layer = {f: build_step(two, decode(8, 512), f).kernels - build_step(m, decode(8, 512), f).kernels
                 for f in ("none", "fused")}
    # none: dense attention side (input norm .. post norm, 50 kernels with q/k norm) + 34 sparse-block kernels + add,
    # + cuDNN's split-KV reduce (8 sequences x 4 kv heads <= 64, over 513 keys: workload.py attention)
    assert per_layer["none"] == 50 + 34 + 1 + 1
    # fused: add-RMSNorm, qkv, RoPE+cache, attention, o_proj, add-RMSNorm + 7 fused_moe kernels
    assert per_layer["fused"] == 6 + 7
    g = [o for o in build_step(m, decode(1, 512), "fused").ops if o.dim("grouped")]
    assert [o.dim("experts_x100") for o in g] == [800, 800] and [o.dim("tpe_x100") for o in g] == [100, 100]


def test_cli_dtype_fp8_end_to_end():
    r = runner.invoke(app, ["predict", "--model", "qwen3-0.6b", "--batch", "8", "--ctx", "512", "--fusion", "fused",
                            "--graph", "full", "--dtype", "fp8", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    b = json.loads(runner.invoke(app, ["predict", "--model", "qwen3-0.6b", "--batch", "8", "--ctx", "512", "--fusion",
                                       "fused", "--graph", "full", "--json"]).output)
    assert d["dtype"] == "fp8" and d["fp8_scaling"] == "per-tensor" and "dtype" not in b
    assert d["kernels"] == b["kernels"] + 28
    r = runner.invoke(app, ["graph-memory", "--model", "qwen3-0.6b", "--dtype", "fp8", "--kv-dtype", "fp8", "--json"])
    assert r.exit_code in (0, 1), r.output
    g = json.loads(r.output)
    assert g["weights_bytes"] == 751_697_920


def test_cli_bad_dtype_one_line(capsys):
    err = cli_error(capsys, ["predict", "--model", "qwen3-0.6b", "--dtype", "fp4"])
    assert "--dtype" in err and "fp4" in err
    err = cli_error(capsys, ["predict", "--model", "qwen3-30b-a3b", "--fusion", "compiled"])
    assert "compiled" in err


def test_scenario_dtype_field():
    from simulator.config import parse_scenario
    from simulator.common.errors import UserError

    sc = parse_scenario({"kind": "step", "name": "x", "model": "qwen3-0.6b", "dtype": "fp8"})
    assert sc.dtype == "fp8" and sc.kv_dtype == "bf16"
    with pytest.raises(UserError, match="dtype"):
        parse_scenario({"kind": "step", "name": "x", "model": "qwen3-0.6b", "dtype": "int4"})


def test_moe_config_missing_top_k_names_the_field(tmp_path, capsys):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
                             "intermediate_size": 512, "vocab_size": 1000, "num_experts": 8}))
    err = cli_error(capsys, ["predict", "--model", str(p)])
    assert "num_experts_per_tok" in err and "missing" in err
