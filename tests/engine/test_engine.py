"""Engine tests: hand-computed timelines, and the fast path equals the SimPy DES (hypothesis)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.des import simulate_des
from simulator.engine.fastpath import simulate_fast
from simulator.engine.timeline import summarize
from tests.conftest import make_plan

ENGINES = [simulate_des, simulate_fast]


@pytest.mark.parametrize("sim", ENGINES)
def test_cpu_bound_hand_case(sim):
    # 3 launches, 6 us host each, 2 us kernels, 1 us gap:
    # submits at 6, 12, 18; kernels start at 7, 13, 19; end at 9, 15, 21.
    tl = sim(make_plan([6, 6, 6], [2, 2, 2], gap_us=1))
    np.testing.assert_allclose(tl.submit * 1e6, [6, 12, 18])
    np.testing.assert_allclose(tl.gpu_start * 1e6, [7, 13, 19])
    np.testing.assert_allclose(tl.gpu_end * 1e6, [9, 15, 21])
    r = summarize(tl)
    assert r.step_s == pytest.approx(21e-6)
    assert r.cpu_busy_s == pytest.approx(18e-6)
    assert r.gpu_busy_s == pytest.approx(6e-6)
    # idle waiting for the CPU: 6 before k0, 15-9... k1 ready at 12 vs k0 end 9 -> 3; k2: 18-15 = 3
    assert r.gpu_bubble_s == pytest.approx(12e-6)
    assert r.bound == "cpu"


@pytest.mark.parametrize("sim", ENGINES)
def test_gpu_bound_hand_case(sim):
    # host 1 us, kernels 10 us, no gap: submits 1,2,3; kernels 1-11, 11-21, 21-31.
    tl = sim(make_plan([1, 1, 1], [10, 10, 10]))
    np.testing.assert_allclose(tl.gpu_end * 1e6, [11, 21, 31])
    r = summarize(tl)
    assert r.step_s == pytest.approx(31e-6)
    assert r.bound == "gpu"
    assert r.gpu_idle_frac == pytest.approx(1 - 30 / 31)


@pytest.mark.parametrize("sim", ENGINES)
def test_bounded_queue_stalls_host(sim):
    # queue depth 1: launch j waits until launch j-1's kernel has started.
    # host 1 us, kernel 10 us: submit0=1 (start 1), ready1=2 >= 1 -> submit1=2, starts 11;
    # ready2 = 3 but launch 1 leaves at 11 -> stall 8, submit2 = 11, starts 21.
    tl = sim(make_plan([1, 1, 1], [10, 10, 10], queue_depth=1))
    np.testing.assert_allclose(tl.submit * 1e6, [1, 2, 11])
    np.testing.assert_allclose(tl.stall * 1e6, [0, 0, 8])
    np.testing.assert_allclose(tl.gpu_end * 1e6, [11, 21, 31])


@pytest.mark.parametrize("sim", ENGINES)
def test_graph_replay_one_launch_many_nodes(sim):
    # one replay: 10 us host, 4 nodes of 5 us; first node pays 1 us gap, the rest 0.5 us.
    p = make_plan([10], [5, 5, 5, 5], gap_us=[1, 0.5, 0.5, 0.5], counts=[4])
    tl = sim(p)
    np.testing.assert_allclose(tl.gpu_start * 1e6, [11, 16.5, 22, 27.5])
    assert summarize(tl).step_s == pytest.approx(32.5e-6)


def test_seed_arithmetic_288_launches():
    """The seed's s13 numbers: 288 launches x 6 us = 1.728 ms host, 0.89 ms GPU, CPU-bound."""
    n = 288
    p = make_plan([6] * n, [890 / n] * n)
    r = summarize(simulate_des(p))
    assert r.cpu_busy_s == pytest.approx(1.728e-3)
    assert r.gpu_busy_s == pytest.approx(0.89e-3)
    assert r.bound == "cpu"
    # the step ends when the last kernel ends: 1.728 ms + one kernel
    assert r.step_s == pytest.approx(1.728e-3 + 0.89e-3 / n)
    assert r.gpu_busy_s / r.step_s == pytest.approx(0.514, abs=0.001)


plans = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.floats(0, 20, allow_nan=False), min_size=n, max_size=n),
        st.lists(st.integers(1, 4), min_size=n, max_size=n),
        st.integers(1, 6),
        st.floats(0, 3),
        st.randoms(use_true_random=False),
    )
)


