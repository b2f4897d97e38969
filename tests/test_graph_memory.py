"""Graph memory and capture cost against hand computations, the measured-table path, KV capacity,
and the `graph-memory` check command (exit 1 over budget)."""

import json

import pytest
from typer.testing import CliRunner

from simulator.cli import app, main
from simulator.graph_memory import (GraphMemoryError, GraphMemoryModel, kv_cache_bytes, kv_cache_tokens,
                                    live_tensors, segment_bytes)
from simulator.models import ModelSpec
from simulator.profile import GraphMemoryTable, load_profile

MiB = 1 << 20
# q = kv = 1024, I = 4096, V = 2^20: every tensor size below is easy to do by hand.
HAND = ModelSpec("hand", 1024, 2, 8, 8, 128, 4096, 1 << 20, False, False, 4096)
runner = CliRunner()


def prof(**device):
    p = load_profile("datasheet-h200")
    host = p.host.model_copy(update={"capture_per_node_ms": 1.0})
    return p.model_copy(update={"host": host, "device": p.device.model_copy(update=device)})


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
    assert priv.pool_bytes == 196 * MiB
    shared = g.layout([1, 8, 64])
    assert shared.pool_bytes == 152 * MiB  # the largest graph; the others fit in its freed blocks
    # static: 64 rows x (28 + 4 x 4096/16) bytes + 64 x 2^20 x 2 bytes of logits
    assert shared.static_buffer_bytes == 64 * 1052 + 128 * MiB
    assert shared.total_bytes == shared.pool_bytes + shared.static_buffer_bytes
    # equal pools: the second graph adds only its kept output, 2 x 1024 x 2 bytes
    assert g.layout([1, 2]).pool_bytes == 24 * MiB + 4096


def test_full_and_piecewise_doubles():
    g = GraphMemoryModel(HAND, prof(), "fused", "full_and_piecewise")
    lay = g.layout([1, 2])
    assert lay.graphs == 4
    assert g.layout([1, 2], shared_pool=False).pool_bytes == 4 * 24 * MiB
    # shared, largest first: (2 full) 24 MiB; (2 pw) +4096 kept; (1 full) +8192; (1 pw) +10240
    assert lay.pool_bytes == 24 * MiB + 10240


def test_capture_time_by_hand():
    # 2 layers fused: embedding + 2 x 9 + final norm + lm_head = 21 kernels, 2 of them attention
    for mode, nodes in (("full", 21), ("piecewise", 19), ("full_and_piecewise", 40)):
        lay = GraphMemoryModel(HAND, prof(), "fused", mode).layout([1, 8, 64])
        assert lay.capture_s == pytest.approx(3 * nodes * 1e-3, rel=1e-12)
    none = GraphMemoryModel(HAND, prof(), "fused", "none").layout([1, 8])
    assert (none.graphs, none.total_bytes, none.capture_s) == (0, 0.0, 0.0)


def test_measured_table_exact_sizes_formula_elsewhere():
    t = GraphMemoryTable(batch=[64, 8], private_pool_bytes=[800e6, 100e6], capture_s=[0.4, 0.1])
    g = GraphMemoryModel(HAND, prof(graph_memory={"hand": t}), "fused", "full")
    formula = GraphMemoryModel(HAND, prof(), "fused", "full")
    assert g.pool_bytes(8) == 100e6 and g.pool_bytes(64) == 800e6  # measured sizes: the measurement
    for b in (4, 36, 120):  # elsewhere: the formula (pool bytes step with allocator segments)
        assert g.pool_bytes(b) == formula.pool_bytes(b)
    assert g.capture_s(36) == pytest.approx(0.25)  # capture time is interpolated
    assert g.capture_s(4) == pytest.approx(0.1)  # clamped below
    assert g.capture_s(120) == pytest.approx(0.4 + 0.3 / 56 * 56)  # last slope extended
    lay = g.layout([4, 8, 120], shared_pool=False)
    assert lay.pool_bytes == pytest.approx(formula.pool_bytes(4) + 100e6 + formula.pool_bytes(120))
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
    assert kv == 5 * (1 << 30) - weights - (152 * MiB + 64 * 1052 + 128 * MiB) - 256 * MiB
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
                            "datasheet-h200", "--budget", "1GiB", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["fits_budget"] and d["graphs"] == 13 and d["kv_tokens"] > 0
    assert d["total_bytes"] == d["pool_bytes"] + d["static_buffer_bytes"] <= 1 << 30


def test_cli_graph_memory_bad_budget_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["graph-memory", "--model", "qwen3-0.6b", "--budget", "lots"])
    assert e.value.code == 2
    assert "--budget" in capsys.readouterr().err
