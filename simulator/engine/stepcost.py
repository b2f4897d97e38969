"""The cost of a routed step: the fast engine's StepResult, memoised by an owned `StepCostCache`.

`StepCostCache` (one per run: a study makes one and passes it down) memoises, keyed by the `StepSetup`'s hash
(engine/setup.py: model, profile digest, fusion, implementation; plus the plan mode and the shape):
- `cache.step_time(setup, plan_mode, shape)`: the fast engine's StepResult of one step (no padding added),
- `cache.routed(setup, shape)`: `setup.capture` routes the step once, then `step_time` of the padded step,
- `cache.expected(setup, batches, weights, ctx, mixed)`: `Expected` over a batch-size distribution,
- `cache.step_figures(setup, mode, shapes)`: step_time's step, GPU busy, CPU busy and GPU gap seconds of many
  shapes at once (engine/batched.py, bitwise; serving's step timer reads these);
- `cache.step_seconds(setup, mode, shapes)` / `cache.routed_seconds(setup, shapes, captures)`: the step times of
  many shapes at once (engine/batched.py: the batch axis vectorised, the same figures as `step_time`); `expected`
  and the optimizer's per-size costs are priced this way.
The module functions below (`step_time`, `routed_step`, `expected_step`) are the same rules for loose arguments,
over the module's `DEFAULT` cache (kept for callers that have no setup, and for the tests that pin them).

- `profile_digest(profile)`: the one digest of a profile's content (part of every step-time memo key).
- `resolve(profile)`: (Profile, CostModel, digest) of a profile name / path / None (the default), a `Profile`
  or a `CostModel`; names are cached (one CostModel per name), a CostModel carries its own digest, a Profile
  gets a new CostModel.
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

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from simulator.model.costs import CostModel
from simulator.engine.setup import load_cached_profile, profile_digest, resolve  # noqa: F401  (re-exported)
from simulator.model.models import ModelSpec
from simulator.model.profile import Profile
from simulator.engine.routing import DEFAULT_BACKEND, Route, plan_mode
from simulator.engine.timeline import StepResult
from simulator.model.workload import StepShape, decode


def step_time(model: ModelSpec, profile: str | None | Profile | CostModel, fusion: str, mode: str,
              shape: StepShape) -> StepResult:
    """The fast engine's result for one step (no padding: `shape` is what the GPU runs), memoised in `DEFAULT`.
    `mode`: a configured graph mode or a routed plan mode (`routing.plan_mode` resolves it for the shape)."""
    pure = shape.is_pure_decode or mode == "full"  # routing.lowered_pure: `mode` may be a routed plan mode
    return DEFAULT.step_time(_setup(model, profile, fusion), plan_mode(mode, pure), shape)


def _setup(model, profile, fusion, capture=None):
    from simulator.engine.setup import Capture, StepSetup

    _, costs, digest = resolve(profile)
    return StepSetup(model, costs, digest, fusion, None, capture or Capture())


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
    `backend`, `prefill_sizes`: routing.route's. `DEFAULT.routed` of the same setup."""
    from simulator.engine.setup import Capture

    return DEFAULT.routed(_setup(model, profile, fusion, Capture.of(graph, sizes, prefill_sizes, backend)), shape)


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


# per batch: rows the GPU executes, padding rows, ungraphed (0/1), overflow (0/1), step s, unpadded step s, waste
_COLUMNS = ("executed", "padding", "eager", "overflow", "step", "unpad", "waste")


def expected_step(model: ModelSpec, profile: str | None | Profile | CostModel, fusion: str, graph: str,
                  sizes: Sequence[int] | None, batches: Sequence[int], weights: Sequence[float], ctx: int,
                  mixed: tuple[float, int, int] | None = None, *, backend: str = DEFAULT_BACKEND,
                  prefill_sizes: Sequence[int] | None = None) -> Expected:
    """`StepCostCache.expected` (definitions in its docstring) for loose arguments, in `DEFAULT`."""
    from simulator.engine.setup import Capture

    sizes_t = None if sizes is None else tuple(int(s) for s in sizes)
    st = _setup(model, profile, fusion, Capture.of(graph, sizes_t, prefill_sizes, backend))
    return DEFAULT.expected(st, batches, weights, ctx, mixed, sizes=sizes_t)


