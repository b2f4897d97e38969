"""One vocabulary (simulator/common/vocab.py) and one validation path for flags and YAML (simulator/cli/flags.py).

- every fixed name set the YAML models, the CLI flags and the engine accept is the enum's values, in one order;
- a command's flags and the YAML of its scenario kind give the same scenario object and the same result;
- a bad choice is one stderr line naming the flag (and the scenario field it fills), exit code 2.
"""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simulator.cli import app
from simulator.cli.choices import BadChoice, parser
from simulator.common import vocab as V
from simulator.config import load_scenario
from simulator.config.buckets import BucketsScenario
from simulator.config.capacity import CapacityScenario
from simulator.config.serve import ArrivalModel, LengthModel, ServeScenario
from simulator.config.step import StepScenario, TimelineSpec
from simulator.config.sweep import SweepScenario
from simulator.config.trace_workload import WorkloadScenario

from tests.conftest import cli_error

runner = CliRunner()


def _enum_of(model, field: str) -> list:
    """The values a scenario field accepts, from its JSON Schema (what YAML is validated against)."""
    prop = model.model_json_schema()["properties"][field]
    return prop["items"]["enum"] if prop.get("type") == "array" else prop["enum"]


@pytest.mark.parametrize("model,field,values", [
    (StepScenario, "fusion", V.values(V.Fusion)),
    (StepScenario, "graph", V.values(V.GraphMode)),
    (StepScenario, "engine", V.values(V.Engine)),
    (TimelineSpec, "fusion", V.values(V.Fusion)),
    (TimelineSpec, "graph", V.values(V.GraphMode)),
    (SweepScenario, "fusion", V.values(V.Fusion)),
    (SweepScenario, "graph", V.values(V.GraphMode)),
    (SweepScenario, "executor", V.values(V.Executor)),
    (CapacityScenario, "graph", V.values(V.GraphMode)),
    (ServeScenario, "fusion", V.values(V.Fusion)),
    (ServeScenario, "graph", V.values(V.GraphMode)),
    (ServeScenario, "scheduling", V.values(V.Scheduling)),
    (ServeScenario, "sampling", V.values(V.Sampling)),
    (ArrivalModel, "process", V.values(V.ArrivalProcess)),
    (LengthModel, "kind", V.values(V.LengthKind)),
    (BucketsScenario, "objective", V.values(V.Objective)),
    (BucketsScenario, "presets", V.values(V.COMPARED_PRESETS + (V.LayoutPreset.POW2,))),
    (WorkloadScenario, "fusion", V.values(V.WORKLOAD_FUSIONS)),
    (WorkloadScenario, "engine", V.values(V.Engine)),
])
def test_yaml_fields_accept_the_enum_values(model, field, values):
    assert tuple(_enum_of(model, field)) == values


def test_engine_tuples_are_the_enum_values():
    from simulator.engine import predict, routing, startup, steploop
    from simulator.engine import graph_memory
    from simulator.layouts import buckets
    from simulator.sweep import executors
    from simulator.model import workload
    from simulator.serving import arrivals
    from simulator.studies import optimize
    from simulator.traces import host, whatif

    assert routing.GRAPH_MODES == V.values(V.GraphMode) == tuple(routing._MODES)
    assert routing.PLAN_MODES == V.values(V.PlanMode)
    assert set(m for pair in routing._MODES.values() for m in pair) <= set(V.values(V.PlanMode))
    assert workload.FUSION_LEVELS == V.values(V.Fusion)
    assert whatif.WORKLOAD_FUSIONS == V.values(V.WORKLOAD_FUSIONS)
    assert buckets.LAYOUT_PRESETS == V.values(V.LayoutPreset)
    assert steploop.SCHEDULING == V.values(V.LOOP_SCHEDULING) and steploop.SAMPLING == V.values(V.Sampling)
    assert startup.COMPILE_MODES == V.values(V.CompileMode)
    assert startup.COMPILE_CACHES == V.values(V.CompileCache)
    assert predict.ENGINES == V.values(V.Engine)
    assert arrivals.PROCESSES == V.values(V.ArrivalProcess) and arrivals.LENGTH_KINDS == V.values(V.LengthKind)
    assert host.POLICIES == V.values(V.HostTime)
    assert optimize.PRESETS == V.values(V.COMPARED_PRESETS)
    assert graph_memory.RETENTIONS == V.values(V.POOL_RETENTIONS) and executors.EXECUTORS == V.values(V.Executor)
    for preset in V.LayoutPreset:  # every preset name is a layout the engine builds
        assert buckets.preset_sizes(preset.value, 64)


