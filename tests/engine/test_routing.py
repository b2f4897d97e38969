"""Routing (routing.py): which plan mode and padded size a step runs at, by graph mode; and one step time for
one step: predict, the sweep, the optimizer's cost and serving agree (issue 12 item 1)."""

import pytest
from typer.testing import CliRunner

from simulator.layouts.buckets import preset_sizes
from simulator.cli import app
from simulator.model.costs import CostModel
from simulator.layouts.distribution import from_histogram
from simulator.model.models import load_model
from simulator.engine.plan import PlanError, build_plan
from simulator.engine.predict import predict
from simulator.model.profile import load_profile
from simulator.engine.routing import GRAPH_MODES, Route, RoutingError, padded_shape, plan_mode, route, route_shape
from simulator.serving.steptime import StepTimer
from simulator.engine.stepcost import routed_step, step_time
from simulator.studies.optimize import Inputs, metrics, setup
from simulator.sweep.grid import evaluate_point, point_for
from simulator.model.workload import StepShape, build_step, decode

SIZES = [1, 2, 4, 8]
PROFILE = "datasheet-h200"
QWEN = load_model("qwen3-0.6b")

# (decode-only, mixed) plan mode of a step that fits a captured size
TABLE = {"none": ("none", "none"), "full": ("full", "none"), "full_decode_only": ("full", "none"),
         "piecewise": ("piecewise", "piecewise"), "full_and_piecewise": ("full", "piecewise")}


@pytest.mark.parametrize("graph", GRAPH_MODES)
def test_route_table(graph):
    dec, mix = TABLE[graph]
    assert plan_mode(graph, True) == dec and plan_mode(graph, False) == mix
    r = route(graph, SIZES, 3)
    assert r == (Route(3, 4, dec) if dec != "none" else Route(3, None, "none"))
    r = route(graph, SIZES, 3, pure_decode=False)
    assert r == (Route(3, 4, mix) if mix != "none" else Route(3, None, "none"))
    # above the largest captured size: eager and unpadded in every mode (vLLM: no cudagraph)
    for pure in (True, False):
        r = route(graph, SIZES, 9, pure)
        assert (r.mode, r.padded, r.executed, r.padding) == ("none", None, 9, 0)
        assert r.overflow == (graph != "none" and TABLE[graph][0 if pure else 1] != "none")
    # no layout: every size captured, no padding
    assert route(graph, None, 600) == Route(600, 600 if dec != "none" else None, dec)


def test_route_errors_and_shapes():
    with pytest.raises(RoutingError):
        route("fully", SIZES, 3)
    with pytest.raises(RoutingError):
        route("full", SIZES, 0)
    with pytest.raises(PlanError):
        build_plan(build_step(QWEN, decode(2, 64), "none"), CostModel(load_profile(PROFILE)), "fully")
    mixed = StepShape(3, 512, 1, 4)  # 7 tokens -> 8: one padding row (attends to nothing)
    r = route_shape("full_and_piecewise", SIZES, mixed)
    assert (r.rows, r.padded, r.mode) == (7, 8, "piecewise")
    assert padded_shape(mixed, r) == StepShape(3, 512, 1, 4, padding=1)
    assert padded_shape(decode(3, 64), route("full", SIZES, 3)) == StepShape(3, 64, padding=1)


def _sweep_ms(graph, sizes, shape, fusion="none"):
    mixed = None if shape.is_pure_decode else (1.0, shape.prefill_seqs, shape.prefill_len)
    p = point_for(QWEN, PROFILE, fusion=fusion, graph=graph, layout="L", sizes=tuple(sizes), distribution="d",
                  dist_sizes=(shape.decode_seqs,), dist_weights=(1.0,), budget_bytes=1 << 40, ctx=shape.ctx,
                  mixed=mixed)
    return evaluate_point(p)["expected_step_ms"]


