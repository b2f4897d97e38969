"""What a serving run measures, over a measurement window [warmup, duration).

Step figures count the steps that START inside the window (runs of merged steps never straddle it):
busy fractions, CPU-bound share, padding waste, KV utilisation, output tokens, the batch-size log.
Request figures count the requests that ARRIVE inside the window:
- TTFT = first token - arrival; TPOT = (finish - first token) / (output tokens - 1), outputs > 1 token;
- requests still unfinished when the run stops (drain limit) are censored: TTFT at least (stop - arrival),
  TPOT at least (stop - first token) / max(1, tokens so far - 1); `unfinished` says how many;
- Little's law: `little_L` is the time-average number of requests in the replica (waiting + running)
  integrated over the window, `little_lambda_W` the window's arrival rate times the mean time in system.
Stability (what `capacity.Stability` checks): `arrival_rate` is the window's measured arrival rate (its
requests / window); `in_system_start` / `in_system_end` the requests in the replica (arrived, not rejected, not
finished) at the window's start and end; `queue_end` those of them still waiting for their first token at the
end; `backlog_growth` the least-squares slope of that queue (requests waiting for their first token) over the last half of the window (sampled at
201 evenly spaced instants), divided by `arrival_rate`: the share of arrivals that pile up instead of being
served (about (rate - capacity) / rate when overloaded, about 0 when stable).
Padding waste: padded rows / all rows of the steps that replayed a graph (decode sequences, or tokens of
piecewise mixed steps). The batch-size log counts decode-only steps by batch (sequences): the histogram
graphs are captured for, written as `batch,count` for `launchsim optimize --distribution`.
"""

from __future__ import annotations

import math

import numpy as np

from .scheduler import DECODE, REJECTED


class Collector:
    def __init__(self, w0: float, w1: float, kv_blocks: int):
        self.w0, self.w1, self.kv_blocks = w0, w1, kv_blocks
        self.steps = self.decode_steps = self.mixed_steps = self.cpu_bound = self.graph_steps = 0
        self.busy_s = self.gpu_s = 0.0
        self.rows = self.padded = 0
        self.tokens = 0
        self.block_s = 0.0
        self.peak_blocks = 0
        self.hist: dict[int, int] = {}
        self.area = 0.0  # integral of requests in system over the window
        self._t = 0.0
        self._n = 0

    def track(self, now: float, n: int) -> None:
        """The number of requests in the system changes to n at time `now`."""
        lo, hi = max(self._t, self.w0), min(now, self.w1)
        if hi > lo:
            self.area += self._n * (hi - lo)
        self._t, self._n = now, n

    def on_steps(self, k: int, cost, plan, tokens: int) -> None:
        """A run of k identical steps that started inside the window (the caller checks)."""
        dt = cost.step_s
        self.steps += k
        self.busy_s += k * dt
        self.gpu_s += k * cost.gpu_busy_s
        if cost.cpu_bound:
            self.cpu_bound += k
        if cost.mode != "none":
            self.graph_steps += k
            self.rows += k * cost.rows
            self.padded += k * cost.padded
        if plan.chunks:
            self.mixed_steps += k
        else:
            self.decode_steps += k
            h, n = self.hist, plan.decode
            h[n] = h.get(n, 0) + k
        self.tokens += tokens
        self.block_s += plan.block_steps * dt
        if plan.peak_used > self.peak_blocks:
            self.peak_blocks = plan.peak_used

    def batch_log(self) -> list[dict]:
        return [{"batch": b, "count": self.hist[b]} for b in sorted(self.hist)]


def _array(x, dtype, n: int) -> np.ndarray:
    """A per-request list (or array) as an array of `dtype`."""
    return x.astype(dtype, copy=False) if isinstance(x, np.ndarray) else np.fromiter(x, dtype=dtype, count=n)


def pct(x: np.ndarray, q: float) -> float | None:
    return float(np.percentile(x, q)) if x.size else None