class StepCostCache:
    """Step costs of one run, memoised by setup hash, plan mode and shape (owned by the study that runs)."""

    LIMIT = 1 << 18  # entries per memo before it is cleared (a bound on memory, not on correctness)

    def __init__(self):
        self._steps: dict[tuple, StepResult] = {}  # (setup.cost_key, plan mode, shape) -> result
        self._small: dict[tuple, object] = {}  # (setup.build_key, layers, shape) -> Step (tiling's cut builds)
        self._ops: dict[int, tuple] = {}  # plan.lower's memo of those steps' op costs (shared by the plan modes)
        self._axis: dict[tuple, dict[int, tuple]] = {}  # (setup, ctx, step kind) -> batch -> _COLUMNS
        # (setup.cost_key, plan mode) -> shape -> step s (engine/batched.py): nested, so that a call over many
        # shapes hashes the cost key (the model's every field) once, not once per shape
        self._secs: dict[tuple, dict[StepShape, float]] = {}
        self._figures: dict[tuple, tuple] = {}  # the same key -> step_figures' four figures (engine/batched.py)
        self._rows: dict[tuple, dict] = {}  # setup.cost_key -> batched.py's memo of built, costed steps by shape
        self._figs: dict[str, dict] = {}  # profile digest -> batched.py's memo of op figures (Op -> figures)
        self._shared: dict[tuple, dict] = {}  # `shared`: a consumer's memo by its key (serving's step timers)
        self.stats = {"lookups": 0, "simulated": 0}

    def clear(self) -> None:
        self._steps.clear()
        self._small.clear()
        self._ops.clear()
        self._axis.clear()
        self._secs.clear()
        self._figures.clear()
        self._rows.clear()
        self._figs.clear()
        self._shared.clear()
        self.stats.update(lookups=0, simulated=0)

    def shared(self, key: tuple) -> dict:
        """A memo that the users of this cache share under `key` (a value naming its owner and what decides its
        entries, e.g. serving's step timers: ("serving.StepTimer", setup.cost_key, engine, ...)): made empty at
        first use, cleared with the cache."""
        m = self._shared.get(key)
        if m is None:
            m = self._shared[key] = {}
        return m

    def step_time(self, setup, mode: str, shape: StepShape) -> StepResult:
        """The fast engine's result of `setup`'s step of `shape` in plan mode `mode` (routed already)."""
        from simulator.engine.fastpath import simulate_fast
        from simulator.engine.tiling import tiled_lower
        from simulator.engine.timeline import summarize

        self.stats["lookups"] += 1
        key = (setup.cost_key, mode, shape)
        r = self._steps.get(key)
        if r is None:
            if len(self._steps) > self.LIMIT:
                self._steps.clear()
            if len(self._small) > 8192:
                self._small.clear()
                self._ops.clear()  # its entries keep the cleared steps' ops alive
            r = self._steps[key] = summarize(simulate_fast(tiled_lower(setup, shape, mode, self._small, self._ops)))
            self.stats["simulated"] += 1
        return r

    def _memos(self, setup) -> tuple[dict, dict]:
        """The batch-axis pricer's memos for `setup` (engine/batched.py): its plan rows (by cost key) and its op
        figures (by digest), each bounded in memory (a rows entry holds a step's distinct ops)."""
        rows = self._rows.get(setup.cost_key)
        if rows is None or len(rows) > 4096:
            if sum(len(v) for v in self._rows.values()) > 16384:
                self._rows.clear()
            rows = self._rows[setup.cost_key] = {}
        figs = self._figs.get(setup.digest)
        if figs is None or len(figs) > 1 << 17:
            figs = self._figs[setup.digest] = {}
        return rows, figs

    def step_seconds(self, setup, mode: str, shapes: Sequence[StepShape]) -> np.ndarray:
        """`step_time(setup, mode, s).step_s` for each shape (routed already): memoised, the missing shapes priced
        together over the batch axis (engine/batched.py: the same step times, without a plan per shape)."""
        from simulator.engine.batched import step_seconds

        key0 = setup.cost_key
        n = len(shapes)
        self.stats["lookups"] += n
        steps = self._steps  # step_time's results (keyed (cost key, mode, shape)): read only where there are any
        memo = self._secs
        secs = memo.get((key0, mode))
        if secs is None:
            secs = memo[(key0, mode)] = {}
        out = np.empty(n)
        miss: dict[StepShape, list[int]] = {}
        get = secs.get
        for i, s in enumerate(shapes):
            v = get(s)
            if v is None:
                r = steps.get((key0, mode, s)) if steps else None
                if r is None:
                    miss.setdefault(s, []).append(i)
                    continue
                v = r.step_s
            out[i] = v
        if miss:
            if sum(len(v) for v in memo.values()) > self.LIMIT:
                for per_mode in memo.values():
                    per_mode.clear()
            todo = list(miss)
            vals = step_seconds(setup, mode, todo, *self._memos(setup)).tolist()
            for k, v in zip(todo, vals):
                secs[k] = v
                for i in miss[k]:
                    out[i] = v
            self.stats["simulated"] += len(todo)
        return out

    def step_figures(self, setup, mode: str, shapes: Sequence[StepShape]) -> list[tuple[float, float, float, float]]:
        """(step_s, gpu_busy_s, cpu_busy_s, gpu_gap_s) of `step_time(setup, mode, s)` for each shape (routed
        already), bitwise: memoised, the missing shapes priced together (engine/batched.py step_figures). The
        figures serving's step timer reads (its CPU-bound test, cpu_busy_s >= gpu_busy_s + gpu_gap_s, is
        `summarize`'s)."""
        from simulator.engine.batched import step_figures

        key0 = setup.cost_key
        keys = [(key0, mode, s) for s in shapes]
        n = len(keys)
        self.stats["lookups"] += n
        memo = self._figures
        todo = list(dict.fromkeys(k for k in keys if k not in memo))
        if todo:
            if len(memo) > self.LIMIT:
                memo.clear()
            cols = step_figures(setup, mode, [k[2] for k in todo], *self._memos(setup))
            for k, v in zip(todo, zip(*(c.tolist() for c in cols))):
                memo[k] = v
            self.stats["simulated"] += len(todo)
        return [memo[k] for k in keys]

    def routed_seconds(self, setup, shapes: Sequence[StepShape], captures: Sequence | None = None) -> tuple:
        """(routes, padded shapes, step s) of each shape routed by `setup.capture` (or by `captures[i]`, one capture
        per shape: the cost does not depend on it), as `routed` would give them; priced by `step_seconds`, one call
        per plan mode."""
        cap = setup.capture
        routed = [(captures[i] if captures is not None else cap).padded(s) for i, s in enumerate(shapes)]
        out = np.empty(len(shapes))
        by_mode: dict[str, list[int]] = {}
        for i, (r, _) in enumerate(routed):
            by_mode.setdefault(r.mode, []).append(i)
        for mode, idx in by_mode.items():
            out[idx] = self.step_seconds(setup, mode, [routed[i][1] for i in idx])
        return [r for r, _ in routed], [x for _, x in routed], out

    def routed_step_seconds(self, setup, shapes: Sequence[StepShape], each: Sequence[tuple]) -> np.ndarray:
        """`routed_seconds(setup, shapes, captures)[2]` where capture i is `setup.capture` with the sizes `each[i]`
        (ascending, unique): decode-only steps routed at once (`_route_many`), then priced per plan mode."""
        modes, runs = self._route_many(setup.capture, shapes, each)[:2]
        out = np.empty(len(shapes))
        by_mode: dict[str, list[int]] = {}
        for i, m in enumerate(modes):
            by_mode.setdefault(m, []).append(i)
        for mode, idx in by_mode.items():
            out[idx] = self.step_seconds(setup, mode, [runs[i] for i in idx])
        return out

    @staticmethod
    def _route_many(cap, shapes: Sequence[StepShape], each: Sequence[tuple] | None = None) -> tuple:
        """The routes of `shapes` under capture `cap` (step i under `cap` with sizes `each[i]`, ascending and
        unique, where given), as `cap.padded` gives them: (plan mode per step, padded shapes, executed rows, padding
        rows, 1.0 where no graph runs else 0.0, 1.0 where it overflows the largest size else 0.0, padding / executed
        rows). Decode-only steps without padding are routed together (`routing.route_decode`, the same rule),
        other steps one by one."""
        from simulator.engine.routing import route_decode, with_padding

        if all(type(x) is StepShape and not x.prefill_seqs and not x.padding and type(x.decode_seqs) is int
               and type(x.q_len) is int for x in shapes):
            rows = np.fromiter((x.decode_seqs * x.q_len for x in shapes), np.int64, len(shapes))  # routing.step_rows
            mode, padded, over = route_decode(cap.graph, cap.sizes, rows, backend=cap.backend, each=each)
            graphed = padded > 0
            executed = np.where(graphed, padded, rows)
            pad = executed - rows
            runs = [x if not p else with_padding(x, p) for x, p in zip(shapes, pad.tolist())]
            modes = [mode if g else "none" for g in graphed.tolist()]
            return (modes, runs, executed.astype(float).tolist(), pad.astype(float).tolist(),
                    (~graphed).astype(float).tolist(), over.astype(float).tolist(), (pad / executed).tolist())
        if each is not None:
            caps = {}
            for e in set(map(tuple, each)):
                caps[e] = cap.with_graph(cap.graph, e)
            routed = [caps[tuple(e)].padded(x) for e, x in zip(each, shapes)]
        else:
            routed = [cap.padded(x) for x in shapes]
        return ([r.mode for r, _ in routed], [x for _, x in routed], [float(r.executed) for r, _ in routed],
                [float(r.padding) for r, _ in routed], [float(r.padded is None) for r, _ in routed],
                [float(r.overflow) for r, _ in routed], [r.padding / r.executed for r, _ in routed])

    def routed(self, setup, shape: StepShape) -> RoutedStep:
        """`setup.capture` routes the step (once), then the padded step's cost in the routed plan mode."""
        r, run = setup.capture.padded(shape)
        return RoutedStep(r, run, self.step_time(setup, r.mode, run))

    def _fill(self, setup, memo: dict, bs: list[int], shapes: list[StepShape], unpadded: bool = True) -> None:
        """memo[b] = the _COLUMNS of each batch's step: routed and costed as `routed` does it (the padded step in
        its routed plan mode; the same mode at its own rows for `unpad`, NaN without `unpadded`), priced together
        (`step_seconds`)."""
        self._fill_many([(setup, memo, bs, shapes)], unpadded)

    def _fill_many(self, items: list[tuple], unpadded: bool = True) -> None:
        """`_fill` of several (setup, memo, batches, shapes) at once: each step routed once by its setup's capture
        (`_route_many`), the steps of one (cost key, plan mode) priced in one `step_seconds` call whichever setup
        asked (a step's cost does not depend on the capture that routed it)."""
        routed = [self._route_many(st.capture, shapes) for st, _, _, shapes in items]
        # the steps wanted per (cost key, plan mode); the cost keys (the model's every field) hashed once per item:
        # each item's by-mode dicts are looked up by mode
        keys: dict[tuple, dict[str, tuple]] = {}
        by_item = []
        for (st, _, _, shapes), (modes, runs, _, pads, *_) in zip(items, routed):
            by_mode = keys.setdefault(st.cost_key, {})
            by_item.append(by_mode)
            for x, m, run, p in zip(shapes, modes, runs, pads):
                e = by_mode.get(m)
                if e is None:
                    e = by_mode[m] = (st, {}, {})
                d = e[1]
                d[run] = None
                if p and unpadded:
                    d[x] = None
        for by_mode in keys.values():
            for mode, (st, d, g) in by_mode.items():
                todo = list(d)
                g.update(zip(todo, self.step_seconds(st, mode, todo).tolist()))
        nan = math.nan
        for (st, memo, bs, shapes), (modes, runs, ex, pads, eag, ovf, waste), by_mode in zip(items, routed, by_item):
            for b, x, m, run, e, p, z, o, w in zip(bs, shapes, modes, runs, ex, pads, eag, ovf, waste):
                g = by_mode[m][2]
                v = g[run]
                memo[b] = (e, p, z, o, v, (g[x] if p else v) if unpadded else nan, w)

    def _axis_memo(self, setup, ctx: int, pre, unpadded: bool = True) -> dict:
        key = (setup, ctx, pre) if unpadded else (setup, ctx, pre, "padded only")
        memo = self._axis.get(key)
        if memo is None:
            if len(self._axis) > 4096:
                self._axis.clear()
            memo = self._axis[key] = {}
        return memo

    def prefetch_expected(self, setups: Sequence, batches: Sequence[int], ctx: int, *, unpadded: bool = True) -> None:
        """Route and price, together, the decode steps `expected(setup, batches, ..., ctx, unpadded=unpadded)` will
        read for each of `setups` (the optimizer's layouts side by side): later `expected` calls find them memoised
        (the same figures: `_fill_many`)."""
        bs = [int(x) for x in batches]
        items = []
        shapes: dict[int, StepShape] = {}
        for st in setups:
            memo = self._axis_memo(st, ctx, None, unpadded)
            miss = list(dict.fromkeys(b for b in bs if b not in memo))
            if miss:
                items.append((st, memo, miss, [shapes[b] if b in shapes else shapes.setdefault(b, decode(b, ctx))
                                               for b in miss]))
        if items:
            self._fill_many(items, unpadded)

    def prebuild(self, items: Sequence[tuple]) -> None:
        """Build ahead, over the batch axis at once, the steps that `expected(setup, batches, ..., ctx)` of each
        (setup, batches, ctx) of `items` will price (decode steps, routed as `expected` routes them, of the batches
        its memo lacks): a hint from a caller that knows its coming calls (a sweep's task), so that one traced
        build (engine/batchbuild.py) serves them all instead of one per call. Only the batch-axis pricer's built
        rows are kept (engine/batched.py build_rows): no figure, memo of figures or count changes, and a step
        time is the same whenever it is priced."""
        from simulator.engine.batched import build_rows

        todo: dict[tuple, tuple] = {}  # cost key -> (a setup of it, its shapes)
        for setup, batches, ctx in items:
            if setup.recipe == "hf":  # not traced (engine/batchbuild.py traceable)
                continue
            memo = self._axis.get((setup, ctx, None)) or {}
            miss = [b for b in dict.fromkeys(int(x) for x in batches) if b not in memo]
            if not miss:
                continue
            shapes = [decode(b, ctx) for b in miss]
            _, runs, _, pads, *_ = self._route_many(setup.capture, shapes)
            want = todo.setdefault(setup.cost_key, (setup, {}))[1]
            for x, run, p in zip(shapes, runs, pads):
                want[run] = None
                if p:
                    want[x] = None
        for setup, want in todo.values():
            build_rows(setup, list(want), *self._memos(setup))

    def expected(self, setup, batches: Sequence[int], weights: Sequence[float], ctx: int,
                 mixed: tuple[float, int, int] | None = None, *, sizes=None, unpadded: bool = True) -> Expected:
        """Expected step time and padding of steps whose batch sizes follow (`batches`, `weights`: probabilities).

        Every step is routed by `setup.capture` and costed exactly as `routed` does it: a decode step of
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
        Per-batch figures are memoised by (setup, ctx, step kind). `sizes`: the capture's sizes in the order the
        caller gave them (only part of the memo key: routing uses the setup's sorted sizes). `unpadded=False`:
        the unpadded steps are not priced (`unpadded_s` is NaN; every other figure the same)."""
        share, ps, pl = mixed if mixed else (0.0, 0, 0)
        kinds = [(1.0 - share, None)] + ([(share, (int(ps), int(pl)))] if share > 0 else [])
        w = np.asarray(weights, dtype=float)
        bs = [int(x) for x in batches]
        parts, toks, evals = [], [], 0
        for wk, pre in kinds:
            if wk <= 0:
                continue
            memo = self._axis_memo(setup, ctx, pre, unpadded)
            get = memo.get
            miss = list(dict.fromkeys(b for b in bs if b not in memo))
            if miss:
                self._fill(setup, memo, miss, [decode(b, ctx) if pre is None else StepShape(b, ctx, pre[0], pre[1])
                                               for b in miss], unpadded)
            rows = [get(b) for b in bs]
            ww = wk * w
            parts.append(ww[:, None] * np.array(rows))
            toks.append(ww * (np.asarray(bs, dtype=float) + (0 if pre is None else pre[0] * pre[1])))
            evals += len(bs)
        # correctly rounded sums (math.fsum): the figures do not depend on summation order or BLAS
        tot = [math.fsum(c) for c in np.concatenate(parts).T] if parts else [0.0] * len(_COLUMNS)
        tokens = math.fsum(np.concatenate(toks)) if toks else 0.0
        executed, padding, eager, overflow, step, unpad, wmean = tot
        return Expected(step_s=step, unpadded_s=unpad, padded_rows=padding, executed_rows=executed,
                        waste=padding / executed if executed > 0 else 0.0, waste_mean=wmean,
                        overflow_share=overflow, eager_share=eager, tokens=tokens, evals=evals)


DEFAULT = StepCostCache()  # the cache of callers that pass loose arguments (module functions above)


def reset_memo() -> None:
    DEFAULT.clear()