def _optimizer_ms(graph, sizes, batch, ctx, fusion="none"):
    st = setup(Inputs(from_histogram({batch: 1}), model=QWEN, profile=PROFILE, fusion=fusion, graph=graph, ctx=ctx,
                      max_size=max(sizes), presets=()))
    return metrics(st, list(sizes))["step_ms"]


def _serving_ms(graph, sizes, shape, fusion="none"):
    t = StepTimer(QWEN, CostModel(load_profile(PROFILE)), fusion, graph, list(sizes))
    if shape.is_pure_decode:
        return t.decode(shape.decode_seqs, shape.ctx).step_s * 1e3
    c = t.mixed(shape.decode_seqs, shape.prefill_seqs, shape.prefill_seqs * shape.prefill_len, shape.ctx)
    return c.step_s * 1e3


def _predict_ms(graph, sizes, shape, fusion="none"):
    p = predict(QWEN, shape.decode_seqs, shape.ctx, fusion, graph, load_profile(PROFILE), shape=shape,
                sizes=list(sizes))
    return p.result.step_s * 1e3


VLLM_512 = preset_sizes("vllm", 512)


@pytest.mark.parametrize("graph,shape,mode", [
    ("piecewise", decode(600, 1024), "none"),  # issue 12: above the largest size (512) -> eager everywhere
    ("full_and_piecewise", decode(600, 1024), "none"),
    ("full", decode(600, 1024), "none"),
    ("piecewise", decode(64, 1024), "piecewise"),  # a captured size: no padding
    ("full_and_piecewise", decode(64, 1024), "full"),
    ("full_decode_only", decode(256, 2048), "full"),
])
def test_decode_step_agrees_everywhere(graph, shape, mode):
    """predict, the sweep, the optimizer's cost and serving charge one time for one decode step."""
    r = route_shape(graph, VLLM_512, shape)
    assert r.mode == mode and r.padding == 0
    want = step_time(QWEN, PROFILE, "none", mode, shape).step_s * 1e3
    assert _predict_ms(graph, VLLM_512, shape) == pytest.approx(want, rel=1e-12)
    assert _sweep_ms(graph, VLLM_512, shape) == pytest.approx(want, rel=1e-12)
    assert _optimizer_ms(graph, VLLM_512, shape.decode_seqs, shape.ctx) == pytest.approx(want, rel=1e-12)
    # serving extrapolates 2- and 3-layer runs to the model's depth (exact to ~1e-13)
    assert _serving_ms(graph, VLLM_512, shape) == pytest.approx(want, rel=1e-9)
    # and the eager figure is the eager one: the 600-row step above 512 is not charged a graph
    if mode == "none":
        assert want == pytest.approx(predict(QWEN, 600, 1024, "none", "none", load_profile(PROFILE))
                                     .result.step_s * 1e3, rel=1e-12)


@pytest.mark.parametrize("graph,mode", [("full", "none"), ("full_decode_only", "none"),
                                        ("piecewise", "piecewise"), ("full_and_piecewise", "piecewise"),
                                        ("none", "none")])
def test_mixed_step_agrees_everywhere(graph, mode):
    """A mixed step (4 decode rows + one 64-token prefill chunk = 68 tokens, a captured size in `sizes`):
    full and full_decode_only run it eager, piecewise modes as piecewise graphs; predict, the sweep and
    serving agree (the optimizer costs decode steps only). Grid points of serving's interpolation: exact."""
    sizes = [1, 2, 4, 8, 16, 32, 68, 128]
    shape = StepShape(4, 1024, 1, 64)
    r = route_shape(graph, sizes, shape)
    assert r.mode == mode and r.padding == 0
    want = step_time(QWEN, PROFILE, "none", mode, shape).step_s * 1e3
    assert _predict_ms(graph, sizes, shape) == pytest.approx(want, rel=1e-12)
    assert _sweep_ms(graph, sizes, shape) == pytest.approx(want, rel=1e-12)
    assert _serving_ms(graph, sizes, shape) == pytest.approx(want, rel=1e-9)
    if graph == "full":  # a mixed step under full is not charged a full graph
        full = step_time(QWEN, PROFILE, "none", "full", decode(4, 1024)).step_s * 1e3
        assert want > full


