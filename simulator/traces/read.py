"""Reading a Chrome trace file (as `torch.profiler`'s `export_chrome_trace` writes it) into events.

Accepts plain JSON or gzip (detected from the first two bytes, not the suffix), either the object
form `{"traceEvents": [...]}` or a bare list of events. Every problem a user can cause (missing
file, gzip damage, truncated or malformed JSON, not a trace, no GPU activity) becomes one
`TraceError` line naming the file. Only complete ("X") events are kept; metadata, flow and
instant events are dropped here.
"""

from __future__ import annotations

import gzip
import io
import math
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from simulator.common.errors import UserError

CPU_CATS = ("cpu_op", "user_annotation")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


class TraceError(UserError):
    """A trace file that cannot be read or holds nothing to import."""


@dataclass(frozen=True)
class Event:
    """One complete event; times in µs as the trace gives them."""

    name: str
    cat: str
    ts: float
    dur: float
    pid: object
    tid: object
    args: dict = field(default_factory=dict, compare=False, hash=False)

    @property
    def end(self) -> float:
        return self.ts + self.dur

    @property
    def correlation(self) -> int | None:
        c = self.args.get("correlation")
        return c if isinstance(c, int) else None


@dataclass
class RawTrace:
    path: str
    events: list[Event]
    meta: dict  # top-level keys other than traceEvents (deviceProperties, schemaVersion, ...)

    def by_cat(self, cats: tuple[str, ...]) -> list[Event]:
        return [e for e in self.events if e.cat in cats]


