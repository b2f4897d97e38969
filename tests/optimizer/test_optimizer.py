"""Exact layout optimizer: brute-force agreement (hypothesis), hand cases, presets never better, memory
arithmetic equal to GraphMemoryModel, CLI errors and output, and a golden scenario result."""

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from simulator.optimizer import dp
from simulator.optimizer import exact as opt
from simulator.layouts.buckets import preset_sizes
from simulator.cli import main
from simulator.config import load_scenario
from simulator.layouts.distribution import from_histogram
from simulator.engine.graph_memory import GraphMemoryModel
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.studies.runner import run_scenario
from simulator.studies.optimize import (Inputs, build_problem, engine_syntax, metrics, parse_memory_budget, preset_rows,
                                        run, setup)
from simulator.studies.optimize import setup as opt_setup
from tests.brute_force import brute_force
from tests.paths import GOLDEN

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@hs.composite
def problems(draw):
    n = draw(hs.integers(1, 7))
    sizes = sorted(draw(hs.sets(hs.integers(1, 14), min_size=n, max_size=n)))
    batches = sorted(draw(hs.sets(hs.integers(1, 16), min_size=1, max_size=7)))
    w = np.array(draw(hs.lists(hs.integers(1, 9), min_size=len(batches), max_size=len(batches))), float)
    ints = lambda lo, hi, k: np.array(draw(hs.lists(hs.integers(lo, hi), min_size=k, max_size=k)), float)  # noqa
    padded_rows = draw(hs.booleans())
    if padded_rows:
        alpha, beta, eager = np.array(sizes, float), -np.array(batches, float), np.zeros(len(batches))
    else:
        alpha, beta, eager = ints(1, 30, n), np.zeros(len(batches)), ints(0, 40, len(batches))
    pool, out, static = ints(1, 12, n), ints(0, 3, n), ints(0, 6, n)
    g = draw(hs.integers(1, 2))
    shared = draw(hs.booleans())
    chk, inc = (pool + (g - 1) * out, g * out) if shared else (pool, pool)
    cap = np.full(n, 2.0) if draw(hs.booleans()) else ints(1, 5, n)
    final_ok = np.array(sizes) == sizes[-1] if padded_rows else None
    return opt.Problem(np.array(sizes), np.array(batches), w / w.sum(), alpha, beta, eager,
                       draw(hs.integers(1, 6)), final_ok, static, chk, inc, cap,
                       draw(hs.one_of(hs.none(), hs.integers(2, 40).map(float))),
                       draw(hs.one_of(hs.none(), hs.integers(1, 12).map(float))))


def _fits(p, sizes):
    idx = [int(np.searchsorted(p.sizes, s)) + 1 for s in sizes]
    mem, cap = dp.resources(p, idx)
    return (len(sizes) <= p.max_graphs and p.final_ok[idx[-1] - 1]
            and (p.memory_budget is None or mem <= p.memory_budget)
            and (p.capture_budget is None or cap <= p.capture_budget))


@SETTINGS
@given(problems())
def test_matches_brute_force_under_all_constraints(p):
    got = _agrees_with_brute_force(p, opt)
    if got is not None:
        assert got.objective == pytest.approx(opt.objective(p, got.sizes), rel=1e-9, abs=1e-12)
        assert got.sizes == sorted(got.sizes)


def _agrees_with_brute_force(p, module, **patch):
    """opt.solve(p), with `module`'s constants patched (restored after), equals brute force (returns the
    solution), or both are infeasible (returns None)."""
    old = {k: getattr(module, k) for k in patch}
    for k, v in patch.items():
        setattr(module, k, v)
    try:
        want_sizes, want = brute_force(p)
        if want_sizes is None:
            with pytest.raises(opt.Infeasible):
                opt.solve(p)
            return None
        got = opt.solve(p)
    finally:
        for k, v in old.items():
            setattr(module, k, v)
    assert got.objective == pytest.approx(want, rel=1e-9, abs=1e-12) and _fits(p, got.sizes)
    return got


def _binding_budgets(p, fm: float, fc: float) -> None:
    """Set budgets between the cheapest single size (fm, fc = 0) and the unconstrained optimum (1); fc >= 0.5:
    no capture budget."""
    p.memory_budget = p.capture_budget = None
    free = opt.solve(p)
    ok = p.final_ok
    lo_m, lo_c = float((p.static + p.mem_chk)[ok].min()), float(p.capture[ok].min())
    p.memory_budget = lo_m + fm * max(free.memory - lo_m, 0.0)
    p.capture_budget = lo_c + fc * max(free.capture - lo_c, 0.0) if fc < 0.5 else None


