"""Steps built over the batch axis by one traced build (engine/batchbuild.py): the rows batched.py makes from a
trace equal the rows of each shape's real build (ops value for value, figures, launch structure), and step times
through them are bitwise the per-shape path's; a build the trace cannot replay falls back to per-shape builds."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from simulator.engine import batchbuild as BB
from simulator.engine import batched
from simulator.engine.setup import StepSetup
from simulator.engine.stepcost import StepCostCache
from simulator.model.resolve import resolve_model
from simulator.model.workload import StepShape

PROFILE = "h200"  # measured GEMM tables and curves (the datasheet profile has none)
MODELS = {"qwen3-0.6b": resolve_model("qwen3-0.6b"), "llama3-8b": resolve_model("llama3-8b"),
          "qwen3-30b-a3b": resolve_model("qwen3-30b-a3b"), "qwen3-8b-fp8": resolve_model("qwen3-8b", "fp8"),
          "llama3-70b-tp4": resolve_model("llama3-70b", tp=4)}


def per_shape(setup, mode, shapes):
    c = StepCostCache()
    return np.array([c.step_time(setup, mode, s).step_s for s in shapes])


def built_rows(setup, shapes):
    memo, figs = {}, {}
    pats = memo.setdefault("patterns", [])
    return [batched._Row(setup.build(s), setup.costs, pats, figs) for s in shapes]


def ops_of(r):
    """A row's distinct ops (a traced row makes them on demand)."""
    if r.ops is None:
        r._materialise()
    return r.ops


def traced_rows(setup, shapes):
    memo, figs = {}, {}
    batched._build_many(setup, shapes, memo, memo.setdefault("patterns", []), figs)
    return [memo[s] for s in shapes]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=hs.sampled_from(sorted(MODELS)), fusion=hs.sampled_from(["none", "packed", "fused"]),
       ctx=hs.sampled_from([1, 127, 1024]), q_len=hs.just(1),
       pairs=hs.lists(hs.tuples(hs.integers(1, 300), hs.sampled_from([0, 0, 1, 5, 64])), min_size=8, max_size=40,
                      unique=True))
def test_traced_rows_equal_built_rows(model, fusion, ctx, q_len, pairs):
    m = MODELS[model]
    if m.is_moe and fusion == "packed":
        fusion = "none"
    setup = StepSetup.of(m, PROFILE, fusion)
    shapes = [StepShape(b, ctx, padding=p, q_len=q_len) for b, p in pairs]
    before = BB.STATS["traced"]
    got, want = traced_rows(setup, shapes), built_rows(setup, shapes)
    for g, w in zip(got, want):
        assert np.array_equal(g.pat.first[g.pat.inv], w.pat.first[w.pat.inv])
        assert g.host(setup.costs) == w.host(setup.costs)  # per column for a traced row
        assert ops_of(g) == w.ops  # value for value
        assert list(g.gpu) == w.gpu and list(g.extra) == w.extra and g.key[1] == w.key[1]
    if not m.is_moe:  # dense decoders trace (MoE routing may not: then every row is built, still equal)
        assert BB.STATS["traced"] > before


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=hs.sampled_from(["qwen3-0.6b", "llama3-8b"]), fusion=hs.sampled_from(["none", "fused"]),
       mode=hs.sampled_from(["none", "full", "piecewise"]),
       pairs=hs.lists(hs.tuples(hs.integers(1, 200), hs.sampled_from([0, 3, 100])), min_size=8, max_size=24,
                      unique=True))
def test_step_seconds_through_traces_bitwise(model, fusion, mode, pairs):
    setup = StepSetup.of(MODELS[model], PROFILE, fusion)
    shapes = [StepShape(b, 512, padding=p) for b, p in pairs]
    assert np.array_equal(batched.step_seconds(setup, mode, shapes), per_shape(setup, mode, shapes))


