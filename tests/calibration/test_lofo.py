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
    assert {r["model"] for r in rs} == {"phi-3-mini-4k"} and len(rs) == 8  # round f 4 + round g 4
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