@SETTINGS
@given(problems(), hs.floats(0, 1), hs.floats(0, 1))
def test_binding_budgets_match_brute_force(p, fm, fc):
    """Budgets between the cheapest single size and the unconstrained optimum: the exact search path."""
    _binding_budgets(p, fm, fc)
    want_sizes, want = brute_force(p)
    if want_sizes is None:
        with pytest.raises(opt.Infeasible):
            opt.solve(p)
        return
    got = opt.solve(p)
    assert got.objective == pytest.approx(want, rel=1e-9, abs=1e-12) and _fits(p, got.sizes)


@SETTINGS
@given(problems(), hs.floats(0, 1), hs.floats(0, 1))
def test_restarted_search_with_more_tables_matches_brute_force(p, fm, fc):
    """The restart path (past FIRST_LIMIT labels: more Lagrangian tables, `_Search.widen`), forced from 0 labels."""
    _binding_budgets(p, fm, fc)
    _agrees_with_brute_force(p, opt, FIRST_LIMIT=0)  # exact.solve reads its own FIRST_LIMIT


@hs.composite
def monge_tables(draw):
    """Interval costs of a problem with non-decreasing alpha (ties included), as _tables builds them."""
    n = draw(hs.integers(1, 40))
    alpha = np.sort(np.array(draw(hs.lists(hs.integers(1, 12), min_size=n, max_size=n)), float)) / 7
    batches = np.arange(1, n + 3)
    w = np.array(draw(hs.lists(hs.integers(0, 5), min_size=batches.size, max_size=batches.size)), float) + 1e-3
    beta = np.array(draw(hs.lists(hs.integers(-3, 3), min_size=batches.size, max_size=batches.size)), float) / 3
    p = opt.Problem(np.arange(1, n + 1), batches, w / w.sum(), alpha, beta, np.zeros(batches.size), n)
    pen = None
    if draw(hs.booleans()):
        pen = np.concatenate(([0.0], np.array(draw(hs.lists(hs.integers(0, 9), min_size=n, max_size=n)), float)))
    return p, pen


@settings(max_examples=300, deadline=None)
@given(monge_tables(), hs.integers(1, 9), hs.integers(1, 12))
def test_monotone_forward_equals_the_full_scan(case, block, k):
    """The block scan (alpha non-decreasing: W is Monge) gives the full scan's minima (to rounding: with ties in
    exact arithmetic, rounding decides which minimiser is leftmost) and minimisers that reach them."""
    p, pen = case
    assert dp.monotone(p)
    W, _ = dp._tables(p)
    K = min(k, len(p.sizes))
    A, arg = dp._forward(W, K, pen, monotone=False)
    A2, arg2 = np.full_like(A, np.inf), np.zeros_like(arg)
    A2[1] = A[1]  # layer 1 is set by _forward before either scan
    A2, arg2 = dp._forward_monotone(W, K, pen, A2, arg2, block)
    fin = np.isfinite(A)
    assert np.array_equal(fin, np.isfinite(A2))
    assert np.allclose(A[fin], A2[fin], rtol=1e-12, atol=0)
    Wp = W if pen is None else W + pen[:, None]
    for n in range(2, K + 1):  # every minimiser reaches its minimum
        j = np.nonzero(np.isfinite(A2[n]))[0]
        assert np.array_equal(A2[n, j], Wp[arg2[n, j], j] + A2[n - 1, arg2[n, j]])


@SETTINGS
@given(problems())
def test_block_scan_matches_brute_force(p):
    """The optimizer with the block scan forced on (alpha sorted so that it applies) against brute force."""
    p.alpha = np.sort(p.alpha)
    if not dp.monotone(p):
        return
    _agrees_with_brute_force(p, dp, MONOTONE_MIN=0, MONOTONE_BLOCK=2)  # dp._forward reads dp's constants


@SETTINGS
@given(problems(), hs.data())
def test_never_worse_than_any_feasible_layout_seeded_or_not(p, data):
    lay = sorted(data.draw(hs.sets(hs.sampled_from([int(s) for s in p.sizes]), min_size=1)))
    if not _fits(p, lay):
        return
    v = opt.objective(p, lay)
    for seeds in ([], [lay]):
        assert opt.solve(p, seeds).objective <= v + 1e-12


