"""calibration/validate_impl.py --lofo: leave one family out. Each refit constant is the shipped formula on the other
families' data; a family's rows are that family's only; the committed lofo.json is what the data give."""

from __future__ import annotations

import json
import statistics

import pytest

from calibration import validate_impl as V


def test_graph_node_refit_is_the_median_of_the_other_families_configurations():
    shipped = json.loads(V.PROFILE_JSON.read_text())["device"]["graph_node_us"]
    qwen_out = V.lofo_profiles("qwen3", ["qwen3-0.6b"])
    llama_out = V.lofo_profiles("llama", ["llama3-8b"])
    nothing_out = V.lofo_profiles("phi3", ["phi-3-mini-4k"])
    # the depth sweep's three configurations (graph_node_us 0 while measuring, as build_profile does):
    # qwen3 none 0.269, qwen3 packed 0.293, llama3-8b none 0.193 (since round t's row-mean table prices the norms'
    # means: qwen3's were 0.296 / 0.321); shipped = their median
    q, l, n = (v["refit"][0].device.graph_node_us for v in (qwen_out, llama_out, nothing_out))
    assert n == pytest.approx(shipped)  # a family not in the sweep: unchanged
    assert q == pytest.approx(0.1931, abs=1e-3)  # llama only
    assert l == pytest.approx(0.2928, abs=1e-3)  # qwen3 none and packed: the upper of two
    assert sorted([q, shipped, l]) == [q, shipped, l]


def test_gemm_tables_of_the_family_are_dropped_and_only_those():
    full = V.lofo_profiles("phi3", ["phi-3-mini-4k"])["refit"][0].device.tables.gemm
    cut = V.lofo_profiles("qwen3", ["qwen3-0.6b"])["refit, GEMM tables dropped"][0].device.tables.gemm
    gone = {(t.n, t.k) for t in full} - {(t.n, t.k) for t in cut}
    assert (151936, 1024) in gone and (3072, 1024) in gone  # qwen3-0.6b's lm_head and gate/up
    assert (14336, 4096) not in gone and len(gone) == len(full) - len(cut)


def test_hf_constants_refit_without_a_family():
    fit = V.python_per_call_fit()
    per = fit["per_model_us"]
    py_all = V.hf_constants_without("phi3")[0]
    assert py_all == pytest.approx(statistics.fmean(per.values()))  # never in the fit: the shipped formula
    assert V.hf_constants_without("gemma2")[0] == pytest.approx(per["qwen3-0.6b"])
    py_q, plan_q, note = V.hf_constants_without("qwen3")
    assert py_q == pytest.approx(per["gemma-2-2b"]) and "llama-3.2-1b" in note
    assert V.hf_constants_without("llama")[1] == pytest.approx(fit["cudnn_plan_ms"])


def test_rows_are_the_familys_and_carry_their_canary():
    from simulator.model import recipes as R
    from simulator.model.costs import CostModel
    from simulator.model.profile import load_profile

    cm = CostModel(load_profile("h200"))
    rs = V._pred_rows("hf", "phi3", cm, (R.PYTHON_US_PER_CALL, R.CUDNN_PLAN_MS))
    # round f 4 + round g 4 + round y's 4 at ctx 512 (graph modes only; its ctx-2048 rows did not capture)
    assert {r["model"] for r in rs} == {"phi-3-mini-4k"} and len(rs) == 12
    y = [r for r in rs if r["source"] == "round y"]
    assert len(y) == 4 and all("piecewise_error" in r and "full_error" in r and "eager_error" not in r for r in y)
    f = [r for r in rs if r["source"] == "round f"]
    assert len(f) == 4 and all(r["fast_host"] and "7.63" in r["canary"] for r in f)
    assert all(r["batch"] <= V.MAX_BATCH for r in rs)
    ref = V._pred_rows("reference", "llama", cm)
    assert {r["model"] for r in ref} == {"llama3-8b"} and all(r["batch"] <= 64 for r in ref)