def test_hand_computed_traced_gemm_sizes():
    # qwen3-0.6b fused: qkv_proj is (T x 1024) @ (1024 x (2048 + 2 x 1024)), T = batch + padding; bf16 bytes
    setup = StepSetup.of(MODELS["qwen3-0.6b"], PROFILE, "fused")
    shapes = [StepShape(b, 64, padding=p) for b, p in [(1, 0), (2, 0), (3, 5), (8, 0), (9, 7), (16, 0), (30, 2),
                                                        (64, 0)]]
    for s, r in zip(shapes, traced_rows(setup, shapes)):
        qkv = next(o for o in ops_of(r) if o.name == "qkv_proj")
        T, n, k = s.decode_seqs + s.padding, 4096, 1024
        assert qkv.shape == (("k", k), ("m", T), ("n", n))
        assert qkv.flops == 2.0 * T * n * k and qkv.bytes == 2.0 * (T * k + n * k + T * n)
        att = next(o for o in ops_of(r) if o.name == "attention")
        assert att.dim("batch") == s.decode_seqs and att.dim("ctx") == 65


def test_untraceable_builds_fall_back():
    # the symbols refuse what they cannot replay; an hf recipe (compiled or not) and a mixed step are never traced
    # (the reference recipe's compiled level is: tests/engine/test_batchbuild_compiled.py)
    x = BB.Sym("leaf", "decode_seqs", None, 3)
    with pytest.raises(BB.Untraceable):
        bool(x)
    with pytest.raises(BB.Untraceable):
        int(x)
    assert (2 * x + 1).v == 7 and (x / 2).v == 1.5 and (x // 2).v == 1
    s = StepShape(4, 128)
    assert not BB.traceable(StepSetup.of(MODELS["qwen3-0.6b"], PROFILE, "compiled", impl="hf"), s)
    assert not BB.traceable(StepSetup.of(MODELS["qwen3-0.6b"], PROFILE, "none", impl="hf"), s)
    assert not BB.traceable(StepSetup.of(MODELS["qwen3-0.6b"], PROFILE, "fused"), StepShape(4, 128, 1, 16))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=hs.sampled_from(["qwen3-0.6b", "llama3-8b", "llama3-70b-tp4"]), fusion=hs.sampled_from(["none", "fused"]),
       mode=hs.sampled_from(["none", "full", "piecewise"]),
       calls=hs.lists(hs.lists(hs.tuples(hs.integers(1, 300), hs.sampled_from([0, 0, 3, 100])), min_size=8,
                               max_size=20, unique=True), min_size=2, max_size=4))
def test_a_memo_reuses_its_traces_across_calls_bitwise(model, fusion, mode, calls):
    """Successive calls on one memo (a sweep's layouts asking for other batch sizes of the same step) replay the
    traces the first call made (batched._TRACES, BB.rows_of `traces`): each call's times equal a fresh scalar
    build's, and a later call whose shapes the first trace covers traces nothing new."""
    setup = StepSetup.of(MODELS[model], PROFILE, fusion)
    rows, figs = {}, {}
    for pairs in calls:
        shapes = [StepShape(b, 512, padding=p) for b, p in pairs]
        assert np.array_equal(batched.step_seconds(setup, mode, shapes, rows, figs), per_shape(setup, mode, shapes))
    n = sum(len(t) for t in rows[batched._TRACES].values())
    more = [StepShape(b, 512) for b in range(301, 321)]  # all off the earlier probes but on their path
    batched.step_seconds(setup, mode, more, rows, figs)
    # the path: no cuDNN split-KV reduce (batch x kv heads > 64, workload.py attention); if no earlier shape took it
    # (every earlier batch small), one new trace of it, and no more
    kv = MODELS[model].num_key_value_heads
    seen = fusion == "fused" or any((b + p) * kv > 64 for pairs in calls for b, p in pairs)
    assert sum(len(t) for t in rows[batched._TRACES].values()) == n + (0 if seen else 1)
