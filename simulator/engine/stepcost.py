"""The cost of a routed step: the fast engine's StepResult, memoised per process.

- `profile_digest(profile)`: the one digest of a profile's content (part of every step-time memo key).
- `resolve(profile)`: (Profile, CostModel, digest) of a profile name / path / None (the default), a `Profile`
  or a `CostModel`; names are cached, objects are digested once per object.
- `step_time(model, profile, fusion, mode, shape)`: the fast engine's StepResult of one step in graph mode
  `mode` (a configured mode or a plan mode: `routing.plan_mode` resolves it for the shape), memoised per process
  on (model, profile digest, fusion, plan mode, shape). Plans are built by layer tiling
  (`engine/tiling.tiled_plan`, bitwise equal to `plan.build_plan` on the full step).
- `routed_step(model, profile, fusion, graph, sizes, shape)`: `routing.route_shape` then `step_time` of the
  padded shape (`routing.padded_shape`) in the routed plan mode: what a step costs under a graph mode and a
  capture layout. Predict (`predict.predict(sizes=...)`), the sweep, the optimizer and serving all read their
  step times here (serving through `step_time` of the same `routing.padded_shape`).
- `expected_step(model, profile, fusion, graph, sizes, batches, weights, ctx, mixed)`: expected step time and
  padding over a batch-size distribution (`Expected`; the one definition of padding waste, in its docstring):
  what the sweep's rows and the optimizer's layout metrics report.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from simulator.model.costs import CostModel
from simulator.model.models import ModelSpec
from simulator.model.profile import Profile, load_profile
from simulator.engine.routing import DEFAULT_BACKEND, Route, padded_shape, plan_mode, route_shape
from simulator.engine.timeline import StepResult
from simulator.model.workload import StepShape, decode

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
    from simulator.engine.tiling import tiled_plan
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


# -- expectations over a batch-size distribution ---------------------------------------------------
@dataclass(frozen=True)
class Expected:
    """Expected figures of one step kind mix over a batch-size distribution (see `expected_step`)."""

    step_s: float  # E[step time], padding included, eager above the largest captured size
    unpadded_s: float  # E[the same steps run at their own rows in the mode they were routed to]
    padded_rows: float  # E[dummy rows per step]
    executed_rows: float  # E[rows the GPU executes per step] (padded size, or the rows of an ungraphed step)
    waste: float  # padded_rows / executed_rows: the share of executed rows that are padding
    waste_mean: float  # E[padding / executed rows of each step]
    overflow_share: float  # share of steps above the largest captured size (run eager: no cudagraph)
    eager_share: float  # share of steps that run without a graph (overflow, mode none, mixed under full)
    tokens: float  # E[tokens per step]
    evals: int  # (batch size, step kind) pairs the expectation sums over


_AXIS: dict[tuple, dict[int, tuple]] = {}  # per config: batch -> _COLUMNS
# per batch: rows the GPU executes, padding rows, ungraphed (0/1), overflow (0/1), step s, unpadded step s, waste
_COLUMNS = ("executed", "padding", "eager", "overflow", "step", "unpad", "waste")


def _per_batch(model, profile, fusion, graph, sizes, shape, memo: dict, b: int, backend: str = DEFAULT_BACKEND,
               prefill_sizes: Sequence[int] | None = None) -> tuple:
    rs = routed_step(model, profile, fusion, graph, sizes, shape, backend=backend, prefill_sizes=prefill_sizes)
    r = rs.route
    run = rs.step_s
    unpad = step_time(model, profile, fusion, r.mode, shape).step_s if r.padding else run
    v = memo[b] = (float(r.executed), float(r.padding), float(r.padded is None), float(r.overflow), run, unpad,
                   r.padding / r.executed)
    return v


def expected_step(model: ModelSpec, profile: str | None | Profile | CostModel, fusion: str, graph: str,
                  sizes: Sequence[int] | None, batches: Sequence[int], weights: Sequence[float], ctx: int,
                  mixed: tuple[float, int, int] | None = None, *, backend: str = DEFAULT_BACKEND,
                  prefill_sizes: Sequence[int] | None = None) -> Expected:
    """Expected step time and padding of steps whose batch sizes follow (`batches`, `weights`: probabilities).

    Every step is routed (`routing.route_shape`) and costed exactly as `routed_step` does it: a decode step of
    batch b at context `ctx`; with `mixed = (share, prefill_seqs, prefill_len)` that share of the steps are
    mixed steps StepShape(b, ctx, prefill_seqs, prefill_len) instead (their rows: all their tokens).
    Definitions (w: the weight of a step; sums over batch sizes and step kinds; executed = the padded size, or
    the rows themselves for a step that runs without a graph):
      padded_rows   = sum w * (executed - rows)      (0 for a step without a graph)
      executed_rows = sum w * executed
      waste         = padded_rows / executed_rows    (the share of the rows the GPU runs that are dummy rows;
                                                      steps without a graph count in the denominator; 0 if none)
      waste_mean    = sum w * (executed - rows) / executed
      step_s        = sum w * step time of the routed, padded step; unpadded_s the same steps at their own rows
      eager_share   = sum of w over steps without a graph; overflow_share: those above the largest size
    The sweep (`sweep/grid.py`) and the optimizer (`studies/optimize.py`) both report these figures from here.
    Per-batch figures are memoised per process by (model, profile, fusion, graph, sizes, ctx, step kind)."""
    _, _, digest = resolve(profile)
    sizes_t = None if sizes is None else tuple(int(s) for s in sizes)
    share, ps, pl = mixed if mixed else (0.0, 0, 0)
    kinds = [(1.0 - share, None)] + ([(share, (int(ps), int(pl)))] if share > 0 else [])
    w = np.asarray(weights, dtype=float)
    bs = [int(x) for x in batches]
    parts, toks, evals = [], [], 0
    for wk, pre in kinds:
        if wk <= 0:
            continue
        key = (model, digest, fusion, graph, sizes_t, ctx, pre, backend,
               None if prefill_sizes is None else tuple(prefill_sizes))
        memo = _AXIS.get(key)
        if memo is None:
            if len(_AXIS) > 4096:
                _AXIS.clear()
            memo = _AXIS[key] = {}
        get = memo.get
        rows = [get(b) or _per_batch(model, profile, fusion, graph, sizes_t,
                                     decode(b, ctx) if pre is None else StepShape(b, ctx, pre[0], pre[1]), memo, b,
                                     backend, prefill_sizes)
                for b in bs]
        ww = wk * w
        parts.append(ww[:, None] * np.array(rows))
        toks.append(ww * (np.asarray(bs, dtype=float) + (0 if pre is None else pre[0] * pre[1])))
        evals += len(bs)
    # correctly rounded sums (math.fsum): the figures do not depend on summation order or BLAS
    tot = [math.fsum(c) for c in np.concatenate(parts).T] if parts else [0.0] * len(_COLUMNS)
    tokens = math.fsum(np.concatenate(toks)) if toks else 0.0
    executed, padding, eager, overflow, step, unpad, wmean = tot
    return Expected(step_s=step, unpadded_s=unpad, padded_rows=padding, executed_rows=executed,
                    waste=padding / executed if executed > 0 else 0.0, waste_mean=wmean, overflow_share=overflow,
                    eager_share=eager, tokens=tokens, evals=evals)


def reset_memo() -> None:
    _MEMO.clear()
    _AXIS.clear()
    STATS.update(lookups=0, simulated=0)