ENUMS = [V.GraphMode, V.PlanMode, V.Fusion, V.LayoutPreset, V.Engine, V.Scheduling, V.Sampling, V.CompileMode,
         V.CompileCache, V.Objective, V.Retention, V.ArrivalProcess, V.LengthKind, V.HostTime, V.Executor]


@given(member=st.sampled_from([m for e in ENUMS for m in e]))
def test_a_member_is_its_string(member):
    s = member.value
    assert member == s and hash(member) == hash(s) and str(member) == s and f"{member}" == s
    assert json.dumps({"k": member}) == json.dumps({"k": s})
    assert {s: 1}[member] == 1


# (command line before the flag, flag, enum values listed in --help)
HELP = [
    (["predict"], "--fusion", V.Fusion), (["predict"], "--graph", V.GraphMode), (["predict"], "--engine", V.Engine),
    (["predict"], "--scheduling", V.LOOP_SCHEDULING), (["predict"], "--sampling", V.Sampling),
    (["serve"], "--fusion", V.Fusion), (["serve"], "--graph", V.GraphMode), (["serve"], "--scheduling", V.Scheduling),
    (["run"], "--scheduling", V.Scheduling),
    (["optimize"], "--fusion", V.Fusion), (["optimize"], "--graph", V.GraphMode),
    (["optimize"], "--objective", V.Objective),
    (["startup"], "--fusion", V.Fusion), (["startup"], "--graph", V.GraphMode),
    (["startup"], "--compile", V.CompileMode), (["startup"], "--compile-cache", V.CompileCache),
    (["graph-memory"], "--fusion", V.Fusion), (["graph-memory"], "--graph", V.GraphMode),
    (["graph-memory"], "--retention", V.Retention),
    (["export-trace"], "--fusion", V.Fusion), (["export-trace"], "--graph", V.GraphMode),
    (["import-trace"], "--host-time", V.HostTime),
]


@pytest.mark.parametrize("cmd,flag,enum", HELP, ids=[f"{c[0]}{f}" for c, f, _ in HELP])
def test_help_lists_the_enum_values(cmd, flag, enum):
    r = runner.invoke(app, cmd + ["--help"], terminal_width=200)
    assert r.exit_code == 0, r.output
    listed = re.escape(flag) + r"(, --[\w-]+)? " + re.escape(f"[{'|'.join(V.values(enum))}]")
    assert re.search(listed, re.sub(r"\s+", " ", r.output)), r.output


@pytest.mark.parametrize("enum", ENUMS)
def test_the_flag_parser_takes_exactly_the_values(enum):
    parse, metavar = parser(enum, "--x", "thing", "x")
    assert metavar == "[" + "|".join(V.values(enum)) + "]"
    for m in enum:
        assert parse(m.value) is m and parse(m) is m
    assert parse(None) is None


@settings(max_examples=200)
@given(text=st.text(max_size=20))
def test_the_flag_parser_refuses_anything_else_naming_flag_and_field(text):
    parse, _ = parser(V.GraphMode, "--graph", "graph mode", "graph")
    if text in V.values(V.GraphMode):
        assert parse(text) == text
    else:
        with pytest.raises(BadChoice) as e:
            parse(text)
        msg = str(e.value)
        assert msg.startswith("--graph (field 'graph'): unknown graph mode ") and "\n" not in msg.replace(text, "")


