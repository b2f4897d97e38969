"""The `lora_rank` step knob (config/stepopts.StepOptions): a LoRA adapter of rank r on every linear projection of each
layer, PEFT's forward `base(x) + lora_B(lora_A(x)) * scaling` (model/workload.py `_Builder.lora_delta`): per wrapped
projection two GEMMs ((T x k) @ (k x r), (T x r) @ (r x n)), the scaling multiply and the add; under torch.compile
the GEMMs stay extern and Inductor fuses the multiply and the add into their readers (model/inductor.py's name
table). Implementations reference and hf, dense models, one GPU; refused in one line elsewhere. Carried whole in
StepSetup and reaching every study; issue 24's knob criterion: its diff stat is in the commit that added it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from simulator.config import ConfigError, load_scenario
from simulator.engine.setup import StepSetup
from simulator.model.models import load_model
from simulator.model.workload import WorkloadError, build_step, decode, kernels_per_layer
from tests.conftest import cli_error
from tests.paths import ROOT
from tests.studies.test_compile_dynamic import QWEN, _cli

CSV = ROOT / "scenarios" / "data" / "optimize_uniform.csv"


def test_eager_layer_counts_by_hand():
    # the reference decoder's layer: 56 kernels (none), 53 (packed); each wrapped projection adds 4
    for f, extra in (("none", 4 * 7), ("packed", 4 * 4)):
        assert kernels_per_layer(QWEN, f, lora_rank=16) == kernels_per_layer(QWEN, f) + extra
    # transformers' layer (66 measured with the split-K reduce; 65 ops) gains the same 28
    assert kernels_per_layer(QWEN, "none", "hf", lora_rank=8) == kernels_per_layer(QWEN, "none", "hf") + 28


def test_compiled_keeps_the_two_gemms_and_fuses_the_rest():
    # Inductor: lora_A / lora_B are extern GEMMs (2 x 7 a layer); the scaling and the add read the expand GEMM and
    # the projection and fuse into the next Triton kernel (the q/k-norm, RoPE, residual add, SiLU-mul)
    assert kernels_per_layer(QWEN, "compiled", lora_rank=16) == kernels_per_layer(QWEN, "compiled") + 14
    ops = build_step(replace(QWEN, num_hidden_layers=1), decode(4, 100), "compiled", lora_rank=16).ops
    names = [o.name for o in ops]
    assert not any(n.startswith("lora_scale") or n.endswith(".lora_add") for n in names)
    fused = [n for n in names if n.startswith("triton_") and "lora_scale" in n]  # kernels list their groups
    assert len(fused) == 6  # q, k, v, o, down; gate and up into one SiLU-mul kernel
    assert "triton_per:lora_scale+o_proj+residual_add+post_norm" in names


def test_op_shapes_by_hand():
    T, r = 4, 16
    ops = {o.name: o for o in build_step(replace(QWEN, num_hidden_layers=1), decode(T, 100), "none", lora_rank=r).ops}
    H, I = QWEN.hidden_size, QWEN.intermediate_size  # 1024, 3072
    a, b = ops["lora_A.down_proj"], ops["lora_B.down_proj"]
    assert (a.dim("m"), a.dim("n"), a.dim("k")) == (T, r, I) and a.flops == 2.0 * T * r * I
    assert a.bytes == 2 * (T * I + r * I + T * r)
    assert (b.dim("m"), b.dim("n"), b.dim("k")) == (T, H, r) and b.flops == 2.0 * T * H * r
    assert b.bytes == 2 * (T * r + H * r + T * H)
    assert ops["lora_scale.down_proj"].bytes == T * H * 4 and ops["down_proj.lora_add"].bytes == T * H * 6
    order = [o.name for o in build_step(replace(QWEN, num_hidden_layers=1), decode(T, 100), "none", lora_rank=r).ops]
    i = order.index("o_proj")
    assert order[i + 1:i + 5] == ["lora_A.o_proj", "lora_B.o_proj", "lora_scale.o_proj", "o_proj.lora_add"]


@settings(max_examples=15, deadline=None)
@given(batch=hs.integers(1, 256), ctx=hs.integers(1, 4000), r=hs.sampled_from([8, 16, 64, 256]))
def test_an_adapter_only_adds_and_rank_zero_is_no_adapter(batch, ctx, r):
    s = decode(batch, ctx)
    for f in ("none", "packed", "compiled"):
        base, lo = build_step(QWEN, s, f), build_step(QWEN, s, f, lora_rank=r)
        assert build_step(QWEN, s, f, lora_rank=0).ops == base.ops
        assert lo.kernels > base.kernels
        if f != "compiled":  # eager: the base op list is a subsequence of the adapted one
            it = iter(lo.ops)
            assert all(any(o == p for p in it) for o in base.ops)


def test_step_time_grows_with_the_rank_and_the_setup_keys_differ():
    sizes = [StepSetup.of(QWEN, "h200", "none", lora_rank=r) for r in (0, 16, 256)]
    assert len({s.build_key for s in sizes}) == 3 and len({s.cost_key for s in sizes}) == 3
    assert sizes[0] == StepSetup.of(QWEN, "h200", "none")  # rank 0: the setup without the knob
    from simulator.engine.predict import predict_setup

    from simulator.engine.setup import Capture

    # eager at batch 64: host-bound, the host pays per kernel, not per rank (16 and 256 launch alike)
    ms = [predict_setup(s, decode(64, 1024), "fast").result.step_s for s in sizes]
    assert ms[0] < ms[1] <= ms[2]
    # a full graph: the GPU's time, which grows with the adapter's GEMMs
    gpu = [predict_setup(s.with_capture(Capture("full")), decode(64, 1024), "fast").result.step_s for s in sizes]
    assert gpu[0] < gpu[1] < gpu[2]


def test_refused_where_not_modelled():
    with pytest.raises(WorkloadError, match="punica"):
        build_step(QWEN, decode(1, 8), "fused", lora_rank=16)
    with pytest.raises(WorkloadError, match="MoE"):
        build_step(load_model("qwen3-30b-a3b"), decode(1, 8), "none", lora_rank=16)
    from simulator.model.parallel import shard

    with pytest.raises(WorkloadError, match="tensor parallelism"):
        build_step(shard(load_model("llama3-8b"), 2), decode(1, 8), "none", lora_rank=16)


@pytest.mark.parametrize("argv, flag", [
    (["predict", "--model", "qwen3-0.6b", "--lora-rank", "16"], "--lora-rank"),  # default fusion fused
    (["predict", "--model", "qwen3-0.6b", "--impl", "vllm", "--lora-rank", "16"], "--lora-rank"),
    (["predict", "--model", "qwen3-0.6b", "--fusion", "none", "--lora-rank", "-1"], "--lora-rank"),
    (["predict", "--model", "qwen3-0.6b", "--fusion", "none", "--lora-rank", "600"], "--lora-rank"),
    (["predict", "--model", "llama3-8b", "--fusion", "none", "--tp", "2", "--lora-rank", "16"], "lora_rank"),
])
def test_refused_in_one_line(capsys, argv, flag):
    assert flag in cli_error(capsys, argv)


def test_every_study_takes_it():
    base = ["--model", "qwen3-0.6b", "--fusion", "none"]
    p0, p16 = _cli(["predict", *base]), _cli(["predict", *base, "--lora-rank", "16"])
    assert p16["lora_rank"] == 16 and "lora_rank" not in p0 and p16["kernels"] > p0["kernels"]
    for cmd in (["serve", "--rate", "2", "--duration", "3", "--graph", "none"], ["startup", "--layout", "1,8"],
                ["graph-memory", "--layout", "1,8"], ["optimize", "--distribution", str(CSV), "--max-graphs", "2"]):
        a, m = _cli(cmd + base), _cli(cmd + base + ["--lora-rank", "16"])
        assert a != m, cmd


def test_sweep_point_and_step_study(tmp_path):
    from simulator.studies.runner import run_scenario
    from simulator.sweep.grid import evaluate_point, point_for

    p = point_for(QWEN, "h200", fusion="compiled", graph="piecewise", layout="l", sizes=(1, 4), distribution="d",
                  dist_sizes=(1, 3), dist_weights=(0.5, 0.5), budget_bytes=1 << 30, ctx=512)
    q = replace(p, lora_rank=16)
    assert q.key() != p.key() and p.key() == replace(p, lora_rank=0).key()
    assert evaluate_point(q)["expected_step_ms"] > evaluate_point(p)["expected_step_ms"]
    f = tmp_path / "s.yaml"
    f.write_text("kind: step\nname: x\nmodel: qwen3-0.6b\nfusion: [none, compiled]\ngraph: [none]\nbatch: [1, 8]\n"
                 "ctx: 512\nlora_rank: 16\n")
    res = run_scenario(load_scenario(f), None)
    assert res["kernels_per_layer"] == {"none": 84, "packed": 69, "compiled": 28}  # fused: not with an adapter
    f.write_text("kind: step\nname: x\nmodel: qwen3-0.6b\nfusion: [none, fused]\nlora_rank: 16\n")
    with pytest.raises(ConfigError, match="lora_rank is modelled for implementations reference and hf"):
        load_scenario(f)


@settings(max_examples=10, deadline=None)
@given(fusion=hs.sampled_from(["none", "packed", "compiled"]), mode=hs.sampled_from(["none", "full", "piecewise"]),
       sizes=hs.lists(hs.integers(1, 300), min_size=4, max_size=16, unique=True), r=hs.sampled_from([8, 64]))
def test_batch_priced_adapter_steps_equal_the_scalar_path(fusion, mode, sizes, r):
    """The batch axis (engine/batchbuild.py traces one build; Inductor's pass over symbolic sizes for compiled)
    prices adapted steps bitwise as one build and plan per shape does."""
    import numpy as np

    from simulator.engine import batched
    from simulator.engine.stepcost import StepCostCache
    from simulator.model.workload import StepShape

    setup = StepSetup.of(QWEN, "h200", fusion, lora_rank=r)
    shapes = [StepShape(b, 512) for b in sizes]
    c = StepCostCache()
    want = np.array([c.step_time(setup, mode, s).step_s for s in shapes])
    assert np.array_equal(batched.step_seconds(setup, mode, shapes, {}, {}), want)
