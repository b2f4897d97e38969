"""One GPU replica serving a request stream under continuous batching: a discrete-event loop.

The replica is one process, so it needs no event queue: a plain loop over its engine steps (SimPy's one
process gave the same floats, `now + delay`, at ~20% more cost; the engine's step model, simulator/engine/des.py,
is the SimPy one). It loops: hand the scheduler every request that has arrived by now (arrivals are a
pre-generated sorted array, each logged at its own arrival time), ask the scheduler for the next step, time it
with the memoised `StepTimer`, advance the clock by it (one iteration per step, or per run of identical
decode-only steps that nothing could change - see `Scheduler.extend`; `merge_steps=False` runs them one
iteration each and gives the same figures), then apply the step (tokens, first tokens, finishes). With nothing
to run it jumps to the next arrival.
Without speculative decoding the loop runs inlined (serving/fastloop.py: the same arithmetic on local variables,
the same figures bit for bit); `_loop_reference` below is the loop through the scheduler's methods. Before it,
serving/plainloop.py's kernel tries the run: where no limit can bind it keeps only what decides the trajectory and
computes the KV blocks and the collector's sums from its log with numpy afterwards (the same figures bit for bit);
the first time a limit could bind it gives up, unchanged, and the inlined loop runs.
Arrivals stop at `duration`; the run continues until every request has left or `drain_s` has passed after
`duration` (what is left is reported as unfinished). Metrics: see `metrics`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from simulator.engine.graph_memory import DEFAULT_WORKSPACE_BYTES
from simulator.model.models import ModelSpec
from simulator.model.profile import Profile
from .arrivals import Workload
from .fastloop import loop_fast
from .kv import BLOCK_SIZE, KVCapacity, kv_capacity
from .metrics import Collector, finite, summarize
from .plainloop import loop_plain
from .scheduler import Limits, Scheduler, SpecDecode
from .steptime import CTX_BUCKET, StepTimer


@dataclass(frozen=True)
class ServeConfig:
    model: ModelSpec
    profile: Profile
    fusion: str = "fused"
    graph: str = "full_and_piecewise"
    sizes: tuple[int, ...] = (1,)
    layout_label: str = "vllm"
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    max_model_len: int | None = None
    gpu_util: float = 0.9
    workspace_bytes: float = DEFAULT_WORKSPACE_BYTES
    kv_blocks: int | None = None  # override the memory model
    block_size: int = BLOCK_SIZE
    ctx_bucket: int = CTX_BUCKET
    warmup_frac: float = 0.1
    drain_s: float | None = None  # default: duration
    merge_steps: bool = True
    scheduling: str = "none"  # none | sync | async: the engine's host work around each forward (steploop)
    sampling: str = "greedy"
    attention_backend: str = "flashinfer"  # routing.route's backend and prefill sizes
    prefill_sizes: tuple[int, ...] | None = None
    step: object = None  # the configuration's StepSetup from the config layer (impl, cache, ...); None: from the above

    @property
    def spec(self):
        """The speculative-decoding setup (engine/setup.py SpecSetup) of the step, None for plain decode."""
        return getattr(self.step, "spec", None)

    def step_setup(self):
        """This configuration's `StepSetup` (engine/setup.py), which the step timer and KV model take whole."""
        from simulator.engine.setup import Capture, StepSetup

        if self.step is not None:
            return self.step
        graphed = self.graph != "none"
        cap = Capture(self.graph, tuple(self.sizes) if graphed else (),
                      tuple(self.prefill_sizes) if self.prefill_sizes is not None and graphed else None,
                      self.attention_backend)
        return StepSetup.of(self.model, self.profile, self.fusion, cap)

    def limits(self) -> Limits:
        mml = self.max_model_len or self.model.max_position_embeddings
        return Limits(self.max_num_seqs, self.max_num_batched_tokens, self.chunked_prefill, mml)

    def label(self) -> dict:
        d = {"model": self.model.name, "profile": self.profile.name, "fusion": self.fusion, "graph": self.graph,
             "layout": self.layout_label}
        if self.scheduling != "none":
            d["scheduling"] = self.scheduling
        if self.attention_backend != "flashinfer":  # defaults stay out: outputs unchanged
            d["attention_backend"] = self.attention_backend
        if self.prefill_sizes is not None and self.graph != "none":
            d["prefill_sizes"] = list(self.prefill_sizes)
        sp = self.spec
        if sp is not None:
            d.update(spec_tokens=sp.k, draft=sp.draft, acceptance=list(sp.acceptance.probs), spec_engine=sp.engine)
        return d


