"""Import a torch.profiler Chrome trace: GPU kernels linked to their launches and aten ops.

Linking: each GPU event (`kernel`, `gpu_memcpy`, `gpu_memset`) carries `args.correlation`, the id
of the CUDA runtime/driver call that launched it (`cuda_runtime`/`cuda_driver`, e.g.
cudaLaunchKernel). The launch call sits inside the aten ops (`cpu_op`) that issued it on the same
thread: time nesting gives the chain from the top-level op (`top_op`) down to the innermost one.
Kernels are ordered by launch time; kernels of one graph launch share a correlation id.

Host time of a kernel = time from the previous launch's return (or the step's start, for a step's
first kernel) to this launch's return, minus time the host spent blocked in synchronising calls
(cuda*Synchronize, blocking cudaMemcpy) in between. Host tail = step end minus last launch return
(minus syncs). Step boundaries come from `trace_steps`; the workload keeps one representative step
(see `representative`).
"""

from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass, field

from simulator.model.kernels import OpClass
from simulator.traces.classify import classify
from simulator.traces.gcpause import no_gc
from simulator.traces.host import annotate
from simulator.traces.read import GPU_CATS, LAUNCH_CATS, Event, RawTrace, TraceError
from simulator.traces.steps import StepWindow, find_steps

GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")
_SYNC_WORDS = ("synchronize",)


def is_sync(name: str) -> bool:
    n = name.lower()
    return any(w in n for w in _SYNC_WORDS) or n in ("cudamemcpy", "cumemcpy", "cumemcpydtoh_v2", "cumemcpyhtod_v2")


@dataclass
class TracedKernel:
    name: str
    cat: str
    ts: float  # GPU start, µs
    dur: float  # GPU duration, µs
    stream: object
    corr: int | None
    launch: Event | None = None  # the runtime/driver call
    chain: list[Event] = field(default_factory=list)  # cpu ops, outermost first
    op_class: OpClass = OpClass.ELEMENTWISE
    graph_pos: int = 0  # index within its graph launch (0: first or not a graph)
    host_us: float = 0.0
    path: str | None = None  # launch path charged under the calibrated host policy (trace_host)
    host_ops: int = 0  # host-only top-level aten ops since the previous launch
    gap_us: float = 0.0  # interpreter time since the previous launch, outside every top-level op

    @property
    def submit(self) -> float:
        return self.launch.end if self.launch is not None else self.ts

    @property
    def top_op(self) -> str:
        return self.chain[0].name if self.chain else (self.launch.name if self.launch else "")

    @property
    def top_start(self) -> float:
        return self.chain[0].ts if self.chain else (self.launch.ts if self.launch else self.ts)

    @property
    def top_end(self) -> float:
        return self.chain[0].end if self.chain else self.submit

    def shape_source(self) -> tuple[str, list, list] | None:
        """(aten op, Input Dims, Input type) of the op whose shapes describe this kernel, if recorded."""
        def dims(e):
            d = e.args.get("Input Dims", e.args.get("Input dims"))
            return d if isinstance(d, list) and any(isinstance(x, list) and x for x in d) else None

        order = list(reversed(self.chain))
        if self.op_class is OpClass.ATTENTION:
            order = [e for e in self.chain if "scaled_dot_product" in e.name] + order
        elif self.op_class is OpClass.EMBEDDING:
            order = [e for e in self.chain if e.name == "aten::embedding"] + order
        elif self.op_class is OpClass.GEMM:
            order = [e for e in order if e.name in GEMM_OPS] + order
        for e in order:
            d = dims(e)
            if d is not None:
                t = e.args.get("Input type", e.args.get("Input types", []))
                return e.name, d, t if isinstance(t, list) else []
        for e in order:  # shapes recorded, every input a scalar (0-dim index arithmetic): size-independent
            d = e.args.get("Input Dims", e.args.get("Input dims"))
            if isinstance(d, list) and d and all(isinstance(x, list) and not x for x in d):
                t = e.args.get("Input type", e.args.get("Input types", []))
                return e.name, d, t if isinstance(t, list) else []
        return None


