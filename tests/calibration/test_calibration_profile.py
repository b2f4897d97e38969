"""Shipped calibration profiles: loading, default, derivation, and one-line validation errors."""

from __future__ import annotations

import copy
import json

import pytest

from calibration.build_profile import derive_h100
from simulator.model.profile import DEFAULT_PROFILE, PROFILE_DIR, ProfileError, load_profile, parse_profile
from tests.paths import ROOT

MEASURED = ROOT / "calibration" / "measured"


@pytest.fixture(scope="module")
def h200_raw() -> dict:
    return json.loads((PROFILE_DIR / "h200.json").read_text())


def test_measured_h200_is_the_default():
    assert DEFAULT_PROFILE == "h200"
    p = load_profile()
    assert p.name == "h200" and p.source == "measured"
    assert "H200" in p.device.gpu
    # every launch path the cost model can ask for has a figure, with a spread
    for path in ("eager_elementwise", "eager_reduction", "eager_gemm", "eager_attention", "eager_copy",
                 "eager_embedding", "eager_view", "compiled", "custom_op", "raw"):
        s = p.host.launch_us[path]
        assert s.p10 <= s.p50 <= s.p90
    assert p.device.tables.gemm and p.device.tables.attention and p.device.tables.elementwise
    assert set(p.device.graph_memory) == {"qwen3-0.6b", "llama3-8b"}


def test_h100_is_derived_and_marked():
    p = load_profile("h100-sxm")
    h = load_profile("h200")
    assert p.source == "derived" and p.derived_from == "h200"
    assert p.device.hbm_tbps == pytest.approx(3.35)
    # same host section; its start-up figures are the H200's, their source naming the assumption
    assert p.host.model_copy(update={"startup": None}) == h.host.model_copy(update={"startup": None})
    assert p.host.startup.model_dump(exclude={"source"}) == h.host.startup.model_dump(exclude={"source"})
    assert p.host.startup.source.startswith("H200 measured, applied to h100-sxm by assumption")
    assert p.device.peak_bf16_tflops == h.device.peak_bf16_tflops  # same compute
    # the attention tables are the H100 calibration round's own (calibration/measured/h100-calib), point for point:
    # a bandwidth-bound point (decode attention at a long context) is slower than the H200's, the floor is not
    raw = json.loads((ROOT / "calibration" / "measured" / "h100-calib" / "timing.json").read_text())["attention"]
    a, b = p.device.tables.attention[0], h.device.tables.attention[0]
    assert [list(r) for r in a.us] == [list(r) for r in raw[0]["graph_us"]]
    assert a.us[-1][-1] > b.us[-1][-1] * 1.3
    assert min(min(r) for r in a.us) == pytest.approx(min(min(r) for r in b.us), rel=0.05)


@pytest.mark.parametrize("version", [0, 2, "1", None])
def test_wrong_schema_version_is_one_line(h200_raw, version):
    raw = copy.deepcopy(h200_raw)
    raw["schema_version"] = version
    with pytest.raises(ProfileError) as e:
        parse_profile(raw, "x.json")
    msg = str(e.value)
    assert "\n" not in msg and "schema_version" in msg and "x.json" in msg


@pytest.mark.parametrize("section", ["host", "device"])
def test_missing_section_is_one_line(h200_raw, section):
    raw = copy.deepcopy(h200_raw)
    del raw[section]
    with pytest.raises(ProfileError) as e:
        parse_profile(raw, "x.json")
    msg = str(e.value)
    assert "\n" not in msg and section in msg


def test_bad_field_names_the_field(h200_raw):
    raw = copy.deepcopy(h200_raw)
    raw["device"]["tables"]["gemm"][0]["kernels"] = [1]  # wrong length
    with pytest.raises(ProfileError) as e:
        parse_profile(raw, "x.json")
    assert "gemm" in str(e.value) and "\n" not in str(e.value)


def test_unknown_profile_and_bad_json(tmp_path):
    with pytest.raises(ProfileError, match="unknown profile"):
        load_profile("no-such-profile")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ProfileError, match="not valid JSON"):
        load_profile(str(bad))


def test_shipped_profile_is_rebuilt_from_committed_measurements():
    """make_profiles from the committed round files gives exactly the shipped h200.json (no hand edits)."""
    from calibration.make_profiles import ENGINE, build_h200

    p, note = build_h200()
    assert ENGINE.exists() and "engine_step_us" in p["host"]  # the measured engine loop is part of it
    shipped = json.loads((PROFILE_DIR / "h200.json").read_text())
    assert json.loads(json.dumps(p)) == shipped
    assert "FITTED on the reference decoder's compiled rows" in note  # rounds b and i (calibration/build_compiled.py)
    q = parse_profile(derive_h100(p))
    assert q.source == "derived" and q.derived_from == "h200"


def test_profile_figures_come_from_a_clean_run():
    p = load_profile("h200")
    t = json.loads((MEASURED / "h200-round-b" / "timing.json").read_text())
    assert t["canary"]["ok"] and "calibration/round.py" in p.notes
    # eager paths = isolated microbenchmark x the measured mixed-block factor; nothing else scales them
    f = t["host"]["context"]["factor"]
    assert p.host.launch_us["eager_gemm"].p50 == pytest.approx(t["host"]["paths"]["eager_gemm"]["p50"] * f)
    assert p.host.launch_us["raw"].p50 == pytest.approx(t["host"]["paths"]["raw"]["p50"])
    assert p.host.launch_us["compiled_extern"].p50 == pytest.approx(t["compiled_extern"]["per_call_us"])
    # tables are identical-node graph times, unchanged
    assert p.device.tables.gemm[1].us == t["gemm"][1]["graph_us"]
    assert p.device.graph_launch_latency_us > 0 and p.device.graph_node_us > 0