@dataclass
class Prepared:
    """What does not depend on the arrival rate: the step-time memo and the KV capacity (reused across runs)."""

    timer: StepTimer
    kv: KVCapacity


def prepare(cfg: ServeConfig) -> Prepared:
    timer = StepTimer.of(cfg.step_setup(), cfg.ctx_bucket, scheduling=cfg.scheduling, sampling=cfg.sampling)
    draft = None
    if cfg.spec is not None:
        from simulator.model.spec import draft_for

        draft = draft_for(cfg.model, cfg.spec.draft)
    kv = kv_capacity(cfg.model, cfg.profile, cfg.fusion, cfg.graph, list(cfg.sizes), cfg.gpu_util,
                     cfg.workspace_bytes, cfg.block_size, cfg.kv_blocks, prefill_sizes=cfg.prefill_sizes, draft=draft)
    return Prepared(timer, kv)


@dataclass
class ServeResult:
    metrics: dict
    batch_log: list[dict]
    kv: dict
    simulated_s: float
    wall_s: float
    step_evals: int
    events: int
    config: dict = field(default_factory=dict)
    samples: dict = field(default_factory=dict)  # per-request TTFT (s) and TPOT (ms) of the window

    def as_dict(self) -> dict:
        return {**self.config, **self.metrics, **self.kv, "simulated_s": self.simulated_s, "wall_s": self.wall_s,
                "step_evals": self.step_evals, "events": self.events}


def simulate_serving(cfg: ServeConfig, wl: Workload, duration: float, prep: Prepared | None = None,
                     spec_seed: np.random.SeedSequence | int | None = None, *, reference: bool = False,
                     kernel: bool = True) -> ServeResult:
    """Serve `wl` (arrivals in [0, duration)) on one replica; return its metrics. `spec_seed`: the stream the
    speculative steps' accepted tokens are drawn from (the replication's, serving/setup.py; None: seed 0).
    `reference`: run the plain loop (`_loop_reference`) instead of the inlined one (fastloop.py, used without
    speculative decoding); both give the same figures, bit for bit (tests/serving/test_serving_fastloop.py).
    `kernel`: try plainloop.loop_plain first (where no limit binds; the same figures again,
    tests/serving/test_serving_plainloop.py); False runs the inlined loop alone."""
    t_wall = time.perf_counter()
    prep = prep or prepare(cfg)
    timer, kv = prep.timer, prep.kv
    evals0 = timer.misses
    times = wl.times.tolist()
    sp = cfg.spec
    spec = None
    if sp is not None:
        spec = SpecDecode(sp.k, sp.acceptance, np.random.default_rng(0 if spec_seed is None else spec_seed))
    sched = Scheduler(cfg.limits(), kv.blocks, kv.block_size, wl.prompt.tolist(), wl.output.tolist(), spec)
    w0, w1 = cfg.warmup_frac * duration, duration
    stop = duration + (duration if cfg.drain_s is None else cfg.drain_s)
    col = Collector(w0, w1, kv.blocks)
    times.append(math.inf)  # sentinel
    # time series for the report (running batch, KV-cache use, queue): about 500 evenly spaced samples
    series = {"t": [], "running": [], "kv_used_frac": [], "queue": []}
    if spec is not None or reference:
        end, rejected, events = _loop_reference(cfg, sched, col, timer, times, spec, w0, w1, stop, series, kv.blocks)
    else:
        out = loop_plain(cfg, sched, col, timer, times, w0, w1, stop, series, kv.blocks, wl.prompt, wl.output) \
            if kernel else None
        if out is None:
            out = loop_fast(cfg, sched, col, timer, times, spec, w0, w1, stop, series, kv.blocks, wl.prompt,
                            wl.output)
        end, rejected, events = out
    col.track(max(end, w1), sched.in_system)
    samples, metrics = summarize(col, sched, np.asarray(wl.times, dtype=float), end, rejected)
    metrics["offered_rate"] = wl.rate
    if spec is not None:
        from simulator.model.spec import closed_form

        acc = sp.acceptance
        metrics["spec_tokens"] = sp.k
        metrics["acceptance"] = list(acc.probs)
        metrics["tokens_per_step_expected"] = acc.tokens_per_step
        metrics["tokens_per_step"] = sched.spec_emitted / sched.spec_steps if sched.spec_steps else None
        metrics["spec_verify_steps"] = sched.spec_steps
        if len(set(acc.probs)) == 1:
            metrics["tokens_per_step_closed_form"] = closed_form(acc.probs[0], sp.k)
    samples["series"] = series
    return ServeResult(finite(metrics), col.batch_log(), kv.as_dict(), float(end), time.perf_counter() - t_wall,
                       timer.misses - evals0, events, cfg.label(), samples)