def _nest(cpu_ops: list[Event], launches: list[Event]) -> dict[int, list[Event]]:
    """For each launch (by id()), the cpu ops enclosing it on its thread, outermost first."""
    out: dict[int, list[Event]] = {}
    by_tid: dict[tuple, list[tuple]] = {}
    # (ts, kind, -dur) orders a thread's items; the running index keeps ties in input order (a stable sort by that
    # key, without a key function) and never lets the sort compare two events; the end rides along
    i = 0
    for kind, evs in ((0, cpu_ops), (1, launches)):
        for e in evs:
            ts, dur = e.ts, e.dur
            item = (ts, kind, -dur if kind == 0 else 0.0, i, ts + dur, e)
            i += 1
            items = by_tid.get((e.pid, e.tid))
            if items is None:
                by_tid[(e.pid, e.tid)] = [item]
            else:
                items.append(item)
    eps = 1e-3
    for items in by_tid.values():
        items.sort()
        stack: list[tuple[float, Event]] = []  # (end, op)
        push, pop = stack.append, stack.pop
        for ts, kind, _, _, end, e in items:
            lim = ts - eps
            while stack and stack[-1][0] < lim:
                pop()
            if kind == 0:
                push((end, e))
            else:
                lo = end - eps
                out[id(e)] = [s for se, s in stack if se >= lo]
    return out


def _split(events: list[Event]) -> tuple[list[Event], list[Event], list[Event], list[Event], list[Event]]:
    """In trace order: every cpu op, the cpu ops that are not `ProfilerStep#` markers, the step-marker
    candidates (ProfilerStep / user annotations), the launch calls, the GPU events."""
    cpu_all: list[Event] = []
    cpu_ops: list[Event] = []
    markers: list[Event] = []
    launches: list[Event] = []
    gpus: list[Event] = []
    for e in events:
        cat = e.cat
        step = e.name.startswith("ProfilerStep#")
        if step or cat == "user_annotation":
            markers.append(e)
        if cat == "cpu_op":
            cpu_all.append(e)
            if not step:
                cpu_ops.append(e)
        elif cat in LAUNCH_CATS:
            launches.append(e)
        elif cat in GPU_CATS:
            gpus.append(e)
    return cpu_all, cpu_ops, markers, launches, gpus


def link(trace: RawTrace) -> tuple[list[TracedKernel], list[Event], list[tuple[float, float]]]:
    """Ordered kernels, step-marker candidates (ProfilerStep / user annotations), sync intervals."""
    with no_gc():
        return _link(trace.path, _split(trace.events))


def _link(where: str, parts) -> tuple[list[TracedKernel], list[Event], list[tuple[float, float]]]:
    _, cpu_ops, markers, launches, gpus = parts
    syncs = sorted((e.ts, e.end) for e in launches if is_sync(e.name))
    linked = [e for e in launches if e.correlation is not None]
    by_corr = {e.correlation: e for e in linked}
    chains = _nest(cpu_ops, linked)
    kernels = []
    seen: dict[tuple, OpClass] = {}  # a step repeats the same few hundred (kernel, ops) pairs: classify each once
    for g in gpus:
        args = g.args
        corr = g.correlation
        launch = by_corr.get(corr) if corr is not None else None
        chain = chains.get(id(launch), []) if launch is not None else []
        k = TracedKernel(g.name, g.cat, g.ts, g.dur, args.get("stream", g.tid), corr, launch, chain)
        key = (g.name, g.cat, tuple([e.name for e in chain]), args.get("launchsim.op_class"))
        c = seen.get(key)
        if c is None:
            c = seen[key] = classify(*key)
        k.op_class = c
        kernels.append(k)
    kernels.sort(key=lambda k: (k.submit, k.ts))
    last_corr = None
    pos = 0
    for k in kernels:
        pos = pos + 1 if (k.corr is not None and k.corr == last_corr and k.launch is not None) else 0
        k.graph_pos, last_corr = pos, k.corr
    if not kernels:
        raise TraceError(f"{where}: trace has no CUDA kernels")
    check_order(kernels, where)
    return kernels, markers, syncs


ORDER_EPS_US = 1.0  # clock skew allowed between the host and the GPU timelines


def check_order(kernels: list[TracedKernel], where: str) -> None:
    """Kernels in time order: none starts on the GPU before its launch call started, and on one stream kernels
    start in launch order (a stream runs its work first in, first out). One TraceError line otherwise."""
    last: dict = {}
    for k in kernels:
        if k.launch is not None and k.ts < k.launch.ts - ORDER_EPS_US:
            raise TraceError(f"{where}: kernels out of time order: '{k.name[:60]}' (correlation {k.corr}) starts on "
                             f"the GPU at {k.ts:.3f} µs, before its launch call at {k.launch.ts:.3f} µs")
        prev = last.get(k.stream)
        if prev is not None and k.launch is not None and prev.launch is not None and k.ts < prev.ts - ORDER_EPS_US:
            raise TraceError(f"{where}: kernels out of time order on stream {k.stream}: '{k.name[:60]}' (correlation "
                             f"{k.corr}) was launched after '{prev.name[:60]}' (correlation {prev.corr}) but starts "
                             f"{prev.ts - k.ts:.3f} µs before it")
        last[k.stream] = k


