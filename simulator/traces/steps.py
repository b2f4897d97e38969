"""Step boundaries in an imported trace, in this order of preference (`--steps auto`):

1. `ProfilerStep#N` markers (torch.profiler with a schedule and `prof.step()`): a step is the
   kernels whose launch returns inside the marker.
2. user annotations (`record_function`): the outermost annotation name that occurs at least twice
   without overlapping itself, trailing `#N`/digits ignored (e.g. "decode_step", "step#3").
3. repetition: the smallest period p such that the kernel-name sequence repeats with period p at
   least twice over all but < 2p of the kernels; the phase (where a step starts) is the one that
   gives the most whole steps, then the one most often preceded by a synchronising call, then the
   one with the largest preceding host gap (launch to launch) on average, since steps are usually
   separated by a sync or the serving loop. A single-step trace of a model with identical layers
   can be mistaken for one step per layer: use markers or `--steps 1`.
4. otherwise the whole trace is one step.
`--steps N` splits the kernels into N consecutive steps of equal kernel count instead.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

import numpy as np

from simulator.traces.read import Event, TraceError


@dataclass(frozen=True)
class StepWindow:
    i0: int  # first kernel index
    i1: int  # one past the last
    label: str
    host_start: float  # µs
    host_end: float


def _window(kernels, i0, i1, label, start=None, end=None) -> StepWindow:
    ks = kernels[i0:i1]
    s = ks[0].top_start if start is None else start
    e = max(max(k.top_end for k in ks), ks[-1].submit) if end is None else end
    return StepWindow(i0, i1, label, s, e)


def _from_markers(kernels, marks: list[Event]) -> list[StepWindow]:
    subs = [k.submit for k in kernels]
    out = []
    for m in sorted(marks, key=lambda e: e.ts):
        i0, i1 = bisect.bisect_left(subs, m.ts), bisect.bisect_right(subs, m.end)
        if out and i0 < out[-1].i1:
            continue  # overlapping marker (nested annotation of the same name)
        if i1 > i0:
            out.append(StepWindow(i0, i1, m.name, m.ts, m.end))
    return out


def _norm(name: str) -> str:
    return re.sub(r"[#_ -]*\d+$", "", name)


def _annotation_steps(kernels, anns: list[Event]) -> tuple[list[StepWindow], str] | None:
    groups: dict[str, list[Event]] = {}
    for e in anns:
        groups.setdefault(_norm(e.name), []).append(e)
    cands = {}
    for name, evs in groups.items():
        if len(evs) < 2:
            continue
        evs = sorted(evs, key=lambda e: e.ts)
        if any(b.ts < a.end for a, b in zip(evs, evs[1:])):
            continue
        w = _from_markers(kernels, evs)
        if len(w) >= 2:
            cands[name] = (evs, w)
    if not cands:
        return None

    def inside(a, b):  # every occurrence of a lies in some occurrence of b
        return all(any(y.ts <= x.ts and x.end <= y.end for y in cands[b][0]) for x in cands[a][0])

    outer = [a for a in cands if not any(b != a and inside(a, b) for b in cands)]
    best = max(outer, key=lambda a: sum(w.i1 - w.i0 for w in cands[a][1]))
    return cands[best][1], f"annotations '{best}'"


def _gaps(kernels) -> np.ndarray:
    s = np.array([k.submit for k in kernels])
    g = np.zeros(len(s))
    g[1:] = np.diff(s)
    return g


def find_period(names: list[str]) -> tuple[int, int, int] | None:
    """(start, period, span): the smallest period repeating >= 2 times over >= n - 2p kernels."""
    ids: dict[str, int] = {}
    seq = [ids.setdefault(n, len(ids)) for n in names]
    a = np.array(seq, dtype=np.int64)
    n = a.size
    for p in range(1, n // 2 + 1):
        # p is found only if the longest run of a[i] == a[i + p] has length L >= m = max(p, n - 3p) (reps >= 2
        # needs L + p >= 2p; reps * p >= n - 2p needs L + p >= n - 2p). Any m consecutive indices hold one that is
        # m - 1 modulo m: where none of those matches, p cannot be found and the full test below is skipped.
        m = max(p, n - 3 * p)
        if not any(seq[i] == seq[i + p] for i in range(m - 1, n - p, m)):
            continue
        eq = a[p:] == a[:-p]
        if not eq.any():
            continue
        d = np.diff(np.concatenate(([0], eq.astype(np.int8), [0])))
        starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
        j = int(np.argmax(ends - starts))
        span = int(ends[j] - starts[j]) + p
        reps = span // p
        if reps >= 2 and reps * p >= n - 2 * p:
            return int(starts[j]), p, span
    return None


def _synced(kernels, syncs: list[tuple[float, float]]) -> np.ndarray:
    """synced[i]: a synchronising call ran between kernel i-1's launch and kernel i's."""
    out = np.zeros(len(kernels), dtype=bool)
    if not syncs:
        return out
    starts = np.array([a for a, _ in syncs])
    sub = np.array([k.submit for k in kernels])
    n_before = np.searchsorted(starts, sub)  # syncs starting before each launch returns
    out[1:] = n_before[1:] > n_before[:-1]
    return out


def _repetition(kernels, syncs=()) -> tuple[list[StepWindow], str] | None:
    found = find_period([k.name for k in kernels])
    if found is None:
        return None
    s, p, span = found
    g = _gaps(kernels)
    sy = _synced(kernels, list(syncs))
    best, phase = None, 0
    # A score leads with its phase's whole steps, so only the phases with the most whole steps can win: the
    # others' scores (numpy means) are not worth computing. Same phase chosen, ties to the first as before.
    size = [len(range(s + ph, s + span, p)) - (s + ph <= 0) for ph in range(p)]
    most = max(((span - ph) // p for ph in range(p) if size[ph] > 0), default=None)
    for ph in range(p):
        whole = (s + span - (s + ph)) // p
        if size[ph] <= 0 or whole != most:
            continue
        idx = np.arange(s + ph, s + span, p)
        idx = idx[idx > 0]
        score = (whole, float(sy[idx].mean()), float(g[idx].mean()))
        if best is None or score > best:
            best, phase = score, ph
    out = []
    i = s + phase
    while i + p <= s + span:
        out.append(_window(kernels, i, i + p, f"step {len(out)}"))
        i += p
    if len(out) < 1:
        return None
    return out, f"repetition (period {p} kernels)"


def parse_steps(steps) -> int | str:
    """'auto', or the number of equal steps a `steps` value (text or an integer) asks for; a TraceError otherwise."""
    if steps == "auto":
        return "auto"
    if isinstance(steps, bool) or not isinstance(steps, (int, str)):
        raise TraceError(f"steps must be 'auto' or a positive integer, got {steps!r}")
    try:
        k = int(steps)
    except (TypeError, ValueError):
        raise TraceError(f"steps must be 'auto' or a positive integer, got {steps!r}") from None
    if k <= 0:
        raise TraceError(f"steps must be 'auto' or a positive integer, got {k}")
    return k


def find_steps(kernels, markers: list[Event], steps: str | int = "auto", where: str = "<trace>",
               syncs: list[tuple[float, float]] = ()):
    """Step windows over `kernels` (ordered by launch) and a phrase saying how they were found."""
    n = len(kernels)
    if steps != "auto":
        k = parse_steps(steps)
        if n % k:
            raise TraceError(f"{where}: {n} kernels do not split into {k} equal steps (use steps auto)")
        per = n // k
        return [_window(kernels, i * per, (i + 1) * per, f"step {i}") for i in range(k)], f"steps {k} (given)"
    prof = [m for m in markers if m.name.startswith("ProfilerStep#")]
    if prof:
        w = _from_markers(kernels, prof)
        if w:
            return w, "markers 'ProfilerStep#N'"
    ann = _annotation_steps(kernels, [m for m in markers if not m.name.startswith("ProfilerStep#")])
    if ann:
        return ann
    rep = _repetition(kernels, syncs)
    if rep:
        return rep
    return [_window(kernels, 0, n, "whole trace")], "single step (no markers, no repetition)"
