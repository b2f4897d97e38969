"""The engine loop around the forward pass: N consecutive decode steps on one host thread and one stream.

Each step is the engine's own host work plus the forward's launches plus the GPU work, as vLLM's model
runner does it:
    schedule + prep (host)  ->  H2D copies into the static inputs (launches, tiny GPU copies)
    -> the forward (eager launches or graph replays, from `plan.build_plan`)
    -> sampling kernels (launches)  ->  D2H copy of the sampled tokens (a launch)
    -> wait for that copy (`.tolist()` / event sync)  ->  tolist + detokenise (host)
Scheduling:
- `sync`: the host waits for step n's tokens (and detokenises them) before it schedules step n+1;
- `async` (vLLM --async-scheduling, SGLang's overlap scheduler): the host launches step n+1 and only then
  waits for step n's tokens; the next input ids stay on the GPU, so step n+1 never needs them on the host.
  One step of lag: step n's tokens are delivered after step n+1 was launched.
The loop is lowered to one `LaunchPlan` with host syncs (`wait_kernel`), which both engines run (des.py and
fastpath.py give identical timelines). The forward is the same at every step (context growth over N steps is
ignored). `step_s`, the steady-state step time, is the mean interval between the GPU ends of two steps'
token copies once the loop runs its full pattern (from step 1 under sync, step 2 under async: async's first
two steps launch back to back with no wait between them); every such interval holds all of one step's
kernels, so a step is never shorter than its GPU work. Where N is too small for that (sync N = 1, async
N <= 2) it is the last delivery / N. `deliver_s`: when each step's tokens are detokenised on the host (the
async tail drains two steps at once). Engine costs come from the profile's `host.engine_step_us`, else from `ESTIMATE` (marked as such).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.common.errors import UserError
from simulator.common import vocab as V
from simulator.engine.plan import LaunchPlan
from simulator.model.profile import ByBatch, EngineStepUs, Profile
from simulator.engine.timeline import Timeline

SCHEDULING = V.values(V.LOOP_SCHEDULING)
SAMPLING = V.values(V.Sampling)
US = 1e-6


class LoopError(UserError):
    """An unknown scheduling or sampling mode, or a bad step count."""


def _c(us: float) -> ByBatch:
    return ByBatch(batch=[1], us=[us])


# Used only where a profile has no measured engine figures; rough vLLM-like magnitudes, not measurements.
ESTIMATE = EngineStepUs(
    schedule=ByBatch(batch=[1, 64], us=[40.0, 90.0]), prep=ByBatch(batch=[1, 64], us=[20.0, 40.0]),
    copy_launch_us=8.0, copy_gpu_us=2.0, h2d_copies=3,
    sample_host={"greedy": _c(15.0), "top_p": _c(120.0)},
    sample_gpu={"greedy": ByBatch(batch=[1, 64], us=[8.0, 12.0]), "top_p": ByBatch(batch=[1, 64], us=[60.0, 90.0])},
    sample_kernels={"greedy": 1, "top_p": 8},
    tolist=_c(10.0), detokenize=ByBatch(batch=[1, 64], us=[5.0, 100.0]),
    source="estimate: the profile has no host.engine_step_us (run calibration/scripts/engine_loop.py on the GPU)")


@dataclass(frozen=True)
class EngineCosts:
    """The engine's work of one step at one batch size, seconds."""

    schedule_s: float
    prep_s: float
    copy_launch_s: float
    copy_gpu_s: float
    h2d_copies: int
    sample_host_s: float
    sample_gpu_s: float
    sample_kernels: int
    tolist_s: float
    detok_s: float
    measured: bool = False
    source: str = ""

    @property
    def pre_s(self) -> float:
        return self.schedule_s + self.prep_s

    @property
    def post_s(self) -> float:
        return self.tolist_s + self.detok_s

    @property
    def host_s(self) -> float:
        """All host work of the engine in one step (copy and sampling launches included)."""
        return self.pre_s + (self.h2d_copies + 1) * self.copy_launch_s + self.sample_host_s + self.post_s

    @property
    def gpu_s(self) -> float:
        return (self.h2d_copies + 1) * self.copy_gpu_s + self.sample_gpu_s


def engine_costs(profile: Profile, batch: int, sampling: str = "greedy") -> EngineCosts:
    """The profile's engine figures at `batch` (ESTIMATE where the profile has none)."""
    e = profile.host.engine_step_us
    measured = e is not None
    e = e or ESTIMATE
    if sampling not in e.sample_host or sampling not in e.sample_gpu:
        raise LoopError(f"unknown sampling '{sampling}': use one of {', '.join(sorted(e.sample_host))}")
    return EngineCosts(
        schedule_s=e.schedule.at(batch) * US, prep_s=e.prep.at(batch) * US, copy_launch_s=e.copy_launch_us * US,
        copy_gpu_s=e.copy_gpu_us * US, h2d_copies=e.h2d_copies, sample_host_s=e.sample_host[sampling].at(batch) * US,
        sample_gpu_s=e.sample_gpu[sampling].at(batch) * US, sample_kernels=max(1, e.sample_kernels.get(sampling, 1)),
        tolist_s=e.tolist.at(batch) * US, detok_s=e.detokenize.at(batch) * US, measured=measured, source=e.source)


