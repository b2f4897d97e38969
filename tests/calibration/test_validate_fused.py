"""calibration/validate_fused.py: round ab's report (`--impl fused` against a decoder launching its kernel list from
real fused kernels) is regenerated from the measured files and the predictions committed before the run; its
measured figures are the raw processes' figures; the measured decoder's kernel list is the recipe's."""

import json
import statistics

import pytest

from calibration import validate_fused as V
from calibration.scripts import round_ab as A

ROUND = V.ROUND


@pytest.fixture(scope="module")
def res():
    return V.build()


def test_committed_report_is_regenerated(res):
    assert (V.HERE / "validation" / "impl_fused.md").read_text() == V.markdown(res)
    committed = json.loads((V.HERE / "validation" / "impl_fused.json").read_text())
    assert committed == json.loads(json.dumps(res))


def test_predictions_were_committed_before_measuring_and_cover_every_measured_row(res):
    before = json.loads((ROUND / "predicted_before_h200.json").read_text())
    assert before["made_before_measuring"] is True and before["impl"] == "fused"
    B = {(r["model"], r["batch"], r["keys"]): r for r in before["rows"]}
    grid = {(m, b, k) for m in A.MODELS for k, bs in A.GRID for b in bs}
    assert set(B) == grid
    for r in res["rows"]:
        assert (r["model"], r["batch"], r["keys"]) in grid
        assert r["h200 before"]["full_ms"] == B[(r["model"], r["batch"], r["keys"])]["full_ms"]


def _raw(model, batch, keys):
    out = []
    for p in sorted(ROUND.glob("time_ab[0-9].json")):
        out += [r for r in json.loads(p.read_text())["rows"]
                if (r["model"], r["batch"], r["keys"]) == (model, batch, keys)]
    return out


def test_measured_figures_are_the_raw_processes_medians(res):
    for r in res["rows"]:
        raw = _raw(r["model"], r["batch"], r["keys"])
        assert len(raw) == r["processes"] > 0
        full = [x["full_ms"]["median"] for x in raw if "full_ms" in x]
        assert r["full_ms"] == (pytest.approx(statistics.median(full)) if full else None)
        fast = [p["median"] for x in raw for p in x["passes"]
                if max(p["canary_before"]["host_us"], p["canary_after"]["host_us"]) <= 7.6]
        assert r["eager_fast_passes"] == len(fast)


def test_the_triton_kernel_computed_the_right_function_on_every_row(res):
    for r in res["rows"]:
        assert r["check_max_rel"] is not None and r["check_max_rel"] < 2e-2


def test_kernel_counts_are_the_profiled_process_counts(res):
    counts = json.loads((ROUND / "counts_ab.json").read_text())["rows"]
    got = {(r["model"], r["batch"]): r["kernels"] for r in res["rows"] if r["keys"] == 512}
    for c in counts:
        if (c["model"], c["batch"]) in got:
            assert got[(c["model"], c["batch"])] == c["last_step"]["kernels"]


def test_the_fused_decoder_kernel_list_is_the_recipes():
    """Per layer the measured decoder's profiled kernels, grouped by the op that launched them, are the recipe's nine
    (plus the GEMM split-K reduce kernels the profile's GEMM tables predict, counted by the step total above)."""
    from simulator.model.models import PRESETS
    from simulator.model.workload import build_step, decode

    st = build_step(PRESETS["llama3-8b"], decode(32, 511), "fused", "fused")
    names = [o.name for o in st.ops]
    layer = names[names.index("fused_add_rmsnorm"):names.index("fused_add_rmsnorm", names.index("down_proj"))]
    assert [n for n in layer if not n.endswith("all_reduce") and not n.startswith("quant")] == [
        "fused_add_rmsnorm", "qkv_proj", "fused_rope_cache_write", "attention", "o_proj", "fused_add_rmsnorm",
        "gate_up_proj", "silu_and_mul", "down_proj"]


def test_the_h100_derivation_is_what_now_prices_and_it_reads_the_measured_copy_bandwidth():
    from calibration.make_profiles import h100_copy_tbps
    from simulator.model.profile import load_profile

    copy_tbps = json.loads((V.CALIB / "timing.json").read_text())["ceilings"]["copy_tbps"]
    assert h100_copy_tbps() == copy_tbps
    d = load_profile("h100-sxm").device
    assert abs(d.hbm_tbps * d.bw_efficiency - copy_tbps) < 1e-9


def test_reference_rows_are_the_calibration_rounds(res):
    cal = json.loads((V.CALIB / "timing.json").read_text())["rows"]
    assert len(res["reference_rows"]) == len(cal) == 112
    for r, m in zip(res["reference_rows"], cal):
        assert r["full_ms"] == m["full"]["isolated"]["step_ms"]["p50"]