def test_older_profiles_without_new_fields_still_cost_compiled_extern(h200_raw):
    """A profile without compiled_extern / graph_launch_latency_us / compiled_wrapper_us still runs."""
    from simulator.model.costs import CostModel
    from simulator.model.kernels import LaunchPath
    from simulator.model.workload import build_step, decode
    from simulator.model.models import PRESETS

    raw = copy.deepcopy(h200_raw)
    raw["host"]["launch_us"].pop("compiled_extern")
    raw["host"].pop("compiled_wrapper_us")
    raw["device"].pop("graph_launch_latency_us")
    cm = CostModel(parse_profile(raw))
    op = next(o for o in build_step(PRESETS["qwen3-0.6b"], decode(1, 128), "compiled").ops
              if o.path is LaunchPath.COMPILED_EXTERN)
    assert cm.host_s(op) == pytest.approx(raw["host"]["launch_us"]["compiled"]["p50"] * 1e-6)
    assert cm.graph_launch_latency_s == pytest.approx(raw["device"]["eager_gap_us"] * 1e-6)


def test_h100_gemms_are_round_ac_measurements():
    """h100-sxm's GEMM tables and grid are round ac's H100 measurements (calibration/measured/h100-round-ac), not
    the H200's moved by bandwidth: qwen3-0.6b's o_proj (1024, 2048) at M 1 is 12.8 us on the H200's cuBLAS and about
    6 on the H100's."""
    import gzip

    d = ROOT / "calibration" / "measured" / "h100-round-ac"
    named = {(r["n"], r["k"]): r for r in json.loads((d / "named" / "timing.json").read_text())["gemm"]}
    with gzip.open(d / "named" / "counts.json.gz", "rt") as f:
        calls = json.load(f)["calls"]
    p, h = load_profile("h100-sxm"), load_profile("h200")
    hit = 0
    for g in p.device.tables.gemm:
        r = named.get((g.n, g.k))
        if r is None:
            continue
        hit += 1
        assert list(g.us) == [round(u, 4) for u in r["graph_us"]]
        assert list(g.kernels) == [len(calls[f"{g.n},{g.k},{m}"]) for m in g.m]
    assert hit == len(named) == 16
    o = {(g.n, g.k): g for g in p.device.tables.gemm}[(1024, 2048)]
    o200 = {(g.n, g.k): g for g in h.device.tables.gemm}[(1024, 2048)]
    assert o.us[0] < 7.0 < 12.0 < o200.us[0]
    grid = json.loads((d / "grid" / "timing.json").read_text())["gemm"]
    gg = p.device.tables.gemm_grid
    assert len(grid) == 1024 and [tuple(s) for s in gg.shapes[:1024]] == [(r["n"], r["k"]) for r in grid]
    assert list(gg.us[5]) == [round(u, 4) for u in grid[5]["graph_us"]]


def test_h100_grid_holds_round_ah_lora_gemms():
    """After round ac's 1,024 grid shapes, h100-sxm's GEMM grid holds round ah's 256 LoRA GEMMs (round_k --set lora:
    ranks 16..128 against round k's dimensions, both ways), their times and counted kernels as measured."""
    import gzip

    from calibration.scripts.round_k import DIMS, RANKS

    d = ROOT / "calibration" / "measured" / "h100-round-ah" / "lora"
    rows = json.loads((d / "timing.json").read_text())["gemm"]
    with gzip.open(d / "counts.json.gz", "rt") as f:
        calls = json.load(f)["calls"]
    gg = load_profile("h100-sxm").device.tables.gemm_grid
    assert len(rows) == 2 * len(RANKS) * len(DIMS) == 256 and len(gg.shapes) == 1024 + 256
    at = {tuple(s): i for i, s in enumerate(gg.shapes)}
    for r in rows:
        i = at[(r["n"], r["k"])]
        assert i >= 1024 and list(gg.us[i]) == [round(u, 4) for u in r["graph_us"]]
        assert list(gg.kernels[i]) == [len(calls[f"{r['n']},{r['k']},{m}"]) for m in gg.m]
    assert "h100-round-ah" in gg.source


def test_h100_triton_curves_and_row_mean_are_round_ae_measurements():
    """h100-sxm's Triton curves and row-mean table are round ae's H100 measurements, read by the H200 profile's own
    builders (calibration/build_compiled.triton_curves, calibration/build_row_mean.section), not derived."""
    from calibration.build_compiled import triton_curves
    from calibration.build_row_mean import section

    d = ROOT / "calibration" / "measured" / "h100-round-ae"
    want = triton_curves(json.loads((d / "ri" / "triton.json").read_text()),
                         json.loads((d / "ri" / "counts.json").read_text()))
    p = load_profile("h100-sxm")
    assert want and all(list(getattr(p.device.tables, k).us) == list(v["us"]) for k, v in want.items())
    rm = section(d / "rt", "x")
    assert [list(r) for r in p.device.tables.row_mean.us] == [list(r) for r in rm["us"]]
    assert "h100-round-ae" in p.device.source