@settings(max_examples=150, deadline=None)
@given(plans)
def test_fast_path_equals_des(args):
    host, counts, q, gap, rnd = args
    nk = sum(counts)
    gpu = [rnd.uniform(0, 20) for _ in range(nk)]
    gaps = [rnd.uniform(0, gap) for _ in range(nk)]
    p = make_plan(host, gpu, gap_us=gaps, counts=counts, queue_depth=q)
    a, b = simulate_des(p), simulate_fast(p)
    scale = max(float(a.gpu_end[-1]), 1e-12)
    for f in ("submit", "stall", "gpu_start", "gpu_end"):
        np.testing.assert_allclose(getattr(a, f), getattr(b, f), rtol=0, atol=1e-9 * scale)
    ra, rb = summarize(a), summarize(b)
    assert ra.step_s == pytest.approx(rb.step_s, rel=1e-9)
    assert ra.bound == rb.bound


@settings(max_examples=40, deadline=None)
@given(st.integers(50, 400), st.integers(1, 16), st.floats(0.1, 10), st.floats(0.1, 10))
def test_fast_path_equals_des_long_queue_runs(n, q, host_us, gpu_us):
    """Long uniform runs where the queue fills and drains (the fast path's blocked mode)."""
    rng = np.random.default_rng(n * 31 + q)
    p = make_plan(rng.uniform(0.5, 1.5, n) * host_us, rng.uniform(0.5, 1.5, n) * gpu_us, 0.3, queue_depth=q)
    a, b = simulate_des(p), simulate_fast(p)
    np.testing.assert_allclose(a.gpu_end, b.gpu_end, rtol=0, atol=1e-9 * a.gpu_end[-1])
    np.testing.assert_allclose(a.submit, b.submit, rtol=0, atol=1e-9 * a.gpu_end[-1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.1, 10), min_size=2, max_size=30), st.floats(0.01, 5))
def test_step_time_monotone_in_host_cost(host, extra):
    """Raising any launch's host cost never shortens the step."""
    gpu = [3.0] * len(host)
    base = summarize(simulate_fast(make_plan(host, gpu, 0.5, queue_depth=4))).step_s
    host2 = list(host)
    host2[len(host) // 2] += extra
    more = summarize(simulate_fast(make_plan(host2, gpu, 0.5, queue_depth=4))).step_s
    assert more >= base - 1e-15


@settings(max_examples=60, deadline=None)
@given(st.integers(20, 3000), st.sampled_from([1, 2, 3, 8, 64]), st.floats(0.2, 5), st.floats(0.2, 5),
       st.floats(0, 1), st.integers(0, 2**32 - 1))
def test_saturated_blocks_bitwise_equal_block_loop(n, q, host_us, gpu_us, burst, seed):
    """The blocked mode's all-at-once attempts (fastpath._saturated_blocks) keep only blocks whose every value is
    the block-by-block loop's own: bitwise equal to the loop alone, and equal to the DES, on runs where the GPU
    saturates, drains and saturates again."""
    import simulator.engine.fastpath as fp

    rng = np.random.default_rng(seed)
    host = rng.uniform(0.0, 3.0, n) * host_us  # uneven host work: with short queues the GPU idles inside a block
    gpu = rng.uniform(0.5, 1.5, n) * gpu_us
    gpu[rng.random(n) < burst * 0.05] *= 20  # long kernels: the queue fills behind them, then drains
    p = make_plan(host, gpu, 0.3, queue_depth=q)
    fast = simulate_fast(p)
    orig = fp._saturated_blocks
    fp._saturated_blocks = lambda *a: (0, False)
    try:
        loop = simulate_fast(p)
    finally:
        fp._saturated_blocks = orig
    for f in ("submit", "stall", "gpu_start", "gpu_end"):
        assert np.array_equal(getattr(fast, f), getattr(loop, f)), f
    des = simulate_des(p)
    np.testing.assert_allclose(des.gpu_end, fast.gpu_end, rtol=0, atol=1e-9 * des.gpu_end[-1])
    np.testing.assert_allclose(des.submit, fast.submit, rtol=0, atol=1e-9 * des.gpu_end[-1])


@settings(max_examples=60, deadline=None)
@given(plans, st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_step_times_bitwise_equal_one_replicate_at_a_time(args, reps, seed):
    """fastpath.step_times (host-noise replicates as rows of one pass) is bitwise the step time of simulate_fast on
    each replicate alone, rows whose queue binds included."""
    from simulator.engine.fastpath import step_times
    from simulator.engine.timeline import step_s

    host, counts, q, gap, rnd = args
    nk = sum(counts)
    p = make_plan(host, [rnd.uniform(0, 20) for _ in range(nk)], gap_us=[rnd.uniform(0, gap) for _ in range(nk)],
                  counts=counts, queue_depth=q)
    hosts = p.host_s * np.random.default_rng(seed).uniform(0.2, 3.0, (reps, p.launches))
    got = step_times(p, hosts)
    want = [step_s(simulate_fast(p.with_host(h))) for h in hosts]
    assert got.tolist() == want


@pytest.mark.parametrize("pieces", [False, True])
def test_long_gpu_bound_run_hand_case(monkeypatch, pieces):
    """1-unit host work, 3-unit kernels, queue depth 2 (integers: every sum exact). Kernel j ends at 3j + 4 from j >= 1
    (it starts at 1, the GPU never idles after); from launch 4 on the host waits for launch j - 2's kernel to start
    (at 3j - 5), so it stalls 2 units a launch. 4,096 launches run the blocked mode's all-at-once attempts, with the
    prefix sums in one pass or in pieces of 8 ahead of the blocks."""
    import simulator.engine.fastpath as fp
    from simulator.engine.plan import LaunchPlan

    if pieces:
        monkeypatch.setattr(fp, "_PREFIX_ALL", 16)
        monkeypatch.setattr(fp, "_PREFIX_MIN", 8)
    n = 4096
    j = np.arange(n, dtype=float)
    tl = simulate_fast(LaunchPlan(np.ones(n), np.ones(n, dtype=np.int64), np.full(n, 3.0), np.zeros(n), 2))
    want_submit = np.where(j < 4, j + 1, 3 * j - 5)
    want_submit[2], want_submit[3] = 3.0, 4.0
    assert np.array_equal(tl.submit, want_submit)
    assert np.array_equal(tl.gpu_end, 3 * j + 4)
    assert np.array_equal(tl.gpu_start, 3 * j + 1)
    assert np.array_equal(tl.stall, np.where(j < 4, 0.0, 2.0))
    assert summarize(tl).step_s == 3 * (n - 1) + 4


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2500), st.sampled_from([1, 2, 3, 8, 64]), st.floats(0.2, 5), st.floats(0.2, 5),
       st.floats(0, 1), st.booleans(), st.booleans(), st.integers(0, 2**32 - 1))
