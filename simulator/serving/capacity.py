"""The highest arrival rate one replica sustains under latency SLOs, and replicas for a target rate.

`find_capacity(evaluate, slo, ...)` calls `evaluate(rate) -> metrics` (a serving run; the caller uses the same
seeds at every rate: common random numbers, see `arrivals`) and searches:
1. start at `start`; if it meets the SLOs, double until a rate fails (or `rate_max` is reached); if it fails,
   halve until one passes; if even `rate_min` fails, stop: no rate meets the SLOs (status `none`);
2. bisect between the highest passing and the lowest failing rate until (fail - pass) / pass <= tolerance.
The answer is the highest passing rate found: the true threshold lies within [pass, pass * (1 + tolerance)]
when meeting the SLOs is monotone in the rate (it need not be exactly, under sampling noise).
A rate meets the SLOs when each given limit holds at the chosen percentile; a run with no measured request
fails. Replicas for a target rate: ceil(target / best rate), traffic split evenly (Poisson splitting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Slo:
    percentile: int = 99
    ttft_s: float | None = None
    tpot_ms: float | None = None

    def check(self, m: dict) -> tuple[bool, str]:
        p = self.percentile
        why = []
        if self.ttft_s is not None:
            v = m.get(f"ttft_p{p}_s")
            if v is None or v > self.ttft_s:
                why.append(f"TTFT p{p} {_fmt(v, 1, 's')} > {self.ttft_s:g} s")
        if self.tpot_ms is not None:
            v = m.get(f"tpot_p{p}_ms")
            if v is None or v > self.tpot_ms:
                why.append(f"TPOT p{p} {_fmt(v, 1, 'ms')} > {self.tpot_ms:g} ms")
        return (not why), "; ".join(why)

    def describe(self) -> str:
        parts = []
        if self.ttft_s is not None:
            parts.append(f"TTFT p{self.percentile} <= {self.ttft_s:g} s")
        if self.tpot_ms is not None:
            parts.append(f"TPOT p{self.percentile} <= {self.tpot_ms:g} ms")
        return " and ".join(parts)


def _fmt(v, scale, unit):
    return "n/a" if v is None else f"{v * scale:.4g} {unit}"


@dataclass
class CapacityResult:
    status: str  # "ok", "none" (no rate meets), "at_max" (rate_max meets)
    best_rate: float | None
    fail_rate: float | None
    points: list[dict] = field(default_factory=list)  # every evaluated rate: {"rate", "meets", "why", **metrics}
    runs: int = 0
    message: str = ""

    def replicas(self, target: float | None) -> int | None:
        if target is None or not self.best_rate:
            return None
        return max(1, math.ceil(target / self.best_rate - 1e-9))


def find_capacity(evaluate: Callable[[float], dict], slo: Slo, start: float, rate_min: float, rate_max: float,
                  tolerance: float = 0.02, max_runs: int = 40) -> CapacityResult:
    points: dict[float, dict] = {}

    def meets(rate: float) -> bool:
        m = evaluate(rate)
        ok, why = slo.check(m)
        points[rate] = {"rate": rate, "meets": ok, "why": why, **m}
        return ok

    def result(status, lo, hi, msg):
        pts = [points[r] for r in sorted(points)]
        return CapacityResult(status, lo, hi, pts, len(points), msg)

    r = min(max(start, rate_min), rate_max)
    lo = hi = None
    if meets(r):
        lo = r
        while lo < rate_max and len(points) < max_runs:
            r = min(lo * 2, rate_max)
            if meets(r):
                lo = r
            else:
                hi = r
                break
        if hi is None:
            return result("at_max", lo, None, f"meets the SLOs up to rate_max = {rate_max:g} req/s (not searched higher)")
    else:
        hi = r
        while len(points) < max_runs:
            if hi <= rate_min:
                return result("none", None, hi, f"no rate meets the SLOs: even {hi:g} req/s fails ({points[hi]['why']})")
            r = max(hi / 2, rate_min)
            if meets(r):
                lo = r
                break
            hi = r
        if lo is None:
            return result("none", None, hi, f"no passing rate found in {max_runs} runs")
    while (hi - lo) / lo > tolerance and len(points) < max_runs:
        mid = 0.5 * (lo + hi)
        if meets(mid):
            lo = mid
        else:
            hi = mid
    return result("ok", lo, hi, f"{lo:.4g} req/s meets the SLOs, {hi:.4g} fails (tolerance {tolerance:g})")
