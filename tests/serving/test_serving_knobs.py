"""Serving knobs under the engines' names, as flags and YAML fields (issue 22, item 5): --max-num-seqs,
--max-num-batched-tokens, --gpu-memory-utilization (--gpu-util), --tensor-parallel-size (--tp, --tp-size), length
distributions (a CSV of real lengths too), every assumption printed, a stated --rate default, and `launchsim
capacity` with the YAML kind's fields."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from simulator.cli import app
from simulator.config import parse_scenario
from simulator.config.serve import DEFAULT_RATE
from simulator.serving.arrivals import LengthSpec, load_lengths
from simulator.studies.runner import run_scenario
from tests.conftest import cli_error

runner = CliRunner()


def _serve(*args) -> dict:
    r = runner.invoke(app, ["serve", "--model", "qwen3-0.6b", "--duration", "4", "--json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_engine_knobs_reach_the_run_and_are_printed():
    d = _serve("--max-num-seqs", "32", "--max-num-batched-tokens", "4096", "--gpu-memory-utilization", "0.5",
               "--tensor-parallel-size", "2")
    a = d["assumptions"]
    assert (a["max_num_seqs"], a["max_num_batched_tokens"], a["gpu_memory_utilization"],
            a["tensor_parallel_size"]) == (32, 4096, 0.5, 2)
    assert d["max_num_seqs"] == 32 and d["max_num_batched_tokens"] == 4096 and d["tp"] == 2
    assert a["rate"] == f"{DEFAULT_RATE:g} req/s (default)"  # no --rate: the stated default, said to be one
    assert a["prompt_lengths"].startswith("lognormal mean 512") and a["output_lengths"].startswith("lognormal mean 256")
    # the short forms are aliases: the same run
    b = _serve("--max-num-seqs", "32", "--max-num-batched-tokens", "4096", "--gpu-util", "0.5", "--tp", "2")
    assert b["kv_blocks"] == d["kv_blocks"] and b["throughput_tok_s"] == d["throughput_tok_s"]
    assert _serve("--tp-size", "2", "--max-num-seqs", "32")["tp"] == 2


def test_less_memory_means_a_smaller_kv_cache():
    assert _serve("--gpu-util", "0.5")["kv_blocks"] < _serve("--gpu-util", "0.9")["kv_blocks"]


def test_length_flags_and_a_csv_of_real_lengths(tmp_path):
    f = tmp_path / "lens.csv"
    f.write_text("prompt_tokens,output_tokens\n100,7\n200,9\n300,11\n")
    d = _serve("--prompt-len", f"csv:{f}:prompt_tokens", "--output-len", "fixed:16")
    assert "3 real lengths" in d["assumptions"]["prompt_lengths"]
    assert d["assumptions"]["output_lengths"] == "fixed 16"
    vals, src = load_lengths(f, "output_tokens")
    assert vals == (7, 9, 11) and src.endswith("column output_tokens")
    spec = LengthSpec("csv", values=vals, source=src)
    a = spec.draw(np.random.default_rng(3), 1000)
    assert set(a.tolist()) == {7, 9, 11} and spec.mean_len() == 9.0
    assert (a == spec.draw(np.random.default_rng(3), 1000)).all()  # deterministic under a seed


@pytest.mark.parametrize("text,needle", [
    ("len\n5\nlen\n6\n", ":3: the header row repeats"), ("len\n0\n", "must be a positive integer"),
    ("len\nx\n", "not an integer"), ("a,b\n1,2\n", "name the one to read"), ("len\n", "no lengths"),
])
def test_bad_length_csv_is_one_line(tmp_path, capsys, text, needle):
    f = tmp_path / "l.csv"
    f.write_text(text)
    msg = cli_error(capsys, ["serve", "--model", "qwen3-0.6b", "--duration", "2", "--prompt-len", f"csv:{f}"])
    assert needle in msg and str(f) in msg and "--prompt-len" in msg


@pytest.mark.parametrize("spec,needle", [("gauss:3", "unknown length distribution"), ("fixed:x", "must be a number"),
                                         ("uniform:5", "uniform takes LOW:HIGH"), ("fixed:0", "greater than 0")])
def test_bad_length_flag(capsys, spec, needle):
    assert needle in cli_error(capsys, ["serve", "--model", "qwen3-0.6b", "--prompt-len", spec])


def test_yaml_takes_the_engines_name_and_the_old_one():
    base = {"kind": "serve", "name": "s", "model": "qwen3-0.6b", "rate": 1}
    a = parse_scenario({**base, "engine": {"gpu_memory_utilization": 0.6}}, "t")
    b = parse_scenario({**base, "engine": {"gpu_util": 0.6}}, "t")
    assert a.engine.gpu_memory_utilization == b.engine.gpu_memory_utilization == 0.6
    c = parse_scenario({**base, "prompt": {"kind": "fixed", "value": 9}}, "t")
    assert c.prompt.to_spec().describe() == "fixed 9"


def test_capacity_command_is_the_yaml_kind():
    r = runner.invoke(app, ["capacity", "--model", "qwen3-0.6b", "--slo-tpot-ms", "20", "--duration", "10",
                            "--max-num-seqs", "128", "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    want = run_scenario(parse_scenario({"kind": "capacity", "name": "c", "models": ["qwen3-0.6b"],
                                        "graph": ["full_and_piecewise"], "duration_s": 10,
                                        "engine": {"max_num_seqs": 128},
                                        "slo": {"percentile": 99, "tpot_ms": 20}}, "t"), None)
    assert [s["best_rate"] for s in got["summary"]] == [s["best_rate"] for s in want["summary"]]
    assert got["assumptions"]["max_num_seqs"] == 128 and "stable" in got["assumptions"]["stability"]
