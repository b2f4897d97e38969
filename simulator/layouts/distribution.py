"""Batch-size distributions: what share of steps run at each batch size.

Built from a histogram ({batch: count}), a list of samples, or a CSV file with a header and either a
`batch` column (one row per observed step) or `batch,count` columns (also the batch-size log that a
serving run writes). Expectations over the distribution are exact weighted sums.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from simulator.common.errors import UserError
from simulator.common.jsonfile import read_text
from simulator.common.limits import MAX_BATCH


class DistributionError(UserError):
    pass


@dataclass(frozen=True)
class BatchDistribution:
    sizes: tuple[int, ...]  # sorted, unique, positive
    weights: tuple[float, ...]  # probabilities, sum to 1
    label: str = ""

    @property
    def max_batch(self) -> int:
        return self.sizes[-1]

    def expect(self, f: Callable[[int], float]) -> float:
        return float(sum(w * f(b) for b, w in zip(self.sizes, self.weights)))

    def as_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.sizes, dtype=np.int64), np.asarray(self.weights, dtype=float)

    @property
    def mean(self) -> float:
        return self.expect(float)


def from_histogram(hist: dict[int, float], label: str = "histogram") -> BatchDistribution:
    if not hist:
        raise DistributionError(f"{label}: the batch-size distribution is empty")
    items = {}
    for b, c in hist.items():
        try:
            b = int(b)
        except (TypeError, ValueError):
            raise DistributionError(f"{label}: batch size {b!r} is not an integer") from None
        if b <= 0:
            raise DistributionError(f"{label}: batch sizes must be positive, got {b}")
        if b > MAX_BATCH:
            raise DistributionError(f"{label}: batch size {b:,} is above the limit of {MAX_BATCH:,}")
        if isinstance(c, bool) or not isinstance(c, (int, float)) or c < 0 or not math.isfinite(float(c)):
            raise DistributionError(f"{label}: count for batch {b} must be a non-negative number, got {c!r}")
        items[b] = items.get(b, 0.0) + float(c)
    top = max(items.values())
    if not math.isfinite(top):
        raise DistributionError(f"{label}: counts add up to more than a float holds")
    if top <= 0:
        raise DistributionError(f"{label}: all counts are zero")
    scaled = {b: c / top for b, c in items.items()}  # scaled first: counts near 1e308 would sum to inf
    total = sum(scaled.values())
    sizes = tuple(sorted(b for b, c in scaled.items() if c > 0))
    return BatchDistribution(sizes, tuple(scaled[b] / total for b in sizes), label)


def from_samples(samples, label: str = "samples") -> BatchDistribution:
    samples = list(samples)
    if not samples:
        raise DistributionError(f"{label}: the batch-size distribution is empty")
    hist: dict[int, float] = {}
    for s in samples:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) and not (isinstance(s, float) and s.is_integer()):
            raise DistributionError(f"{label}: batch size {s!r} is not an integer")
        hist[int(s)] = hist.get(int(s), 0) + 1
    return from_histogram(hist, label)


def from_csv(path: str | Path) -> BatchDistribution:
    """A CSV with a header: a `batch` column (one row per step) or `batch,count` columns."""
    p = Path(path)
    text = read_text(p, "batch-size CSV", DistributionError)
    rows = list(csv.reader(line for line in text.splitlines() if line.strip() and not line.startswith("#")))
    if not rows:
        raise DistributionError(f"{p}: empty CSV (expected a header with a 'batch' column)")
    header = [h.strip().lower() for h in rows[0]]
    if "batch" not in header:
        raise DistributionError(f"{p}:1: header must have a 'batch' column (and optionally 'count'), got {rows[0]}")
    bi = header.index("batch")
    ci = header.index("count") if "count" in header else None
    if len(rows) == 1:
        raise DistributionError(f"{p}: no data rows after the header")
    hist: dict[int, float] = {}
    for n, r in enumerate(rows[1:], start=2):
        if [c.strip().lower() for c in r] == header:
            raise DistributionError(f"{p}:{n}: the header row repeats (two CSV files concatenated?)")
        try:
            b = int(float(r[bi]))
            if float(r[bi]) != b:
                raise ValueError
        except (ValueError, IndexError, OverflowError):
            raise DistributionError(f"{p}:{n}: column 'batch': not an integer ({r[bi] if bi < len(r) else ''!r})") from None
        if b <= 0:
            raise DistributionError(f"{p}:{n}: column 'batch': must be positive, got {b}")
        if b > MAX_BATCH:
            raise DistributionError(f"{p}:{n}: column 'batch': {b:,} is above the limit of {MAX_BATCH:,}")
        c = 1.0
        if ci is not None:
            try:
                c = float(r[ci])
            except (ValueError, IndexError):
                raise DistributionError(f"{p}:{n}: column 'count': not a number") from None
            if c < 0 or not math.isfinite(c):
                raise DistributionError(f"{p}:{n}: column 'count': must be a non-negative number, got {r[ci]}")
        hist[b] = hist.get(b, 0.0) + c
        if not math.isfinite(hist[b]):
            raise DistributionError(f"{p}:{n}: column 'count': counts for batch {b} add up to more than a float holds")
    return from_histogram(hist, str(p))


def uniform(lo: int, hi: int) -> BatchDistribution:
    return from_histogram({b: 1.0 for b in range(lo, hi + 1)}, f"uniform[{lo},{hi}]")