def test_hand_computed_padded_rows():
    # steps: half at batch 1, 30% at 3, 20% at 4; largest size fixed at 4
    p = opt.Problem(np.arange(1, 5), np.array([1, 3, 4]), np.array([0.5, 0.3, 0.2]), np.arange(1, 5, dtype=float),
                    -np.array([1.0, 3.0, 4.0]), np.zeros(3), 1, np.arange(1, 5) == 4)
    assert (opt.solve(p).sizes, opt.solve(p).objective) == ([4], pytest.approx(0.5 * 3 + 0.3 * 1))
    p.max_graphs = 2  # {1,4}: 0.3 x 1 = 0.3 beats {2,4}: 0.5 + 0.3 and {3,4}: 0.5 x 2
    assert (opt.solve(p).sizes, opt.solve(p).objective) == ([1, 4], pytest.approx(0.3))
    p.max_graphs = 3
    assert (opt.solve(p).sizes, opt.solve(p).objective) == ([1, 3, 4], pytest.approx(0.0, abs=1e-12))


def test_hand_computed_step_time_with_eager_fallback_and_budgets():
    # step cost at padded size s: 10 + s; eager: 30 at any batch; batches 1 and 8 half each
    sizes = np.array([1, 2, 4, 8])
    p = opt.Problem(sizes, np.array([1, 8]), np.array([0.5, 0.5]), 10.0 + sizes, np.zeros(2), np.full(2, 30.0), 1,
                    static=np.zeros(4), mem_chk=sizes * 1.0, mem_inc=sizes * 1.0)
    # one graph: {8} costs 18 for both (18); {1}: 0.5*11 + 0.5*30 = 20.5
    assert (opt.solve(p).sizes, opt.solve(p).objective) == ([8], pytest.approx(18.0))
    p.max_graphs = 2  # {1, 8}: 0.5*11 + 0.5*18 = 14.5
    assert (opt.solve(p).sizes, opt.solve(p).objective) == ([1, 8], pytest.approx(14.5))
    p.memory_budget = 8.0  # private pools: 1 + 8 = 9 > 8, so the best is {8} again
    assert (opt.solve(p).sizes, opt.solve(p).objective) == ([8], pytest.approx(18.0))
    p.memory_budget = 4.0  # {8} no longer fits: batch 1 at size 1 and batch 8 eager, 0.5*11 + 0.5*30
    got = opt.solve(p)
    assert got.objective == pytest.approx(20.5) and got.sizes[0] == 1 and sum(got.sizes) <= 4
    p.memory_budget = 0.5
    with pytest.raises(opt.Infeasible) as e:
        opt.solve(p)
    assert e.value.smallest["memory"] == 1.0


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("graph", ["full", "full_and_piecewise"])
@settings(max_examples=25, deadline=None)
@given(lay=hs.sets(hs.integers(1, 64), min_size=1, max_size=10))
def test_memory_arithmetic_equals_graph_memory_model(shared, graph, lay):
    st = setup(Inputs(from_histogram({64: 1.0}), "qwen3-0.6b", "datasheet-h200", graph=graph, shared_pool=shared,
                      objective="padded-rows"))
    p = build_problem(st, None)
    mem, cap = dp.resources(p, sorted(lay))
    lm = GraphMemoryModel(load_model("qwen3-0.6b"), load_profile("datasheet-h200"), "fused", graph)
    want = lm.layout(sorted(lay), shared)
    assert mem == want.total_bytes
    assert cap == pytest.approx(want.capture_s, rel=1e-12)


def _dist():
    h = {b: float(np.exp(-b / 10)) for b in range(1, 49)}
    h.update({b: 0.05 for b in range(90, 97)})
    return from_histogram(h)


@pytest.mark.parametrize("budget,shared,objective", [("vllm", True, "step-time"), ("seed", False, "step-time"),
                                                      (None, True, "padded-rows")])
def test_optimum_never_worse_than_feasible_presets(budget, shared, objective):
    inp = Inputs(_dist(), "qwen3-0.6b", "datasheet-h200", max_graphs=24, memory_budget=budget, shared_pool=shared,
                 objective=objective, max_size=96, presets=("vllm", "sglang", "trtllm", "seed", "pow2"))
    res = run(inp, frontier=False)
    feasible = [v for v in res["presets"].values() if v["feasible"]]
    assert feasible, res["presets"]
    for v in res["presets"].values():
        assert (v["reason"] is None) == v["feasible"]
        if v["feasible"]:
            assert res["objective"] <= v["objective"] * (1 + 1e-12)
            assert v["gain_pct"] >= -1e-9
    assert res["sizes"] == sorted(res["sizes"]) and len(res["sizes"]) <= 24
    if objective == "padded-rows":
        assert res["sizes"][-1] == 96


