"""One set of defaults across commands (issue 22, item 4): vLLM V1's, fusion fused + graph full_and_piecewise,
in predict, graph-memory, startup, optimize and serve; `--help` shows them; each command's text output says
which fusion and graph it used and which were defaults."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from simulator.cli import app
from simulator.common import vocab as V

runner = CliRunner()


def _ok(args):
    r = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    return r.stdout


def test_the_defaults_are_vllm_v1s():
    assert (V.DEFAULT_FUSION, V.DEFAULT_GRAPH) == ("fused", "full_and_piecewise")


@pytest.mark.parametrize("cmd", ["predict", "graph-memory", "startup", "optimize", "serve"])
def test_help_shows_the_defaults(cmd):
    h = " ".join(_ok([cmd, "--help"]).split())
    assert "fused" in h and "full_and_piecewise" in h


def test_commands_use_and_state_the_same_defaults(tmp_path):
    note = V.defaults_note(V.DEFAULT_FUSION, V.DEFAULT_GRAPH)
    assert note.startswith("fusion fused (default), graph full_and_piecewise (default)")
    p = json.loads(_ok(["predict", "--model", "qwen3-0.6b", "--json"]))
    assert p["fusion"] == "fused" and p["graph"] == "full"  # a pure decode step replays the full graph
    assert note in _ok(["predict", "--model", "qwen3-0.6b"])
    g = json.loads(_ok(["graph-memory", "--model", "qwen3-0.6b", "--json"]))
    assert (g["fusion"], g["graph"]) == ("fused", "full_and_piecewise")
    assert note in _ok(["graph-memory", "--model", "qwen3-0.6b"])
    s = json.loads(_ok(["startup", "--model", "qwen3-0.6b", "--json"]))
    assert (s["fusion"], s["graph"]) == ("fused", "full_and_piecewise")
    assert note in _ok(["startup", "--model", "qwen3-0.6b"])
    d = tmp_path / "d.csv"
    d.write_text("batch,count\n1,3\n8,2\n")
    o = json.loads(_ok(["optimize", "--dist", str(d), "--model", "qwen3-0.6b", "--json"]))
    assert (o["inputs"]["fusion"], o["inputs"]["graph"]) == ("fused", "full_and_piecewise")
    assert note in " ".join(_ok(["optimize", "--dist", str(d), "--model", "qwen3-0.6b"]).split())
    sv = json.loads(_ok(["serve", "--model", "qwen3-0.6b", "--rate", "5", "--duration", "3", "--json"]))
    assert (sv["fusion"], sv["graph"]) == ("fused", "full_and_piecewise")
    # graph memory agrees between graph-memory and serve under the shared default (was 348.3 vs 497.7 MiB)
    assert sv["graph_gib"] * 2 ** 30 == pytest.approx(g["total_bytes"], rel=1e-9)


def test_a_given_value_is_not_called_a_default():
    assert V.defaults_note("none", "full").startswith("fusion none, graph full;")
