"""calibration/build_spec.py: round f's SDPA rows -> q_len > 1 attention tables the cost model reads."""

import math

from calibration.build_spec import add_to_profile, verify_attention_tables
from simulator.model.costs import CostModel
from simulator.model.kernels import OpClass
from simulator.model.models import PRESETS
from simulator.model.profile import load_profile, parse_profile
from simulator.model.workload import StepShape, build_step


def _raw(drop=None):
    rows = []
    for q in (1, 2, 3):
        for b in (1, 8):
            for c in (256, 512):
                if (q, b, c) == drop:
                    continue
                rows.append({"table": "attention", "q_heads": 16, "kv_heads": 8, "head_dim": 128, "batch": b,
                             "ctx": c, "q_len": q, "device_us": 10.0 * q + b + c / 256, "backend": "flash"})
    rows.append({"table": "verify", "batch": 1})  # other tables are ignored
    return {"rows": rows}


def test_tables_from_rows():
    tables, notes = verify_attention_tables(_raw())
    assert [t["q_len"] for t in tables] == [2, 3]  # q_len 1 stays the profile's decode table
    t = tables[0]
    assert t["batch"] == [1, 8] and t["ctx"] == [256, 512]
    assert t["us"] == [[20 + 1 + 1, 20 + 1 + 2], [20 + 8 + 1, 20 + 8 + 2]]
    assert all("flash" in n for n in notes)


def test_incomplete_grid_left_out():
    tables, notes = verify_attention_tables(_raw(drop=(3, 8, 512)))
    assert [t["q_len"] for t in tables] == [2] and any("missing" in n for n in notes)


def test_profile_with_tables_costs_verify():
    p = load_profile("h200").model_dump()
    add_to_profile(p, _raw())
    cm = CostModel(parse_profile(p, "test"))
    st = build_step(PRESETS["qwen3-0.6b"], StepShape(8, 512 - 3, q_len=3), "fused")
    att = next(o for o in st.ops if o.op_class is OpClass.ATTENTION)
    assert math.isclose(cm.gpu_s(att), (30 + 8 + 2) * 1e-6)
    add_to_profile(p, _raw())  # idempotent: replaces, does not duplicate
    assert sum(1 for t in p["device"]["tables"]["attention"] if t.get("q_len", 1) > 1) == 2


def test_validate_spec_predicts_each_row(tmp_path):
    """calibration/validate_spec.py on a synthetic round-f file: every verify row and draft-loop k gets a
    prediction equal to simulator.engine.predict's for the same step; the report is written."""
    import json

    from calibration.validate_spec import main, profile_with_verify
    from simulator.engine.predict import predict

    raw = _raw()
    for q in (4, 5, 8):  # the verify rows below need q_len up to 4 (and the table grid must be complete)
        for b in (1, 8):
            for c in (256, 512):
                raw["rows"].append({"table": "attention", "q_heads": 16, "kv_heads": 8, "head_dim": 128, "batch": b,
                                    "ctx": c, "q_len": q, "device_us": 10.0 * q + b, "backend": "flash"})
    raw["rows"] = [r for r in raw["rows"] if r.get("table") == "attention"]
    raw["rows"].append({"table": "verify", "impl": "reference", "model": "qwen3-0.6b", "layers": 28, "batch": 8,
                        "ctx": 512, "q_len": 4, "eager_ms": {"median": 20.0}, "graph_ms": {"median": 4.0}})
    raw["rows"].append({"table": "draft_loop", "model": "qwen3-0.6b", "layers": 1, "batch": 8, "ctx": 512,
                        "k1_loop_ms": {"median": 0.2}, "k3_loop_ms": {"median": 0.5}})
    f = tmp_path / "verify_timing.json"
    f.write_text(json.dumps(raw))
    assert main(["--measured", str(f), "--out", str(tmp_path / "out")]) == 0
    res = json.loads((tmp_path / "out" / "spec_decode.json").read_text())
    prof, _ = profile_with_verify(raw)
    full = next(r for r in res["verify"] if r["graph"] == "full")
    want = predict("qwen3-0.6b", 8, 508, "none", "full", prof, shape=StepShape(8, 508, q_len=4)).result.step_s * 1e3
    assert math.isclose(full["predicted_ms"], want) and math.isclose(full["err_pct"], 100 * (want - 4.0) / 4.0)
    d = {r["k"]: r for r in res["draft_loop"]}
    assert set(d) == {1, 3}
    assert math.isclose(d[3]["predicted_ms"], d[1]["predicted_ms"] + 2 * d[1]["predicted_period_ms"])
    assert (tmp_path / "out" / "spec_decode.md").read_text().startswith("# Speculative decoding")


def test_backend_choice():
    raw = _raw()
    raw["rows"] += [dict(r, backend="default", device_us=r["device_us"] + 100) for r in raw["rows"]
                    if r.get("table") == "attention"]
    t, notes = verify_attention_tables(raw)
    assert t[0]["us"][0][0] == 122 and all("default" in n for n in notes)
    t, notes = verify_attention_tables(raw, backend="flash")
    assert t[0]["us"][0][0] == 22
    t, notes = verify_attention_tables(_raw())  # flash rows only: used, and said
    assert t[0]["us"][0][0] == 22 and "no default rows" in notes[0]
