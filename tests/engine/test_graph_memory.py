"""Graph memory and capture cost against hand computations, the measured-table path, KV capacity,
and the `graph-memory` check command (exit 1 over budget)."""

import functools
import json

import pytest
from typer.testing import CliRunner

from simulator.cli import app, main
from simulator.engine.graph_memory import GraphMemoryError, GraphMemoryModel, kv_cache_bytes, kv_cache_tokens, live_tensors, segment_bytes
from simulator.model.costs import CostModel
from simulator.model.models import ModelSpec
from simulator.model.profile import GraphMemoryTable, load_profile

MiB = 1 << 20
# q = kv = 1024, I = 4096, V = 2^20: every tensor size below is easy to do by hand.
HAND = ModelSpec("hand", 1024, 2, 8, 8, 128, 4096, 1 << 20, False, False, 4096)
runner = CliRunner()
W = 32 * MiB  # default capture-stream workspace (no measured constants in the datasheet profile)


def prof(**device):
    p = load_profile("datasheet-h200")
    return p.model_copy(update={"device": p.device.model_copy(update=device)})


def test_segment_rounding():
    assert segment_bytes([1000, 2000]) == 2 * MiB  # small tensors share one 2 MiB segment
    assert segment_bytes([MiB, 3 * MiB]) == 20 * MiB  # 1-10 MiB tensors share a 20 MiB segment
    assert segment_bytes([11 * MiB + 1]) == 12 * MiB  # >= 10 MiB: rounded up to 2 MiB
    assert segment_bytes([100, MiB, 16 * MiB]) == (2 + 20 + 16) * MiB


def test_live_set_by_hand():
    # b=1: residual 2048, hidden 2048, MLP block (gate/up 16384 + act 8192 > attention 6144 + 2048), logits 2 MiB
    assert live_tensors(HAND, 1, "fused") == [2048, 2048, 16384, 8192, 2 * MiB]
    assert len(live_tensors(HAND, 1, "none")) == 7  # + two fp32 norm temporaries


@pytest.mark.parametrize("batch,mib", [(1, 22 + 2), (2, 22 + 2), (8, 18 + 2), (64, 150 + 2)])
def test_pool_bytes_by_hand(batch, mib):
    # 1, 2: small tensors -> 2 MiB, logits 2/4 MiB -> one 20 MiB segment; 8: 2 + 16 MiB of logits;
    # 64: small 768 KiB -> 2, gate/up exactly 1 MiB -> 20, logits 128; each + the capture's own 2 MiB
    assert GraphMemoryModel(HAND, prof(), "fused", "full").pool_bytes(batch) == mib * MiB


def test_layout_private_vs_shared():
    g = GraphMemoryModel(HAND, prof(), "fused", "full")
    priv = g.layout([64, 1, 8], shared_pool=False)
    assert priv.sizes == (1, 8, 64) and priv.graphs == 3
    assert priv.per_graph_bytes == (24 * MiB, 20 * MiB, 152 * MiB)
    assert priv.pool_bytes == 196 * MiB + W  # + the capture-stream workspace, once
    shared = g.layout([1, 8, 64])
    assert shared.pool_bytes == 152 * MiB + W  # drop: the largest graph; the others fit in its freed blocks
    # static: 64 rows x (28 + 4 x 4096/16) bytes + 64 x 2^20 x 2 bytes of logits
    assert shared.static_buffer_bytes == 64 * 1052 + 128 * MiB
    assert shared.total_bytes == shared.pool_bytes + shared.static_buffer_bytes
    # keep: logits 16 + 2 MiB of the smaller graphs, less alpha x the largest's freed 152 - 128 MiB
    keep = GraphMemoryModel(HAND, prof(), "fused", "full", "keep").layout([1, 8, 64])
    assert keep.pool_bytes == pytest.approx(W + 152 * MiB + 18 * MiB - 0.32 * 24 * MiB, abs=1)
    # keep, equal pools: 2 MiB of b1 logits fit in 0.32 x (24 - 4) MiB the b2 graph freed
    assert GraphMemoryModel(HAND, prof(), "fused", "full", "keep").layout([1, 2]).pool_bytes == 24 * MiB + W


