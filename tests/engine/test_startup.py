"""Start-up cost (simulator/engine/startup.py): the formula by hand, the derivation of its constants, every measured
row against its target, the `startup` command, and that graph-memory / optimizer / sweep use the same figures."""

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from simulator.cli import app
from simulator.engine.graph_memory import GraphMemoryModel
from simulator.model.models import load_model
from simulator.model.profile import CompileFit, StartupFigures, load_profile
from simulator.engine.startup import StartupError, StartupModel, compile_nodes, eager_pass

from tests.conftest import cli_error
from tests.paths import ROOT

runner = CliRunner()
ENGINE = ROOT / "calibration" / "measured" / "h200-engine" / "engine_loop.json"
QWEN = load_model("qwen3-0.6b")


def toy_profile(**fig):
    base = dict(warmup_runs=2, capture_host_ratio=1.5,
                compile_static_cold=CompileFit(fixed_s=10.0, per_node_s=0.01, nodes=[131, 467]),
                compile_static_warm=CompileFit(fixed_s=2.0, per_node_s=0.01, nodes=[131, 467]),
                compile_dynamic_note="not measured here", source="test")
    base.update(fig)
    p = load_profile("h200")
    return p.model_copy(update={"host": p.host.model_copy(update={"startup": StartupFigures(**base)})})


def toy_eager(b):  # step 10 ms + 1 ms per row, host 8 ms
    return 0.010 + 0.001 * b, 0.008


def test_formula_by_hand():
    p = toy_profile()
    r = StartupModel(QWEN, p, "none", "full", eager=toy_eager).layout([4, 1])
    # warm-up: 2 x (11 + 14) ms; capture: 2 graphs x 1.5 x 8 ms; no torch.compile at fusion none
    assert r.warmup_s == pytest.approx(0.050) and r.capture_s == pytest.approx(0.024)
    assert r.compile_s == 0.0 and r.total_s == pytest.approx(0.074) and r.graphs == 2
    assert [x.batch for x in r.passes] == [4, 1]  # captured largest first
    fp = StartupModel(QWEN, p, "none", "full_and_piecewise", eager=toy_eager).layout([4, 1])
    assert fp.graphs == 4 and fp.total_s == pytest.approx(2 * 0.074)  # two passes per size, each with warm-ups
    pw = StartupModel(QWEN, p, "none", "piecewise", eager=toy_eager).layout([4, 1])
    assert pw.graphs == 2 and pw.total_s == pytest.approx(0.074)  # piecewise: one pass per size
    none = StartupModel(QWEN, p, "none", "none", eager=toy_eager).layout([4, 1])
    assert (none.graphs, none.warmup_s, none.capture_s, none.total_s) == (0, 0.0, 0.0, 0.0)
    one = StartupModel(QWEN, p, "none", "full", warmup_runs=1, eager=toy_eager).layout([4, 1])
    assert one.warmup_s == pytest.approx(0.025)


def test_compile_by_hand():
    p = toy_profile()
    n = compile_nodes(QWEN)
    cold = StartupModel(QWEN, p, "compiled", "full", eager=toy_eager).layout([1], "static", "cold")
    assert cold.compile_s == pytest.approx(10.0 + 0.01 * n)
    assert cold.total_s == pytest.approx(cold.compile_s + 0.022 + 0.012)
    assert not cold.compile_measured  # 1587 nodes is beyond the measured 131-467: an extrapolation, said so
    assert "extrapolated" in cold.notes[0]
    warm = StartupModel(replace(QWEN, num_hidden_layers=8), p, "compiled", "full", eager=toy_eager).layout([1], cache="warm")
    assert warm.compile_s == pytest.approx(2.0 + 0.01 * 467) and warm.compile_measured
    with pytest.raises(StartupError, match="dynamic.*not measured here"):
        StartupModel(QWEN, p, "compiled", "full", eager=toy_eager).layout([1], "dynamic")
    # dynamic is refused only where torch.compile runs at all
    assert StartupModel(QWEN, p, "fused", "full", eager=toy_eager).layout([1], "dynamic").compile_s == 0.0


def test_compile_nodes_follow_depth():
    # qwen3-0.6b cut to 2 and 8 layers (the measured compiles): 56 eager kernels per layer
    assert compile_nodes(replace(QWEN, num_hidden_layers=2)) == 131
    assert compile_nodes(replace(QWEN, num_hidden_layers=8)) == 467
    assert compile_nodes(QWEN) == 131 + 26 * 56


def test_eager_pass_exact_at_powers_of_two_linear_between():
    p = load_profile("h200")
    a, b, mid = eager_pass(QWEN, p, "fused", 256), eager_pass(QWEN, p, "fused", 512), eager_pass(QWEN, p, "fused", 384)
    assert mid[0] == pytest.approx((a[0] + b[0]) / 2) and mid[1] == pytest.approx((a[1] + b[1]) / 2)
    from simulator.model.costs import CostModel
    from simulator.engine.predict import simulate
    from simulator.model.workload import build_step, decode

    r, _ = simulate(build_step(QWEN, decode(256, 512), "fused"), CostModel(p), "none")
    assert a == (r.step_s, r.cpu_busy_s)
    with pytest.raises(StartupError):
        StartupModel(QWEN, p).passes(0)


def test_dynamic_compile_uses_its_own_fit():
    p = load_profile("h200")
    m = StartupModel(load_model("qwen3-0.6b"), p, fusion="compiled")
    st = p.host.startup
    n = compile_nodes(load_model("qwen3-0.6b"))
    s, inside, note = m.compile("dynamic", "cold")
    assert s == pytest.approx(st.compile_dynamic_cold.fixed_s + st.compile_dynamic_cold.per_node_s * n)
    assert inside and "dynamic" in note
    assert m.compile("dynamic", "cold")[0] > m.compile("static", "cold")[0] > m.compile("static", "warm")[0]


