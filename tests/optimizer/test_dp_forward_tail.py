"""optimizer/dp._forward's certified block scan of a non-decreasing tail of alpha (`_forward_tail`) gives the full
scan's minima and leftmost argmins bitwise: ties, near-ties, zero weights, penalties, a non-monotone head."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from simulator.optimizer import dp
from simulator.optimizer import exact as opt
from tests.optimizer.test_dp_forward_blocks import _full_scan


@hs.composite
def tail_problems(draw):
    """A problem whose alpha decreases somewhere in its first sizes and never after (integer figures: exact ties)."""
    n = draw(hs.integers(3, 90))
    head = draw(hs.integers(1, max(1, n // 3)))
    scale = draw(hs.sampled_from([1.0, 7.0, 1e3]))
    a_head = np.array(draw(hs.lists(hs.integers(1, 40), min_size=head, max_size=head)), float)
    a_tail = np.sort(np.array(draw(hs.lists(hs.integers(1, 40), min_size=n - head, max_size=n - head)), float))
    alpha = np.concatenate((a_head, a_tail)) / scale
    batches = np.arange(1, n + 3)
    w = np.array(draw(hs.lists(hs.integers(0, 5), min_size=batches.size, max_size=batches.size)), float)
    if draw(hs.booleans()):
        w = w + draw(hs.sampled_from([1e-3, 1e-9]))
    if w.sum() == 0:
        w[0] = 1.0
    beta = np.array(draw(hs.lists(hs.integers(-3, 3), min_size=batches.size, max_size=batches.size)), float) / 3
    p = opt.Problem(np.arange(1, n + 1), batches, w / w.sum(), alpha, beta, np.zeros(batches.size), n)
    pen = None
    if draw(hs.booleans()):
        pen = np.concatenate(([0.0], np.array(draw(hs.lists(hs.integers(0, 9), min_size=n, max_size=n)), float)))
    return p, pen


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tail_problems(), hs.integers(1, 9), hs.integers(1, 14))
def test_tail_scan_equals_the_full_scan_bitwise(case, block, k):
    p, pen = case
    tail = dp.monotone_tail(p)
    assert tail is not None
    W, _ = dp._tables(p)
    K = min(k, len(p.sizes))
    A0, arg0 = _full_scan(W, K, pen)
    n1 = W.shape[0]
    A, arg = np.full((K + 1, n1), dp.INF), np.zeros((K + 1, n1), dtype=np.int64)
    A[1] = A0[1]
    if K >= 2 and tail[0] < n1 - 1:
        A, arg = dp._forward_tail(W, K, pen, A, arg, tail[0], tail[1], block)
        assert np.array_equal(A, A0) and np.array_equal(arg, arg0)


@pytest.mark.parametrize("seed", range(12))
def test_forward_takes_the_tail_scan_and_matches(seed, monkeypatch):
    """Through `_forward` (as exact.solve calls it), on smooth costs with a dip at small sizes (the step-time
    objective's shape) and on rounded ones (ties)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(70, 300))
    s = np.arange(1, n + 1)
    alpha = 5e-3 + 1e-5 * s + (2e-5 * np.exp(-s / 3.0) if seed % 2 else 0.0)
    if seed % 3 == 0:
        alpha = np.round(alpha * 2e4) / 2e4
    alpha[:3] = alpha[:3][::-1] + 1e-4
    w = rng.random(n) if seed % 4 else np.ones(n)
    beta = 1e-6 * s
    p = opt.Problem(s, s, w / w.sum(), alpha, beta, 0.02 + 1e-5 * s, 16)
    tail = dp.monotone_tail(p)
    assert tail is not None and 1 < tail[0] < n - 64 and not dp.monotone(p)
    W, _ = dp._tables(p)
    pen = None if seed % 2 else np.concatenate(([0.0], rng.random(n) * 1e-3))
    A, arg = dp._forward(W, 16, pen, tail=tail)
    A0, arg0 = _full_scan(W, 16, pen)
    assert np.array_equal(A, A0) and np.array_equal(arg, arg0)


def test_no_tail_certificate_without_nonnegative_finite_figures():
    p = opt.Problem(np.arange(1, 5), np.arange(1, 5), np.array([0.5, -0.1, 0.3, 0.3]), np.array([2.0, 1, 3, 4]),
                    np.zeros(4), np.zeros(4), 2)
    assert dp.monotone_tail(p) is None
    p = opt.Problem(np.arange(1, 5), np.arange(1, 5), np.full(4, 0.25), np.array([2.0, 1, np.inf, 4]), np.zeros(4),
                    np.zeros(4), 2)
    assert dp.monotone_tail(p) is None
    p = opt.Problem(np.arange(1, 5), np.arange(1, 5), np.full(4, 0.25), np.array([2.0, 1, 3, 4]), np.zeros(4),
                    np.zeros(4), 2)
    assert dp.monotone_tail(p)[0] == 2  # W's columns 2.. (sizes 2..4): alpha 1, 3, 4
