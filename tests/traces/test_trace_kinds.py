"""The trace commands as scenario kinds (issue 24 item 2): `import-trace`, `export-trace` and `predict --workload`
fill the import_trace, export_trace and workload kinds from flags generated from their fields, so a YAML file does
what the flags do and gives the same figures; a bad field of such a file is one line naming file, line and field."""

from __future__ import annotations

import json
import re

import pytest

from simulator.cli import main
from simulator.config import load_scenario
from simulator.config.trace_files import ExportTraceScenario, ImportTraceScenario
from simulator.config.trace_workload import WorkloadScenario
from tests.conftest import cli_error
from tests.fuzz_cases import trace_doc
from tests.paths import ROOT

HF = ROOT / "calibration/measured/h200-round-a/hf_qwen3-0.6b_eager_b1.trace.json.gz"


def _main(argv) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code in (0, None)


def _run(capsys, argv) -> str:
    _main(argv)
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small trace and the workload `import-trace` makes of it."""
    d = tmp_path_factory.mktemp("trace_kinds")
    (d / "trace.json").write_text(json.dumps(trace_doc()))
    _main(["import-trace", str(d / "trace.json"), "--out", str(d / "w.json")])
    return d


def test_import_trace_kind_writes_the_commands_workload(tmp_path, capsys):
    text = _run(capsys, ["import-trace", str(HF), "--out", str(tmp_path / "cli.json"), "--top-ops", "3"])
    (tmp_path / "s.yaml").write_text(f"kind: import_trace\nname: hf\ntrace: {HF}\nout: {tmp_path / 'yaml.json'}\n"
                                     "top_ops: 3\n")
    _run(capsys, ["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o")])
    assert (tmp_path / "yaml.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    rec = json.loads((tmp_path / "o" / "result.json").read_text())["result"]
    # the figures the command printed are the record's
    assert f"{rec['steps']} step(s), " in text  # the table's title wraps
    assert f"representative step: {rec['representative']}; {rec['kernels']} kernels" in text
    assert f"traced host {rec['traced_host_ms']:.3f} ms" in text
    assert f"charged host {rec['charged_host_ms']['total']:.3f} ms" in text
    assert f"3 of {len(rec['launches_by_op'])} ops shown" in text and rec["readiness"] in text


@pytest.mark.parametrize("source", ["model", "workload"])
def test_export_trace_kind_writes_the_commands_trace(files, tmp_path, capsys, source):
    flags = (["--model", "qwen3-0.6b", "--batch", "4", "--fusion", "fused", "--graph", "full"] if source == "model"
             else ["--workload", str(files / "w.json"), "--fusion", "compiled", "--graph", "piecewise"])
    text = _run(capsys, ["export-trace", "--out", str(tmp_path / "cli.json"), *flags])
    fields = dict(zip((f[2:] for f in flags[::2]), flags[1::2]))
    (tmp_path / "s.yaml").write_text("kind: export_trace\nname: x\n" + f"out: {tmp_path / 'yaml.json'}\n"
                                     + "".join(f"{k}: {v}\n" for k, v in fields.items()))
    _run(capsys, ["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o")])
    assert (tmp_path / "yaml.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    rec = json.loads((tmp_path / "o" / "result.json").read_text())["result"]
    assert f"{rec['launches']} launches, {rec['kernels']} kernels, step {rec['step_ms']:.3f} ms" in text


def test_workload_kind_gives_the_figures_of_predict_workload(files, tmp_path, capsys):
    argv = ["predict", "--workload", str(files / "w.json"), "--graph", "none", "--replicates", "3", "--seed", "5",
            "--json"]
    d = json.loads(_run(capsys, argv))
    (tmp_path / "s.yaml").write_text(f"kind: workload\nname: w\nworkload: {files / 'w.json'}\ngraph: [none]\n"
                                     "replicates: 3\nseed: 5\n")
    _run(capsys, ["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o")])
    row = json.loads((tmp_path / "o" / "result.json").read_text())["rows"][0]
    keys = ["step_ms", "step_ms_p10", "step_ms_p50", "step_ms_p90", "cpu_ms", "gpu_ms", "kernels", "launches", "bound",
            "fusion", "graph", "batch"]
    assert {k: row[k] for k in keys} == {k: d[k] for k in keys}


def test_flags_fill_the_kinds_as_the_yaml_does(files, tmp_path):
    from simulator.cli.flags import scenario_from_flags
    from simulator.cli.generated import fill

    given = {"trace": str(files / "trace.json"), "out": str(tmp_path / "w.json"), "steps": 2, "batch": 4,
             "host_time": "trace", "top_ops": 0, "ctx": 512}
    (tmp_path / "s.yaml").write_text("kind: import_trace\nname: import_trace\n"
                                     + "".join(f"{k}: {v}\n" for k, v in given.items()))
    sc = scenario_from_flags(ImportTraceScenario, fill({"kind": "import_trace"}, given), {}, given)
    assert sc == load_scenario(tmp_path / "s.yaml")


@pytest.mark.parametrize("cmd,kind", [("import-trace", ImportTraceScenario), ("export-trace", ExportTraceScenario)])
def test_every_field_is_a_flag(cmd, kind):
    import typer.main

    from simulator.cli import _load, app

    _load(["trace"])
    c = typer.main.get_command(app).commands[cmd]
    names = {o for p in c.params for o in p.opts} | {p.name for p in c.params}
    fields = set(kind.model_fields) - {"kind", "name", "description"}
    assert {f"--{f.replace('_', '-')}" for f in fields} - {"--trace"} <= names and ("trace" in names) == ("trace" in fields)


def test_predict_workload_flags_are_workload_fields():
    from simulator.cli.workload import WORKLOAD_FLAGS

    assert set(WORKLOAD_FLAGS) <= set(WorkloadScenario.model_fields)


BAD = [
    ("import_trace", "trace: {t}\nout: {o}\ntop_ops: -1\n", "top_ops", 4),
    ("import_trace", "trace: {t}\nout: {o}\nsteps: zero\n", "steps", 4),
    ("import_trace", "trace: {t}\nout: {o}\nbatch: 0\n", "batch", 4),
    ("import_trace", "trace: {t}\nout: {o}\nhost_time: sometimes\n", "host_time", 4),
    ("import_trace", "trace: {t}\nout: {o}\nhost_time: deflate\n", "host_time", 4),
    ("import_trace", "trace: {t}\nout: {o}\nprofile: nope\n", "profile", 4),
    ("import_trace", "trace: {t}\nout: {o}\nmodel: nope\n", "model", 4),
    ("import_trace", "trace: {d}/nope.json\nout: {o}\n", "trace", 2),
    ("import_trace", "trace: {t}\nout: {d}\n", "out", 3),
    ("import_trace", "trace: {t}\nout: {o}\nwarp: 1\n", "warp", 4),
    ("export_trace", "out: {o}\nworkload: {w}\nfusion: fused\n", "fusion", 4),
    ("export_trace", "out: {o}\nmodel: qwen3-0.6b\nctx: 100000\n", "ctx", 4),
    ("export_trace", "out: {o}\nmodel: qwen3-0.6b\nbatch: 0\n", "batch", 4),
    ("export_trace", "out: {o}\nworkload: {d}/nope.json\n", "workload", 3),
    ("export_trace", "out: {o}\nmodel: qwen3-0.6b\ngraph: sometimes\n", "graph", 4),
    ("workload", "workload: {w}\nreplicates: -1\n", "replicates", 3),
]


@pytest.mark.parametrize("kind,body,field,line", BAD, ids=[f"{k}:{f}:{i}" for i, (k, _, f, _) in enumerate(BAD)])
def test_bad_field_is_one_line_naming_file_line_and_field(files, tmp_path, capsys, kind, body, field, line):
    s = tmp_path / "bad.yaml"
    s.write_text(f"kind: {kind}\n" + body.format(t=files / "trace.json", w=files / "w.json", d=tmp_path,
                                                 o=tmp_path / "x.json") + ("name: x\n" if kind == "workload" else ""))
    err = cli_error(capsys, ["run", str(s), "--out", str(tmp_path / "o")])
    assert re.search(rf"bad\.yaml:{line}: field '{field}'", err), err
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "o" / "result.json").exists()


def test_export_needs_one_source_in_yaml_too(tmp_path, capsys):
    s = tmp_path / "s.yaml"
    s.write_text(f"kind: export_trace\nout: {tmp_path / 'x.json'}\n")
    assert "exactly one of model or workload" in cli_error(capsys, ["run", str(s), "--out", str(tmp_path / "o")])


@pytest.mark.parametrize("argv,needle", [
    (["import-trace", "{t}", "--out", "{o}", "--top-ops", "-1"], "--top-ops (field 'top_ops')"),
    (["import-trace", "{t}", "--out", "{d}"], "--out (field 'out')"),
    (["import-trace", "{t}", "--out", "{o}", "--profile", "nope"], "--profile (field 'profile')"),
    (["import-trace", "{t}", "--out", "{o}", "--host-time", "deflate"], "--host-time deflate needs it"),
    (["export-trace", "--out", "{o}", "--workload", "{w}", "--fusion", "fused"], "--fusion (field 'fusion')"),
    (["export-trace", "--out", "{o}", "--model", "qwen3-0.6b", "--ctx", "40960"], "--ctx (field 'ctx')"),
    (["export-trace", "--out", "{o}", "--workload", "{d}/nope.json"], "--workload (field 'workload')"),
    (["predict", "--workload", "{w}", "--replicates", "-1"], "--replicates (field 'replicates')"),
    (["predict", "--workload", "{w}", "--prefill-seqs", "2"], "--prefill-seqs applies to model presets"),
])
def test_command_errors_name_flag_and_field(files, tmp_path, capsys, argv, needle):
    names = {"t": files / "trace.json", "w": files / "w.json", "d": tmp_path, "o": tmp_path / "x.json"}
    assert needle in cli_error(capsys, [a.format(**names) for a in argv])
    assert not (tmp_path / "x.json").exists()