def _loop_reference(cfg: ServeConfig, sched: Scheduler, col: Collector, timer, times: list, spec, w0: float,
                    w1: float, stop: float, series: dict, kv_blocks: int) -> tuple[float, int, int]:
    """The event loop through the scheduler's and collector's methods (any configuration); returns (the clock at
    the end, requests rejected, events)."""
    rejected = 0
    events = 0
    every = stop / 500.0
    next_sample = 0.0
    arrive, track = sched.arrive, col.track
    cb, merge, inf, ceil = cfg.ctx_bucket, cfg.merge_steps, math.inf, math.ceil
    bounds = [w0, w1, stop, inf]
    decode_time, mixed_time = timer.decode, timer.mixed
    schedule, extend, complete, on_steps = sched.schedule, sched.extend, sched.complete, col.on_steps
    admission_open = sched.admission_open
    now = 0.0
    nxt = 0  # next arrival not yet handed to the scheduler
    while True:
        while times[nxt] <= now:  # hand every request that has arrived by now to the scheduler, in order
            if arrive(nxt):
                track(times[nxt], sched.in_system)
            else:
                rejected += 1
            nxt += 1
        plan = schedule()
        if plan is None:
            ta = times[nxt]
            if ta == inf or ta >= stop:
                break
            now = now + (ta - now)  # idle until the next arrival (the float a timer of ta - now gives)
            continue
        k = 1
        if plan.chunks:
            cost = mixed_time(plan.decode, len(plan.chunks), plan.prefill_tokens, plan.ctx)
            if spec is not None and plan.decode:  # the decode rows verify and draft too (steptime.spec_extra)
                cost = cost._replace(step_s=cost.step_s + timer.spec_extra(
                    plan.decode, -(-plan.decode_ctx_sum // plan.decode)))
        else:
            cost = decode_time(plan.decode, -(-plan.decode_ctx_sum // plan.decode))
            if merge:
                dt = cost.step_s
                while bounds[0] <= now:
                    bounds.pop(0)
                cap = ceil((bounds[0] - now) / dt) if bounds[0] != inf else 1 << 62
                ta = times[nxt]
                if ta != inf and admission_open():
                    ka = ceil((ta - now) / dt)
                    if ka < cap:
                        cap = ka
                if cap > 1:
                    k = extend(plan, cap, cb)
        events += 1
        start = now
        now = now + k * cost.step_s
        while times[nxt] <= now:
            if arrive(nxt):
                track(times[nxt], sched.in_system)
            else:
                rejected += 1
            nxt += 1
        tokens, done = complete(plan, now)
        if w0 <= start < w1:
            on_steps(k, cost, plan, tokens)
        if done:
            track(now, sched.in_system)
        if now >= next_sample:
            series["t"].append(now)
            series["running"].append(plan.decode + len(plan.chunks))
            series["kv_used_frac"].append(sched.used / max(1, kv_blocks))
            series["queue"].append(len(sched.waiting))
            next_sample = now + every
        if now >= stop:
            break
    return now, rejected, events
