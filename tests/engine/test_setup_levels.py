"""StepSetup.fusion_levels and StepSetup.kernels_per_layer: the step study's per-layer kernel counts come from the
setup whole, and equal model/workload.py kernels_per_layer called with the same knobs one by one."""

from __future__ import annotations

import pytest

from simulator.common import vocab as V
from simulator.engine.setup import StepSetup
from simulator.model.models import load_model
from simulator.model.recipes import FUSIONS_OF
from simulator.model.workload import kernels_per_layer


@pytest.mark.parametrize("name", ["qwen3-0.6b", "llama3-8b", "qwen3-8b"])
def test_reference_levels_match_the_workload_counts(name):
    m = load_model(name)
    base = StepSetup.of(m, "h200")
    assert base.fusion_levels == tuple(V.values(V.Fusion))
    for f in base.fusion_levels:
        assert base.with_fusion(f).kernels_per_layer() == kernels_per_layer(m, f)


@pytest.mark.parametrize("cache", ["static", "dynamic"])
def test_hf_levels_and_cache(cache):
    m = load_model("qwen3-0.6b")
    base = StepSetup.of(m, "h200", fusion="none", impl="hf", cache=cache)
    assert base.fusion_levels == FUSIONS_OF["hf"] == ("none", "compiled")
    for f in base.fusion_levels:
        assert base.with_fusion(f).kernels_per_layer() == kernels_per_layer(m, f, "hf", cache=cache)


def test_dynamic_compile_knobs_reach_the_count():
    m = load_model("qwen3-0.6b")
    s = StepSetup.of(m, "h200", fusion="compiled", compile_dynamic=True, compile_inputs="arguments")
    assert s.kernels_per_layer() == kernels_per_layer(m, "compiled", compile_dynamic=True,
                                                      compile_inputs="arguments")
    assert s.kernels_per_layer() == 15  # dynamic=True keeps the reference decoder's k-norm apart: one more than 14
    assert s.with_fusion("none").kernels_per_layer() == 56


def test_the_count_ignores_the_cache_length():
    """At context 128 the count is the default cache's, whatever max_cache_len the setup carries (as before)."""
    m = load_model("qwen3-0.6b")
    a = StepSetup.of(m, "h200", fusion="none", impl="hf", max_cache_len=4096)
    assert a.kernels_per_layer() == kernels_per_layer(m, "none", "hf")


def test_an_moe_model_lists_the_levels_it_builds():
    """torch.compile of an MoE layer is refused (not measured), so its setup lists none, packed and fused only, and
    the step study of an MoE model counts those (it failed on `compiled` before, whatever levels it ran)."""
    m = load_model("qwen3-30b-a3b")
    base = StepSetup.of(m, "h200")
    assert base.fusion_levels == ("none", "packed", "fused")
    for f in base.fusion_levels:
        assert base.with_fusion(f).kernels_per_layer() == kernels_per_layer(m, f)
