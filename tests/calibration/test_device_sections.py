"""Device figures in the profile JSON, not in code (calibration/device_sections.py, issue 24 item 3): every shipped
profile carries its collective, graph-memory-constant and start-up sections with a source; make_profiles
regenerates the shipped files byte for byte; a profile without a section is refused with one line."""

import json
import shutil

import pytest

from calibration import make_profiles
from calibration.device_sections import NVLINK4_COLLECTIVE, carry
from simulator.model.profile import CollectiveSection, available_profiles, load_profile
from tests.conftest import cli_error

SHIPPED = {f.stem: f for f in available_profiles()}


def test_every_shipped_profile_carries_the_sections_with_a_source():
    assert set(SHIPPED) >= {"h200", "h100-sxm", "datasheet-h200", "datasheet-h100-sxm"}
    h200 = load_profile("h200")
    published = CollectiveSection(**NVLINK4_COLLECTIVE)
    for name in SHIPPED:
        p = load_profile(name)
        d = p.device
        assert d.collective == published, name  # exactly the published figures (JSON keys back to ints)
        assert d.graph_memory_constants is not None and p.host.startup is not None, name
        for t in d.graph_memory.values():  # the device-wide constants are the tables' own fit
            assert t.constants.model_dump(exclude={"source"}) == d.graph_memory_constants.model_dump(
                exclude={"source"})
        src = d.graph_memory_constants.source
        if name == "h200":
            assert src.startswith("H200 measured (calibration/measured/h200-round-a)")
        else:
            assert src.startswith(f"H200 measured, applied to {name} by assumption")
            assert p.host.startup.model_dump(exclude={"source"}) == h200.host.startup.model_dump(exclude={"source"})


def test_make_profiles_regenerates_the_shipped_files(tmp_path, monkeypatch):
    """CPU only: the shipped JSONs are exactly what make_profiles writes from the committed measurements."""
    for f in SHIPPED.values():
        shutil.copy(f, tmp_path / f.name)
    monkeypatch.setattr(make_profiles, "PROFILES", tmp_path)
    make_profiles.main()
    for name, f in SHIPPED.items():
        assert (tmp_path / f.name).read_bytes() == f.read_bytes(), name


def test_carry_names_the_assumption():
    p = json.loads(SHIPPED["h200"].read_text())
    q = carry({"name": "b200-guess", "host": {}, "device": {}}, p)
    assert q["host"]["startup"]["source"].startswith("H200 measured, applied to b200-guess by assumption: ")
    assert q["device"]["graph_memory_constants"]["capture_workspace_bytes"] == 32 * 1024 * 1024
    assert q["device"]["collective"] == p["device"]["collective"]


def _without(tmp_path, *paths):
    raw = json.loads(SHIPPED["h200"].read_text())
    raw["name"] = "bare"
    for sec, key in paths:
        raw[sec].pop(key)
    out = tmp_path / "bare.json"
    out.write_text(json.dumps(raw))
    return str(out)


def test_commands_refuse_a_profile_without_the_section(tmp_path, capsys):
    bare = _without(tmp_path, ("host", "startup"), ("device", "collective"), ("device", "graph_memory_constants"))
    err = cli_error(capsys, ["startup", "--model", "qwen3-0.6b", "--profile", bare])
    assert "no host.startup section" in err
    err = cli_error(capsys, ["predict", "--model", "llama3-8b", "--tp", "2", "--profile", bare])
    assert "no device.collective section" in err
    # a model without its own measured graph-memory table needs the device-wide constants
    err = cli_error(capsys, ["graph-memory", "--model", "llama3-70b", "--tp", "8", "--profile", bare])
    assert "no device.graph_memory_constants" in err


@pytest.mark.parametrize("model", ["qwen3-0.6b", "llama3-8b"])
def test_measured_tables_need_no_device_constants(tmp_path, model):
    from simulator.engine.graph_memory import GraphMemoryModel
    from simulator.model.models import load_model

    p = load_profile(_without(tmp_path, ("device", "graph_memory_constants")))
    lay = GraphMemoryModel(load_model(model), p, "none", "full").layout([1, 8])
    assert lay.parts["capture_workspace"]["source"] == "measured"
