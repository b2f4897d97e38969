"""The highest arrival rate one replica sustains under latency SLOs, and replicas for a target rate.

`find_capacity(evaluate, slo, ...)` calls `evaluate(rate) -> metrics` (a serving run; the caller uses the same
seeds at every rate: common random numbers, see `arrivals`) and searches:
1. start at `start`; if it meets the SLOs, double until a rate fails (or `rate_max` is reached); if it fails,
   halve until one passes; if even `rate_min` fails, stop: no rate meets the SLOs (status `none`);
2. bisect between the highest passing and the lowest failing rate until (fail - pass) / pass <= tolerance.
The answer is the highest passing rate found: the true threshold lies within [pass, pass * (1 + tolerance)]
when meeting the SLOs is monotone in the rate (it need not be exactly, under sampling noise).
A rate meets the SLOs when the run is stable (`Stability`: latency percentiles of an overloaded run only measure
how long the run was, so they alone cannot tell) and each given limit holds at the chosen percentile; a run with
no measured request fails. The search's upper end is the lower of `rate_max` and `bound`, the replica's throughput
bound (`throughput_bound`): no rate above what its fastest decode step can emit is tried. Replicas for a target rate: ceil(target / best rate), traffic split evenly (Poisson splitting).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

BOUND_MARGIN = 1.25  # the search's upper end: this x throughput_bound (the bound's mean output is nominal)


def throughput_bound(decode_step_s: Callable[[int], float], batches: list[int], mean_output: float) -> float:
    """Requests/s no replica can exceed: the most output tokens per second any decode-only step of a batch in
    `batches` emits (batch / step time, at context 1, the cheapest), divided by the mean output length. Prefill
    work and longer contexts only lower it."""
    return max(b / decode_step_s(b) for b in batches) / max(mean_output, 1.0)


@dataclass(frozen=True)
class Stability:
    """When a serving run is stable (metrics.summarize measures the figures, over the measurement window):
    - completed throughput at least (1 - throughput_tol) x the window's arrival rate;
    - the waiting queue (requests without a first token) at the window's end at most `backlog_tol` x the window's
      arrivals: an overload by a share e of the rate piles up about e x the arrivals by then;
    - that queue not growing over the last half of the window: its least-squares slope at most `growth_tol` x the
      arrival rate (an overload by e grows it at about e / (1 + e) of the rate);
    - at most `unfinished_tol` x the window's requests unfinished when the run stops (drain_s after arrivals end).
    Defaults 0.05 / 0.02 / 0.05 / 0.001: a rate overloaded by more than a few percent fails at least one."""

    throughput_tol: float = 0.05
    backlog_tol: float = 0.02
    growth_tol: float = 0.05
    unfinished_tol: float = 0.001

    def check(self, m: dict) -> list[str]:
        """Why the run `m` is not stable (empty: stable)."""
        why = []
        rate, n = m.get("arrival_rate"), m.get("requests") or 0
        thr = m.get("throughput_req_s")
        if rate and thr is not None and thr < (1 - self.throughput_tol) * rate:
            why.append(f"completed {thr:.4g} req/s < {1 - self.throughput_tol:.3g} x arrivals {rate:.4g} req/s")
        q = m.get("queue_end")
        if q is not None and q > self.backlog_tol * n:
            why.append(f"{q} requests still queued at the window's end > {self.backlog_tol:g} x {n} arrivals")
        g = m.get("backlog_growth")
        if g is not None and g > self.growth_tol:
            why.append(f"queue growing at {g:.3g} x the arrival rate over the window's last half "
                       f"(> {self.growth_tol:g})")
        u = m.get("unfinished") or 0
        if u > self.unfinished_tol * n:
            why.append(f"{u} of {n} requests unfinished at the stop (> {self.unfinished_tol:g} x)")
        return why

    def describe(self) -> str:
        return (f"stable: completed >= {1 - self.throughput_tol:.3g} x arrivals, queue at the end <= "
                f"{self.backlog_tol:g} x arrivals and growing <= {self.growth_tol:g} x the rate, unfinished <= "
                f"{self.unfinished_tol:g} x requests")


@dataclass(frozen=True)
class Slo:
    percentile: int = 99
    ttft_s: float | None = None
    tpot_ms: float | None = None
    stability: Stability = Stability()

    def check(self, m: dict) -> tuple[bool, str]:
        p = self.percentile
        unstable = self.stability.check(m)
        why = [f"not stable ({'; '.join(unstable)})"] if unstable else []
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
        return " and ".join(parts) + " (and the run stable)"


def _fmt(v, scale, unit):
    return "n/a" if v is None else f"{v * scale:.4g} {unit}"


@dataclass
class CapacityResult:
    status: str  # "ok", "none" (no rate meets), "at_max" (the search's upper end meets)
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
                  tolerance: float = 0.02, max_runs: int = 40, bound: float | None = None) -> CapacityResult:
    points: dict[float, dict] = {}
    top = "rate_max"
    if bound is not None and bound < rate_max:
        rate_max, top = max(bound, rate_min), "the replica's throughput bound"

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
            return result("at_max", lo, None, f"meets the SLOs up to {top} = {rate_max:.4g} req/s (not searched higher)")
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