def test_shipped_profile_carries_the_derived_figures():
    p = load_profile("h200")
    st = p.host.startup
    assert st is not None and st.warmup_runs == 2 and st.compile_static_cold.nodes == [99, 131, 339]
    assert st.compile_static_cold.validated_nodes == [1299, 1587]  # the two full-depth models are held out
    assert "engine_loop.json" in st.source and "not validated" in st.compile_dynamic_note
    # the derived and datasheet profiles carry the same H200 figures, and say so
    for name in ("h100-sxm", "datasheet-h200", "datasheet-h100-sxm"):
        q = load_profile(name).host.startup
        assert q is not None and q.model_dump(exclude={"source"}) == st.model_dump(exclude={"source"})
        assert q.source.startswith(f"H200 measured, applied to {name} by assumption: ")


def test_profile_without_startup_is_refused():
    p = load_profile("h200")
    bare = p.model_copy(update={"host": p.host.model_copy(update={"startup": None})})
    with pytest.raises(StartupError, match="has no host.startup section"):
        StartupModel(QWEN, bare)
    with pytest.raises(StartupError, match="has no host.startup section"):
        GraphMemoryModel(QWEN, bare, "fused", "full").layout([1, 8])


def test_graph_memory_optimizer_and_sweep_use_the_same_figures():
    p = load_profile("h200")
    m = load_model("llama3-8b")
    gm = GraphMemoryModel(m, p, "compiled", "full_and_piecewise")
    st = StartupModel(m, p, "compiled", "full_and_piecewise")
    sizes = [1, 8, 24, 64]
    lay, res = gm.layout(sizes), st.layout(sizes)
    assert lay.capture_s == pytest.approx(res.warmup_s + res.capture_s, rel=1e-12)
    assert all(gm.capture_s(b) == pytest.approx(st.size_s(b), rel=1e-12) for b in sizes)  # optimizer's per size
    from simulator.sweep.grid import evaluate_point, point_for

    row = evaluate_point(point_for(m, "h200", fusion="compiled", graph="full_and_piecewise", layout="L",
                                   sizes=tuple(sizes), distribution="d", dist_sizes=(8,), dist_weights=(1.0,),
                                   budget_bytes=1 << 30, ctx=512))
    assert row["capture_s"] == pytest.approx(lay.capture_s, rel=1e-12)


# ------------------------------------------------------------------------------------------------ CLI
def test_cli_json_keys():
    r = runner.invoke(app, ["startup", "--model", "qwen3-0.6b", "--layout", "1,8,64", "--fusion", "compiled",
                            "--graph", "full", "--compile", "static", "--compile-cache", "warm", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    for k in ("compile_s", "warmup_s", "capture_s", "total_s", "graphs"):
        assert k in d
    assert d["graphs"] == 3 and d["sizes"] == [1, 8, 64] and d["compile_cache"] == "warm"
    assert d["total_s"] == pytest.approx(d["compile_s"] + d["warmup_s"] + d["capture_s"])
    assert d["compile_s"] == pytest.approx(2.974256 + 0.00161 * 1587, rel=1e-4)  # qwen3-0.6b: 1587 nodes
    assert d["compile_measured"] is True and any("within the measured 99-1587 nodes" in n for n in d["notes"])
    big = runner.invoke(app, ["startup", "--model", "llama3-70b", "--layout", "1,8", "--fusion", "compiled", "--json"])
    assert big.exit_code == 0, big.output  # 80 layers: beyond the measured node range -> said so
    b = json.loads(big.stdout)
    assert b["compile_measured"] is False and any("extrapolated" in n for n in b["notes"])
    g = runner.invoke(app, ["graph-memory", "--model", "qwen3-0.6b", "--layout", "1,8,64", "--fusion", "compiled",
                            "--graph", "full", "--json"])
    assert json.loads(g.stdout)["capture_s"] == pytest.approx(d["warmup_s"] + d["capture_s"], rel=1e-12)
    a = runner.invoke(app, ["startup", "--model", "qwen3-0.6b", "--layout", "1,8,64", "--fusion", "compiled",
                            "--cache", "warm", "--json"])  # the short alias
    assert json.loads(a.stdout)["compile_s"] == d["compile_s"]


def test_cli_text():
    r = runner.invoke(app, ["startup", "--model", "llama3-8b", "--layout", "sglang", "--fusion", "none"])
    assert r.exit_code == 0, r.output
    assert "total" in r.stdout and "compile" in r.stdout and "note:" in r.stdout


@pytest.mark.parametrize("argv,needle", [
    (["--compile", "eager"], "--compile"),
    (["--compile-cache", "hot"], "--compile-cache"),
    (["--fusion", "turbo"], "--fusion"),
    (["--graph", "half"], "--graph"),
    (["--layout", "0,4"], "--layout"),
    (["--warmups", "-1"], "--warmups"),
    (["--ctx", "0"], "--ctx"),
    (["--ctx", "100000"], "--ctx"),
])
def test_cli_bad_input_exit_2_one_line(capsys, argv, needle):
    err = cli_error(capsys, ["startup", "--model", "qwen3-0.6b"] + argv)
    assert needle in err


def test_cli_unknown_model_exit_2(capsys):
    assert "--model" in cli_error(capsys, ["startup", "--model", "no-such-model"])