def test_full_and_piecewise_doubles():
    g = GraphMemoryModel(HAND, prof(), "fused", "full_and_piecewise")
    lay = g.layout([1, 2])
    assert lay.graphs == 4
    assert g.layout([1, 2], shared_pool=False).pool_bytes == 4 * 24 * MiB + W
    # shared, drop: piece outputs 3 x 8704 B (b2 pw twice the b1 row) vanish in 0.32 x 24 MiB of reuse
    assert lay.pool_bytes == 24 * MiB + W


def test_capture_time_is_the_startup_model():
    # capture time of a size = warm-up runs x launchsim's eager step + capture ratio x its eager host time
    # (simulator/engine/startup.py); piecewise is one pass per size, full_and_piecewise two
    from simulator.engine.startup import eager_pass

    p = prof()
    f = p.host.startup  # the datasheet profile carries the H200 figures (calibration/device_sections.py)
    one = sum(f.warmup_runs * eager_pass(HAND, p, "fused", b)[0] + f.capture_host_ratio * eager_pass(HAND, p, "fused", b)[1]
              for b in (1, 8, 64))
    for mode, passes in (("full", 1), ("piecewise", 1), ("full_and_piecewise", 2)):
        lay = GraphMemoryModel(HAND, p, "fused", mode).layout([1, 8, 64])
        assert lay.capture_s == pytest.approx(passes * one, rel=1e-12)
    none = GraphMemoryModel(HAND, prof(), "fused", "none").layout([1, 8])
    assert (none.graphs, none.total_bytes, none.capture_s) == (0, 0.0, 0.0)


def test_measured_table_exact_sizes_formula_elsewhere():
    from simulator.engine.startup import eager_pass

    t = GraphMemoryTable(batch=[64, 8], private_pool_bytes=[800e6, 100e6], capture_s=[0.4, 0.1])
    g = GraphMemoryModel(HAND, prof(graph_memory={"hand": t}), "fused", "full")
    formula = GraphMemoryModel(HAND, prof(), "fused", "full")
    assert g.pool_bytes(8) == 100e6 and g.pool_bytes(64) == 800e6  # measured sizes: the measurement
    for b in (4, 36, 120):  # elsewhere: the formula (pool bytes step with allocator segments)
        assert g.pool_bytes(b) == formula.pool_bytes(b)
    warm = lambda b: g.startup.warmup_runs * eager_pass(HAND, g.profile, "fused", b)[0]  # noqa: E731
    assert g.capture_s(36) == pytest.approx(0.25 + warm(36))  # the capture part is interpolated
    assert g.capture_s(4) == pytest.approx(0.1 + warm(4))  # clamped below
    assert g.capture_s(120) == pytest.approx(0.4 + 0.3 / 56 * 56 + warm(120))  # last slope extended
    lay = g.layout([4, 8, 120], shared_pool=False)
    assert lay.pool_bytes == pytest.approx(formula.pool_bytes(4) + 100e6 + formula.pool_bytes(120) + W)
    assert lay.source == "table at 1 sizes, formula at 2"
    assert g.layout([8, 64]).source == "table"
    assert formula.layout([8]).source == "formula"


def test_kv_cache_by_hand():
    p = prof(memory_gib=10.0)
    lay = GraphMemoryModel(HAND, p, "fused", "full").layout([1, 8, 64])
    # params: 2 x (1024*3072 + 1024*1024 + 3*1024*4096 + 2048) + 2 x 2^20 x 1024 + 1024 = 2,181,043,200
    weights = 2 * 2_181_043_200
    assert HAND.weight_bytes == weights
    kv = kv_cache_bytes(HAND, p, lay, workspace_bytes=256 * MiB, gpu_util=0.5)
    assert kv == 5 * (1 << 30) - weights - (152 * MiB + W + 64 * 1052 + 128 * MiB) - 256 * MiB
    assert kv_cache_tokens(HAND, kv) == kv // (2 * 2 * 1024 * 2)
    assert kv_cache_tokens(HAND, -5.0) == 0


def test_bad_inputs():
    with pytest.raises(GraphMemoryError, match="unknown graph mode"):
        GraphMemoryModel(HAND, prof(), "fused", "fully")
    with pytest.raises(GraphMemoryError, match="positive"):
        GraphMemoryModel(HAND, prof(), "fused", "full").layout([0, 4])