BAD = [  # command line, flag, the field it fills (None: the command has no scenario kind)
    (["predict", "--model", "qwen3-0.6b"], "--fusion", "fusion"),
    (["predict", "--model", "qwen3-0.6b"], "--graph", "graph"),
    (["predict", "--model", "qwen3-0.6b"], "--engine", "engine"),
    # predict's flags are generated from the `predict` kind (cli/generated.py): scheduling and sampling are fields
    (["predict", "--model", "qwen3-0.6b", "--steps", "2"], "--scheduling", "scheduling"),
    (["predict", "--model", "qwen3-0.6b", "--steps", "2"], "--sampling", "sampling"),
    (["serve", "--model", "qwen3-0.6b", "--rate", "1"], "--fusion", "fusion"),
    (["serve", "--model", "qwen3-0.6b", "--rate", "1"], "--graph", "graph"),
    (["serve", "--model", "qwen3-0.6b", "--rate", "1"], "--scheduling", "scheduling"),
    (["run", "scenarios/serve_qwen3_0p6b.yaml"], "--scheduling", "scheduling"),
    (["optimize", "--dist", "x.csv", "--model", "qwen3-8b"], "--fusion", "fusion"),
    (["optimize", "--dist", "x.csv", "--model", "qwen3-8b"], "--graph", "graph"),
    (["optimize", "--dist", "x.csv", "--model", "qwen3-8b"], "--objective", "objective"),
    # startup and graph-memory fill their scenario kinds (config/capture.py): their flags now name the field
    (["startup", "--model", "qwen3-0.6b", "--fusion", "compiled"], "--compile", "compile"),
    (["startup", "--model", "qwen3-0.6b", "--fusion", "compiled"], "--compile-cache/--cache", "compile_cache"),
    (["graph-memory", "--model", "qwen3-0.6b"], "--graph", "graph"),
    (["graph-memory", "--model", "qwen3-0.6b"], "--retention", "retention"),
]


@pytest.mark.parametrize("argv,flag,field", BAD, ids=[f"{a[0]}{f}" for a, f, _ in BAD])
def test_bad_choice_is_one_line_naming_flag_and_field(capsys, argv, flag, field):
    err = cli_error(capsys, argv + [flag.split("/")[0], "bogus"])
    at = f"{flag} (field '{field}')" if field else flag
    assert err.startswith(f"launchsim: error: {at}: unknown ") and "'bogus': use one of " in err


@pytest.mark.parametrize("argv,field", [
    (["predict", "--model", "qwen3-0.6b", "--batch", "0"], "--batch (field 'batch')"),  # the predict kind: one batch
    (["predict", "--model", "qwen3-0.6b", "--ctx", "0"], "--ctx (field 'ctx')"),
    # the engines' name with the short form beside it (issue 22 item 5)
    (["predict", "--model", "qwen3-0.6b", "--tp", "3"], "--tensor-parallel-size/--tp (field 'tensor_parallel_size')"),
    (["predict", "--model", "nope"], "--model (field 'model')"),
    (["predict", "--model", "qwen3-0.6b", "--profile", ""], "--profile (field 'profile'): empty profile name"),
    (["optimize", "--dist", "x.csv", "--model", "qwen3-8b", "--max-graphs", "0"], "--max-graphs (field 'max_graphs')"),
    (["optimize", "--dist", "nope.csv", "--model", "qwen3-8b"], "--distribution/--dist (field 'distribution.csv')"),
    (["optimize", "--dist", "x.csv", "--model", "qwen3-8b", "--graph", "none"], "--graph (field 'graph'): graph none captures no graphs"),
    (["serve", "--model", "qwen3-0.6b", "--rate", "0"], "--rate"),
])
def test_flag_errors_carry_the_field_path(capsys, tmp_path, monkeypatch, argv, field):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.csv").write_text("batch\n1\n4\n")
    (tmp_path / "scenarios").mkdir()
    assert field in cli_error(capsys, argv)


# -- flags and YAML: one scenario object, one result -------------------------------------------------------

def _json(argv) -> dict:
    r = runner.invoke(app, argv)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    d.pop("wall_s", None)
    return d


