"""Request streams: when requests arrive and how long their prompts and outputs are.

Arrival processes (`ArrivalSpec.process`):
- `poisson`: exponential inter-arrival gaps with mean 1/rate;
- `gamma`:   bursty, gamma-distributed gaps with mean 1/rate and coefficient of variation `cv`
             (cv = 1 is Poisson, cv > 1 burstier);
- `trace`:   a CSV file with header `timestamp,prompt_tokens,output_tokens` (seconds, tokens). Timestamps
             are shifted to start at 0; with a rate given they are rescaled so the trace's mean rate equals it.
Lengths (`LengthSpec.kind`): `fixed` (value), `uniform` (integers low..high), `lognormal` (mean and cv,
clipped to [low, high]), `csv` (real lengths: one column of a CSV file, `load_lengths`, drawn uniformly with
replacement). A trace carries its own lengths.

Common random numbers: gaps are drawn at unit rate and divided by the rate, and lengths are drawn per request
index from their own streams (children of one `SeedSequence`), so the same seed at two rates gives the same
requests, only closer together. That makes SLO checks across rates (the capacity bisection) well behaved.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.common.errors import UserError
from simulator.common.jsonfile import read_text
from simulator.common import vocab as V
from simulator.common.limits import MAX_CTX

PROCESSES = V.values(V.ArrivalProcess)
LENGTH_KINDS = V.values(V.LengthKind)
TRACE_COLUMNS = ("timestamp", "prompt_tokens", "output_tokens")
MAX_REQUESTS = 5_000_000  # one run's request arrays stay in memory


class ArrivalError(UserError):
    """A bad arrival process, rate, length distribution or trace file."""


@dataclass(frozen=True)
class LengthSpec:
    kind: str = "lognormal"
    value: int = 0  # fixed
    mean: float = 0.0  # lognormal
    cv: float = 1.0  # lognormal
    low: int = 1  # uniform bounds; lognormal clip
    high: int = 4096
    values: tuple[int, ...] = ()  # csv: the lengths read from the file
    source: str = ""  # csv: "FILE column NAME"

    def check(self, what: str) -> None:
        if self.kind not in LENGTH_KINDS:
            raise ArrivalError(f"{what}: unknown length distribution '{self.kind}': use {', '.join(LENGTH_KINDS)}")
        if self.kind == "fixed" and self.value <= 0:
            raise ArrivalError(f"{what}: a fixed length must be a positive integer, got {self.value}")
        if self.kind != "fixed" and not (1 <= self.low <= self.high):
            raise ArrivalError(f"{what}: need 1 <= low <= high, got low={self.low} high={self.high}")
        if self.kind == "csv" and not self.values:
            raise ArrivalError(f"{what}: a csv length distribution needs lengths (none read)")
        if self.kind == "lognormal" and (self.mean <= 0 or self.cv < 0):
            raise ArrivalError(f"{what}: lognormal needs mean > 0 and cv >= 0, got mean={self.mean} cv={self.cv}")

    @property
    def max(self) -> int:
        if self.kind == "csv":
            return max(self.values)
        return self.value if self.kind == "fixed" else self.high

    def mean_len(self) -> float:
        """The distribution's mean (lognormal: its nominal mean, clipped to [low, high])."""
        if self.kind == "fixed":
            return float(self.value)
        if self.kind == "uniform":
            return (self.low + self.high) / 2
        if self.kind == "csv":
            return float(np.mean(self.values))
        return float(min(max(self.mean, self.low), self.high))

    def describe(self) -> str:
        if self.kind == "fixed":
            return f"fixed {self.value}"
        if self.kind == "uniform":
            return f"uniform {self.low}..{self.high}"
        if self.kind == "csv":
            return f"{len(self.values):,} real lengths from {self.source} (mean {self.mean_len():.1f}), resampled"
        return f"lognormal mean {self.mean:g} cv {self.cv:g}, clipped to {self.low}..{self.high}"

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "csv":
            vals = np.asarray(self.values, dtype=np.int64)
            return vals[rng.integers(0, vals.size, size=n)]
        if self.kind == "fixed":
            return np.full(n, self.value, dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(self.low, self.high + 1, size=n, dtype=np.int64)
        s2 = math.log1p(self.cv ** 2)
        mu = math.log(self.mean) - s2 / 2
        x = rng.lognormal(mu, math.sqrt(s2), size=n)
        return np.clip(np.rint(x), self.low, self.high).astype(np.int64)


@dataclass(frozen=True)
class ArrivalSpec:
    process: str = "poisson"
    cv: float = 1.0  # gamma only
    trace: str | None = None  # trace only

    def check(self) -> None:
        if self.process not in PROCESSES:
            raise ArrivalError(f"unknown arrival process '{self.process}': use {', '.join(PROCESSES)}")
        if self.process == "gamma" and self.cv <= 0:
            raise ArrivalError(f"gamma arrivals need cv > 0, got {self.cv}")
        if self.process == "trace" and not self.trace:
            raise ArrivalError("trace arrivals need a trace file")


@dataclass(frozen=True)
class Workload:
    """Requests sorted by arrival: times (s), prompt and output lengths (tokens)."""

    times: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    label: str
    rate: float  # offered mean arrival rate, requests/s

    def __len__(self) -> int:
        return int(self.times.size)


@dataclass(frozen=True)
class Trace:
    times: np.ndarray  # shifted to start at 0
    prompt: np.ndarray
    output: np.ndarray
    path: str

    @property
    def native_rate(self) -> float:
        span = float(self.times[-1]) if self.times.size > 1 else 0.0
        return (self.times.size - 1) / span if span > 0 else float("inf")


def _csv_rows(p: Path, what: str, expect: str) -> tuple[int, list[str], list[tuple[int, list[str]]]]:
    """(header line number, lower-cased header columns, [(line number, cells)]) of a CSV with a header; blank and
    `#` lines skipped; an empty file or a repeated header row (two files concatenated) is one line naming the file
    and line."""
    text = read_text(p, what, ArrivalError)
    numbered = [(i, line) for i, line in enumerate(text.splitlines(), start=1)
                if line.strip() and not line.lstrip().startswith("#")]
    if not numbered:
        raise ArrivalError(f"{p}: empty {what} ({expect})")
    hline, header = numbered[0]
    cols = [c.strip().lower() for c in next(csv.reader([header]))]
    rows = []
    for ln, line in numbered[1:]:
        row = next(csv.reader([line]))
        if [c.strip().lower() for c in row] == cols:
            raise ArrivalError(f"{p}:{ln}: the header row repeats (two files concatenated?)")
        rows.append((ln, row))
    return hline, cols, rows


def load_trace(path: str | Path) -> Trace:
    """Read and validate a trace CSV; any problem is one line naming the file and line."""
    p = Path(path)
    hline, cols, rows = _csv_rows(p, "trace", f"expected a header {','.join(TRACE_COLUMNS)} and rows")
    missing = [c for c in TRACE_COLUMNS if c not in cols]
    if missing:
        raise ArrivalError(f"{p}:{hline}: header must name columns {', '.join(TRACE_COLUMNS)}; missing {', '.join(missing)}")
    idx = [cols.index(c) for c in TRACE_COLUMNS]
    if not rows:
        raise ArrivalError(f"{p}: no requests after the header")
    ts, pr, out = [], [], []
    for ln, row in rows:
        if len(row) < len(cols):
            raise ArrivalError(f"{p}:{ln}: expected {len(cols)} columns, got {len(row)}")
        try:
            t = float(row[idx[0]])
        except ValueError:
            raise ArrivalError(f"{p}:{ln}: column 'timestamp': not a number ({row[idx[0]].strip()!r})") from None
        if not math.isfinite(t) or t < 0 or t > 1e12:
            raise ArrivalError(f"{p}:{ln}: column 'timestamp': must be a finite number >= 0 (seconds, at most 1e12), got {row[idx[0]].strip()}")
        if ts and t < ts[-1]:
            raise ArrivalError(f"{p}:{ln}: column 'timestamp': timestamps must be non-decreasing ({t} after {ts[-1]})")
        vals = []
        for name, j in zip(TRACE_COLUMNS[1:], idx[1:]):
            raw = row[j].strip()
            try:
                v = int(raw)
            except ValueError:
                raise ArrivalError(f"{p}:{ln}: column '{name}': not an integer ({raw!r})") from None
            if v <= 0:
                raise ArrivalError(f"{p}:{ln}: column '{name}': must be a positive integer, got {v}")
            if v > MAX_CTX:
                raise ArrivalError(f"{p}:{ln}: column '{name}': {v:,} tokens is above the limit of {MAX_CTX:,}")
            vals.append(v)
        ts.append(t)
        pr.append(vals[0])
        out.append(vals[1])
    t = np.asarray(ts, dtype=float)
    return Trace(t - t[0], np.asarray(pr, dtype=np.int64), np.asarray(out, dtype=np.int64), str(p))


def load_lengths(path: str | Path, column: str | None = None) -> tuple[tuple[int, ...], str]:
    """Positive token lengths from one column of a CSV with a header (`column`: its name; default the only
    column, or `prompt_tokens` / `output_tokens` are not guessed: name it). Returns (lengths, "FILE column C");
    any problem is one line naming the file and line: a repeated header row, a non-integer, a length <= 0."""
    p = Path(path)
    hline, cols, rows = _csv_rows(p, "lengths CSV", "expected a header naming the column and rows")
    if column is None:
        if len(cols) != 1:
            raise ArrivalError(f"{p}:{hline}: {len(cols)} columns ({', '.join(cols)}): name the one to read "
                               f"(column)")
        column = cols[0]
    if column.lower() not in cols:
        raise ArrivalError(f"{p}:{hline}: no column '{column}' in the header ({', '.join(cols)})")
    j = cols.index(column.lower())
    vals = []
    for ln, row in rows:
        if len(row) <= j:
            raise ArrivalError(f"{p}:{ln}: expected {len(cols)} columns, got {len(row)}")
        raw = row[j].strip()
        try:
            v = int(raw)
        except ValueError:
            raise ArrivalError(f"{p}:{ln}: column '{column}': not an integer ({raw!r})") from None
        if not 0 < v <= MAX_CTX:
            raise ArrivalError(f"{p}:{ln}: column '{column}': must be a positive integer of at most {MAX_CTX:,} "
                               f"tokens, got {v}")
        vals.append(v)
    if not vals:
        raise ArrivalError(f"{p}: no lengths after the header")
    return tuple(vals), f"{p} column {column}"


def _unit_arrivals(spec: ArrivalSpec, rng: np.random.Generator, horizon: float) -> np.ndarray:
    """Arrival times of a unit-rate process up to `horizon` (drawn in fixed chunks: prefix-stable)."""
    chunk, parts, t = 4096, [], 0.0
    while t < horizon:
        if spec.process == "poisson":
            g = rng.standard_exponential(chunk)
        else:
            k = 1.0 / spec.cv ** 2
            g = rng.gamma(k, 1.0 / k, chunk)
        c = t + np.cumsum(g)
        parts.append(c)
        t = float(c[-1])
    times = np.concatenate(parts) if parts else np.empty(0)
    return times[times < horizon]


def child_seeds(ss: np.random.SeedSequence, n: int) -> list[np.random.SeedSequence]:
    """The first `n` children of `ss`, as `ss.spawn(n)` would give on a fresh sequence, without mutating it
    (so the same SeedSequence object always yields the same streams)."""
    return [np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (i,), pool_size=ss.pool_size)
            for i in range(n)]