def test_committed_lofo_summaries_are_reproducible():
    committed = json.loads((V.HERE / "validation" / "lofo.json").read_text())
    fresh = V.lofo()
    assert committed.keys() == fresh.keys()
    for k, v in fresh.items():
        for var, r in v["variants"].items():
            c = committed[k]["variants"][var]["summary"]
            for key, x in r["summary"].items():
                assert c[key] == (None if x is None else pytest.approx(x, rel=1e-9)), (k, var, key)


def test_round_g_rows_take_the_fast_passes_median():
    """Round g: a pass is fast when both its canaries are <= 7.6 us; a row's eager figure is the median of its fast
    passes over both processes (all passes, marked slow, where none is fast)."""
    by = V._round_g_fast_passes()
    rows = {(r["model"], r["batch"]): r for r in V.round_g_rows()}
    assert len(rows) == 36  # 9 transformers decoders x batch 1/8/32/64
    for key, (r, fast) in by.items():
        g = rows[key]
        assert g["fast_passes"] == len(fast) and g["fast_host"] == bool(fast)
        if fast:
            assert g["eager_measured_ms"] == pytest.approx(statistics.median(p["median"] for p in fast))
            assert all(max(p["canary_before"]["host_us"], p["canary_after"]["host_us"]) <= V.FAST_CANARY_US
                       for p in fast)
            assert g["canary_us"][1] <= V.FAST_CANARY_US
    slow = [k for k, r in rows.items() if not r["fast_host"]]
    assert slow and all(rows[k]["canary_us"][1] > V.FAST_CANARY_US for k in slow)


def test_round_y_rows_score_both_graph_modes_and_record_refusals():
    """Round y: full and piecewise graphs of one step per row; measured = the median over the processes' medians;
    where transformers could not capture (phi-3-mini past its 2047-token window) launchsim refuses both modes."""
    d = json.loads((V.ROUND_Y / "rows_y.json").read_text())
    raw = {(r["model"], r["batch"], r["ctx"]): r for r in d["rows"] if r["impl"] == "hf"}
    rows = {(r["model"], r["batch"], r["ctx"]): r for r in V.round_y_rows()}
    assert rows.keys() == raw.keys() and len(rows) == 8 * 7  # eight decoders x (4 batches at 512, 3 at 2048)
    for k, r in rows.items():
        runs = raw[k]["runs"]
        if k[0] == "phi-3-mini-4k" and k[2] == 2048:
            assert "Cannot copy between CPU and CUDA" in r["graph_error"]
            assert r["full_refused"] and r["piecewise_refused"] and "piecewise_measured_ms" not in r
            continue
        for mode in ("full", "piecewise"):
            assert r[f"{mode}_measured_ms"] == pytest.approx(statistics.median(x[f"{mode}_ms"] for x in runs))
            assert r[f"{mode}_error"] == pytest.approx(
                100 * (r[f"{mode}_predicted_ms"] / r[f"{mode}_measured_ms"] - 1))
        assert r["piecewise_predicted_ms"] > r["full_predicted_ms"]  # the eager SDPA calls cost something


def test_round_y_combine_drops_rows_whose_sdpa_output_moved(tmp_path):
    """A replay whose eager SDPA output did not land where the next captured piece reads it measured another step:
    combine keeps its full-graph figure and drops its piecewise one."""
    from calibration.scripts import round_y as Y

    def proc(name, misses, full, pw):
        row = {"impl": "hf", "model": "m", "batch": 1, "ctx": 512, "q_len": 1, "layers": 2, "max_cache_len": 640,
               "canary_before": {"host_us": 7.0}, "canary_after": {"host_us": 7.1}, "full_ms": {"median": full},
               "piecewise_ms": {"median": pw}, "pieces": {"graphs": 3, "eager_calls": 2, "address_misses": misses}}
        (tmp_path / f"piece_{name}.json").write_text(json.dumps({"quick": False, "rows": [row], "canary": {}}))

    proc("a", 0, 1.0, 1.2)
    proc("b", 0, 3.0, 1.4)
    proc("c", 2, 2.0, 9.9)
    r = Y.combine(tmp_path)["rows"][0]
    assert r["full_ms"] == pytest.approx(2.0) and r["piecewise_ms"] == pytest.approx(1.3)
    assert [x.get("dropped") for x in r["runs"]] == [None, None, "SDPA output address missed on replay"]
