"""One call from a question to an answer: model + shape + fusion + graph mode + profile -> step figures.

`simulate` runs one engine on one step. `predict` adds the host-noise band: with `replicates` > 0 it
draws each eager op's host cost from the profile's per-path distribution and, where the profile has
one, a per-step host-speed factor (numpy Generator, seeded), and reports the p10/p50/p90 of step
time over the replicates (fast path). Which plan a step runs is `routing.route`: without `sizes` every size
counts as captured (no padding); with `sizes` the step pads to a captured size or runs eager above the largest,
exactly as the sweep, the optimizer and serving route it.
"""

from __future__ import annotations


from simulator.common.errors import UserError
from simulator.common import vocab as V

from dataclasses import dataclass

import numpy as np

from simulator.model.costs import CostModel
from simulator.engine.fastpath import simulate_fast, step_times
from simulator.model.kernels import Step
from simulator.model.models import ModelSpec, load_model
from simulator.engine.plan import build_plan, lower, sample_hosts
from simulator.model.profile import Profile, load_profile
from simulator.engine.routing import DEFAULT_BACKEND, Route
from simulator.engine.timeline import StepResult, Timeline, summarize
from simulator.model.workload import StepShape, decode

ENGINES = V.values(V.Engine)


class EngineError(UserError):
    pass


def run_engine(plan, engine: str = "fast") -> Timeline:
    if engine == "des":
        from simulator.engine.des import simulate_des  # simpy: imported only when the DES engine is asked for

        return simulate_des(plan)
    if engine == "fast":
        return simulate_fast(plan)
    raise EngineError(f"unknown engine '{engine}': use des or fast")


def simulate(step: Step, costs: CostModel, graph: str = "none", engine: str = "fast",
             pure_decode: bool = True) -> tuple[StepResult, Timeline]:
    plan = build_plan(step, costs, graph, pure_decode=pure_decode)
    tl = run_engine(plan, engine)
    return summarize(tl), tl


@dataclass
class Prediction:
    result: StepResult
    timeline: Timeline
    step: Step
    band_ms: dict[str, float] | None = None  # p10/p50/p90 of step time under host noise
    route: Route | None = None  # the captured size and plan mode the step ran at

    def as_dict(self) -> dict:
        d = self.result.as_dict()
        if self.band_ms:
            d["step_ms_p10"] = self.band_ms["p10"]
            d["step_ms_p50"] = self.band_ms["p50"]
            d["step_ms_p90"] = self.band_ms["p90"]
        return d


def host_band(step: Step, costs: CostModel, graph: str, replicates: int, seed: int,
              pure_decode: bool = True, plan=None) -> dict[str, float]:
    """`plan`: build_plan(step, costs, graph, pure_decode=pure_decode) where the caller has it already."""
    if plan is None:
        plan = build_plan(step, costs, graph, pure_decode=pure_decode)
    return _band(plan, step, costs, replicates, seed)


def _band(plan, step: Step, costs: CostModel, replicates: int, seed: int) -> dict[str, float]:
    """p10/p50/p90 of step time over `replicates` host-noise draws of a lowered plan (numpy Generator `seed`)."""
    rng = np.random.default_rng(seed)
    sf = costs.profile.host.step_factor
    # each replicate draws one uniform per op (eager plans only), then (with a step factor) one more: all rows at
    # once, the same stream as one replicate after the other
    n = len(step.ops) if plan.graph_mode == "none" else 0
    u = rng.random((replicates, n + (sf is not None)))
    hosts = sample_hosts(plan, step, costs, u[:, :n])
    if sf is not None:  # one host-speed factor for the whole step
        hosts = hosts * np.array([sf.q(float(u[r, -1])) / sf.p50 for r in range(replicates)])[:, None]
    times = step_times(plan, hosts)
    q = np.percentile(times, [10, 50, 90]) * 1e3
    return {"p10": float(q[0]), "p50": float(q[1]), "p90": float(q[2])}


def predict_setup(setup, shape: StepShape, engine: str = "fast", replicates: int = 0, seed: int = 0) -> Prediction:
    """One step's figures for a `StepSetup` (engine/setup.py): `setup.capture` routes the step once, the padded
    step is built by the setup's recipe and lowered in the routed plan mode (`plan.lower`), then run on `engine`,
    with the host-noise band over `replicates` draws (seeded)."""
    r, shape = setup.capture.padded(shape)
    step = setup.build(shape)
    plan = lower(step, setup.costs, r.mode)
    tl = run_engine(plan, engine)
    band = _band(plan, step, setup.costs, replicates, seed) if replicates > 0 else None
    return Prediction(summarize(tl), tl, step, band, r)


def predict(model: ModelSpec | str, batch: int, ctx: int, fusion: str = "none", graph: str = "none",
            profile: Profile | str | None = None, engine: str = "fast", replicates: int = 0,
            seed: int = 0, shape: StepShape | None = None, sizes: list[int] | None = None, *,
            backend: str = DEFAULT_BACKEND, prefill_sizes: list[int] | None = None) -> Prediction:
    """`predict_setup` for loose arguments; `sizes`: the captured sizes (None: every size captured, the step runs
    unpadded); `backend`, `prefill_sizes`: the attention backend and prefill token sizes (routing.route)."""
    from simulator.engine.setup import Capture, StepSetup

    m = load_model(model) if isinstance(model, str) else model
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    costs = CostModel(prof)
    setup = StepSetup(m, costs, "", fusion, None, Capture.of(graph, sizes, prefill_sizes, backend))
    return predict_setup(setup, shape or decode(batch, ctx), engine, replicates, seed)