class _Syncs:
    def __init__(self, spans: list[tuple[float, float]]):
        self.spans = spans
        self.starts = [s for s, _ in spans]

    def within(self, a: float, b: float) -> float:
        """Seconds (µs) of sync calls overlapping (a, b]."""
        tot = 0.0
        spans = self.spans
        if not spans:
            return tot
        for j in range(max(bisect.bisect_left(self.starts, a) - 1, 0), len(spans)):  # no slice copy per call
            s, e = spans[j]
            if s >= b:
                break
            x = (b if b < e else e) - (a if a > s else s)  # max(0.0, min(e, b) - max(s, a)), without the calls
            if x > 0.0:
                tot += x
        return tot


@dataclass
class ImportedTrace:
    path: str
    kernels: list[TracedKernel]
    steps: list[StepWindow]
    method: str
    step_rows: list[dict]
    tails_us: list[float]
    outside: int  # kernels outside every step
    meta: dict
    host_tails: list[tuple[int, float]] = field(default_factory=list)  # per step: host-only ops, gap µs


def host_times(kernels: list[TracedKernel], steps: list[StepWindow], syncs: _Syncs) -> list[float]:
    """Fill each in-step kernel's host_us; return each step's host tail (µs)."""
    tails = []
    for st in steps:
        prev = st.host_start
        for k in kernels[st.i0:st.i1]:
            if k.launch is None or k.graph_pos > 0:
                k.host_us = 0.0
                continue
            sub = k.submit
            k.host_us = max(0.0, sub - prev - syncs.within(prev, sub))
            prev = sub
        end = max(st.host_end, prev)
        tails.append(max(0.0, end - prev - syncs.within(prev, end)))
    return tails


def step_rows(kernels, steps, tails, syncs: _Syncs) -> list[dict]:
    rows = []
    for s, (st, tail) in enumerate(zip(steps, tails)):
        ks = kernels[st.i0:st.i1]
        gpu_end = max(k.ts + k.dur for k in ks)
        wall = max(st.host_end, gpu_end, max(k.submit for k in ks)) - st.host_start
        rows.append({
            "step": s, "label": st.label, "kernels": len(ks),
            "host_ms": (sum(k.host_us for k in ks) + tail) / 1e3,
            "gpu_ms": sum(k.dur for k in ks) / 1e3,
            "step_ms": wall / 1e3,
            "sync_ms": syncs.within(st.host_start, st.host_start + wall) / 1e3,
        })
    return rows


def import_trace(trace: RawTrace, steps: str | int = "auto") -> ImportedTrace:
    with no_gc():
        return _import_trace(trace, steps)


def _import_trace(trace: RawTrace, steps: str | int) -> ImportedTrace:
    split = _split(trace.events)
    kernels, markers, sync_spans = _link(trace.path, split)
    syncs = _Syncs(sync_spans)
    windows, method = find_steps(kernels, markers, steps, trace.path, sync_spans)
    tails = host_times(kernels, windows, syncs)
    rows = step_rows(kernels, windows, tails, syncs)
    parts = annotate(kernels, windows, split[0], syncs)
    inside = sum(w.i1 - w.i0 for w in windows)
    return ImportedTrace(trace.path, kernels, windows, method, rows, tails, len(kernels) - inside, trace.meta, parts)


