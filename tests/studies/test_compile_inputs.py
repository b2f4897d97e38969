"""The `compile_inputs` step knob (config/stepopts.StepOptions): with torch.compile dynamic=True, whether the compiled
code receives the weights and the KV cache as arguments (symbolic sizes reach them: the reference decoder, +1
kernel a layer for qwen3-0.6b) or holds them as nn.Module parameters and buffers (Dynamo specialises them: the
kernels are dynamic=False's; transformers and the gpt-fast style independent decoder measured so, round h: 450 and
450). Carried whole in StepSetup, honoured by every study, refused in one line where it changes nothing. Its diff
touched 7 modules of simulator/ (issue 24's knob criterion)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from simulator.config import ConfigError, load_scenario
from simulator.engine.setup import StepSetup
from simulator.model.workload import WorkloadError, build_step, decode
from tests.conftest import cli_error

from tests.studies.test_compile_dynamic import QWEN, _cli, _predict  # the same CLI helpers as its twin knob


def test_module_inputs_launch_the_static_kernels_and_arguments_are_the_reference_default():
    st, dyn = _predict(), _predict("--compile-dynamic")
    args, mod = _predict("--compile-dynamic", "--compile-inputs", "arguments"), \
        _predict("--compile-dynamic", "--compile-inputs", "module")
    assert (st["kernels"], dyn["kernels"], args["kernels"], mod["kernels"]) == (424, 452, 452, 424)
    assert args["step_ms"] == dyn["step_ms"] and "compile_inputs" not in dyn and mod["compile_inputs"] == "module"
    # module inputs keep dynamic=True's wrapper cost on every launch: slower host lane than static, same kernels
    assert mod["cpu_ms"] > st["cpu_ms"] and mod["launches"] == st["launches"]


def _kernels(step):
    """The step's ops without dynamic=True's mark (the "dynamic" shape key that only the inductor pass adds)."""
    return tuple(replace(o, shape=tuple(kv for kv in o.shape if kv[0] != "dynamic")) for o in step.ops)


@settings(max_examples=12, deadline=None)
@given(batch=hs.integers(1, 128), ctx=hs.integers(1, 3000))
def test_kernel_lists_by_hand_rule(batch, ctx):
    s = decode(batch, ctx)
    static = build_step(QWEN, s, "compiled").ops
    assert _kernels(build_step(QWEN, s, "compiled", compile_dynamic=True, compile_inputs="module")) == static
    assert build_step(QWEN, s, "compiled", compile_dynamic=True, compile_inputs="arguments").ops == \
        build_step(QWEN, s, "compiled", compile_dynamic=True).ops
    hf = dict(impl="hf", compile_dynamic=True)
    assert build_step(QWEN, s, "compiled", **hf, compile_inputs="module").ops == build_step(QWEN, s, "compiled", **hf).ops
    # transformers' op list with symbolic sizes forced into its cache and weights: the reference's extra kernels
    assert build_step(QWEN, s, "compiled", **hf, compile_inputs="arguments").kernels > \
        build_step(QWEN, s, "compiled", **hf).kernels


def test_unknown_value_refused_by_the_builder():
    with pytest.raises(WorkloadError, match="unknown compile_inputs 'x'"):
        build_step(QWEN, decode(1, 8), "compiled", compile_dynamic=True, compile_inputs="x")


def test_setup_keys_and_sweep_point():
    from simulator.sweep.grid import evaluate_point, point_for

    a = StepSetup.of(QWEN, "h200", "compiled", compile_dynamic=True)
    m = StepSetup.of(QWEN, "h200", "compiled", compile_dynamic=True, compile_inputs="module")
    assert a.build_key != m.build_key and a.cost_key != m.cost_key and hash(a) != hash(m)
    assert m.build(decode(4, 100)).kernels == StepSetup.of(QWEN, "h200", "compiled").build(decode(4, 100)).kernels
    p = point_for(QWEN, "h200", fusion="compiled", graph="piecewise", layout="l", sizes=(1, 4), distribution="d",
                  dist_sizes=(1, 3), dist_weights=(0.5, 0.5), budget_bytes=1 << 30, ctx=512, compile_dynamic=True)
    q = replace(p, compile_inputs="module")
    assert q.key() != p.key()
    assert evaluate_point(q)["expected_step_ms"] < evaluate_point(p)["expected_step_ms"]  # 28 fewer kernels a step


def test_every_study_takes_it():
    base = ["--model", "qwen3-0.6b", "--fusion", "compiled", "--compile-dynamic"]
    for cmd in (["serve", "--rate", "2", "--duration", "3", "--graph", "none"], ["startup", "--layout", "1,8"],
                ["graph-memory", "--layout", "1,8"]):
        a, m = _cli(cmd + base), _cli(cmd + base + ["--compile-inputs", "module"])
        assert a != m, cmd


@pytest.mark.parametrize("argv", [
    ["predict", "--model", "qwen3-0.6b", "--fusion", "compiled", "--compile-inputs", "module"],
    ["predict", "--model", "qwen3-0.6b", "--fusion", "compiled", "--no-compile-dynamic", "--compile-inputs", "module"],
    ["predict", "--model", "qwen3-0.6b", "--fusion", "compiled", "--compile-dynamic", "--compile-inputs", "weights"],
])
def test_refused_in_one_line(capsys, argv):
    assert "--compile-inputs" in cli_error(capsys, argv)


def test_yaml_twin_and_its_refusal(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("kind: predict\nname: x\nmodel: qwen3-0.6b\nbatch: 1\nctx: 511\nfusion: compiled\ngraph: none\n"
                 "compile_dynamic: true\ncompile_inputs: module\n")
    from simulator.studies.runner import run_scenario

    assert run_scenario(load_scenario(f), None)["rows"][0]["kernels"] == 424
    f.write_text("kind: predict\nname: x\nmodel: qwen3-0.6b\nfusion: compiled\ncompile_inputs: module\n")
    with pytest.raises(ConfigError, match="compile_inputs applies to torch.compile with dynamic=True only"):
        load_scenario(f)
