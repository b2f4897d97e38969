"""What a user sees (issue 14): --version, flag aliases, layouts in engine terms, tables that keep labels and fit the
terminal, every headline field of predict, refusing config.json fields launchsim does not model, quiet progress."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from simulator.cli import main
from simulator.layouts.engine_syntax import engine_lines, engine_syntax, parse_engine_layout
from tests.conftest import cli_error


def _out(capsys, argv, code=0) -> str:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == code
    return capsys.readouterr().out


def test_version(capsys):
    assert _out(capsys, ["--version"]).startswith("launchsim ")


def test_distribution_and_dist_alias_give_the_same_answer(tmp_path, capsys):
    d = tmp_path / "b.csv"
    d.write_text("batch,count\n1,5\n3,2\n8,4\n")
    args = ["--model", "qwen3-0.6b", "--max-graphs", "2", "--json"]
    a = json.loads(_out(capsys, ["optimize", "--distribution", str(d), *args]))
    b = json.loads(_out(capsys, ["optimize", "--dist", str(d), *args]))
    assert a["sizes"] == b["sizes"]


def test_memory_budget_and_budget_alias(capsys):
    a = json.loads(_out(capsys, ["graph-memory", "--model", "qwen3-0.6b", "--memory-budget", "64GiB", "--json"]))
    b = json.loads(_out(capsys, ["graph-memory", "--model", "qwen3-0.6b", "--budget", "64GiB", "--json"]))
    assert a["budget_bytes"] == b["budget_bytes"] == 64 << 30


@pytest.mark.parametrize("text", ["[1, 2, 8]", '{"cudagraph_capture_sizes": [8, 1, 2]}',
                                  """--compilation-config '{"cudagraph_capture_sizes": [1, 2, 8]}'""",
                                  '{"compilation_config": {"cudagraph_capture_sizes": [1, 2, 8]}}',
                                  "--cuda-graph-bs 1 2 8", "--cuda-graph-max-bs 8 --cuda-graph-bs 1 2 8",
                                  "--cuda-graph-max-bs-decode 8 --cuda-graph-bs-decode 1 2 8",
                                  "cuda_graph_config: {enable_padding: true, batch_sizes: [1, 2, 8]}"])
def test_layout_in_engine_terms(text, capsys):
    assert sorted(parse_engine_layout(text)) == [1, 2, 8]
    d = json.loads(_out(capsys, ["pad", "3", "--layout", text, "--json"]))
    assert d["padded"] == 8


def test_engine_syntax_round_trips():
    sizes = [1, 2, 4, 24, 256]
    for key, line in engine_syntax(sizes).items():
        assert parse_engine_layout(line) == sizes, key
    lines = engine_lines(sizes)
    assert len(lines) == 8 and all(x.startswith("# ") for x in lines[::2])
    assert any("--cuda-graph-bs-decode" in x for x in lines) and any("--cuda-graph-bs 1" in x for x in lines)


def test_bad_engine_layout_is_one_line(capsys):
    err = cli_error(capsys, ["pad", "3", "--layout", '{"sizes": [1]}'])
    assert "cudagraph_capture_sizes" in err


def test_buckets_prints_raw_engine_lines(capsys):
    out = _out(capsys, ["buckets", "sglang"]).splitlines()
    assert out[4].startswith("--cuda-graph-max-bs 256 --cuda-graph-bs 1 2 4 8")  # one unwrapped line
    assert out[4].endswith(" 256") and out[3].startswith("# SGLang before")
    out = _out(capsys, ["buckets", "--layout", "[1, 2, 8]"])
    assert "3 sizes: 1, 2, 8" in out


def test_table_keeps_bracketed_labels_and_fits(capsys):
    from simulator.cli.tables import print_rows

    rows = [{"config": f"qwen3-0.6b fused full_and_piecewise [{lab}]", "best_rate": 100.0 + i, "runs": 6,
             "kv_gib": 123.4, "graph_gib": 0.4, "throughput_tok_s": 32000.5, "note": "same"}
            for i, lab in enumerate(["vllm", "optimized", "sglang"])]
    con = Console(width=60, force_terminal=False, markup=False, highlight=False)
    with con.capture() as cap:
        print_rows(rows, "[bold]t[/bold]", limit=2, where="out/result.json", more="--rows 0", out=con)
    text = cap.get()
    assert "[vllm]" in text and "[bold]t[/bold]" in text
    assert "…" not in text
    assert all(len(line) <= 60 for line in text.splitlines())
    assert "first 2 of 3 rows (--rows 0 prints all)" in " ".join(text.split())
    assert "out/result.json" in text and "same in every row" in " ".join(text.split())


def test_predict_shows_every_headline_field(capsys):
    out = _out(capsys, ["predict", "--model", "qwen3-0.6b", "--replicates", "3"])
    for k in ("kernels", "launches", "bound", "graph", "step_ms_p10", "step_ms_p90", "step_ms", "cpu_ms", "gpu_ms"):
        assert f" {k} " in out, k
    assert "p10-p90" in out


# num_experts / num_local_experts are modelled since issue 15 (simulator/model/moe.py); other MoE layouts are not
@pytest.mark.parametrize("field,value", [("first_k_dense_replace", 1), ("mlp_only_layers", [0]), ("n_routed_experts", 64),
                                         ("quantization_config", {"quant_method": "fp8"}), ("kv_lora_rank", 512),
                                         ("rope_scaling", {"rope_type": "longrope"}),
                                         ("torch_dtype", "float8_e4m3fn"),
                                         ("layer_types", ["full_attention", "linear_attention"])])
def test_unmodelled_config_fields_are_refused(tmp_path, capsys, field, value):
    cfg = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 512, "vocab_size": 1000, field: value}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg, indent=1))
    err = cli_error(capsys, ["predict", "--model", str(p)])
    assert f"field '{field}'" in err and "not modelled" in err


def test_dense_config_with_inactive_fields_still_loads(tmp_path):
    from simulator.model.models import load_model

    cfg = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 512, "vocab_size": 1000, "sliding_window": None, "use_sliding_window": False, "torch_dtype": "bfloat16",
           "num_experts": 0, "quantization_config": None}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    assert load_model(str(p)).num_hidden_layers == 2


def test_progress_is_quiet_without_a_terminal_and_under_json(capsys):
    from simulator.report import progress

    with progress.task("x", total=2) as advance:  # pytest's stderr is not a terminal
        advance()
        progress.note("n")
    assert capsys.readouterr().err == ""
    progress.set_quiet(True)
    assert not progress.enabled()
    progress.set_quiet(False)


def test_run_set_overrides_a_field(tmp_path, capsys):
    out = _out(capsys, ["run", "scenarios/qwen3_0p6b_decode.yaml", "--out", str(tmp_path / "o"),
                        "--set", "batch=[1, 2]", "--set", "replicates=0", "--set", "fusion=[fused]"])
    res = json.loads((tmp_path / "o" / "result.json").read_text())
    assert {r["batch"] for r in res["rows"]} == {1, 2} and "wrote" in out
    err = cli_error(capsys, ["run", "scenarios/qwen3_0p6b_decode.yaml", "--out", str(tmp_path / "p"),
                             "--set", "nonsense"])
    assert "--set" in err


def test_run_refuses_negative_rows_before_running(tmp_path, capsys):
    """--rows is checked before the scenario runs: nothing is written, one error line, exit 2."""
    err = cli_error(capsys, ["run", "scenarios/qwen3_0p6b_decode.yaml", "--out", str(tmp_path / "o"), "--rows", "-1"])
    assert "--rows must be >= 0, got -1" in err
    assert not (tmp_path / "o").exists()
