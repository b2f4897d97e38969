"""A scenario's checks resolve each model it names once (issue 24: one owner per concept, resolve once): the checks
of its context (and of serve's KV memory) reuse the spec its model check loaded. Counted as reads of a config.json."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest
import yaml

from simulator.cli import main
from simulator.config import load_scenario
from tests.paths import ROOT

QWEN = ROOT / "calibration" / "configs" / "hf" / "qwen3-0.6b.json"


@pytest.fixture
def reads(monkeypatch):
    """The paths load_model reads, one entry a read."""
    import simulator.model.models as M

    seen: list[str] = []
    real = M.read_json

    def counting(path, *a, **k):
        seen.append(str(path))
        return real(path, *a, **k)
    monkeypatch.setattr(M, "read_json", counting)
    return seen


def _config(tmp_path, name: str) -> str:
    (tmp_path / name).mkdir()
    return str(shutil.copy(QWEN, tmp_path / name / "config.json"))


def _scenario(tmp_path, example: str, **fields) -> str:
    data = yaml.safe_load((ROOT / "scenarios" / example).read_text())
    data.update(fields)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    return str(tmp_path / "s.yaml")


def test_a_step_scenario_reads_its_config_once(tmp_path, reads):
    cfg = _config(tmp_path, "a")
    load_scenario(_scenario(tmp_path, "qwen3_0p6b_decode.yaml", model=cfg))
    assert reads == [cfg]


def test_a_sweep_reads_each_of_its_configs_once(tmp_path, reads):
    a, b = _config(tmp_path, "a"), _config(tmp_path, "b")
    load_scenario(_scenario(tmp_path, "sweep_layouts_qwen3_0p6b.yaml", models=[a, b]))
    assert Counter(reads) == {a: 1, b: 1}


def test_serve_reads_its_config_once_for_model_context_and_memory(tmp_path, reads):
    cfg = _config(tmp_path, "a")
    s = _scenario(tmp_path, "serve_qwen3_0p6b.yaml", model=cfg)
    load_scenario(s, overrides=["engine.max_model_len=4096"])
    assert reads == [cfg]


def test_serve_checks_context_and_memory_under_assume_family(tmp_path):
    """The context and KV-memory checks use the model as its check read it, `assume_family` included."""

    d = tmp_path / "falcon"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({**json.loads(QWEN.read_text()), "model_type": "falcon",
                                               "architectures": ["FalconForCausalLM"]}))
    s = _scenario(tmp_path, "serve_qwen3_0p6b.yaml", model=str(d / "config.json"), assume_family="llama")
    assert load_scenario(s, overrides=["engine.max_model_len=4096"]).assume_family == "llama"


def test_export_trace_flags_read_the_config_once(tmp_path, reads, capsys):
    cfg = _config(tmp_path, "a")
    with pytest.raises(SystemExit) as e:
        main(["export-trace", "--model", cfg, "--ctx", "2048", "--out", str(tmp_path / "t.json")])
    assert e.value.code in (0, None), capsys.readouterr().err
    assert (tmp_path / "t.json").is_file() and reads == [cfg]


def test_export_trace_checks_read_the_config_once(tmp_path, reads):
    cfg = _config(tmp_path, "a")
    (tmp_path / "s.yaml").write_text(f"kind: export_trace\nname: x\nout: {tmp_path / 't.json'}\nmodel: {cfg}\n"
                                     "ctx: 2048\n")
    load_scenario(tmp_path / "s.yaml")
    assert reads == [cfg]