def make_workload(spec: ArrivalSpec, prompt: LengthSpec, output: LengthSpec, rate: float | None,
                  duration: float, seed: np.random.SeedSequence | int = 0, trace: Trace | None = None) -> Workload:
    """Requests arriving in [0, duration). `seed` spawns independent streams for gaps, prompts, outputs."""
    spec.check()
    if rate is not None and (not math.isfinite(rate) or rate <= 0):
        raise ArrivalError(f"arrival rate must be a positive number of requests/s, got {rate}")
    if not math.isfinite(duration) or duration <= 0:
        raise ArrivalError(f"duration must be a positive number of seconds, got {duration}")
    if spec.process == "trace":
        tr = trace or load_trace(spec.trace)
        scale = 1.0 if rate is None or not math.isfinite(tr.native_rate) else tr.native_rate / rate
        t = tr.times * scale
        keep = t < duration
        r = rate if rate is not None else tr.native_rate
        return Workload(t[keep], tr.prompt[keep], tr.output[keep], f"trace {tr.path}", float(r))
    if rate is None:
        raise ArrivalError(f"{spec.process} arrivals need a rate (requests/s)")
    if rate * duration > MAX_REQUESTS:
        raise ArrivalError(f"rate x duration = {rate * duration:.3g} requests exceeds the limit of {MAX_REQUESTS:,}; "
                           "shorten the duration or lower the rate")
    prompt.check("prompt")
    output.check("output")
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    g_arr, g_pr, g_out = (np.random.default_rng(s) for s in child_seeds(ss, 3))
    times = _unit_arrivals(spec, g_arr, rate * duration) / rate
    n = times.size
    label = "poisson" if spec.process == "poisson" else f"gamma cv={spec.cv:g}"
    return Workload(times, prompt.draw(g_pr, n), output.draw(g_out, n), f"{label} {rate:g} req/s", float(rate))