def test_predict_flags_and_predict_yaml_are_one_scenario(tmp_path):
    """predict's flags are generated from the `predict` kind: the flags and the YAML fill one model."""
    from simulator.cli.flags import scenario_from_flags
    from simulator.cli.generated import model_options
    from simulator.config.predict import PredictScenario

    (tmp_path / "s.yaml").write_text("kind: predict\nname: predict\nmodel: qwen3-0.6b\nprofile: datasheet-h200\n"
                                     "fusion: fused\ngraph: full\nbatch: 8\nctx: 300\nengine: des\n"
                                     "replicates: 2\nseed: 3\ntensor_parallel_size: 2\n")
    given = {"model": "qwen3-0.6b", "profile": "datasheet-h200", "fusion": "fused", "graph": "full", "batch": 8,
             "ctx": 300, "engine": "des", "replicates": 2, "seed": 3, "tensor_parallel_size": 2}
    _, flags = model_options(PredictScenario, {"tensor_parallel_size": ("--tp",)})
    assert set(given) <= set(flags)
    sc = scenario_from_flags(PredictScenario, {"kind": "predict", **given}, flags, given)
    assert sc == load_scenario(tmp_path / "s.yaml")


def test_predict_and_run_give_the_same_step(tmp_path):
    (tmp_path / "s.yaml").write_text("kind: step\nname: s\nmodel: qwen3-0.6b\nfusion: [fused]\ngraph: [full]\n"
                                     "batch: [8]\nctx: 300\n")
    r = runner.invoke(app, ["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    row = json.loads((tmp_path / "o" / "result.json").read_text())["rows"][0]
    p = _json(["predict", "--model", "qwen3-0.6b", "--fusion", "fused", "--graph", "full", "--batch", "8",
               "--ctx", "300", "--json"])
    assert (row["fusion"], row["graph"], row["batch"]) == (p["fusion"], p["graph"], p["batch"])
    assert row["step_ms"] == pytest.approx(p["step_ms"], rel=1e-12)
    assert row["kernels"] == p["kernels"] and row["launches"] == p["launches"]


def test_optimize_flags_and_buckets_yaml_are_one_scenario_and_one_result(tmp_path):
    from simulator.cli.optimize import buckets_scenario

    csv = tmp_path / "d.csv"
    csv.write_text("batch,count\n1,5\n7,2\n16,1\n40,3\n")
    (tmp_path / "b.yaml").write_text(f"kind: buckets\nname: optimize\nmodel: qwen3-0.6b\ndistribution: {{csv: {csv}}}\n"
                                     "graph: piecewise\nmax_graphs: 4\nmemory_budget: 300MiB\nshared_pool: false\n")
    flags = buckets_scenario(None, csv, model="qwen3-0.6b", graph=V.GraphMode.PIECEWISE, max_graphs=4,
                             memory_budget="300MiB", shared_pool=False)
    assert flags == load_scenario(tmp_path / "b.yaml")
    by_flags = _json(["optimize", "--dist", str(csv), "--model", "qwen3-0.6b", "--graph", "piecewise",
                      "--max-graphs", "4", "--memory-budget", "300MiB", "--private", "--json"])
    by_file = _json(["optimize", "--scenario", str(tmp_path / "b.yaml"), "--json"])
    assert by_flags == by_file
    # flags over a file: the file's fields stay, the flags' replace theirs
    over = _json(["optimize", "--scenario", str(tmp_path / "b.yaml"), "--max-graphs", "2", "--json"])
    assert len(over["sizes"]) <= 2 and over["objective"] >= by_file["objective"]


def test_serve_flags_and_serve_yaml_give_one_result(tmp_path):
    (tmp_path / "s.yaml").write_text("kind: serve\nname: serve\nmodel: qwen3-0.6b\nrate: 4\nduration_s: 3\n"
                                     "graph: none\nscheduling: async\nseed: 2\n")
    by_flags = _json(["serve", "--model", "qwen3-0.6b", "--rate", "4", "--duration", "3", "--graph", "none",
                      "--scheduling", "async", "--seed", "2", "--json"])
    by_file = _json(["serve", "--scenario", str(tmp_path / "s.yaml"), "--json"])
    for d in (by_flags, by_file):
        d.pop("step_evals")  # step costs memoised per process: the second run finds them
    assert by_flags == by_file
