"""The SimPy model of one GPU replica serving a request stream under continuous batching.

Two processes share one `simpy.Environment`:
- `arrivals` walks the workload's arrival times, hands each request to the scheduler (or rejects it) and
  wakes the engine when it sits idle;
- `engine` loops: ask the scheduler for the next step, time it with the memoised `StepTimer`, hold the
  replica for that long (one SimPy event per step, or per run of identical decode-only steps that nothing
  could change - see `Scheduler.extend`; `merge_steps=False` runs them one event each, same figures), then
  apply the step (tokens, first tokens, finishes).
Arrivals stop at `duration`; the run continues until every request has left or `drain_s` has passed after
`duration` (what is left is reported as unfinished). Metrics: see `metrics`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import simpy

from ..costs import CostModel
from ..graph_memory import DEFAULT_WORKSPACE_BYTES
from ..models import ModelSpec
from ..profile import Profile
from .arrivals import Workload
from .kv import BLOCK_SIZE, KVCapacity, kv_capacity
from .metrics import Collector, finite, summarize
from .scheduler import Limits, Scheduler
from .steptime import CTX_BUCKET, PREFILL_BUCKET, StepTimer


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
    prefill_bucket: int = PREFILL_BUCKET
    warmup_frac: float = 0.1
    drain_s: float | None = None  # default: duration
    merge_steps: bool = True

    def limits(self) -> Limits:
        mml = self.max_model_len or self.model.max_position_embeddings
        return Limits(self.max_num_seqs, self.max_num_batched_tokens, self.chunked_prefill, mml)

    def label(self) -> dict:
        return {"model": self.model.name, "profile": self.profile.name, "fusion": self.fusion, "graph": self.graph,
                "layout": self.layout_label}


@dataclass
class Prepared:
    """What does not depend on the arrival rate: the step-time memo and the KV capacity (reused across runs)."""

    timer: StepTimer
    kv: KVCapacity


def prepare(cfg: ServeConfig) -> Prepared:
    costs = CostModel(cfg.profile)
    timer = StepTimer(cfg.model, costs, cfg.fusion, cfg.graph, list(cfg.sizes), cfg.ctx_bucket, cfg.prefill_bucket)
    kv = kv_capacity(cfg.model, cfg.profile, cfg.fusion, cfg.graph, list(cfg.sizes), cfg.gpu_util,
                     cfg.workspace_bytes, cfg.block_size, cfg.kv_blocks)
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

    def as_dict(self) -> dict:
        return {**self.config, **self.metrics, **self.kv, "simulated_s": self.simulated_s, "wall_s": self.wall_s,
                "step_evals": self.step_evals, "events": self.events}


def simulate_serving(cfg: ServeConfig, wl: Workload, duration: float, prep: Prepared | None = None) -> ServeResult:
    """Serve `wl` (arrivals in [0, duration)) on one replica; return its metrics."""
    t_wall = time.perf_counter()
    prep = prep or prepare(cfg)
    timer, kv = prep.timer, prep.kv
    evals0 = timer.misses
    times = wl.times.tolist()
    sched = Scheduler(cfg.limits(), kv.blocks, kv.block_size, wl.prompt.tolist(), wl.output.tolist())
    w0, w1 = cfg.warmup_frac * duration, duration
    stop = duration + (duration if cfg.drain_s is None else cfg.drain_s)
    col = Collector(w0, w1, kv.blocks)
    env = simpy.Environment()
    idle: list = [None]
    nxt = [0]
    rejected = [0]
    events = [0]
    n_req = len(times)
    cb = cfg.ctx_bucket
    merge = cfg.merge_steps
    bounds = [b for b in (w0, w1, stop)]

    def arrivals():
        for i, t in enumerate(times):
            if t > env.now:
                yield env.timeout(t - env.now)
            nxt[0] = i + 1
            if sched.arrive(i):
                col.track(env.now, sched.in_system)
                ev = idle[0]
                if ev is not None and not ev.triggered:
                    ev.succeed()
            else:
                rejected[0] += 1

    def engine():
        while True:
            plan = sched.schedule()
            if plan is None:
                if nxt[0] >= n_req:
                    return
                idle[0] = env.event()
                yield idle[0]
                idle[0] = None
                continue
            now = env.now
            if plan.chunks:
                cost = timer.mixed(plan.decode, len(plan.chunks), plan.prefill_tokens, plan.ctx)
                k = 1
            else:
                cost = timer.decode(plan.decode, plan.ctx)
                k = 1
                if merge:
                    dt = cost.step_s
                    cap = 1 << 62
                    for b in bounds:
                        if b > now:
                            cap = min(cap, max(1, math.ceil((b - now) / dt)))
                    if nxt[0] < n_req and sched.admission_open():
                        cap = min(cap, max(1, math.ceil((times[nxt[0]] - now) / dt)))
                    k = sched.extend(plan, cap, cb)
            events[0] += 1
            yield env.timeout(k * cost.step_s)
            tokens, done = sched.complete(plan, env.now)
            col.on_steps(now, k, cost, plan, tokens)
            if done:
                col.track(env.now, sched.in_system)
            if env.now >= stop:
                return

    env.process(arrivals())
    proc = env.process(engine())
    env.run(until=proc)
    end = env.now
    col.track(max(end, w1), sched.in_system)
    metrics = summarize(col, sched, np.asarray(times, dtype=float), end, rejected[0])
    metrics["offered_rate"] = wl.rate
    return ServeResult(finite(metrics), col.batch_log(), kv.as_dict(), float(end), time.perf_counter() - t_wall,
                       timer.misses - evals0, events[0], cfg.label())