@dataclass
class LoopPlan:
    plan: LaunchPlan  # every launch of the N steps, with host syncs
    steps: int
    scheduling: str
    costs: EngineCosts
    forward: LaunchPlan
    deliver_launch: np.ndarray  # per step: the launch whose wait delivers its tokens (-1: in the tail)
    tail: list[tuple[int, float]]  # after the last launch: (kernel waited for, host work after it)
    tail_steps: list[int]  # the steps the tail delivers
    d2h_kernels: np.ndarray  # per step: the kernel index of its D2H token copy


def build_loop(forward: LaunchPlan, ec: EngineCosts, steps: int, scheduling: str, gap_s: float) -> LoopPlan:
    """Lower N steps of (engine work + forward) to one plan with host syncs. `gap_s`: the in-stream gap of
    the engine's own kernels (copies, sampling)."""
    if scheduling not in SCHEDULING:
        raise LoopError(f"unknown scheduling '{scheduling}': use sync or async")
    if steps < 1:
        raise LoopError(f"steps must be >= 1, got {steps}")
    h, s = ec.h2d_copies, ec.sample_kernels
    f_host, f_cnt = forward.host_s, forward.kernels_per_launch
    nf, nfk = f_host.size, forward.gpu_s.size
    # one step's launches: h copies, the forward, s sampling launches, the D2H copy
    host1 = np.concatenate((np.full(h, ec.copy_launch_s), f_host, np.full(s, ec.sample_host_s / s), [ec.copy_launch_s]))
    host1[0] += ec.pre_s
    host1[h + nf] += forward.host_tail_s
    cnt1 = np.concatenate((np.ones(h, np.int64), f_cnt, np.ones(s + 1, np.int64)))
    gpu1 = np.concatenate((np.full(h, ec.copy_gpu_s), forward.gpu_s, np.full(s, ec.sample_gpu_s / s), [ec.copy_gpu_s]))
    gap1 = np.concatenate((np.full(h, gap_s), forward.gap_s, np.full(s + 1, gap_s)))
    nl, nk = host1.size, gpu1.size
    host = np.tile(host1, steps)
    wait = np.full(nl * steps, -1, dtype=np.int64)
    d2h = [n * nk + nk - 1 for n in range(steps)]  # each step's D2H copy kernel
    lag = 1 if scheduling == "sync" else 2  # step m's first launch waits for step m - lag's tokens
    deliver = np.full(steps, -1, dtype=np.int64)
    for m in range(lag, steps):
        j = m * nl
        wait[j] = d2h[m - lag]
        host[j] += ec.post_s
        deliver[m - lag] = j
    tail_steps = list(range(max(0, steps - lag), steps))
    tail = [(d2h[n], ec.post_s) for n in tail_steps]
    labels = (["h2d copy"] * h + list(forward.launch_labels or [""] * nf) + ["sample"] * s + ["d2h copy"])
    names = (["h2d copy"] * h + list(forward.kernel_names or [""] * nfk) + ["sample"] * s + ["d2h copy"])
    plan = LaunchPlan(
        host_s=host, kernels_per_launch=np.tile(cnt1, steps), gpu_s=np.tile(gpu1, steps),
        gap_s=np.tile(gap1, steps), queue_depth=forward.queue_depth, launch_labels=labels * steps,
        kernel_names=names * steps, host_calls=(forward.host_calls + h + s + 1) * steps,
        graph_mode=forward.graph_mode, extra_kernels=forward.extra_kernels * steps, wait_kernel=wait)
    return LoopPlan(plan, steps, scheduling, ec, forward, deliver, tail, tail_steps, np.asarray(d2h, dtype=np.int64))


@dataclass(frozen=True)
class LoopResult:
    steps: int
    scheduling: str
    deliver_s: tuple[float, ...]  # when each step's tokens are detokenised (host), from the loop's start
    total_s: float
    step_s: float  # steady-state mean interval between deliveries
    first_step_s: float
    host_per_step_s: float  # forward launches + engine host work
    engine_host_per_step_s: float
    forward_host_per_step_s: float
    gpu_per_step_s: float  # kernels + gaps of one step (forward + copies + sampling)
    host_wait_per_step_s: float  # host blocked on the token sync, mean per step
    bound: str  # gpu | cpu (forward launches) | engine (the engine's own host work)
    engine_costs_measured: bool
    timeline: Timeline | None = None  # set by predict_loop: the loop's CPU and GPU lanes

    def as_dict(self) -> dict:
        ms = 1e3
        return {
            "steps": self.steps, "scheduling": self.scheduling, "step_ms": self.step_s * ms,
            "first_step_ms": self.first_step_s * ms, "total_ms": self.total_s * ms,
            "host_ms_per_step": self.host_per_step_s * ms, "engine_host_ms_per_step": self.engine_host_per_step_s * ms,
            "forward_host_ms_per_step": self.forward_host_per_step_s * ms, "gpu_ms_per_step": self.gpu_per_step_s * ms,
            "host_wait_ms_per_step": self.host_wait_per_step_s * ms, "bound": self.bound,
            "engine_costs": "measured" if self.engine_costs_measured else "estimate",
        }


