"""The cost of a routed step: the fast engine's StepResult, memoised per process.

- `profile_digest(profile)`: the one digest of a profile's content (part of every step-time memo key).
- `resolve(profile)`: (Profile, CostModel, digest) of a profile name / path / None (the default), a `Profile`
  or a `CostModel`; names are cached, objects are digested once per object.
- `step_time(model, profile, fusion, mode, shape)`: the fast engine's StepResult of one step in graph mode
  `mode` (a configured mode or a plan mode: `routing.plan_mode` resolves it for the shape), memoised per process
  on (model, profile digest, fusion, plan mode, shape). Plans are built by layer tiling
  (`sweep_eval.tiled_plan`, bitwise equal to `plan.build_plan` on the full step).
- `routed_step(model, profile, fusion, graph, sizes, shape)`: `routing.route_shape` then `step_time` of the
  padded shape (`routing.padded_shape`) in the routed plan mode: what a step costs under a graph mode and a
  capture layout. Predict (`predict.predict(sizes=...)`), the sweep, the optimizer and serving all read their
  step times here (serving through `step_time` of the same `routing.padded_shape`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from simulator.model.costs import CostModel
from simulator.model.models import ModelSpec
from simulator.model.profile import Profile, load_profile
from simulator.engine.routing import DEFAULT_BACKEND, Route, padded_shape, plan_mode, route_shape
from simulator.engine.timeline import StepResult
from simulator.model.workload import StepShape

_MEMO: dict[tuple, dict[tuple, StepResult]] = {}  # (model, profile digest) -> (fusion, plan mode, shape) -> result
_OBJ: dict[int, tuple] = {}  # id(Profile or CostModel) -> (object, Profile, CostModel, digest)
STATS = {"lookups": 0, "simulated": 0}


def profile_digest(p: Profile) -> str:
    """A digest of a profile's content: equal profiles share step-time memo entries, different ones never do."""
    return hashlib.sha256(json.dumps(p.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:16]


@lru_cache(maxsize=64)
def load_cached_profile(name: str | None) -> tuple[Profile, CostModel, str]:
    """A profile by name or path (None: the default), its cost model and its digest."""
    p = load_profile(name)
    return p, CostModel(p), profile_digest(p)


def resolve(profile: str | None | Profile | CostModel) -> tuple[Profile, CostModel, str]:
    """(Profile, CostModel, digest) of a profile name or path, a Profile or a CostModel."""
    if profile is None or isinstance(profile, str):
        return load_cached_profile(profile)
    hit = _OBJ.get(id(profile))
    if hit is not None and hit[0] is profile:
        return hit[1:]
    if isinstance(profile, CostModel):
        p, costs = profile.profile, profile
    elif isinstance(profile, Profile):
        p, costs = profile, CostModel(profile)
    else:
        raise TypeError(f"a profile name, Profile or CostModel, got {type(profile).__name__}")
    if len(_OBJ) > 256:
        _OBJ.clear()
    _OBJ[id(profile)] = (profile, p, costs, profile_digest(p))  # holds the object: its id is not reused
    return p, costs, _OBJ[id(profile)][3]


def step_time(model: ModelSpec, profile: str | None | Profile | CostModel, fusion: str, mode: str,
              shape: StepShape) -> StepResult:
    """The fast engine's result for one step (no padding: `shape` is what the GPU runs), memoised per process."""
    from simulator.engine.fastpath import simulate_fast
    from simulator.sweep.evaluate import tiled_plan
    from simulator.engine.timeline import summarize

    _, costs, digest = resolve(profile)
    pure = shape.is_pure_decode or mode == "full"  # routing.lowered_pure, inlined: `mode` is a routed plan mode
    pm = plan_mode(mode, pure)
    STATS["lookups"] += 1
    memo = _MEMO.get((model, digest))
    if memo is None:
        memo = _MEMO[(model, digest)] = {}
    key = (fusion, pm, shape)
    r = memo.get(key)
    if r is None:
        r = memo[key] = summarize(simulate_fast(tiled_plan(model, shape, fusion, costs, pm,
                                                           pure_decode=pure)))
        STATS["simulated"] += 1
    return r


@dataclass(frozen=True)
class RoutedStep:
    route: Route
    shape: StepShape  # the step as the GPU runs it (padded)
    result: StepResult

    @property
    def step_s(self) -> float:
        return self.result.step_s


def routed_step(model: ModelSpec, profile: str | None | Profile | CostModel, fusion: str, graph: str,
                sizes: Sequence[int] | None, shape: StepShape, *, backend: str = DEFAULT_BACKEND,
                prefill_sizes: Sequence[int] | None = None) -> RoutedStep:
    """A step of `shape` under graph mode `graph` and captured sizes `sizes` (None: every size captured);
    `backend`, `prefill_sizes`: routing.route's."""
    r = route_shape(graph, sizes, shape, backend=backend, prefill_sizes=prefill_sizes)
    run = padded_shape(shape, r)
    return RoutedStep(r, run, step_time(model, profile, fusion, r.mode, run))


def reset_memo() -> None:
    _MEMO.clear()
    STATS.update(lookups=0, simulated=0)