def test_cli_graph_memory_over_budget_exits_1(capsys):
    with pytest.raises(SystemExit) as e:
        main(["graph-memory", "--model", "qwen3-0.6b", "--layout", "vllm", "--profile", "datasheet-h200",
              "--budget", "256MiB"])
    assert e.value.code == 1
    out = capsys.readouterr()
    assert "OVER BUDGET" in out.out and "KV cache" in out.out and "exceeds the budget" in out.err


def test_cli_graph_memory_json_within_budget():
    r = runner.invoke(app, ["graph-memory", "--model", "qwen3-0.6b", "--layout", "seed", "--profile",
                            "datasheet-h200", "--budget", "1GiB", "--graph", "full", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["fits_budget"] and d["graphs"] == 13 and d["kv_tokens"] > 0
    assert d["total_bytes"] == d["pool_bytes"] + d["static_buffer_bytes"] <= 1 << 30


def test_cli_graph_memory_bad_budget_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["graph-memory", "--model", "qwen3-0.6b", "--budget", "lots"])
    assert e.value.code == 2
    assert "--budget" in capsys.readouterr().err


# -- shared pool formula, retention, new profile section, --json parts (issue 16) ------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as hs  # noqa: E402

from calibration.build_memory import memory_section  # noqa: E402
from simulator.engine.graph_memory import default_retention, piece_output_bytes  # noqa: E402
from simulator.model.models import load_model  # noqa: E402

MEASURED = "calibration/measured/h200-round-a"


def test_piece_outputs_and_default_retention_by_hand():
    # residual 1024 + q 1024 + k, v 2 x 1024 + cos, sin 2 x 128, bf16: 8704 bytes a row
    assert piece_output_bytes(HAND, 3) == 3 * 8704
    assert default_retention("sglang") == "keep" and default_retention("vllm") == "drop"
    assert default_retention("1,2,4") == "drop"
    with pytest.raises(GraphMemoryError, match="retention"):
        GraphMemoryModel(HAND, prof(), "fused", "full", "hold")


def test_shared_formula_with_a_measured_layout_by_hand():
    from simulator.model.profile import GraphMemoryConstants, GraphMemoryLayoutTable

    lay = GraphMemoryLayoutTable(fusion="fused", mode="full", batch=[1, 2, 4], workspace_in_first=True,
                                 private_reserved=[(10 + 16) * MiB, 12 * MiB, 30 * MiB])
    c = GraphMemoryConstants(capture_workspace_bytes=16 * MiB, reuse_fraction=0.5, slack_bytes=MiB)
    t = GraphMemoryTable(batch=[1], private_pool_bytes=[1.0], layouts=[lay], constants=c)
    g = GraphMemoryModel(HAND, prof(graph_memory={"hand": t}), "fused", "full", "keep")
    assert g.pool_bytes(1) == 10 * MiB  # the workspace is taken out of the first private pool
    # keep: R(b) = b x 2 MiB of logits; F = 30 - 8 MiB; 0.5 F = 11 MiB absorbs the 2 + 4 MiB of the others
    assert g.layout([1, 2, 4]).pool_bytes == 16 * MiB + MiB + 30 * MiB
    # private: W + 10 + 12 + 30 MiB, all measured
    priv = g.layout([1, 2, 4], shared_pool=False)
    assert priv.pool_bytes == (16 + 52) * MiB and priv.source == "table"
    assert priv.parts["private_pools_measured"] == {"bytes": 52 * MiB, "source": "measured"}
    g2 = GraphMemoryModel(HAND, prof(graph_memory={"hand": t.model_copy(update={"constants": c.model_copy(
        update={"reuse_fraction": 0.0})})}), "fused", "full", "keep")
    assert g2.layout([1, 2, 4]).pool_bytes == (16 + 1 + 30 + 2 + 4) * MiB  # no reuse: outputs stack


@functools.cache
def _costs(name: str) -> CostModel:
    """One CostModel per profile for the property tests' models: a layout's capture times come from the start-up
    model's eager passes, memoised in the cost model a GraphMemoryModel is given (graph_memory.py: "shared by every
    model made with it"): the same figures, each computed once instead of once per model made."""
    return CostModel(load_profile(name))


_MODES = hs.sampled_from(["full", "piecewise", "full_and_piecewise"])
_SIZES = hs.sets(hs.integers(1, 600), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(sizes=_SIZES, mode=_MODES, ret=hs.sampled_from(["keep", "drop"]), fusion=hs.sampled_from(["none", "fused"]))
def test_shared_never_above_private(sizes, mode, ret, fusion):
    g = GraphMemoryModel(load_model("qwen3-0.6b"), _costs("h200"), fusion, mode, ret)
    assert g.layout(sizes).pool_bytes <= g.layout(sizes, shared_pool=False).pool_bytes + 1e-6


@settings(max_examples=60, deadline=None)
@given(sizes=_SIZES, extra=hs.integers(1, 600), mode=_MODES, ret=hs.sampled_from(["keep", "drop"]))
def test_shared_monotone_in_adding_a_smaller_size(sizes, extra, mode, ret):
    g = GraphMemoryModel(load_model("llama3-8b"), _costs("datasheet-h200"), "fused", mode, ret)
    extra = min(extra, max(sizes))  # engines add sizes below the largest; a larger size may have a smaller pool
    assert g.layout(sizes | {extra}).pool_bytes >= g.layout(sizes).pool_bytes - 1e-6


@settings(max_examples=60, deadline=None)
@given(sizes=_SIZES, mode=_MODES)
def test_keep_at_least_drop(sizes, mode):
    m, p = load_model("qwen3-0.6b"), _costs("h200")
    keep = GraphMemoryModel(m, p, "none", mode, "keep").layout(sizes).pool_bytes
    assert keep >= GraphMemoryModel(m, p, "none", mode, "drop").layout(sizes).pool_bytes


def test_memory_section_loads_into_a_patched_profile():
    p = load_profile("h200")
    sec = memory_section(MEASURED, base={k: v.model_dump() for k, v in p.device.graph_memory.items()})
    assert set(sec) == {"qwen3-0.6b", "llama3-8b"}
    tables = {k: GraphMemoryTable(**v) for k, v in sec.items()}
    q = tables["qwen3-0.6b"]
    assert {(x.fusion, x.mode) for x in q.layouts} == {(f, m) for f in ("none", "compiled")
                                                       for m in ("full", "piecewise")}
    assert q.constants.capture_workspace_bytes == 32 * MiB and 0 < q.constants.reuse_fraction < 1
    assert "qwen3-0.6b fusion none" in q.constants.source and q.formula and q.static_buffers["largest"] == 512
    assert q.capture_s == p.device.graph_memory["qwen3-0.6b"].capture_s  # kept from the base section
    prof2 = p.model_copy(update={"device": p.device.model_copy(update={"graph_memory": tables})})
    g = GraphMemoryModel(load_model("qwen3-0.6b"), prof2, "none", "full", "drop")
    assert g.pool_bytes(512) == 180 * MiB and g.pool_bytes(1) == 4 * MiB  # measured, W taken out of b1
    sizes = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert g.layout(sizes).pool_bytes == 180 * MiB + 32 * MiB  # measured 182 MiB + W (1.1% under)
    assert g.layout(sizes).source == "table"
    # a profile without the new fields (the committed h200.json) still loads and works
    assert GraphMemoryModel(load_model("qwen3-0.6b"), p, "none", "full").layout(sizes).pool_bytes > 0


def test_cli_graph_memory_json_parts():
    r = runner.invoke(app, ["graph-memory", "--model", "qwen3-0.6b", "--layout", "sglang", "--profile",
                            "datasheet-h200", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["retention"] == "keep"  # the sglang preset keeps its outputs
    assert set(d["parts"]) == {"largest_graph_pool", "capture_workspace", "segment_slack", "retained_outputs",
                               "static_buffers"}
    assert sum(v["bytes"] for v in d["parts"].values()) == pytest.approx(d["total_bytes"])
    assert d["measured_bytes"] + d["derived_bytes"] == pytest.approx(d["total_bytes"])
    assert d["parts"]["capture_workspace"]["source"] == "default"
    assert d["parts"]["capture_workspace"]["bytes"] == load_profile("datasheet-h200").device.graph_memory_constants.capture_workspace_bytes
    r2 = runner.invoke(app, ["graph-memory", "--model", "qwen3-0.6b", "--layout", "sglang", "--profile",
                             "datasheet-h200", "--json", "--retention", "drop", "--private"])
    d2 = json.loads(r2.stdout)
    assert d2["retention"] == "drop" and "private_pools_formula" in d2["parts"]
    assert d2["pool_bytes"] == d2["parts"]["private_pools_formula"]["bytes"] + W
