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
    assert main(["--measured", str(f), "--tables", str(f), "--out", str(tmp_path / "out")]) == 0
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


def _inplace(drop=None):
    """Round-g-shaped in-place rows (calibration/scripts/round_g.py job_inplace): both layouts, attn_us a formula."""
    rows = []
    for lay in ("ref", "hf"):
        for q in (1, 2, 3):
            for b in (1, 8):
                for c in (256, 512):
                    if (lay, q, b, c) == drop:
                        continue
                    slots = c if lay == "ref" else c + 128
                    rows.append({"table": "attention_inplace", "layout": lay, "q_heads": 16, "kv_heads": 8,
                                 "head_dim": 128, "batch": b, "ctx": c, "slots": slots, "q_len": q,
                                 "unit_us": 0.0, "copy_us": 0.0,
                                 "attn_us": (100.0 if lay == "hf" else 0.0) + 10.0 * q + b + slots / 256})
    rows.append({"table": "attention_inplace", "layout": "ref", "error": "x"})  # a failed point is skipped
    return {"rows": rows}


def test_inplace_tables_by_layout():
    from calibration.build_spec import inplace_tables

    tables, notes = inplace_tables(_inplace())
    got = {(t["layout"], t["q_len"]): t for t in tables}
    assert sorted(got) == [("hf_static", 2), ("hf_static", 3), ("reference", 2), ("reference", 3)]
    ref, hf = got[("reference", 2)], got[("hf_static", 2)]
    assert ref["ctx"] == [256, 512] and hf["ctx"] == [384, 640]  # keys vs StaticCache slots
    assert ref["us"] == [[20 + 1 + 1, 20 + 1 + 2], [20 + 8 + 1, 20 + 8 + 2]]
    assert hf["us"][1][1] == 100 + 20 + 8 + 640 / 256
    tables, notes = inplace_tables(_inplace(drop=("hf", 3, 8, 512)))
    assert ("hf_static", 3) not in {(t["layout"], t["q_len"]) for t in tables} and any("missing" in n for n in notes)


def test_hf_verify_block_priced_by_its_table():
    """hf recipe, static cache, q_len 3: the attention op reads the hf_static table at the slots (ctx axis), the
    repeat_kv copies and SDPA's mask kernels cost nothing more (inside the block's figure), their launches stay;
    the reference step at the same shape reads the reference table."""
    p = load_profile("h200").model_dump()
    add_to_profile(p, _inplace())
    cm = CostModel(parse_profile(p, "test"))
    m = PRESETS["qwen3-0.6b"]
    st = build_step(m, StepShape(8, 400, q_len=3), "none", "hf", max_cache_len=512 + 128)
    att = [o for o in st.ops if o.op_class is OpClass.ATTENTION]
    assert len(att) == m.num_hidden_layers
    assert math.isclose(cm.gpu_s(att[0]), (100 + 30 + 8 + 640 / 256) * 1e-6)
    parts = [o for o in st.ops if o.dim("verify_part")]
    assert {o.name for o in parts} == {"repeat_kv_k", "repeat_kv_v", "sdpa.mask_fill", "sdpa.mask_where"}
    assert len(parts) == 5 * m.num_hidden_layers and all(cm.gpu_s(o) == 0.0 for o in parts)
    assert all(o.launches_kernel for o in parts)
    ref = build_step(m, StepShape(8, 512 - 3, q_len=3), "none")
    ra = next(o for o in ref.ops if o.op_class is OpClass.ATTENTION)
    assert math.isclose(cm.gpu_s(ra), (30 + 8 + 2) * 1e-6)


def test_hf_verify_without_table_keeps_its_own_pricing():
    """A profile with no hf_static table (round f's isolated rows only): the hf verify attention falls back to its
    roofline and the repeat_kv / mask parts keep their own prices, as before round g."""
    p = load_profile("h200").model_dump()
    add_to_profile(p, _raw())
    cm = CostModel(parse_profile(p, "test"))
    st = build_step(PRESETS["qwen3-0.6b"], StepShape(8, 400, q_len=3), "none", "hf", max_cache_len=640)
    att = next(o for o in st.ops if o.op_class is OpClass.ATTENTION)
    assert cm.table_s(att) is None and cm.gpu_s(att) == cm.roofline_s(att)
    rk = next(o for o in st.ops if o.name == "repeat_kv_k")
    assert cm.gpu_s(rk) == rk.fixed_gpu_s > 0


def test_hf_decode_q_len_one_unchanged():
    """q_len 1 (plain decode): no verify parts, the attention op is the decode one (no verify dim)."""
    st = build_step(PRESETS["qwen3-0.6b"], StepShape(8, 512), "none", "hf", max_cache_len=640)
    assert not any(o.dim("verify_part") or o.dim("verify") for o in st.ops)


def test_round_g_eager_rows_predicted_on_their_host(tmp_path):
    """validate_spec on a round-g eager_rows.json: an eager verify row is predicted with the profile's host lane
    rescaled to the median canary of the passes its figure comes from (fast passes here), and scored; a row
    without any usable pass (eager_ms null) is left out."""
    import json

    from calibration.validate_spec import main, profile_with_verify
    from simulator.engine.predict import predict
    from simulator.model.profile import host_scaled

    def ps(c0, c1, fast):
        return {"process": "eager", "pass": 0, "median_ms": 20.0, "canary_before_us": c0, "canary_after_us": c1,
                "fast": fast, "lower_mode": True}

    rows = [{"impl": "ref_verify", "model": "qwen3-0.6b", "batch": 8, "q_len": 3, "ctx": 512, "layers": 28,
             "passes": [ps(7.0, 7.2, True), ps(10.0, 10.4, False), ps(7.4, 7.4, True)], "eager_ms": 21.0,
             "eager_ms_from": "fast", "fast_passes": 2},
            {"impl": "ref_verify", "model": "qwen3-0.6b", "batch": 1, "q_len": 3, "ctx": 512, "layers": 28,
             "passes": [], "eager_ms": None, "eager_ms_from": None},
            {"impl": "hf", "model": "qwen3-0.6b", "batch": 1, "q_len": 1, "ctx": 512, "passes": [], "eager_ms": 30.0}]
    f = tmp_path / "eager_rows.json"
    f.write_text(json.dumps({"kind": "launchsim-round-g-eager-rows", "rows": rows}))
    t = tmp_path / "inplace.json"
    t.write_text(json.dumps(_inplace()))
    assert main(["--measured", str(f), "--tables", str(t), "--out", str(tmp_path / "out")]) == 0
    res = json.loads((tmp_path / "out" / "spec_decode.json").read_text())
    assert len(res["verify"]) == 1
    r = res["verify"][0]
    assert r["source"] == "round g" and r["graph"] == "none" and r["host_canary_us"] == (7.1 + 7.4) / 2
    prof, _ = profile_with_verify(json.loads(t.read_text()))
    want = predict("qwen3-0.6b", 8, 509, "none", "none", host_scaled(prof, (7.1 + 7.4) / 2),
                   shape=StepShape(8, 509, q_len=3)).result.step_s * 1e3
    assert math.isclose(r["predicted_ms"], want) and math.isclose(r["err_pct"], 100 * (want - 21.0) / 21.0)
    assert res["summary"]["reference none (round g)"]["scored"]