def test_padded_decode_step_agrees_everywhere():
    """A padded step (300 -> 304): predict, the sweep, the optimizer and serving charge the same padded step,
    whose 4 padding rows run the token-wise kernels but attend to nothing."""
    shape = decode(300, 1024)
    r = route_shape("full", VLLM_512, shape)
    assert (r.padded, r.mode) == (304, "full")
    want = routed_step(QWEN, PROFILE, "none", "full", VLLM_512, shape).step_s * 1e3
    assert want == step_time(QWEN, PROFILE, "none", "full", StepShape(300, 1024, padding=4)).step_s * 1e3
    assert step_time(QWEN, PROFILE, "none", "full", shape).step_s * 1e3 < want < \
        step_time(QWEN, PROFILE, "none", "full", decode(304, 1024)).step_s * 1e3
    assert _predict_ms("full", VLLM_512, shape) == pytest.approx(want, rel=1e-12)
    assert _sweep_ms("full", VLLM_512, shape) == pytest.approx(want, rel=1e-12)
    assert _optimizer_ms("full", VLLM_512, 300, 1024) == pytest.approx(want, rel=1e-12)
    assert _serving_ms("full", VLLM_512, shape) == pytest.approx(want, rel=1e-9)


def test_full_decode_only_accepted():
    res = CliRunner().invoke(app, ["predict", "--model", "qwen3-0.6b", "--graph", "full_decode_only", "--batch", "4",
                                   "--prefill-seqs", "1", "--prefill-len", "64", "--json"])
    assert res.exit_code == 0, res.output
    assert '"graph": "none"' in res.output
    res = CliRunner().invoke(app, ["predict", "--model", "qwen3-0.6b", "--graph", "full_decode_only", "--json"])
    assert res.exit_code == 0 and '"graph": "full"' in res.output
    from simulator.engine.graph_memory import GraphMemoryModel

    gm = GraphMemoryModel(QWEN, load_profile(PROFILE), "none", "full_decode_only")
    assert gm.layout((1, 2, 4), True).total_bytes == \
        GraphMemoryModel(QWEN, load_profile(PROFILE), "none", "full").layout((1, 2, 4), True).total_bytes


def test_predict_layout_flag():
    """`predict --layout` routes the step as the sweep and serving do; without it, no padding (keys unchanged)."""
    import json

    run = lambda *a: json.loads(CliRunner().invoke(app, ["predict", "--model", "qwen3-0.6b", "--profile", PROFILE, "--fusion", "none",
                                                         "--json", *a]).output)
    over = run("--batch", "600", "--graph", "piecewise", "--layout", "vllm")
    assert (over["graph"], over["padded"], over["requested_graph"]) == ("none", None, "piecewise")
    eager = run("--batch", "600", "--graph", "none")
    assert over["step_ms"] == pytest.approx(eager["step_ms"], rel=1e-12)
    padded = run("--batch", "300", "--graph", "full", "--layout", "vllm")
    assert (padded["graph"], padded["padded"]) == ("full", 304)
    from simulator.layouts.buckets import parse_layout

    want = routed_step(QWEN, PROFILE, "none", "full", parse_layout("vllm"), decode(300, 1024)).step_s * 1e3
    assert padded["step_ms"] == pytest.approx(want, rel=1e-3)  # the CLI rounds to 4 significant digits
    assert padded["step_ms"] <= run("--batch", "304", "--graph", "full")["step_ms"]  # padding attends to nothing
    plain = run("--batch", "300", "--graph", "full")
    assert "padded" not in plain and "layout" not in plain