def test_parse_memory_budget_forms():
    assert parse_memory_budget("1GiB") == 2 ** 30
    assert parse_memory_budget("256MiB") == 256 * 2 ** 20
    assert parse_memory_budget("1000") == 1000
    assert parse_memory_budget("vllm") == "vllm"


def test_engine_syntax_is_paste_ready():
    s = engine_syntax([1, 2, 4, 8])
    assert json.loads(s["vllm"].split("'")[1]) == {"cudagraph_capture_sizes": [1, 2, 4, 8]}
    assert s["sglang"].endswith("--cuda-graph-bs 1 2 4 8")
    assert "batch_sizes: [1, 2, 4, 8]" in s["trtllm"] and s["trtllm"].startswith("cuda_graph_config:")


from tests.conftest import cli_error  # noqa: E402


def _err(argv, capsys) -> str:
    return cli_error(capsys, argv)


@pytest.mark.parametrize("text,needle", [
    ("", "empty CSV"), ("batch\n", "no data rows"), ("batch\n3\n0\n", "must be positive"),
    ("batch\nx\n", "not an integer"), ("size,n\n3,1\n", "header must have a 'batch' column"),
    ("batch,count\n3,-1\n", "non-negative"),
])
def test_cli_bad_distribution(tmp_path, capsys, text, needle):
    f = tmp_path / "d.csv"
    f.write_text(text)
    assert needle in _err(["optimize", "--dist", str(f), "--model", "qwen3-0.6b"], capsys)


@pytest.mark.parametrize("extra,needle", [
    (["--max-graphs", "0"], "--max-graphs (field 'max_graphs'): Input should be greater than 0"),
    (["--memory-budget", "1MiB"], "smallest memory budget any layout meets is"),
    (["--capture-budget", "1e-6"], "smallest capture budget any layout meets is"),
    (["--memory-budget", "lots"], "memory budget"),
    (["--max-size", "-3"], "--max-size (field 'max_size'): Input should be greater than 0"),
    (["--objective", "fastest"], "--objective (field 'objective'): unknown objective 'fastest': use one of step-time, padded-rows"),
])
def test_cli_bad_constraints(tmp_path, capsys, extra, needle):
    f = tmp_path / "d.csv"
    f.write_text("batch,count\n1,5\n7,2\n16,1\n")
    assert needle in _err(["optimize", "--dist", str(f), "--model", "qwen3-0.6b", "--profile", "datasheet-h200",
                           *extra], capsys)


def test_cli_json_output(tmp_path, capsys):
    f = tmp_path / "d.csv"
    f.write_text("batch\n" + "\n".join(str(b) for b in [1, 1, 1, 2, 3, 5, 8, 8, 13, 21, 40]) + "\n")
    with pytest.raises(SystemExit) as e:
        main(["optimize", "--dist", str(f), "--model", "qwen3-0.6b", "--profile", "datasheet-h200",
              "--max-graphs", "4", "--memory-budget", "vllm", "--json", "--out", str(tmp_path / "o")])
    assert e.value.code == 0
    d = json.loads(capsys.readouterr().out)
    assert d["sizes"] == sorted(d["sizes"]) and 1 <= len(d["sizes"]) <= 4
    assert set(d["presets"]) == {"vllm", "sglang", "trtllm", "seed"}
    for v in d["presets"].values():
        assert "objective" in v and (v["feasible"] or v["reason"])
    assert d["presets"]["vllm"]["reason"].startswith(f"{len(preset_sizes('vllm'))} graphs > max graphs 4")
    for name in ("report.html", "result.json", "frontier.csv"):
        assert (tmp_path / "o" / name).stat().st_size > 0


def test_scenario_with_wrong_kind_is_refused(capsys):
    assert "not a buckets scenario" in _err(["optimize", "--scenario", "scenarios/s13_launch_bound.yaml"], capsys)


