"""The serving engine with fixed step times: hand-computed schedules, a naive per-token reference scheduler
(hypothesis), paged-block arithmetic, and merged runs of decode steps equal to one event per step."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.serving.arrivals import Workload
from simulator.serving.kv import Cohort, KVCapacity, KVError, kv_capacity
from simulator.serving.replica import Prepared, ServeConfig, simulate_serving
from simulator.serving.steptime import StepCost

MODEL = load_model("qwen3-0.6b")
PROFILE = load_profile("datasheet-h200")
DEC, MIX = 1e-3, 2e-3


class FakeTimer:
    """Decode steps take DEC + 10 us per sequence; mixed steps MIX + 1 us per token."""

    misses = 0

    def decode(self, n, ctx):
        return StepCost(DEC + 1e-5 * n, 0.5 * DEC, n < 4, "none", n, n)

    def mixed(self, d, p, pt, ctx):
        return StepCost(MIX + 1e-6 * (d + pt), 0.5 * MIX, False, "none", d + pt, d + pt)


def run(times, prompt, output, blocks=10000, duration=100.0, merge=True, **limits):
    cfg = ServeConfig(MODEL, PROFILE, graph="none", warmup_frac=0.0, merge_steps=merge, **limits)
    wl = Workload(np.asarray(times, float), np.asarray(prompt), np.asarray(output), "test", 1.0)
    prep = Prepared(FakeTimer(), KVCapacity(blocks, 16, 0.0, 0.0, 0.0, 0))
    return simulate_serving(cfg, wl, duration, prep)


def test_single_request_hand_computed():
    r = run([0.0], [32], [4])
    m = r.metrics
    ttft = MIX + 32e-6
    dec = DEC + 1e-5
    assert m["ttft_p50_s"] == pytest.approx(ttft, rel=1e-12)
    assert m["tpot_p50_ms"] == pytest.approx(dec * 1e3, rel=1e-12)
    assert r.simulated_s == pytest.approx(ttft + 3 * dec, rel=1e-12)
    assert m["completed"] == 1 and m["decode_steps"] == 3 and m["mixed_steps"] == 1
    assert r.batch_log == [{"batch": 1, "count": 3}]


def test_max_num_seqs_makes_the_third_request_wait():
    r = run([0, 0, 0], [16, 16, 16], [3, 3, 3], max_num_seqs=2, max_num_batched_tokens=64)
    t1 = MIX + 32e-6  # both prefills in one mixed step
    t_free = t1 + 2 * (DEC + 2e-5)  # two decode steps of 2 sequences: both finish
    t3_first = t_free + MIX + 16e-6
    ttft = sorted(r.samples["ttft_s"])
    assert ttft[:2] == pytest.approx([t1, t1]) and ttft[2] == pytest.approx(t3_first)
    assert r.simulated_s == pytest.approx(t3_first + 2 * (DEC + 1e-5))


def test_chunked_prefill_splits_a_long_prompt_and_unchunked_rejects_it():
    r = run([0.0], [100], [2], max_num_seqs=8, max_num_batched_tokens=40)
    first = 3 * MIX + 100e-6  # chunks of 40, 40, 20 tokens
    assert r.metrics["ttft_p50_s"] == pytest.approx(first)
    assert r.metrics["mixed_steps"] == 3
    r2 = run([0.0], [100], [2], max_num_seqs=8, max_num_batched_tokens=40, chunked_prefill=False)
    assert r2.metrics["rejected"] == 1 and r2.metrics["requests"] == 0


def test_request_larger_than_the_kv_pool_is_rejected():
    r = run([0.0, 0.1], [100, 10], [100, 10], blocks=8)  # 199 tokens need 13 blocks > 8
    assert r.metrics["rejected"] == 1 and r.metrics["completed"] == 1


def test_preemption_by_recompute_completes_everything():
    r = run([0.0, 0.0], [16, 16], [40, 40], blocks=5)
    m = r.metrics
    assert m["preemptions"] >= 1 and m["completed"] == 2 and m["unfinished"] == 0
    assert m["throughput_tok_s"] * m["window_s"] == 80  # every output token exactly once
    assert m["kv_util_peak"] <= 1.0


# -- a naive reference: one loop iteration per step, one per request ------------------------------------------
def reference(times, P, O, blocks, max_seqs, budget, chunked, bs=16, mml=1 << 30):
    n = len(times)
    state = ["new"] * n
    kv, comp, target, gen, held = [0] * n, [0] * n, [0] * n, [0] * n, [0] * n
    first, fin, pre = [math.nan] * n, [math.nan] * n, [0] * n
    waiting, running = [], []
    now, nxt, used = 0.0, 0, 0
    ceil = lambda t: -(-t // bs)  # noqa: E731

    def preempt():
        nonlocal used
        rid = running.pop()
        used -= held[rid]
        held[rid] = comp[rid] = kv[rid] = 0
        target[rid] = P[rid] + gen[rid]
        state[rid] = "wait"
        waiting.insert(0, rid)
        pre[rid] += 1
        return rid

    while True:
        while nxt < n and times[nxt] <= now:
            need_all = P[nxt] + O[nxt]
            if ceil(need_all - 1) > blocks or need_all > mml or (not chunked and need_all - 1 > budget):
                state[nxt] = "rej"
            else:
                state[nxt], target[nxt] = "wait", P[nxt]
                waiting.append(nxt)
            nxt += 1
        dec_need = lambda: sum(1 for r in running if state[r] == "dec" and kv[r] % bs == 0)  # noqa: E731
        npre = sum(pre)
        while dec_need() > blocks - used and running:
            preempt()
        chunks, ptok = [], 0
        ndec = lambda: sum(1 for r in running if state[r] == "dec")  # noqa: E731
        for rid in [r for r in running if state[r] == "pre"]:
            if rid not in running:
                continue
            left = budget - ndec() - ptok
            if left <= 0:
                break
            c = min(target[rid] - comp[rid], left)
            nb = ceil(comp[rid] + c) - held[rid]
            ok = True
            while nb > blocks - used - dec_need():
                if preempt() == rid:
                    ok = False
                    break
            if ok:
                used += nb
                held[rid] += nb
                chunks.append((rid, c))
                ptok += c
        while sum(pre) == npre and waiting and len(running) < max_seqs:
            left = budget - ndec() - ptok
            if left <= 0:
                break
            rid = waiting[0]
            if not chunked and target[rid] > left:
                break
            c = min(target[rid], left)
            if ceil(c) > blocks - used - dec_need():
                break
            waiting.pop(0)
            running.append(rid)
            state[rid], comp[rid], held[rid] = "pre", 0, ceil(c)
            used += ceil(c)
            chunks.append((rid, c))
            ptok += c
        decs = [r for r in running if state[r] == "dec"]
        for r in decs:
            if kv[r] % bs == 0:
                used += 1
                held[r] += 1
        if not decs and not chunks:
            if nxt >= n:
                break
            now = max(now, times[nxt])
            continue
        dt = (MIX + 1e-6 * (len(decs) + ptok)) if chunks else (DEC + 1e-5 * len(decs))
        now += dt
        for r in decs:
            kv[r] += 1
            gen[r] += 1
            if gen[r] == O[r]:
                state[r], fin[r] = "done", now
                running.remove(r)
                used -= held[r]
        for rid, c in chunks:
            comp[rid] += c
            if comp[rid] == target[rid]:
                gen[rid] += 1
                if math.isnan(first[rid]):
                    first[rid] = now
                if gen[rid] == O[rid]:
                    state[rid], fin[rid] = "done", now
                    running.remove(rid)
                    used -= held[rid]
                else:
                    state[rid], kv[rid] = "dec", target[rid]
    return first, fin, pre, used


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_matches_the_naive_reference_scheduler(data):
    n = data.draw(st.integers(1, 10))
    times = sorted(data.draw(st.lists(st.floats(0, 0.05), min_size=n, max_size=n)))
    P = data.draw(st.lists(st.integers(1, 70), min_size=n, max_size=n))
    O = data.draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    blocks = data.draw(st.integers(6, 24))
    max_seqs = data.draw(st.integers(1, 5))
    budget = data.draw(st.integers(max_seqs, 64))
    chunked = data.draw(st.booleans())
    merge = data.draw(st.booleans())
    first, fin, pre, used = reference(times, P, O, blocks, max_seqs, budget, chunked)
    cfg = ServeConfig(MODEL, PROFILE, graph="none", warmup_frac=0.0, merge_steps=merge, max_num_seqs=max_seqs,
                      max_num_batched_tokens=budget, chunked_prefill=chunked)
    wl = Workload(np.asarray(times, float), np.asarray(P), np.asarray(O), "t", 1.0)
    from simulator.serving import replica

    captured = {}
    orig = replica.Scheduler

    class Spy(orig):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            captured["s"] = self

    replica.Scheduler = Spy
    try:
        simulate_serving(cfg, wl, 1000.0, Prepared(FakeTimer(), KVCapacity(blocks, 16, 0.0, 0.0, 0.0, 0)))
    finally:
        replica.Scheduler = orig
    s = captured["s"]
    np.testing.assert_allclose(s.first_t, first, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(s.finish_t, fin, rtol=1e-9, atol=1e-12)
    assert s.preempted == pre
    assert s.used == used == 0


def test_merged_steps_equal_one_event_per_step():
    rng = np.random.default_rng(5)
    t = np.sort(rng.uniform(0, 2.0, 120))
    P, O = rng.integers(1, 300, 120), rng.integers(1, 200, 120)
    a = run(t, P, O, blocks=60, duration=2.0, merge=True, max_num_seqs=16, max_num_batched_tokens=256)
    b = run(t, P, O, blocks=60, duration=2.0, merge=False, max_num_seqs=16, max_num_batched_tokens=256)
    assert a.events < b.events
    assert a.metrics["preemptions"] > 0
    for k, v in b.metrics.items():
        if isinstance(v, float):
            assert a.metrics[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k
        else:
            assert a.metrics[k] == v, k
    assert a.batch_log == b.batch_log


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_merged_runs_equal_step_by_step_on_random_traffic(data):
    """The skip path (a run of identical decode steps advanced as one iteration) against one iteration per
    step, on random traffic, limits, pool sizes and windows: the same requests' first tokens and finishes, the
    same batch log and metrics (times to float summation order: k * dt against k additions of dt)."""
    n = data.draw(st.integers(1, 40))
    span = data.draw(st.floats(0.01, 2.0))
    times = sorted(data.draw(st.lists(st.floats(0, span), min_size=n, max_size=n)))
    P = data.draw(st.lists(st.integers(1, 400), min_size=n, max_size=n))
    O = data.draw(st.lists(st.integers(1, 300), min_size=n, max_size=n))
    limits = dict(max_num_seqs=data.draw(st.integers(1, 32)), max_num_batched_tokens=data.draw(st.integers(32, 512)),
                  chunked_prefill=data.draw(st.booleans()), ctx_bucket=data.draw(st.sampled_from([16, 64, 256])))
    blocks = data.draw(st.integers(30, 400))
    frac = data.draw(st.sampled_from([0.0, 0.1, 0.5]))

    def go(merge):
        cfg = ServeConfig(MODEL, PROFILE, graph="none", warmup_frac=frac, merge_steps=merge, **limits)
        wl = Workload(np.asarray(times, float), np.asarray(P), np.asarray(O), "t", 1.0)
        return simulate_serving(cfg, wl, span, Prepared(FakeTimer(), KVCapacity(blocks, 16, 0.0, 0.0, 0.0, 0)))

    a, b = go(True), go(False)
    assert a.events <= b.events
    assert a.batch_log == b.batch_log
    assert a.simulated_s == pytest.approx(b.simulated_s, rel=1e-9)
    for k, v in b.metrics.items():
        if isinstance(v, float):
            assert a.metrics[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k
        else:
            assert a.metrics[k] == v, k
    for k in ("ttft_s", "tpot_ms"):
        np.testing.assert_allclose(a.samples[k], b.samples[k], rtol=1e-9, atol=1e-12)


# -- paged blocks -------------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-300, 3000), max_size=30), st.integers(1, 4000), st.integers(1, 70),
       st.integers(0, 200))
def test_cohort_block_demand_matches_brute_force(bases, g, k, free):
    c = Cohort(16)
    for b in bases:
        c.add(b)
    needs = [sum(1 for b in bases if (b + g + j) % 16 == 1) for j in range(k)]
    assert c.needs_over(g, k) == (sum(needs), sum(x * (k - j) for j, x in enumerate(needs)))
    if bases:
        cum, best = 0, 0
        for j in range(2000):
            cum += sum(1 for b in bases if (b + g + j) % 16 == 1)
            if cum > free:
                break
            best = j + 1
        assert min(c.steps_affordable(g, free), 2000) == best


def test_kv_capacity_follows_the_memory_model():
    from simulator.engine.graph_memory import GraphMemoryModel, kv_cache_bytes

    kv = kv_capacity(MODEL, PROFILE, "fused", "full", [1, 2, 4, 8])
    lm = GraphMemoryModel(MODEL, PROFILE, "fused", "full").layout([1, 2, 4, 8])
    expect = int(kv_cache_bytes(MODEL, PROFILE, lm) // (MODEL.kv_bytes_per_token() * 16))
    assert kv.blocks == expect and kv.graph_bytes == lm.total_bytes
    eager = kv_capacity(MODEL, PROFILE, "fused", "none", [1])
    assert eager.blocks > kv.blocks and eager.graph_bytes == 0
    with pytest.raises(KVError, match="no memory left"):
        kv_capacity(load_model("llama3-70b"), PROFILE, "fused", "none", [1])


def test_config_is_a_dataclass_with_defaults():
    cfg = ServeConfig(MODEL, PROFILE)
    assert dataclasses.replace(cfg, max_num_seqs=8).limits().max_num_seqs == 8


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-300, 3000), max_size=30), st.integers(-50, 4000), st.integers(0, 200),
       st.sampled_from([1, 2, 3, 5, 16, 64]))
def test_cohort_needs_over_any_block_size_matches_brute_force(bases, g, k, bs):
    """needs_over at rate 1 (runs shorter than a period read only the rotation's first entries) against a
    member-by-member count, for block sizes other than 16 and runs of 0 to 200 steps."""
    c = Cohort(bs)
    for b in bases:
        c.add(b)
    needs = [sum(1 for b in bases if (b + g + j) % bs == 1 % bs) for j in range(k)]
    assert c.needs_over(g, k) == (sum(needs), sum(x * (k - j) for j, x in enumerate(needs)))
