"""Issue 11 item 4: the attention backend (fa3: `full` captures mixed steps) and the prefill (token-count) sizes
of SGLang's piecewise graphs, routed in one place (simulator/engine/routing.py) and agreed on by every study."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import given, settings, strategies as st

from simulator.common import vocab as V
from simulator.config import ConfigError, load_scenario
from simulator.engine.predict import predict
from simulator.engine.routing import ATTENTION_BACKENDS, GRAPH_MODES, Route, RoutingError, route, route_shape
from simulator.engine.startup import StartupModel
from simulator.engine.stepcost import step_time
from simulator.engine.graph_memory import GraphMemoryModel
from simulator.layouts.prefill import parse_prefill_layout, sglang_pcg_sizes
from simulator.model.profile import load_profile
from simulator.model.workload import StepShape
from tests.conftest import cli_error
from tests.engine.test_routing import PROFILE, QWEN, _predict_ms, _serving_ms, _sweep_ms

SIZES = [1, 2, 4, 8]

# hand-written: backend -> graph mode -> (decode-only step, mixed step) plan mode, for a step that fits
_FI = {"none": ("none", "none"), "full": ("full", "none"), "full_decode_only": ("full", "none"),
       "piecewise": ("piecewise", "piecewise"), "full_and_piecewise": ("full", "piecewise")}
HAND = {"flashinfer": _FI, "fa2": _FI, "triton": _FI,
        "fa3": {"none": ("none", "none"), "full": ("full", "full"), "full_decode_only": ("full", "none"),
                "piecewise": ("piecewise", "piecewise"), "full_and_piecewise": ("full", "piecewise")}}


def test_every_backend_has_a_hand_row():
    assert set(HAND) == set(ATTENTION_BACKENDS) == {"flashinfer", "fa3", "fa2", "triton"}
    assert ATTENTION_BACKENDS[0] == "flashinfer"  # the default: today's rule


@pytest.mark.parametrize("backend", sorted(HAND))
@pytest.mark.parametrize("graph", GRAPH_MODES)
def test_backend_routing_table(backend, graph):
    dec, mix = HAND[backend][graph]
    # 3 rows pad to 4; a mixed step pads by its token count (3 tokens -> 4), as vLLM pads num_tokens
    assert route(graph, SIZES, 3, True, backend=backend) == (Route(3, 4, dec) if dec != "none" else
                                                             Route(3, None, "none"))
    assert route(graph, SIZES, 3, False, backend=backend) == (Route(3, 4, mix) if mix != "none" else
                                                              Route(3, None, "none"))
    for pure, want in ((True, dec), (False, mix)):  # above the largest size: eager, unpadded
        r = route(graph, SIZES, 9, pure, backend=backend)
        assert (r.mode, r.padded, r.overflow) == ("none", None, want != "none")


def test_unknown_backend():
    with pytest.raises(RoutingError, match="unknown attention backend 'fa4'"):
        route("full", SIZES, 3, False, backend="fa4")


def _old_route(graph, sizes, rows, pure):
    """The rule before the backend existed (commit d76c252), written out: the reference for flashinfer."""
    table = {"none": ("none", "none"), "full": ("full", "none"), "full_decode_only": ("full", "none"),
             "piecewise": ("piecewise", "piecewise"), "full_and_piecewise": ("full", "piecewise")}
    mode = table[graph][0 if pure else 1]
    if mode == "none":
        return Route(rows, None, "none")
    if sizes is None:
        return Route(rows, rows, mode)
    i = bisect.bisect_left(sizes, rows)
    if i == len(sizes):
        return Route(rows, None, "none", overflow=True)
    return Route(rows, sizes[i], mode)


@settings(max_examples=300, deadline=None)
@given(graph=st.sampled_from(GRAPH_MODES), rows=st.integers(1, 5000), pure=st.booleans(),
       sizes=st.one_of(st.none(), st.lists(st.integers(1, 4096), min_size=1, max_size=20, unique=True).map(sorted)),
       backend=st.sampled_from(["flashinfer", "fa2", "triton"]))
def test_non_fa3_backends_route_as_before(graph, rows, pure, sizes, backend):
    want = _old_route(graph, sizes, rows, pure)
    assert route(graph, sizes, rows, pure) == want
    assert route(graph, sizes, rows, pure, backend=backend, prefill_sizes=None) == want


@settings(max_examples=200, deadline=None)
@given(graph=st.sampled_from(GRAPH_MODES), rows=st.integers(1, 5000),
       sizes=st.lists(st.integers(1, 4096), min_size=1, max_size=20, unique=True).map(sorted),
       prefill=st.lists(st.integers(1, 8192), min_size=1, max_size=20, unique=True).map(sorted),
       backend=st.sampled_from(ATTENTION_BACKENDS))
def test_prefill_sizes_only_move_mixed_piecewise_steps(graph, rows, sizes, prefill, backend):
    base = route(graph, sizes, rows, False, backend=backend)
    r = route(graph, sizes, rows, False, backend=backend, prefill_sizes=prefill)
    assert route(graph, sizes, rows, True, backend=backend, prefill_sizes=prefill) == \
        route(graph, sizes, rows, True, backend=backend)  # decode-only steps keep the decode sizes
    if base.mode == "piecewise" or (base.overflow and HAND[backend][graph][1] == "piecewise"):
        assert r == _old_route("piecewise", prefill, rows, False)
    else:
        assert r == base


def test_sglang_pcg_list():
    s = sglang_pcg_sizes()
    assert s[:9] == [4, 8, 12, 16, 20, 24, 28, 32, 48] and s[-3:] == [7168, 7680, 8192]
    assert [x for x in s if 256 < x <= 576] == [288, 320, 352, 384, 416, 448, 480, 512, 576]
    assert [x for x in s if 1024 <= x <= 1536] == [1024, 1280, 1536]
    assert len(s) == 8 + 14 + 8 + 8 + 12 + 8
    assert sglang_pcg_sizes(2048) == [x for x in s if x <= 2048]  # older SGLang: max 2048
    assert parse_prefill_layout("sglang_pcg:512") == [x for x in s if x <= 512]
    assert parse_prefill_layout("--piecewise-cuda-graph-tokens 64 16 256") == [16, 64, 256]
    assert parse_prefill_layout("none") is None and parse_prefill_layout(None) is None


def test_mixed_step_pads_to_prefill_sizes_and_overflows_eager():
    pre = parse_prefill_layout("sglang_pcg:1024")
    mixed = StepShape(4, 1024, 1, 60)  # 64 tokens: a prefill size
    assert route_shape("piecewise", SIZES, mixed, prefill_sizes=pre) == Route(64, 64, "piecewise")
    mixed = StepShape(4, 1024, 1, 61)  # 65 tokens -> 80 (48..256 step 16)
    assert route_shape("full_and_piecewise", SIZES, mixed, prefill_sizes=pre) == Route(65, 80, "piecewise")
    # without prefill sizes the same step overflows the decode sizes (max 8) and runs eager
    assert route_shape("full_and_piecewise", SIZES, mixed) == Route(65, None, "none", overflow=True)
    big = StepShape(4, 1024, 1, 1100)  # 1104 tokens > 1024: eager
    assert route_shape("piecewise", SIZES, big, prefill_sizes=pre) == Route(1104, None, "none", overflow=True)
    # decode steps ignore them; full (flashinfer) runs the mixed step eager whatever the prefill sizes
    assert route("piecewise", SIZES, 3, True, prefill_sizes=pre) == Route(3, 4, "piecewise")
    assert route_shape("full", SIZES, mixed, prefill_sizes=pre) == Route(65, None, "none")


SIZES_64 = [1, 2, 4, 8, 16, 32, 64, 128]


def test_fa3_full_mixed_step_pads_by_tokens_and_costs_a_full_replay():
    """4 decode rows + a 60-token chunk = 64 tokens; under fa3 + full it pads to nothing (64 captured) and runs
    one full-graph replay: predict, the sweep and serving charge that one time."""
    shape = StepShape(4, 1024, 1, 64)  # 68 tokens -> 128: 60 padding rows that attend to nothing
    r = route_shape("full", SIZES_64, shape, backend="fa3")
    assert (r.rows, r.padded, r.mode) == (68, 128, "full")
    want = step_time(QWEN, PROFILE, "none", "full", StepShape(4, 1024, 1, 64, padding=60)).step_s * 1e3
    p = predict(QWEN, 4, 1024, "none", "full", load_profile(PROFILE), shape=shape, sizes=SIZES_64, backend="fa3")
    assert p.result.launches == 1 and p.result.graph_mode == "full"
    assert p.result.step_s * 1e3 == pytest.approx(want, rel=1e-12)
    eager = _predict_ms("full", SIZES_64, shape)  # flashinfer: eager
    assert want < eager
    assert _sweep_fa3(shape) == pytest.approx(want, rel=1e-12)
    assert _serving_fa3(shape) == pytest.approx(want, rel=1e-9)
    # fa3 leaves the other modes' mixed steps where they were
    for g in ("full_decode_only", "piecewise", "full_and_piecewise", "none"):
        assert _sweep_fa3(shape, g) == pytest.approx(_sweep_ms(g, SIZES_64, shape), rel=1e-12)


def _sweep_fa3(shape, graph="full"):
    from simulator.sweep.grid import evaluate_point, point_for

    p = point_for(QWEN, PROFILE, fusion="none", graph=graph, layout="L", sizes=tuple(SIZES_64), distribution="d",
                  dist_sizes=(shape.decode_seqs,), dist_weights=(1.0,), budget_bytes=1 << 40, ctx=shape.ctx,
                  mixed=(1.0, shape.prefill_seqs, shape.prefill_len), attention_backend="fa3")
    return evaluate_point(p)["expected_step_ms"]


def _serving_fa3(shape):
    from simulator.model.costs import CostModel
    from simulator.serving.steptime import StepTimer

    t = StepTimer(QWEN, CostModel(load_profile(PROFILE)), "none", "full", SIZES_64, backend="fa3")
    return t.mixed(shape.decode_seqs, shape.prefill_seqs, shape.prefill_seqs * shape.prefill_len, shape.ctx).step_s * 1e3


def test_prefill_padding_agrees_everywhere():
    """A 68-token mixed step under piecewise with prefill sizes [16, 80]: pads to 80 in predict, sweep, serving."""
    from simulator.model.costs import CostModel
    from simulator.serving.steptime import StepTimer
    from simulator.sweep.grid import evaluate_point, point_for

    shape, pre = StepShape(4, 1024, 1, 64), (16, 80)
    want = step_time(QWEN, PROFILE, "none", "piecewise", StepShape(4, 1024, 1, 64, padding=12)).step_s * 1e3
    p = predict(QWEN, 4, 1024, "none", "piecewise", load_profile(PROFILE), shape=shape, sizes=SIZES,
                prefill_sizes=list(pre))
    assert (p.route.padded, p.route.mode) == (80, "piecewise")
    assert p.result.step_s * 1e3 == pytest.approx(want, rel=1e-12)
    pt = point_for(QWEN, PROFILE, fusion="none", graph="piecewise", layout="L", sizes=tuple(SIZES), distribution="d",
                   dist_sizes=(4,), dist_weights=(1.0,), budget_bytes=1 << 40, ctx=1024, mixed=(1.0, 1, 64),
                   prefill_sizes=pre)
    assert evaluate_point(pt)["expected_step_ms"] == pytest.approx(want, rel=1e-12)
    base = point_for(QWEN, PROFILE, fusion="none", graph="piecewise", layout="L", sizes=tuple(SIZES),
                     distribution="d", dist_sizes=(4,), dist_weights=(1.0,), budget_bytes=1 << 40, ctx=1024,
                     mixed=(1.0, 1, 64))
    assert pt.key() != base.key() and base.key() == base.base_key()  # old caches keep their keys
    t = StepTimer(QWEN, CostModel(load_profile(PROFILE)), "none", "piecewise", SIZES, prefill_sizes=list(pre))
    assert t.mixed(4, 1, 64, 1024).step_s * 1e3 == pytest.approx(want, rel=1e-9)
    assert _serving_ms("piecewise", SIZES, shape) != pytest.approx(want, rel=1e-6)  # without: 68 > 8, eager


def test_startup_and_memory_count_prefill_passes():
    prof = load_profile("h200")
    pre = [16, 64, 256]
    for graph, extra in (("full_and_piecewise", 3), ("piecewise", 3), ("full", 0), ("full_decode_only", 0),
                         ("none", 0)):
        sm = StartupModel(QWEN, prof, "fused", graph)
        a, b = sm.layout(SIZES), sm.layout(SIZES, prefill_sizes=pre)
        assert b.graphs == a.graphs + extra
        got = [p for p in b.passes if p.mode == "prefill"]
        assert [p.batch for p in got] == ([256, 64, 16] if extra else [])
        assert b.capture_s + b.warmup_s == pytest.approx(
            a.capture_s + a.warmup_s + sum(p.warmup_s + p.capture_s for p in got), rel=1e-12)
        if extra:  # each pass is one piecewise pass of that many rows
            assert got[-1].warmup_s == pytest.approx(sm.passes(16)[0].warmup_s, rel=1e-12)
        gm = GraphMemoryModel(QWEN, prof, "fused", graph)
        la, lb = gm.layout(SIZES), gm.layout(SIZES, prefill_sizes=pre)
        assert lb.graphs == la.graphs + extra
        assert (lb.total_bytes > la.total_bytes) == bool(extra)
        assert sum(v["bytes"] for v in lb.parts.values()) == pytest.approx(lb.total_bytes, rel=1e-12)
        assert lb.capture_s == pytest.approx(b.capture_s + b.warmup_s, rel=1e-9)
        if extra:  # private pools: one more piecewise pool per prefill size
            pa, pb = gm.layout(SIZES, False), gm.layout(SIZES, False, prefill_sizes=pre)
            assert pb.total_bytes - pa.total_bytes == pytest.approx(
                sum(gm.prefill_pool_bytes(t) for t in pre), rel=1e-12)


@pytest.mark.parametrize("argv,needle", [
    (["predict", "--model", "qwen3-0.6b", "--attention-backend", "fa4"], "--attention-backend"),
    (["predict", "--model", "qwen3-0.6b", "--prefill-layout", "sglang_pcg:x"], "--prefill-layout"),
    (["predict", "--model", "qwen3-0.6b", "--prefill-layout", "0,4"], "--prefill-layout"),
    (["serve", "--model", "qwen3-0.6b", "--rate", "1", "--attention-backend", "fa4"],
     "--attention-backend (field 'attention_backend')"),
    (["serve", "--model", "qwen3-0.6b", "--rate", "1", "--prefill-layout", "x"],
     "--prefill-layout (field 'prefill_layout')"),
    (["startup", "--model", "qwen3-0.6b", "--prefill-layout", "sglang_pcg:0"], "--prefill-layout"),
    (["graph-memory", "--model", "qwen3-0.6b", "--prefill-layout", "-4"], "--prefill-layout"),
])
def test_bad_values_exit_2_naming_the_flag(capsys, argv, needle):
    assert needle in cli_error(capsys, argv)


@pytest.mark.parametrize("field,value", [("attention_backend", "fa4"), ("prefill_layout", "sglang_pcg:-1")])
@pytest.mark.parametrize("kind", ["serve", "sweep", "capacity"])
def test_bad_yaml_fields_name_the_field(tmp_path, capsys, kind, field, value):
    head = {"serve": "kind: serve\nname: s\nmodel: qwen3-0.6b\nrate: 1\n",
            "sweep": "kind: sweep\nname: s\nmodels: [qwen3-0.6b]\nlayouts: [{name: a, sizes: seed}]\n"
                     "distributions: [{name: h, histogram: {1: 1}}]\n",
            "capacity": "kind: capacity\nname: c\nmodels: [qwen3-0.6b]\n"}[kind]
    p = tmp_path / "s.yaml"
    p.write_text(head + f"{field}: '{value}'\n")
    with pytest.raises(ConfigError, match=field):
        load_scenario(p)
    assert field in cli_error(capsys, ["run", str(p), "--out", str(tmp_path / "o")])


def test_yaml_fields_reach_the_run(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("kind: serve\nname: s\nmodel: qwen3-0.6b\nrate: 1\ngraph: full\nattention_backend: fa3\n"
                 "prefill_layout: sglang_pcg:512\n")
    sc = load_scenario(p)
    from simulator.serving.setup import build_config

    cfg = build_config(sc, sc.model, sc.profile, sc.fusion, sc.graph, sc.layout)
    assert cfg.attention_backend == V.AttentionBackend.FA3 and cfg.prefill_sizes == tuple(sglang_pcg_sizes(512))
    assert cfg.label()["attention_backend"] == "fa3"
    plain = load_scenario_text(tmp_path, "kind: serve\nname: s\nmodel: qwen3-0.6b\nrate: 1\n")
    assert "attention_backend" not in build_config(plain, plain.model, plain.profile, plain.fusion, plain.graph,
                                                   plain.layout).label()  # the default keeps the output


def load_scenario_text(tmp_path, text):
    q = tmp_path / "plain.yaml"
    q.write_text(text)
    return load_scenario(q)