def test_prefix_sums_in_pieces_bitwise_equal_one_pass(n, q, host_us, gpu_us, burst, multi, syncs, seed):
    """Long plans fill their prefix sums in pieces just ahead of the blocks (fastpath._PREFIX_ALL/_PREFIX_MIN) and
    write stall and gpu_start behind the blocked mode: bitwise the one-pass result, on single- and multi-kernel
    launches, with and without host syncs, through queue runs that fill and drain; and equal to the DES."""
    import simulator.engine.fastpath as fp

    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 4, n) if multi else np.ones(n, dtype=np.int64)
    nk = int(counts.sum())
    gpu = rng.uniform(0.5, 1.5, nk) * gpu_us
    gpu[rng.random(nk) < burst * 0.05] *= 20
    p = make_plan(rng.uniform(0.0, 3.0, n) * host_us, gpu, rng.uniform(0, 0.5, nk), counts=counts, queue_depth=q)
    if syncs and n > 3:
        wk = np.full(n, -1, dtype=np.int64)
        last = np.cumsum(counts) - 1
        for j in rng.choice(np.arange(2, n), size=min(3, n - 2), replace=False):
            wk[j] = last[rng.integers(0, j)]
        p.wait_kernel = wk
    one = simulate_fast(p)
    saved = fp._PREFIX_ALL, fp._PREFIX_MIN
    fp._PREFIX_ALL, fp._PREFIX_MIN = 16, int(rng.integers(1, 40))
    try:
        pieces = simulate_fast(p)
    finally:
        fp._PREFIX_ALL, fp._PREFIX_MIN = saved
    for f in ("submit", "stall", "gpu_start", "gpu_end"):
        assert np.array_equal(getattr(one, f), getattr(pieces, f)), f
    if n <= 600:
        des = simulate_des(p)
        scale = max(float(des.gpu_end[-1]), 1e-12)
        for f in ("submit", "stall", "gpu_start", "gpu_end"):
            np.testing.assert_allclose(getattr(des, f), getattr(one, f), rtol=0, atol=1e-9 * scale)
