"""serve, capacity and optimize fill their scenario kinds from flags generated from the pydantic fields
(simulator/cli/generated.py; issue 24 item 2, issue 22 items 4-5): every flag a YAML twin, every flag the commands
had before keeps its name, `--help` shows the defaults, errors name the flags the user gave, one set of defaults
(optimize requires --model as the others do) printed in each header."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from simulator.cli import app
from simulator.cli.flags import command_scenario
from simulator.cli.generated import Flag, fill, model_options
from simulator.config import load_scenario
from simulator.config.buckets import BucketsScenario
from simulator.config.capacity import CapacityScenario
from simulator.config.serve import LengthModel, ServeScenario
from tests.conftest import cli_error

runner = CliRunner()

# every flag (and alias) the three commands declared by hand before they were generated (README and tests use them)
BEFORE = {
    "serve": ["--model", "--rate", "--duration", "--seed", "--scenario", "--fusion", "--graph", "--layout",
              "--attention-backend", "--prefill-layout", "--profile", "--scheduling", "--trace", "--out",
              "--inline-plotly", "--tensor-parallel-size", "--tp", "--tp-size", "--max-num-seqs",
              "--max-num-batched-tokens", "--gpu-memory-utilization", "--gpu-util", "--prompt-len", "--output-len",
              "--replications", "--dtype", "--kv-dtype", "--spec-tokens", "--draft", "--acceptance", "--json"],
    "capacity": ["--model", "--scenario", "--slo-tpot-ms", "--slo-ttft-s", "--slo-percentile", "--target-rate",
                 "--profile", "--fusion", "--graph", "--layout", "--duration", "--replications", "--seed", "--rate-min",
                 "--rate-max", "--tolerance", "--max-runs", "--tensor-parallel-size", "--tp", "--tp-size",
                 "--max-num-seqs", "--max-num-batched-tokens", "--gpu-memory-utilization", "--gpu-util",
                 "--prompt-len", "--output-len", "--workers", "--out", "--spec-tokens", "--draft", "--acceptance",
                 "--json"],
    "optimize": ["--distribution", "--dist", "--scenario", "--model", "--fusion", "--profile", "--graph", "--ctx",
                 "--max-graphs", "--memory-budget", "--budget", "--capture-budget", "--max-size", "--objective",
                 "--private", "--out", "--inline-plotly", "--dtype", "--kv-dtype", "--spec-tokens", "--json"],
}
KINDS = {"serve": ServeScenario, "capacity": CapacityScenario, "optimize": BucketsScenario}


def _flags_of(cmd: str) -> set[str]:
    import typer.main

    c = typer.main.get_command(app).commands[cmd]
    return {o for p in c.params for o in p.opts + p.secondary_opts}


def _command_flags(cmd: str) -> tuple[list[Flag], dict]:
    from simulator.cli import capacity, optimize, serve

    mod = {"serve": serve, "capacity": capacity, "optimize": optimize}[cmd]
    return mod.FLAGS, getattr(mod, "RUN_ALIASES", getattr(mod, "ALIASES", {}))


@pytest.mark.parametrize("cmd", sorted(BEFORE))
def test_every_flag_keeps_its_name_and_every_plain_field_is_a_flag(cmd):
    have = _flags_of(cmd)
    assert set(BEFORE[cmd]) <= have, set(BEFORE[cmd]) - have
    flags, aliases = _command_flags(cmd)
    _, texts = model_options(KINDS[cmd], aliases, flags=flags)
    from simulator.cli.generated import _is_model

    plain = {n for n, f in KINDS[cmd].model_fields.items() if not _is_model(f.annotation)}
    assert plain - {"kind", "name", "description"} <= set(texts)
    # each text the errors use is made of flags the command has
    assert all(set(t.split("/")) <= have for t in texts.values())


def test_fill_sets_paths_and_merges_only_where_asked():
    base = {"kind": "serve", "engine": {"max_num_seqs": 8, "chunked_prefill": False}, "arrivals": {"cv": 2.0}}
    got = fill(base, {"engine.max_num_seqs": 32, "engine.max_num_batched_tokens": None, "rate": 3.0,
                      "arrivals": {"process": "trace", "trace": "t.csv"}, "prompt": {"kind": "fixed", "value": 5}},
               [Flag("arrivals", merge=True)])
    assert got == {"kind": "serve", "engine": {"max_num_seqs": 32, "chunked_prefill": False}, "rate": 3.0,
                   "arrivals": {"cv": 2.0, "process": "trace", "trace": "t.csv"},
                   "prompt": {"kind": "fixed", "value": 5}}
    assert base["engine"] == {"max_num_seqs": 8, "chunked_prefill": False}  # the input is not changed
    over = fill({"prompt": {"kind": "lognormal", "mean": 9.0}}, {"prompt": {"kind": "fixed", "value": 5}})
    assert over == {"prompt": {"kind": "fixed", "value": 5}}  # not merged: a fixed length keeps no mean


@pytest.mark.parametrize("cmd,yaml_text,given", [
    ("serve", "kind: serve\nname: serve\nmodel: qwen3-0.6b\nrate: 4\nduration_s: 3\nengine:\n  max_num_seqs: 32\n"
              "  gpu_memory_utilization: 0.5\nprompt: {kind: fixed, value: 100}\nwarmup_frac: 0.2\n"
              "sampling: top_p\nscheduling: sync\n",
     {"model": "qwen3-0.6b", "rate": 4.0, "duration_s": 3.0, "engine.max_num_seqs": 32,
      "engine.gpu_memory_utilization": 0.5, "prompt": {"kind": "fixed", "value": 100}, "warmup_frac": 0.2,
      "sampling": "top_p", "scheduling": "sync"}),
    ("capacity", "kind: capacity\nname: capacity\nmodels: [qwen3-0.6b]\nfusion: [fused]\ngraph: [none, full]\n"
                 "slo: {tpot_ms: 20, percentile: 90}\nsearch: {rate_max: 300, max_runs: 4}\n"
                 "curve_fractions: [0.5]\n",
     {"models": ["qwen3-0.6b"], "fusion": ["fused"], "graph": ["none", "full"], "slo.tpot_ms": 20.0,
      "slo.percentile": 90, "search.rate_max": 300.0, "search.max_runs": 4, "curve_fractions": [0.5]}),
    ("optimize", "kind: buckets\nname: optimize\nmodel: qwen3-0.6b\ndistribution: {csv: D}\nshared_pool: false\n"
                 "presets: [vllm, pow2]\nmemory_budget: 300MiB\n",
     {"model": "qwen3-0.6b", "distribution": {"csv": "D"}, "shared_pool": False, "presets": ["vllm", "pow2"],
      "memory_budget": "300MiB"}),
])
def test_flags_and_yaml_fill_one_scenario(tmp_path, cmd, yaml_text, given):
    d = tmp_path / "d.csv"
    d.write_text("batch,count\n1,3\n8,2\n")
    (tmp_path / "s.yaml").write_text(yaml_text.replace("csv: D", f"csv: {d}"))
    given = {k: ({"csv": str(d)} if v == {"csv": "D"} else v) for k, v in given.items()}
    flags, aliases = _command_flags(cmd)
    _, texts = model_options(KINDS[cmd], aliases, flags=flags)
    kind = KINDS[cmd].model_fields["kind"].annotation.__args__[0]
    sc = command_scenario(KINDS[cmd], kind, given, texts, None, {"name": kind if cmd != "optimize" else "optimize"},
                          flags)
    assert sc == load_scenario(tmp_path / "s.yaml")
    # flags over the file: the file's fields stay, the flags' replace theirs
    sc2 = command_scenario(KINDS[cmd], kind, {"seed": 7} if cmd != "optimize" else {"ctx": 77}, texts,
                           tmp_path / "s.yaml", flags=flags)
    assert sc2 == sc.model_copy(update={"seed": 7} if cmd != "optimize" else {"ctx": 77})


def test_serve_flags_reach_the_run_as_the_yaml_does(tmp_path):
    (tmp_path / "s.yaml").write_text("kind: serve\nname: serve\nmodel: qwen3-0.6b\nrate: 4\nduration_s: 3\n"
                                     "warmup_frac: 0.3\nengine: {max_num_seqs: 16}\nscheduling: sync\n"
                                     "sampling: top_p\n")
    argv = ["serve", "--model", "qwen3-0.6b", "--rate", "4", "--duration", "3", "--warmup-frac", "0.3",
            "--max-num-seqs", "16", "--scheduling", "sync", "--sampling", "top_p", "--json"]
    a = json.loads(runner.invoke(app, argv).stdout)
    b = json.loads(runner.invoke(app, ["serve", "--scenario", str(tmp_path / "s.yaml"), "--json"]).stdout)
    plain = json.loads(runner.invoke(app, argv[:-7] + ["--json"]).stdout)
    for d in (a, b, plain):
        d.pop("wall_s"), d.pop("step_evals")  # wall time; the step memo is shared in the process
    assert a == b and a != plain
    assert a["assumptions"]["warmup_frac"] == 0.3 and a["max_num_seqs"] == 16


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["fixed", "uniform", "lognormal"]), a=st.integers(1, 5000), b=st.integers(1, 5000),
       cv=st.sampled_from([0.0, 0.5, 1.0, 2.25]))
def test_a_length_flag_and_its_help_text_round_trip(kind, a, b, cv):
    from simulator.cli.serve import length_spec, length_text

    low, high = min(a, b), max(a, b)
    m = {"fixed": LengthModel(kind="fixed", value=a), "uniform": LengthModel(kind="uniform", low=low, high=high),
         "lognormal": LengthModel(kind="lognormal", mean=float(a), cv=cv, low=low, high=high)}[kind]
    assert LengthModel(**length_spec("--prompt-len", length_text(m))) == m


@pytest.mark.parametrize("cmd,needles", [
    ("serve", ["--max-num-seqs", "[default: 256]", "[default: lognormal:512:1:1:4096]",
               "[default: lognormal:256:1:1:2048]", "--gpu-memory-utilization, --gpu-util", "[default: 0.9]",
               "[default: full_and_piecewise]", "[default: fused]", "--tensor-parallel-size, --tp, --tp-size"]),
    ("capacity", ["[default: full_and_piecewise]", "[default: fused]", "[default: 40]", "[default: 0.02]",
                  "[default: 99]", "[default: vllm]", "[default: h200]"]),
    ("optimize", ["[default: full_and_piecewise]", "[default: fused]", "[default: 64]", "[default: 1024]",
                  "--memory-budget, --budget", "--distribution, --dist", "--private"]),
])
def test_help_shows_the_defaults(cmd, needles):
    r = runner.invoke(app, [cmd, "--help"], terminal_width=200)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    for n in needles:
        assert n in text, n


@pytest.mark.parametrize("argv,needle", [
    (["optimize", "--dist", "D"], "give --model (or --scenario FILE)"),
    (["serve", "--rate", "2"], "give --model (or --scenario FILE)"),
    (["capacity", "--slo-tpot-ms", "5"], "give --model (or --scenario FILE)"),
    (["serve", "--model", "qwen3-0.6b", "--max-num-seqs", "512", "--max-num-batched-tokens", "256"],
     "--max-num-batched-tokens must be at least --max-num-seqs"),
    (["capacity", "--model", "qwen3-0.6b", "--slo-tpot-ms", "5", "--rate-min", "10", "--rate-max", "5"],
     "--rate-min must be below --rate-max"),
    (["capacity", "--model", "qwen3-0.6b", "--slo-tpot-ms", "5", "--slo-percentile", "95"],
     "--slo-percentile (field 'slo.percentile'): unknown percentile '95'"),
    (["capacity", "--model", "qwen3-0.6b", "--slo-tpot-ms", "5", "--fusion", "x"],
     "--fusion (field 'fusion'): unknown fusion level 'x'"),
    (["serve", "--model", "qwen3-0.6b", "--gpu-util", "2"],
     "--gpu-memory-utilization/--gpu-util (field 'engine.gpu_memory_utilization')"),
    (["optimize", "--dist", "D", "--model", "qwen3-0.6b", "--presets", "x"], "--presets (field 'presets')"),
    (["optimize", "--dist", "D", "--model", "qwen3-0.6b", "--acceptance", "0.5"], "--acceptance and draft apply"),
])
def test_errors_are_one_line_naming_the_flags(capsys, tmp_path, argv, needle):
    d = tmp_path / "d.csv"
    d.write_text("batch,count\n1,3\n8,2\n")
    err = cli_error(capsys, [str(d) if a == "D" else a for a in argv])
    assert needle in err and "\n" not in err.strip()


def test_the_headers_print_model_profile_fusion_and_graph(tmp_path):
    from simulator.common import vocab as V

    note = V.defaults_note(V.DEFAULT_FUSION, V.DEFAULT_GRAPH)
    d = tmp_path / "d.csv"
    d.write_text("batch,count\n1,3\n8,2\n")
    runs = {"serve": ["serve", "--model", "qwen3-0.6b", "--rate", "2", "--duration", "2", "--profile", "datasheet-h200"],
            "optimize": ["optimize", "--dist", str(d), "--model", "qwen3-0.6b", "--profile", "datasheet-h200",
                         "--max-graphs", "2"],
            "capacity": ["capacity", "--model", "qwen3-0.6b", "--slo-tpot-ms", "20", "--duration", "5", "--max-runs",
                         "3", "--profile", "datasheet-h200"]}
    for cmd, argv in runs.items():
        r = runner.invoke(app, argv, env={"COLUMNS": "250"})
        assert r.exit_code == 0, r.output
        first = r.stdout.splitlines()[0]
        assert first.startswith(f"{cmd} qwen3-0.6b on datasheet-h200: {note}"), first
    assert first.endswith("SLO TPOT p99 <= 20 ms (and the run stable)")  # capacity's header also states its SLO