def _read_bytes(p: Path) -> bytes:
    from simulator.common.jsonfile import MAX_JSON_BYTES, read_bytes

    raw = read_bytes(p, "trace", TraceError)
    if raw[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
                raw = f.read(MAX_JSON_BYTES + 1)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(f"{p}: damaged gzip file ({str(e) or e.__class__.__name__})") from None
        if len(raw) > MAX_JSON_BYTES:
            raise TraceError(f"{p}: decompresses to more than {MAX_JSON_BYTES:,} bytes; too large for a trace")
    elif p.suffix == ".gz":
        raise TraceError(f"{p}: named .gz but is not gzip data")
    return raw


def _event(d: dict) -> Event | None:
    if d.get("ph") != "X":
        return None
    try:
        ts = float(d["ts"])
        dur = float(d.get("dur", 0.0))
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    args = d.get("args") if isinstance(d.get("args"), dict) else {}
    return Event(str(d.get("name", "")), str(d.get("cat", "")), ts, max(dur, 0.0), d.get("pid"), d.get("tid"), args)


def read_trace(path: str | Path) -> RawTrace:
    """Parse a Chrome trace; raise `TraceError` (one line, naming the file) on any user-side problem."""
    from simulator.traces.gcpause import no_gc

    with no_gc():
        return _read_trace(Path(path))


def _read_trace(p: Path) -> RawTrace:
    raw = _read_bytes(p)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise TraceError(f"{p}: not a Chrome trace (binary data, not JSON text)") from None
    if not text.strip():
        raise TraceError(f"{p}: empty file, not a Chrome trace")
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise TraceError(f"{p}: JSON nested too deep, not a Chrome trace") from None
    except _Constant as e:
        raise TraceError(f"{p}: not valid JSON ({e} is not a JSON number)") from None
    except json.JSONDecodeError as e:
        if e.pos >= len(text.rstrip()) - 2 or e.msg.startswith("Unterminated string"):
            raise TraceError(f"{p}:{e.lineno}: truncated JSON (the file ends before the trace does)") from None
        raise TraceError(f"{p}:{e.lineno}: not valid JSON ({e.msg}, column {e.colno})") from None
    if isinstance(data, dict):
        evs = data.get("traceEvents")
        if not isinstance(evs, list):
            raise TraceError(f"{p}: not a Chrome trace (a JSON object without a 'traceEvents' list)")
        meta = {k: v for k, v in data.items() if k != "traceEvents"}
    elif isinstance(data, list):
        evs, meta = data, {}
    else:
        raise TraceError(f"{p}: not a Chrome trace (top-level JSON is a {type(data).__name__})")
    events = _events(evs, p, text, isinstance(data, dict))
    if evs and not any(isinstance(d, dict) and "ph" in d for d in evs):
        raise TraceError(f"{p}: not a Chrome trace (events have no 'ph' field)")
    if not any(e.cat in GPU_CATS for e in events):
        cpu = sum(e.cat in CPU_CATS for e in events)
        raise TraceError(
            f"{p}: trace has no CUDA kernels ({cpu} CPU ops, 0 GPU events): record it with "
            "ProfilerActivity.CUDA on a GPU"
        )
    if not any(e.cat in GPU_CATS and e.correlation is not None for e in events):
        gpu = sum(e.cat in GPU_CATS for e in events)
        raise TraceError(f"{p}: none of the trace's {gpu} GPU events has a correlation id (args.correlation): "
                         "kernels cannot be linked to their launches, so no host time can be read")
    if not any(e.cat in LAUNCH_CATS for e in events):
        gpu = sum(e.cat in GPU_CATS for e in events)
        raise TraceError(
            f"{p}: trace has {gpu} GPU events but no CUDA launch calls (cuda_runtime / cuda_driver): record it "
            "with ProfilerActivity.CPU as well as ProfilerActivity.CUDA"
        )
    return RawTrace(str(p), events, meta)


class _Constant(ValueError):
    pass


def _no_constant(name: str):
    raise _Constant(name)


MAX_TS_US = 1e18  # timestamps: µs since some epoch (torch.profiler: ~1e15-1e16); beyond this is not a clock
TIMED_CATS = GPU_CATS + LAUNCH_CATS  # events whose duration the import uses (GPU time, launch return)


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 40 else f"{r[:20]}...({len(r)} characters)"


def _events(evs: list, p: Path, text: str, wrapped: bool) -> list[Event]:
    """The complete events of `evs`, in order, each checked by `_check_event`'s rules; the first bad one raises.

    One pass: an event whose timestamp and duration are plain floats within bounds and whose name and category
    are strings (what torch.profiler writes) is checked and built inline; any other is checked by
    `_check_event` and built by `_event` once every event has passed (as when all were checked first), so
    both paths accept, refuse and build exactly the same events."""
    from simulator.common.limits import MAX_US

    out: list = []  # Events, and the dicts of events that `_event` builds after the pass
    append = out.append
    late = False
    new = object.__new__
    set_dict = object.__setattr__  # Event is frozen: one __dict__ write instead of __init__'s seven field writes
    lo_ts, hi_ts, hi_dur = -MAX_TS_US, MAX_TS_US, MAX_US
    timed_cats = TIMED_CATS
    for i, d in enumerate(evs):
        if type(d) is dict:
            get = d.get
            if get("ph") != "X":
                continue
            ts, dur = get("ts"), get("dur")
            if type(ts) is float and type(dur) is float and lo_ts <= ts <= hi_ts and 0.0 <= dur <= hi_dur:
                cat, name, args = get("cat", ""), get("name", ""), get("args")
                if type(args) is not dict:
                    args = args if isinstance(args, dict) else None
                if cat in timed_cats and args is not None:
                    c = args.get("correlation")
                    if c is not None and type(c) is not int:
                        _check_event(i, d, p, text, wrapped)  # the full rules: raises unless an int subclass
                if type(name) is str and type(cat) is str:
                    ev = new(Event)
                    set_dict(ev, "__dict__", {"name": name, "cat": cat, "ts": ts, "dur": dur, "pid": get("pid"),
                                              "tid": get("tid"), "args": {} if args is None else args})
                    append(ev)
                else:
                    append(d)
                    late = True
                continue
        elif not isinstance(d, dict) or d.get("ph") != "X":  # a dict subclass is never from json.loads
            continue
        _check_event(i, d, p, text, wrapped)
        append(d)
        late = True
    if not late:
        return out
    return [e for e in (x if x.__class__ is Event else _event(x) for x in out) if e is not None]


def _check_event(i: int, d: dict, p: Path, text: str, wrapped: bool) -> None:
    """The rules for one complete event `d` (index `i` of the list), raising on its first problem: a finite
    timestamp and a finite, non-negative duration, within bounds (MAX_TS_US, MAX_US); GPU events and CUDA launch
    calls must have a duration (their GPU time and launch return come from it) and an integer correlation id (it
    links a kernel to its launch)."""
    from simulator.common.jsonfile import field_error
    from simulator.common.limits import MAX_US

    def fail(i, k, msg):
        loc = (("traceEvents",) if wrapped else ()) + (i, k)
        raise field_error(str(p), text, loc, msg, TraceError)

    timed = d.get("cat") in TIMED_CATS
    for k in ("ts", "dur"):
        v = d.get(k)
        if v is None and k == "dur":
            if timed:
                fail(i, k, f"missing: a {d.get('cat')} event needs its duration (event '{d.get('name', '')}')")
            continue
        try:
            x = float(v)
        except OverflowError:
            x = float("inf")
        except (TypeError, ValueError):
            if k == "ts":
                continue  # events without a usable timestamp are dropped, as before
            x = float("nan")
        cap = MAX_US if k == "dur" else MAX_TS_US
        if not math.isfinite(x) or (k == "dur" and x < 0) or abs(x) > cap:
            fail(i, k, f"must be a finite number{' >= 0' if k == 'dur' else ''} up to {cap:g} µs, got "
                       f"{_short(v)} (event '{d.get('name', '')}')")
    if timed:
        c = (d.get("args") or {}).get("correlation") if isinstance(d.get("args"), dict) else None
        if c is not None and (isinstance(c, bool) or not isinstance(c, int)):
            loc = ("args", "correlation")
            raise field_error(str(p), text, (("traceEvents",) if wrapped else ()) + (i, *loc),
                              f"must be an integer id, got {_short(c)} (event '{d.get('name', '')}')",
                              TraceError)