def summarize(col: Collector, sched, arrivals: np.ndarray, stop: float, rejected: int) -> tuple[dict, dict]:
    """(per-request samples, metrics dict) of a run; times in s, TPOT in ms."""
    w0, w1 = col.w0, col.w1
    span = w1 - w0
    n = len(arrivals)
    idx = np.nonzero((arrivals >= w0) & (arrivals < w1))[0]
    # the scheduler's per-request lists (or arrays: serving/plainloop.py leaves some), each read into an array once
    state_all = _array(sched.state, np.int64, n) if n else np.empty(0, dtype=int)
    first_all = _array(sched.first_t, float, n) if n else np.empty(0)
    fin_all = _array(sched.finish_t, float, n) if n else np.empty(0)
    state = state_all[idx]
    arr = arrivals[idx]
    first = first_all[idx]
    fin = fin_all[idx]
    out = _array(sched.O, np.int64, n)[idx] if n else np.empty(0, dtype=np.int64)
    ok = state != REJECTED
    arr, first, fin, out = arr[ok], first[ok], fin[ok], out[ok]
    if not idx.size:
        gen = out
    elif sched.spec is None:  # Scheduler.generated_now for every request at once
        sel = idx[ok]
        g = _array(sched.gen, np.int64, n)[sel]
        gen = np.where(state[ok] == DECODE, g + (sched.G - _array(sched.join, np.int64, n)[sel]), g)
    else:
        gen = np.asarray([sched.generated_now(int(i)) for i in idx[ok]], dtype=np.int64)
    done = ~np.isnan(fin)
    ttft = np.where(np.isnan(first), stop - arr, first - arr)
    multi = out > 1
    tpot_done = (fin - first) / np.maximum(out - 1, 1)
    tpot_open = (stop - first) / np.maximum(gen - 1, 1)
    has_first = ~np.isnan(first)
    tpot = np.where(done, tpot_done, tpot_open)[multi & has_first] * 1e3
    sojourn = np.where(done, fin, stop) - arr
    completed_in_window = int(np.count_nonzero((fin_all >= w0) & (fin_all < w1)))
    graph_rows = col.padded
    stab = _stability(arrivals, state_all, first_all, fin_all, w0, w1, arr.size / span)
    samples = {"ttft_s": ttft, "tpot_ms": tpot}
    return samples, {
        "requests": int(arr.size),
        "completed": int(done.sum()),
        "unfinished": int((~done).sum()),
        "rejected": int(rejected),
        "preemptions": int(sched.preemptions),
        "throughput_tok_s": col.tokens / span,
        "throughput_req_s": completed_in_window / span,
        "ttft_p50_s": pct(ttft, 50), "ttft_p90_s": pct(ttft, 90), "ttft_p99_s": pct(ttft, 99),
        "tpot_p50_ms": pct(tpot, 50), "tpot_p90_ms": pct(tpot, 90), "tpot_p99_ms": pct(tpot, 99),
        "latency_p50_s": pct(sojourn, 50), "latency_p99_s": pct(sojourn, 99),
        "gpu_busy_frac": col.gpu_s / span,
        "engine_busy_frac": col.busy_s / span,
        "steps": col.steps,
        "decode_steps": col.decode_steps,
        "mixed_steps": col.mixed_steps,
        "cpu_bound_step_share": col.cpu_bound / col.steps if col.steps else 0.0,
        "graph_step_share": col.graph_steps / col.steps if col.steps else 0.0,
        "padding_waste": (col.padded - col.rows) / graph_rows if graph_rows else 0.0,
        "mean_decode_batch": (sum(b * c for b, c in col.hist.items()) / col.decode_steps) if col.decode_steps else 0.0,
        "kv_util_mean": col.block_s / (col.kv_blocks * span),
        "kv_util_peak": col.peak_blocks / col.kv_blocks,
        "little_L": col.area / span,
        "little_lambda_W": (arr.size / span) * (float(sojourn.mean()) if sojourn.size else 0.0),
        "window_s": span,
        "arrival_rate": arr.size / span,
        **stab,
    }


def _stability(arrivals: np.ndarray, state: np.ndarray, first: np.ndarray, fin: np.ndarray, w0: float, w1: float,
               rate: float) -> dict:
    """Requests in system at the window's ends, the queue at its end, and the backlog's growth over its last half."""
    keep = state != REJECTED if state.size else np.zeros(0, dtype=bool)
    a = np.sort(arrivals[keep])
    f = np.sort(np.where(np.isnan(fin[keep]), np.inf, fin[keep]))
    fi = np.where(np.isnan(first[keep]), np.inf, first[keep])

    def in_system(t):
        return np.searchsorted(a, t, side="right") - np.searchsorted(f, t, side="right")

    fs = np.sort(fi)

    def queue(t):
        return np.searchsorted(a, t, side="right") - np.searchsorted(fs, t, side="right")

    ts = np.linspace(w0 + 0.5 * (w1 - w0), w1, 201)
    ys = queue(ts).astype(float)
    slope = float(np.polyfit(ts, ys, 1)[0]) if w1 > w0 else 0.0
    queue_end = int(queue(w1))
    return {"in_system_start": int(in_system(w0)), "in_system_end": int(in_system(w1)), "queue_end": queue_end,
            "backlog_growth": slope / rate if rate > 0 else 0.0}



def finite(d: dict) -> dict:
    """Replace NaN/inf by None so the dict is valid JSON."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}
