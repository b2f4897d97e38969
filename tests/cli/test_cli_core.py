"""CLI and scenario-file tests: run, predict, schema, and one-line errors with exit code 2."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from simulator.cli import app
from simulator.config import ConfigError, load_scenario

from tests.conftest import cli_error  # noqa: E402

runner = CliRunner()


def err_of(capsys, argv):
    return cli_error(capsys, argv)


def test_predict_json_keys():
    r = runner.invoke(app, ["predict", "--model", "qwen3-0.6b", "--batch", "1", "--fusion", "none", "--graph", "none",
                            "--json"])  # eager, spelled out: the defaults are vLLM V1's (fused, full_and_piecewise)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    for k in ("step_ms", "cpu_ms", "gpu_ms", "kernels", "launches", "bound"):
        assert k in d
    # eager: one launch per kernel op; cuBLAS split-K reduce kernels (from the profile) add kernels
    assert d["bound"] == "cpu" and d["launches"] <= d["kernels"] <= 1.05 * d["launches"]


def test_predict_graph_full_is_one_launch_and_faster():
    eager = json.loads(runner.invoke(app, ["predict", "--model", "qwen3-0.6b", "--graph", "none", "--json"]).stdout)
    graph = json.loads(runner.invoke(app, ["predict", "--model", "qwen3-0.6b", "--graph", "full", "--json"]).stdout)
    assert graph["launches"] == 1 and graph["kernels"] == eager["kernels"]
    assert graph["step_ms"] < eager["step_ms"]


def test_predict_des_equals_fast():
    a = json.loads(runner.invoke(app, ["predict", "--model", "llama3-8b", "--batch", "16", "--engine", "des", "--json"]).stdout)
    b = json.loads(runner.invoke(app, ["predict", "--model", "llama3-8b", "--batch", "16", "--engine", "fast", "--json"]).stdout)
    assert a["step_ms"] == pytest.approx(b["step_ms"], rel=1e-9)


@pytest.mark.parametrize("argv,needle", [
    (["predict", "--model", "nope"], "unknown model"),
    (["predict", "--model", "qwen3-0.6b", "--batch", "0"], "--batch"),
    (["predict", "--model", "qwen3-0.6b", "--batch", "-3"], "--batch"),
    (["predict", "--model", "llama3-8b", "--ctx", "9000"], "max_position_embeddings"),
    (["predict", "--model", "qwen3-0.6b", "--fusion", "max"], "fusion"),
    (["predict", "--model", "qwen3-0.6b", "--graph", "sometimes"], "graph mode"),
    (["predict", "--model", "qwen3-0.6b", "--profile", "tpu-v9"], "unknown profile"),
    (["predict", "--model", "qwen3-0.6b", "--engine", "warp"], "engine"),
])
def test_predict_bad_input(capsys, argv, needle):
    assert needle in err_of(capsys, argv)


def test_run_scenarios_write_outputs(tmp_path):
    r = runner.invoke(app, ["run", "scenarios/s13_launch_bound.yaml", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    d = json.loads((tmp_path / "result.json").read_text())
    assert d["rows"][0]["launches"] == 288
    html = (tmp_path / "report.html").read_text()
    assert "Plotly.newPlot" in html and "<script src=\"http" not in html  # opens offline
    assert '<script src="plotly.min.js"' in html and len(html) < 500_000  # plotly.js once per folder, beside it
    assert (tmp_path / "plotly.min.js").stat().st_size > 1_000_000
    r = runner.invoke(app, ["run", "scenarios/s13_launch_bound.yaml", "--out", str(tmp_path / "inl"), "--inline-plotly"])
    assert r.exit_code == 0, r.output
    assert len((tmp_path / "inl" / "report.html").read_text()) > 1_000_000
    assert not (tmp_path / "inl" / "plotly.min.js").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    # --inline-plotly holds for its own run only (report/html.plotly_inline): the next run in the same process
    # writes plotly.min.js beside its report again
    r = runner.invoke(app, ["run", "scenarios/s13_launch_bound.yaml", "--out", str(tmp_path / "after")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "after" / "plotly.min.js").exists()
    assert len((tmp_path / "after" / "report.html").read_text()) < 500_000


def test_plotly_inline_is_scoped_to_its_block():
    from simulator.report.html import inline_plotly, plotly_inline

    assert not inline_plotly()
    with plotly_inline():
        assert inline_plotly()
        with plotly_inline(False):
            assert not inline_plotly()
        assert inline_plotly()
    assert not inline_plotly()
    with pytest.raises(RuntimeError), plotly_inline():
        raise RuntimeError("a failed run")
    assert not inline_plotly()


BAD_YAML = {
    "unknown_key": ("kind: step\nname: x\nmodel: qwen3-0.6b\nbatchh: [1]\n", ":4: field 'batchh': unknown key"),
    "negative_batch": ("kind: step\nname: x\nmodel: qwen3-0.6b\nbatch:\n  - 1\n  - -4\n", ":6: field 'batch[1]'"),
    "bad_kind": ("kind: magic\nname: x\n", ":1: field 'kind'"),
    "malformed": ("kind: step\nname: [unclosed\n", "malformed YAML"),
    "missing": ("kind: step\nname: x\n", "field 'model': required field missing"),
    "nested": ("kind: toy\nname: t\ncases:\n  - label: a\n    layers: 2\n    kernels_per_layer: 3\n"
               "    launch_us: 6\n    kernel_us: 1\n    colour: red\n", ":9: field 'cases[0].colour': unknown key"),
    "not_mapping": ("- 1\n- 2\n", "must be a YAML mapping"),
    # a value matching no branch of a union (preset name | list of sizes): the error names the bad item
    "union": ("kind: serve\nname: x\nmodel: qwen3-0.6b\nrate: 1\nlayout:\n  - 0\n  - 1\n",
              ":6: field 'layout[0]': Input should be greater than 0"),
}


@pytest.mark.parametrize("case", sorted(BAD_YAML))
def test_bad_scenarios_name_file_line_and_field(tmp_path, capsys, case):
    text, needle = BAD_YAML[case]
    p = tmp_path / f"{case}.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_scenario(p)
    assert str(p) in str(e.value) and needle in str(e.value)
    err = err_of(capsys, ["run", str(p), "--out", str(tmp_path / "o")])
    assert needle in err
    assert not (tmp_path / "o" / "result.json").exists()


def test_unknown_model_in_scenario_is_one_line(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text("kind: step\nname: x\nmodel: gpt-7\n")
    assert "unknown model" in err_of(capsys, ["run", str(p), "--out", str(tmp_path / "o")])


def test_schema_is_json():
    r = runner.invoke(app, ["schema"])
    schema = json.loads(r.stdout)
    text = json.dumps(schema)
    assert "step" in text and "toy" in text and "description" in text


def test_console_script_runs():
    r = subprocess.run([sys.executable, "-m", "simulator.cli", "predict", "--model", "qwen3-0.6b", "--batch", "0"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_scenario_file_paths_resolve_beside_the_scenario(tmp_path, monkeypatch):
    """A scenario names its data files relative to itself, so it runs from any working directory."""
    from pathlib import Path

    scen = Path("scenarios/optimize_bimodal.yaml").resolve()
    monkeypatch.chdir(tmp_path)
    sc = load_scenario(scen)
    csv = Path(sc.distribution.csv)
    assert csv.is_absolute() and csv.exists() and csv.parent == scen.parent / "data"
