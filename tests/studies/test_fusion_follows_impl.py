"""`impl` given, `fusion` left out: every kind's fusion default stands when the implementation has that level, else
the implementation's first level takes its place (stepopts.StepOptions._fusion_follows_impl): `--impl hf` alone is
transformers' eager code, never a refusal; an explicit fusion the implementation lacks is still refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from simulator.cli import app
from simulator.config.scenario import kind_model
from simulator.model.recipes import FUSIONS_OF

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "scenarios").glob("*.yaml"))
runner = CliRunner()
CONFIG = str(ROOT / "calibration" / "configs" / "hf_unseen" / "qwen3-1.7b.json")


def _kinds_with_both():
    out = []
    for p in SHIPPED:
        d = yaml.safe_load(p.read_text())
        M = kind_model(d["kind"])
        if "fusion" in M.model_fields and "impl" in M.model_fields:
            out.append(pytest.param(d, M, id=p.stem))
    return out


@pytest.mark.parametrize("impl", ["hf", "reference", "fused"])
@pytest.mark.parametrize("data,M", _kinds_with_both())
def test_every_kind_takes_a_fusion_level_the_implementation_has(data, M, impl):
    d = {k: v for k, v in data.items() if k != "fusion"}
    default = M.model_fields["fusion"].get_default(call_default_factory=True)
    got = M.model_validate({**d, "impl": impl}).fusion
    levels = FUSIONS_OF[impl]
    if isinstance(default, list):
        assert set(got) <= set(levels)
        assert got == (default if set(default) <= set(levels) else [levels[0]])
    else:
        assert got == (default if default in levels else levels[0])


@pytest.mark.parametrize("data,M", _kinds_with_both())
def test_without_impl_the_kinds_default_is_unchanged(data, M):
    d = {k: v for k, v in data.items() if k not in ("fusion", "impl")}
    assert M.model_validate(d).fusion == M.model_fields["fusion"].get_default(call_default_factory=True)


@pytest.mark.parametrize("data,M", _kinds_with_both())
def test_an_explicit_fusion_is_kept_or_refused(data, M):
    d = {k: v for k, v in data.items() if k != "fusion"}
    many = isinstance(M.model_fields["fusion"].get_default(call_default_factory=True), list)
    got = M.model_validate({**d, "impl": "hf", "fusion": ["compiled"] if many else "compiled"}).fusion
    assert got == (["compiled"] if many else "compiled")


def test_predict_impl_hf_alone_is_transformers_eager_code():
    r = runner.invoke(app, ["predict", "--model", CONFIG, "--impl", "hf", "--batch", "8", "--ctx", "512",
                            "--graph", "full", "--json"])
    assert r.exit_code == 0, r.output
    alone = json.loads(r.stdout)
    r = runner.invoke(app, ["predict", "--model", CONFIG, "--impl", "hf", "--fusion", "none", "--batch", "8",
                            "--ctx", "512", "--graph", "full", "--json"])
    explicit = json.loads(r.stdout)
    assert alone["fusion"] == "none" and alone["impl"] == "hf"
    assert alone["step_ms"] == explicit["step_ms"] and alone["kernels"] == explicit["kernels"]


def test_predict_impl_hf_with_fused_is_still_refused_in_one_line(capsys):
    from simulator.cli import main

    with pytest.raises(SystemExit) as e:
        main(["predict", "--model", CONFIG, "--impl", "hf", "--fusion", "fused"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fusion 'fused' does not exist for implementation 'hf'" in err, err


@pytest.mark.parametrize("argv", [
    ["optimize", "--model", "qwen3-0.6b", "--impl", "hf", "--max-size", "64", "--max-graphs", "4", "--json"],
    ["startup", "--model", "qwen3-0.6b", "--impl", "hf", "--layout", "1,8", "--json"],
    ["graph-memory", "--model", "qwen3-0.6b", "--impl", "hf", "--layout", "1,8", "--json"],
    ["predict", "--model", "qwen3-0.6b", "--impl", "reference", "--graph", "full", "--json"],
])
def test_other_commands_take_impl_alone_as_its_first_level(argv, tmp_path):
    """Each command answers `--impl X` alone exactly as `--impl X --fusion <X's first level>` (the same output, or
    the same refusal where the command refuses the implementation for another reason: optimize's padded rows)."""
    if argv[0] == "optimize":
        (tmp_path / "d.csv").write_text("batch\n" + "\n".join(str(b) for b in (1, 2, 3, 8, 13, 40, 64)) + "\n")
        argv = argv + ["--distribution", str(tmp_path / "d.csv")]
    impl = argv[argv.index("--impl") + 1]
    alone = runner.invoke(app, argv + (["--out", str(tmp_path / "a")] if argv[0] == "optimize" else []))
    explicit = runner.invoke(app, argv + ["--fusion", FUSIONS_OF[impl][0]]
                             + (["--out", str(tmp_path / "b")] if argv[0] == "optimize" else []))
    assert alone.exit_code == explicit.exit_code, (alone.output, explicit.output)
    assert "does not exist for implementation" not in alone.output
    if alone.exit_code == 0:
        assert json.loads(alone.stdout) == json.loads(explicit.stdout)
    else:
        assert str(alone.exception) == str(explicit.exception)


def test_serve_impl_hf_alone_reaches_the_recipe_refusal_not_a_fusion_one(capsys):
    """serve takes `--impl hf` alone as fusion none, then refuses the mixed prefill steps hf does not model, in one
    line (exit 2)."""
    from simulator.cli import main

    with pytest.raises(SystemExit) as e:
        main(["serve", "--model", "qwen3-0.6b", "--impl", "hf", "--graph", "full", "--rate", "2", "--duration", "5"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "models decode steps only" in err, err


def test_predict_says_the_fusion_came_from_the_implementation(capsys):
    """The first line names the fusion the step used and why: never 'fusion fused (default)' over an hf step."""
    from simulator.cli import main

    with pytest.raises(SystemExit) as e:
        main(["predict", "--model", CONFIG, "--impl", "hf", "--batch", "8", "--ctx", "511"])
    assert e.value.code == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("fusion none (hf's first level: hf has no fused), graph full_and_piecewise (default)")
    with pytest.raises(SystemExit):
        main(["predict", "--model", CONFIG, "--impl", "hf", "--fusion", "none", "--batch", "8", "--ctx", "511"])
    assert capsys.readouterr().out.splitlines()[0].startswith("fusion none, graph full_and_piecewise (default)")