def representative(imp: ImportedTrace) -> tuple[list[dict], float, str, tuple[int, float]]:
    """One step's kernels as plain dicts (name, class, gpu_us, host_us, ...), its host tail, how the
    step was built, and its tail's (host-only ops, interpreter µs).

    When every step has the same kernel-name sequence, each kernel's GPU and host time is the
    median over the steps at that position (robust to one slow warm-up step). Otherwise the step
    with the median wall time among the steps with the most common kernel count is used as is.
    """
    ks, ws = imp.kernels, imp.steps
    seqs = [tuple(k.name for k in ks[w.i0:w.i1]) for w in ws]
    if len(set(seqs)) == 1:
        n = len(seqs[0])
        out = []
        for j in range(n):
            col = [ks[w.i0 + j] for w in ws]
            d = _kernel_dict(col[0], statistics.median(k.dur for k in col),
                             statistics.median(k.host_us for k in col))
            _host_parts(d, round(statistics.median(k.host_ops for k in col)),
                        statistics.median(k.gap_us for k in col))
            out.append(d)
        how = f"per-kernel median over {len(ws)} identical step(s)"
        tails = imp.host_tails or [(0, 0.0)]
        tail = (round(statistics.median(t[0] for t in tails)), float(statistics.median(t[1] for t in tails)))
        return out, float(statistics.median(imp.tails_us)), how, tail
    counts = [len(s) for s in seqs]
    mode = max(set(counts), key=counts.count)
    cand = sorted((r["step_ms"], i) for i, r in enumerate(imp.step_rows) if counts[i] == mode)
    i = cand[(len(cand) - 1) // 2][1]
    w = ws[i]
    out = [_host_parts(_kernel_dict(k, k.dur, k.host_us), k.host_ops, k.gap_us) for k in ks[w.i0:w.i1]]
    tail = imp.host_tails[i] if imp.host_tails else (0, 0.0)
    return (out, imp.tails_us[i], f"step {i} (median wall time of {len(cand)} steps with {mode} kernels; steps differ)",
            tail)


def _host_parts(d: dict, host_ops: int, gap_us: float) -> dict:
    if host_ops:
        d["host_ops"] = int(host_ops)
    if gap_us > 0:
        d["gap_us"] = round(float(gap_us), 4)
    return d


def _kernel_dict(k: TracedKernel, gpu_us: float, host_us: float) -> dict:
    d = {"name": k.name, "op_class": k.op_class.value, "gpu_us": round(float(gpu_us), 4),
         "host_us": round(float(host_us), 4), "op": k.top_op}
    if k.cat != "kernel":
        d["event"] = k.cat
    if k.graph_pos:
        d["graph_node"] = k.graph_pos
    if k.path is not None:
        d["path"] = k.path
    src = k.shape_source()
    if src is not None:
        d["shape_op"], d["dims"], d["dtypes"] = src[0], src[1], src[2]
    return d


def infer_batch(kernels: list[TracedKernel]) -> tuple[int | None, int | None, int | None]:
    """(batch, tokens per sequence, context) from recorded shapes: the embedding op's index tensor
    [batch, q_len] and attention's key tensor [batch, kv_heads, ctx, head_dim]; None where unknown."""
    batch = q_len = ctx = None
    for k in kernels:
        for e in k.chain:
            dims = e.args.get("Input Dims", e.args.get("Input dims"))
            if not isinstance(dims, list) or len(dims) < 2 or not isinstance(dims[1], list):
                continue
            if batch is None and e.name == "aten::embedding" and len(dims[1]) == 2:
                batch, q_len = int(dims[1][0]), int(dims[1][1])
            if ctx is None and e.name == "aten::scaled_dot_product_attention" and len(dims[1]) == 4:
                ctx = int(dims[1][2])
        if batch is not None and ctx is not None:
            break
    return batch, q_len, ctx


def op_histogram(imp: ImportedTrace) -> list[dict]:
    """Per aten op, how many top-level calls launched GPU work in a step and how many kernels they launched
    (the seed's `Counter(compute).most_common()`, but counted from the kernels the trace shows rather than by
    leaving out view ops): per name, the median over the steps; most calls first, then by name. A kernel with
    no CPU op around its launch counts under its launch call's name."""
    import statistics
    from collections import Counter

    per_step = []
    for w in imp.steps:
        calls, kernels = Counter(), Counter()
        seen = set()
        for k in imp.kernels[w.i0:w.i1]:
            top = k.chain[0] if k.chain else k.launch
            name = k.top_op or "(no CPU op)"
            kernels[name] += 1
            key = id(top) if top is not None else ("kernel", id(k))
            if key not in seen:
                seen.add(key)
                calls[name] += 1
        per_step.append((calls, kernels))
    names = {n for c, _ in per_step for n in c}
    rows = [{"op": n, "calls": statistics.median(c.get(n, 0) for c, _ in per_step),
             "kernels": statistics.median(k.get(n, 0) for _, k in per_step)} for n in names]
    for r in rows:
        for f in ("calls", "kernels"):
            r[f] = int(r[f]) if float(r[f]).is_integer() else r[f]
    return sorted(rows, key=lambda r: (-r["calls"], -r["kernels"], r["op"]))