def summarize_loop(lp: LoopPlan, tl: Timeline) -> LoopResult:
    """Token delivery times, the steady-state step time and which lane bounds it."""
    ec, f = lp.costs, lp.forward
    deliver = np.zeros(lp.steps)
    cs = tl.cpu_start
    for n, j in enumerate(lp.deliver_launch):
        if j >= 0:
            deliver[n] = cs[j] + ec.post_s
    t = float(tl.submit[-1])
    waited = float(tl.wait.sum()) if tl.wait is not None else 0.0
    for (k, h), n in zip(lp.tail, lp.tail_steps):
        w = max(0.0, float(tl.gpu_end[k]) - t)
        waited += w
        t += w + h
        deliver[n] = t
    N = lp.steps
    lag = 1 if lp.scheduling == "sync" else 2
    if N > lag:  # steady state: the pace of the token copies once the loop runs its full pattern
        d2h = tl.gpu_end[lp.d2h_kernels]
        step = (d2h[-1] - d2h[lag - 1]) / (N - lag)
    else:
        step = deliver[-1] / N
    f_host = float(f.host_s.sum()) + f.host_tail_s
    gpu = float(lp.plan.gpu_s.sum() + lp.plan.gap_s.sum()) / N
    host = f_host + ec.host_s
    bound = "gpu" if gpu >= host else ("engine" if ec.host_s >= f_host else "cpu")
    return LoopResult(N, lp.scheduling, tuple(float(x) for x in deliver), float(deliver.max()), float(step),
                      float(deliver[0]), host, ec.host_s, f_host, gpu, waited / N, bound, ec.measured)


def steady_step_s(forward_step_s: float, forward_host_s: float, forward_gpu_s: float, ec: EngineCosts,
                  scheduling: str) -> float:
    """Closed-form steady-state step time from one forward's figures (serving's per-step cost): sync runs the
    engine's work and the forward back to back; async overlaps the host lane with the GPU lane, so the
    longer lane sets the pace. `forward_gpu_s`: the forward's kernels plus gaps."""
    launch = (ec.h2d_copies + 1) * ec.copy_launch_s + ec.sample_host_s
    if scheduling == "sync":
        return ec.pre_s + max(forward_step_s + ec.gpu_s, forward_host_s + launch) + ec.post_s
    return max(forward_host_s + ec.host_s, forward_gpu_s + ec.gpu_s)


def run_loop(forward: LaunchPlan, ec: EngineCosts, steps: int, scheduling: str, gap_s: float,
             engine: str = "fast") -> tuple[LoopResult, Timeline, LoopPlan]:
    """Build the N-step plan and run it on one engine (des or fast)."""
    from simulator.engine.predict import run_engine

    lp = build_loop(forward, ec, steps, scheduling, gap_s)
    tl = run_engine(lp.plan, engine)
    return summarize_loop(lp, tl), tl, lp


def loop_of(setup, shape, engine: str = "fast", steps: int = 8, scheduling: str = "sync", sampling: str = "greedy"):
    """N steps of the engine loop around one forward of a `StepSetup` (engine/setup.py), routed once by its
    capture: (LoopResult, forward StepResult)."""
    import dataclasses

    from simulator.engine.plan import lower
    from simulator.engine.predict import run_engine
    from simulator.engine.timeline import summarize

    r, shape = setup.capture.padded(shape)
    plan = lower(setup.build(shape), setup.costs, r.mode)
    ec = engine_costs(setup.profile, max(1, shape.seqs), sampling)
    res, tl, _ = run_loop(plan, ec, steps, scheduling, setup.costs.eager_gap_s, engine)
    res = dataclasses.replace(res, timeline=tl)  # the whole loop's two lanes (for the step report)
    return res, summarize(run_engine(plan, engine))


def predict_loop(model, batch: int, ctx: int, fusion: str = "none", graph: str = "none",
                 profile=None, engine: str = "fast", steps: int = 8,
                 scheduling: str = "sync", sampling: str = "greedy", shape=None):
    """`loop_of` for loose arguments (every size captured): (LoopResult, forward StepResult)."""
    from simulator.engine.setup import Capture, StepSetup
    from simulator.model.costs import CostModel
    from simulator.model.models import load_model
    from simulator.model.profile import Profile, load_profile
    from simulator.model.workload import decode

    m = load_model(model) if isinstance(model, str) else model
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    setup = StepSetup(m, CostModel(prof), "", fusion, None, Capture(graph))  # no memo: the digest is not needed
    return loop_of(setup, shape or decode(batch, ctx), engine, steps, scheduling, sampling)
