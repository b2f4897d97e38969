"""`optimize --spec-tokens k` (issue 21 item 2): candidates and the optimum in tokens the engines accept, verify
steps priced, the engines' spec-decode lists as presets, brute force equal to the optimizer."""

import json

import numpy as np
import pytest

from simulator.cli import main
from simulator.layouts.distribution import from_histogram
from simulator.layouts.spec import SPEC_ENGINES, accepts, allowed_sizes, spec_layout
from simulator.model.workload import StepShape
from simulator.studies.optimize import Inputs, build_problem, metrics, run
from simulator.studies.optimize import setup as opt_setup
from simulator.optimizer.dp import objective
from tests.brute_force import brute_force
from tests.conftest import cli_error


def _dist():
    return from_histogram({1: 5.0, 2: 3.0, 5: 2.0, 9: 1.0, 12: 1.0})


@pytest.mark.parametrize("k", [1, 2, 3])
def test_candidates_and_optimum_are_accepted_by_every_engine(k):
    inp = Inputs(_dist(), "llama3-8b", None, graph="full", max_graphs=6, spec_tokens=k,
                 presets=SPEC_ENGINES)
    st = opt_setup(inp)
    # candidates: allowed_sizes up to the largest verify step, 12 (1 + k) tokens
    assert st.sizes.tolist() == allowed_sizes("vllm", k, 12 * (1 + k)) == list(range(1 + k, 12 * (1 + k) + 1, 1 + k))
    res = run(inp, frontier=False)
    assert res["sizes"] and all(accepts(e, k, s) for e in SPEC_ENGINES for s in res["sizes"])
    assert res["sizes_requests"] == [s // (1 + k) for s in res["sizes"]]
    # presets are the engines' spec-decode lists in tokens; vLLM with FlashInfer (the default backend) runs verify
    # steps PIECEWISE (engine/spec.py verify_graph_mode) and does not round its list then
    assert st.step.capture.graph == "piecewise"
    for e in SPEC_ENGINES:
        assert res["presets"][e]["sizes"] == list(spec_layout(e, k, graph="piecewise").tokens)
        assert res["objective"] <= res["presets"][e]["objective"] * (1 + 1e-12)
    assert res["presets"]["vllm"]["sizes"][0] == 1


def test_problem_is_priced_on_verify_steps_in_tokens():
    k = 3
    inp = Inputs(_dist(), "llama3-8b", None, graph="full", spec_tokens=k, presets=("vllm",))
    st = opt_setup(inp)
    p = build_problem(st, None)
    b, _ = inp.dist.as_arrays()
    assert p.batches.tolist() == (b * (1 + k)).tolist()  # a batch of B sequences pads B(1 + k) tokens
    # alpha: one sequence's verify step (1 + k tokens) padded to s tokens, routed and costed by the step cache
    s = int(st.sizes[2])
    setup = st.step.with_capture(st.step.capture.with_graph(st.step.capture.graph, (s,)))
    rs = st.cache.routed(setup, StepShape(1, inp.ctx, q_len=1 + k))
    assert rs.route.padded == s and rs.route.padding == s - (1 + k)
    assert p.alpha[2] == rs.step_s
    # the DP's objective of a layout equals the routed verify steps' expectation (full graphs add up exactly)
    lay = [int(st.sizes[1]), int(st.sizes[-1])]
    assert objective(p, lay) == pytest.approx(metrics(st, lay)["step_ms"] / 1e3, rel=1e-9)


@pytest.mark.parametrize("obj,budget", [("step-time", None), ("padded-rows", None), ("step-time", "vllm")])
def test_brute_force_equals_the_optimizer_with_spec(obj, budget):
    dist = from_histogram({1: 4.0, 2: 2.0, 3: 1.0, 6: 1.0})
    inp = Inputs(dist, "llama3-8b", None, graph="full", max_graphs=3, spec_tokens=2, objective=obj,
                 memory_budget=budget, presets=("vllm",))
    st = opt_setup(inp)
    from simulator.studies.optimize import memory_budget
    p = build_problem(st, memory_budget(st))
    assert st.sizes.tolist() == [3, 6, 9, 12, 15, 18]
    want_sizes, want = brute_force(p)
    res = run(inp, frontier=False)
    assert res["objective"] == pytest.approx(want, rel=1e-12, abs=1e-15)
    assert objective(p, res["sizes"]) == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_padded_rows_hand_computed():
    # k = 1, batches 1 and 3 (2 and 6 tokens), one graph, largest size fixed at max size 6 tokens:
    # both pad to 6 -> padded tokens 4 * 0.5 + 0 * 0.5 = 2
    inp = Inputs(from_histogram({1: 1.0, 3: 1.0}), "llama3-8b", None, graph="full", max_graphs=1,
                 spec_tokens=1, objective="padded-rows", presets=("vllm",))
    res = run(inp, frontier=False)
    assert res["sizes"] == [6] and res["objective"] == pytest.approx(2.0)
    assert res["best_padded_rows"] == pytest.approx(2.0)


def test_vllm_flashinfer_full_verify_runs_piecewise_and_says_so():
    from simulator.config.buckets import BucketsScenario
    from simulator.studies.optimize import inputs_from_scenario

    base = dict(kind="buckets", name="t", model="llama3-8b", graph="full", spec_tokens=2,
                distribution={"histogram": {1: 1.0, 4: 1.0}})
    r = run(inputs_from_scenario(BucketsScenario(**base)), frontier=False)
    assert any("PIECEWISE" in n for n in r["spec_notes"])
    r2 = run(inputs_from_scenario(BucketsScenario(**base, attention_backend="fa3")), frontier=False)
    assert not any("PIECEWISE" in n for n in r2["spec_notes"])
    assert list(r["presets"]) == list(SPEC_ENGINES)  # default presets under spec: the engines' lists
    # under full verify graphs vLLM rounds its list to multiples of 1 + k (adjust_cudagraph_sizes_for_spec_decode)
    assert r2["presets"]["vllm"]["sizes"] == list(spec_layout("vllm", 2, graph="full").tokens)
    assert all(s % 3 == 0 for s in r2["presets"]["vllm"]["sizes"])


@pytest.mark.parametrize("extra,needle", [
    (["--spec-tokens", "65"], "--spec-tokens (field 'spec_tokens')"),
    (["--spec-tokens", "2", "--memory-budget", "seed"], "--memory-budget/--budget preset 'seed' has no spec-decode capture rule"),
])
def test_cli_spec_refusals(tmp_path, capsys, extra, needle):
    f = tmp_path / "d.csv"
    f.write_text("batch,count\n1,5\n7,2\n")
    assert needle in cli_error(capsys, ["optimize", "--dist", str(f), "--model", "llama3-8b", *extra])


def test_buckets_yaml_refuses_acceptance_draft_and_non_spec_presets(tmp_path, capsys):
    base = ("kind: buckets\nname: t\nmodel: llama3-8b\nspec_tokens: 2\n"
            "distribution: {histogram: {1: 1.0, 4: 1.0}}\n")
    for extra, needle in (("acceptance: 0.7\n", "acceptance does not change"), ("draft: mtp\n", "draft:"),
                          ("presets: [vllm, seed]\n", "no spec-decode capture rule")):
        f = tmp_path / "s.yaml"
        f.write_text(base + extra)
        assert needle in cli_error(capsys, ["optimize", "--scenario", str(f)])


def test_cli_json_with_spec(tmp_path, capsys):
    f = tmp_path / "d.csv"
    f.write_text("batch,count\n1,5\n3,2\n")
    with pytest.raises(SystemExit) as e:
        main(["optimize", "--dist", str(f), "--model", "llama3-8b", "--spec-tokens", "3", "--graph", "full",
              "--json", "--out", str(tmp_path / "o")])
    assert e.value.code == 0
    r = json.loads(capsys.readouterr().out)
    assert r["spec_tokens"] == 3 and r["sizes_unit"] == "tokens" and all(s % 4 == 0 for s in r["sizes"])
    assert np.all(np.array(r["sizes"]) <= 12)
    assert r["sizes_requests"] == [s // 4 for s in r["sizes"]]
    assert (tmp_path / "o" / "report.html").stat().st_size > 0
