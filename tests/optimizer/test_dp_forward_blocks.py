"""optimizer/dp._forward's block scan of the upper triangle gives the full scan's minima and leftmost argmins."""

import numpy as np
import pytest

from simulator.optimizer import dp


def _full_scan(W, K, pen=None):
    n1 = W.shape[0]
    A, arg = np.full((K + 1, n1), dp.INF), np.zeros((K + 1, n1), dtype=np.int64)
    A[1] = W[0] if pen is None else W[0] + pen[0]
    A[1, 0] = dp.INF
    Wp = W if pen is None else W + pen[:, None]
    for n in range(2, K + 1):
        tot = Wp + A[n - 1][:, None]
        arg[n] = tot.argmin(axis=0)
        A[n] = tot[arg[n], np.arange(n1)]
    return A, arg


@pytest.mark.parametrize("seed", range(40))
def test_block_scan_equals_full_scan(seed):
    rng = np.random.default_rng(seed)
    n1, K = int(rng.integers(1, 3 * dp.FORWARD_BLOCK)), int(rng.integers(1, 12))
    W = rng.random((n1, n1))
    if seed % 3 == 0:
        W = np.round(W * 4) / 4  # ties: the leftmost argmin
    if seed % 4 == 0:
        W[rng.random((n1, n1)) < 0.3] = dp.INF  # columns with no finite start
    W[np.tril_indices(n1)] = dp.INF
    pen = None if seed % 2 else np.round(rng.random(n1) * 3) / 3
    A, arg = dp._forward(W, K, pen, monotone=False)
    A0, arg0 = _full_scan(W, K, pen)
    assert np.array_equal(A, A0) and np.array_equal(arg, arg0)