def test_bimodal_scenario_golden():
    sc = load_scenario("scenarios/optimize_bimodal.yaml").model_copy(update={"profile": "datasheet-h200"})
    res = run_scenario(sc, None)
    got = {"sizes": res["sizes"], "objective": res["objective"],
           "presets": {n: v["objective"] for n, v in res["presets"].items()}}
    path = GOLDEN / "optimize_bimodal_datasheet.json"
    if os.environ.get("LAUNCHSIM_REGEN_GOLDEN"):
        path.write_text(json.dumps(got, indent=1) + "\n")
    want = json.loads(path.read_text())
    assert got["sizes"] == want["sizes"]
    assert got["objective"] == pytest.approx(want["objective"], rel=1e-9)
    # the DP's alpha(s) + beta(b) is the routed padded step itself (full graphs: time adds up over kernels)
    assert got["objective"] * 1e3 == pytest.approx(res["best_step_ms"], rel=1e-12)
    for n, v in want["presets"].items():
        assert got["presets"][n] == pytest.approx(v, rel=1e-9)
    vllm = res["presets"]["vllm"]  # equal memory by construction: vllm is feasible and never better
    assert vllm["feasible"] and vllm["memory_bytes"] == res["inputs"]["memory_budget_bytes"]
    assert res["best_memory_bytes"] <= vllm["memory_bytes"] and res["objective"] <= vllm["objective"]


def test_run_scenario_writes_report_with_frontier(tmp_path):
    sc = load_scenario("scenarios/optimize_skewed.yaml").model_copy(update={"profile": "datasheet-h200"})
    res = run_scenario(sc, tmp_path)
    for name in ("report.html", "result.json", "frontier.csv"):
        assert (tmp_path / name).stat().st_size > 0
    assert res["frontier_graphs"] and res["frontier_memory"]
    objs = [r["objective"] for r in res["frontier_graphs"]]
    assert all(b <= a + 1e-15 for a, b in zip(objs, objs[1:]))  # more graphs allowed: never worse
    html = (tmp_path / "report.html").read_text()
    assert "cudagraph_capture_sizes" in html and "--cuda-graph-bs" in html and "batch_sizes" in html


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.floats(1e-6, 1e6), min_size=1, max_size=30), hs.floats(0, 1e3))
def test_count_bound_never_undercounts(adds, slack):
    """The label search's count bound: sizes that each add >= the least still fit (float sums included)."""
    from simulator.optimizer.search import _below_min, _more

    least = min(adds)
    room = 0.0
    for a in adds:  # the search adds figures one at a time, as here
        room += a
    room += slack
    assert _more(np.array([room]), np.array([least]), 64)[0] >= min(len(adds), 64)
    assert _more(np.array([5.0]), np.array([0.0]), 7)[0] == 7 and _more(np.array([5.0]), np.array([np.inf]), 7)[0] == 0
    lo = _below_min(np.array([3.0, 1.0, 2.0]))
    assert lo.tolist() == [np.inf, np.inf, 3.0, 1.0]


def test_presets_are_the_engines_real_lists_issue22():
    """Largest batch 23: the vllm preset keeps 24 (vLLM's own list, uncut), so no step runs eagerly; its memory is
    the uncut list's, and `--memory-budget vllm` means that memory (issue 22, item 3)."""
    dist = from_histogram({1: 10, 5: 20, 12: 30, 17: 25, 23: 15})
    res = run(Inputs(dist, "qwen3-0.6b", "datasheet-h200", memory_budget="vllm"), frontier=False)
    v = res["presets"]["vllm"]
    assert v["sizes"] == preset_sizes("vllm") and 24 in v["sizes"]
    assert v["eager_share"] == 0.0
    st = opt_setup(Inputs(dist, "qwen3-0.6b", "datasheet-h200"))
    assert v["memory_bytes"] == st.memory(preset_sizes("vllm"))[0] == res["inputs"]["memory_budget_bytes"]
    above = [s for s in preset_sizes("vllm") if s > 23]
    assert v["sizes_above_max_batch"] == len(above) and "pad to 24" in v["note"]
    # the cut list of before ran batches 17 and 23 (40 % of steps) eagerly
    cut = [s for s in preset_sizes("vllm") if s <= 23]
    assert cut == [1, 2, 4, 8, 16]
    e = metrics(st, cut)["eager_share"]
    assert e == pytest.approx(0.40)
    assert res["objective"] <= v["objective"] * (1 + 1e-12)
    # the CLI table states each layout's eager share
    rows = {r["layout"]: r for r in preset_rows(res)}
    assert rows["vllm"]["eager_pct"] == 0.0 and rows["vllm"]["above_max_batch"] == len(above)


def test_preset_above_an_explicit_max_size_is_marked_infeasible():
    dist = from_histogram({1: 10, 23: 15})
    res = run(Inputs(dist, "qwen3-0.6b", "datasheet-h200", max_size=16), frontier=False)
    assert res["presets"]["vllm"]["reason"] == "replays size 24 > max size 16"
