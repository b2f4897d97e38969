"""recipes 'vllm': vLLM 0.34.0's default decode layer as read from its source (calibration/validation/
vllm_source_kernels.md; not profiled). Hand-counted kernels per layer per family, the ops a piecewise graph leaves
eager, the Triton pricing of its Inductor kernels, and the FA3 combine's bytes."""

import pytest

from simulator.model import recipes as R
from simulator.model.costs import CostModel
from simulator.model.kernels import TRITON_LIKE, OpClass
from simulator.model.models import PRESETS
from simulator.model.profile import load_profile
from simulator.model.workload import WorkloadError, build_step, decode


def _layer(model, batch=8, ctx=511):
    names = [o.name for o in build_step(model, decode(batch, ctx), "fused", "vllm").ops]
    i = names.index("fused_add_rmsnorm")
    return names[i:names.index("fused_add_rmsnorm", names.index("down_proj"))]


LLAMA = ["fused_add_rmsnorm", "qkv_proj", "rotary_embedding", "reshape_and_cache_flash", "attention",
         "attention.fa3_combine", "o_proj", "fused_add_rmsnorm", "gate_up_proj", "silu_and_mul", "down_proj"]


def test_llama_layer_is_eleven_kernels_in_vllms_order():
    assert _layer(PRESETS["llama3-8b"]) == LLAMA


def test_qwen3_adds_its_qk_norm_combo_kernel_after_the_qkv_gemm():
    got = _layer(PRESETS["qwen3-0.6b"])
    assert len(got) == 12 and got[:3] == ["fused_add_rmsnorm", "qkv_proj", "qk_norm"] and got[3:] == LLAMA[2:]


def test_the_recipe_is_a_fused_level_and_refuses_the_others():
    assert R.FUSIONS_OF["vllm"] == ("fused",)
    with pytest.raises(WorkloadError, match="does not exist for implementation 'vllm'"):
        build_step(PRESETS["llama3-8b"], decode(1, 511), "none", "vllm")


def test_piecewise_leaves_the_cache_write_attention_and_combine_eager():
    st = build_step(PRESETS["llama3-8b"], decode(8, 511), "fused", "vllm")
    eager = [o.name for o in st.ops if o.in_attention][:3]
    assert eager == ["reshape_and_cache_flash", "attention", "attention.fa3_combine"]


def test_inductor_kernels_are_triton_priced_and_the_others_are_not():
    cm = CostModel(load_profile("h200"))
    ops = {o.name: o for o in build_step(PRESETS["qwen3-0.6b"], decode(8, 511), "fused", "vllm").ops}
    for n, key in (("fused_add_rmsnorm", "triton_per"), ("qk_norm", "triton_per"), ("rotary_embedding", "triton_poi"),
                   ("silu_and_mul", "triton_poi")):
        assert ops[n].dim(TRITON_LIKE) == 1 and cm.curve_key(ops[n]) == key
    for n in ("reshape_and_cache_flash", "attention.fa3_combine"):
        assert not ops[n].dim(TRITON_LIKE) and cm.curve_key(ops[n]) in (OpClass.COPY, OpClass.REDUCTION)


def test_fa3_combine_reads_the_graph_split_count_of_fp32_partials():
    m = PRESETS["llama3-8b"]
    op = next(o for o in build_step(m, decode(4, 511), "fused", "vllm").ops if o.name == "attention.fa3_combine")
    rows = 4 * m.num_attention_heads
    assert op.bytes == rows * (R.FA3_GRAPH_SPLITS * (m.head_dim + 1) * 4 + m.head_dim * 2)


def test_vllm_costs_more_than_fused_under_a_full_graph():
    """Two or three more kernels a layer: a full-graph step of vllm is slower than fused's on the same model."""
    from simulator.engine.predict import simulate

    cm = CostModel(load_profile("h200"))
    for name in ("qwen3-0.6b", "llama3-8b"):
        f, _ = simulate(build_step(PRESETS[name], decode(8, 511), "fused", "fused"), cm, "full")
        v, _ = simulate(build_step(PRESETS[name], decode(8, 511), "fused", "vllm"), cm, "full")
        assert v.step_s > f.step_s and v.kernels > f.kernels


def test_predict_says_the_vllm_list_was_not_profiled():
    import json

    from typer.testing import CliRunner

    from simulator.cli import app

    r = CliRunner().invoke(app, ["predict", "--model", "llama3-8b", "--impl", "vllm", "--batch", "8", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["impl"] == "vllm" and d["impl_checked_by"].startswith("NOT profiled")
    assert d["kernels"] > json.loads(CliRunner().invoke(app, ["predict", "--model", "llama3-8b", "--batch", "8",
                                                             "--json"]).stdout)["kernels"]
