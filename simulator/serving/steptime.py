"""Step times for the serving model, from the step engine, memoised.

Depth: each step is `stepcost.step_time` of the full model (its plan built by layer tiling, bitwise the full
build), so serving's step is stepcost's bit for bit. `layer_extrapolation=True` instead simulates 2 and 3 layers
and extrapolates linearly, step(L) = step(2) + (L - 2) * (step(3) - step(2)) (equal to 1e-13 relative on every
preset, fusion level and graph mode checked, tests/serving/test_serving_steptime.py, except `compiled`, whose
Inductor pass stores the residual stream every second layer: within 3.4e-3); since plans are tiled it is no
cheaper (1.6 ms against 1.3 ms per qwen3-0.6b step), so it is off by default.

Which plan a step runs and at which padded size is `routing.route` (the table is in routing.py and the README):
decode-only steps route by their n sequences, mixed steps by their T = decode rows + prefill tokens; above the
largest captured size a step runs eager at its own size. The padded step is `routing.padded_shape`, the rule
predict, the sweep and the optimizer use: the padding rows run every token-wise kernel (GEMMs, norms,
elementwise, lm_head) but attend to nothing, as vLLM's padded slots (seq_len 0), so a decode step of n sequences
at context c costs exactly `stepcost.routed_step(..., StepShape(n, c))` (tests/serving/test_serving_steptime.py).
Engine results come from `stepcost.step_time` (one memo per process, keyed by the profile digest).
Engine host work (`scheduling` sync or async, simulator/engine/steploop.py): each step's forward figures are turned
into the engine loop's steady-state step time by `steploop.steady_step_s` with the engine's costs at the step's
sequence count (decode rows, or decode rows + prefill chunks); `none` keeps the forward alone.
Buckets of the memo key (stated here because they are approximations):
- context: the mean context of the step's sequences, rounded UP to a multiple of `ctx_bucket` (256 tokens),
  clamped to the model's position limit; a step's sequences all run at that context;
- mixed steps: the prefill chunks are modelled as `p` equal chunks of the mean length L, every sequence at the
  step's mean context; each grid point runs with its own padding rows (those of its d + p * L tokens under the
  layout), so a step on a grid point is exactly `routed_step`'s and padding is interpolated between grid
  points like the rest of the step; the step time is interpolated
  trilinearly in (decode rows d, L, context) between points of three grids: d in 0, 1, 2, 4, 8, 12, 16, 24,
  32, 48 ... (x1.5 / x1.33 steps), L in 16, 32, 48, 64 then four points per octave (multiples of 16), and
  context in 0, 256, 512, 1024, 1536, 2048, 3072, 4096, ...  (interpolation overestimates the exact engine by 0.3% on average, at most 5%, on random shapes checked).
Keys: (plan mode, StepShape as the GPU runs it, padding included). Engine figures are priced on the batch axis
(`StepCostCache.step_figures`, engine/batched.py: bitwise `stepcost.step_time`'s), a mixed cell's missing corners
together; fusion `compiled` is priced by `step_time` one step at a time (its tiled plans are step_time's own).
Speculative decoding (the setup's `spec`, k draft tokens): a decode step of n sequences is the verify step of
n x (1 + k) tokens (StepShape.q_len = 1 + k, padded in tokens to the capture sizes, which count verify tokens:
simulator/layouts/spec.py), in the graph mode verify steps run in (engine/spec.py verify_graph_mode), plus the draft
loop (model/spec.py draft_loop, each pass routed in the draft's own graph mode over the same token sizes), the
same arithmetic as engine/spec.py predict_spec_setup, memoised by (n, context bucket). The bucket's context is
clamped so that the drafts (ctx + 2(k + 1)) stay within the model's positions. Mixed steps with decode rows:
`spec_extra` is what the speculative decode step of those rows costs over a plain decode step of them (the k
verify tokens per row and the draft loop), added to the plain mixed step by the replica: the workload builder does
not model verify rows beside prefill rows, so their extra tokens are priced as in a decode-only step.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

from simulator.model.costs import CostModel
from simulator.model.models import ModelSpec
from simulator.engine.routing import DEFAULT_BACKEND, check_backend, check_mode, padded_shape
from simulator.engine.stepcost import resolve
from simulator.model.workload import StepShape

CTX_BUCKET = 256



def clear_step_cache() -> None:
    """Forget every memoised step time of stepcost.py's DEFAULT cache, the serving timers' shared step costs
    included (benchmarks use it to measure cold runs)."""
    from simulator.engine.stepcost import reset_memo

    reset_memo()


class StepCost(NamedTuple):
    step_s: float
    gpu_busy_s: float
    cpu_bound: bool
    mode: str  # plan that ran: none | full | piecewise
    rows: int  # real rows (sequences for decode steps, tokens for mixed steps)
    padded: int  # rows after padding (== rows when eager)
    cpu_busy_s: float = 0.0  # the forward's host launch work
    gpu_gap_s: float = 0.0  # the forward's in-stream gaps


class StepTimer:
    """Serving's step times for one `StepSetup` (engine/setup.py: model, costs, fusion, implementation, capture),
    memoised; `cache`: the run's `stepcost.StepCostCache` (default: stepcost's DEFAULT)."""

    def __init__(self, model: ModelSpec, costs: CostModel, fusion: str, graph: str, sizes: list[int],
                 ctx_bucket: int = CTX_BUCKET, engine: str = "fast", layer_extrapolation: bool = False,
                 scheduling: str = "none", sampling: str = "greedy", *, backend: str = DEFAULT_BACKEND,
                 prefill_sizes: list[int] | None = None, setup=None, cache=None):
        from simulator.engine.setup import Capture, StepSetup
        from simulator.engine.stepcost import DEFAULT

        if setup is None:
            check_mode(graph)
            check_backend(backend)
            cap = Capture(graph, tuple(sizes) if graph != "none" else (),
                          tuple(prefill_sizes) if prefill_sizes is not None and graph != "none" else None, backend)
            _, costs, digest = resolve(costs)
            setup = StepSetup(model, costs, digest, fusion, None, cap)
        self.setup, self.cache = setup, cache or DEFAULT
        cap = setup.capture
        self.model, self.costs, self.fusion, self.graph = setup.model, setup.costs, setup.fusion, cap.graph
        self.backend, self.prefill_sizes = cap.backend, cap.prefill_sizes
        self.sizes = list(cap.sizes or ()) if cap.graph != "none" else []
        self.scheduling, self.sampling = scheduling, sampling
        self._ec: dict[int, object] = {}
        self.ctx_bucket, self.engine = ctx_bucket, engine
        self.max_pos = setup.model.max_position_embeddings
        self.layer_extrapolation = layer_extrapolation
        # engine figures from StepCostCache.step_figures (the batch axis, engine/batched.py: a plan's arrays from the
        # full build) where they are stepcost.step_time's bit for bit; `compiled` keeps step_time's tiled plans,
        # which differ from the full build in the last bits at some shapes (Inductor's layers alternate)
        self._batched = engine == "fast" and not layer_extrapolation and setup.fusion != "compiled"
        self._s2 = setup.with_layers(2)
        self._s3 = setup.with_layers(3)
        # engine results shared by every StepTimer of the run's cache with the same profile, model, fusion and engine
        # (a capacity study's configurations differ in graph mode and layout but reuse many step shapes); keyed by
        # (plan mode, StepShape as the GPU runs it, padding rows included), so sharing is exact
        self._cache: dict[tuple, StepCost] = self.cache.shared(("serving.StepTimer", setup.cost_key, engine,
                                                                 layer_extrapolation))
        self._decode: dict[tuple[int, int], StepCost] = {}
        self._cells: dict[tuple, tuple] = {}  # mixed-step grid cell -> its 8 corners' figures
        self._brackets_d: dict[int, tuple] = {}
        self._brackets_c: dict[int, tuple] = {}
        self._brackets_l: dict[tuple[int, int], tuple] = {}
        self._mroutes: dict[int, tuple[str, int]] = {}  # mixed step's tokens -> (plan mode, padded size)
        self._mpads: dict[int, int] = {}  # a mixed grid point's tokens -> its padding rows
        self.misses = 0
        self._sdecode: dict[tuple[int, int], StepCost] = {}  # spec: (n, ctx bucket) -> verify + draft step
        self._vsetup = None  # spec: the setup in the verify steps' graph mode
        self._draft = None  # spec: the draft (model/spec.py Draft)

    @classmethod
    def of(cls, setup, ctx_bucket: int = CTX_BUCKET, engine: str = "fast", layer_extrapolation: bool = False,
           scheduling: str = "none", sampling: str = "greedy", cache=None) -> "StepTimer":
        """The timer of a `StepSetup`, passed whole."""
        return cls(setup.model, setup.costs, setup.fusion, setup.capture.graph, [], ctx_bucket, engine,
                   layer_extrapolation, scheduling, sampling, setup=setup, cache=cache)

    def ctx_of(self, ctx: int) -> int:
        """The context bucket a mean context `ctx` falls in (rounded up to a multiple of ctx_bucket)."""
        b = self.ctx_bucket
        return max(b, -(-ctx // b) * b)

    def _engine(self, setup, shape: StepShape, mode: str):
        """The step's result in plan mode `mode` (routed already)."""
        if self.engine == "fast":
            return self.cache.step_time(setup, mode, shape)
        from simulator.engine.predict import run_engine
        from simulator.engine.plan import lower
        from simulator.engine.timeline import summarize

        return summarize(run_engine(lower(setup.build(shape), self.costs, mode), self.engine))

    def _run(self, key: tuple, shape: StepShape, mode: str, rows: int, padded: int) -> StepCost:
        L = self.model.num_hidden_layers
        if self.layer_extrapolation and L > 3:
            a, b = self._engine(self._s2, shape, mode), self._engine(self._s3, shape, mode)
            f = L - 2
            step = a.step_s + f * (b.step_s - a.step_s)
            gpu = a.gpu_busy_s + f * (b.gpu_busy_s - a.gpu_busy_s)
            cpu = a.cpu_busy_s + f * (b.cpu_busy_s - a.cpu_busy_s)
            gaps = a.gpu_gap_s + f * (b.gpu_gap_s - a.gpu_gap_s)
            c = StepCost(step, gpu, cpu >= gpu + gaps, b.graph_mode, rows, padded, cpu, gaps)
        elif self._batched:  # the engine's figures of the step, priced on the batch axis (bitwise)
            self._price(mode, [(shape, rows, padded)])
            return self._cache[key]
        else:
            r = self._engine(self.setup, shape, mode)
            c = StepCost(r.step_s, r.gpu_busy_s, r.bound == "cpu", r.graph_mode, rows, padded, r.cpu_busy_s,
                         r.gpu_gap_s)
        self.misses += 1
        self._cache[key] = c
        return c

    def _price(self, mode: str, todo: list[tuple[StepShape, int, int]]) -> None:
        """Memoise the StepCost of each (shape, rows, padded rows) in plan mode `mode`, priced together by
        `StepCostCache.step_figures` (`stepcost.step_time`'s figures, bitwise: `bound` is its CPU-bound test)."""
        figs = self.cache.step_figures(self.setup, mode, [t[0] for t in todo])
        for (shape, rows, padded), (step, gpu, cpu, gaps) in zip(todo, figs):
            self._cache[(mode, shape)] = StepCost(step, gpu, cpu >= gpu + gaps, mode, rows, padded, cpu, gaps)
        self.misses += len(todo)

    def decode(self, n: int, ctx: int) -> StepCost:
        """A decode-only step of n sequences at mean context ctx (>= 1) (spec: the verify step plus the draft
        loop)."""
        if self.setup.spec is not None:
            return self.spec_decode(n, ctx)
        return self.plain_decode(n, ctx)

    def spec_decode(self, n: int, ctx: int) -> StepCost:
        """The speculative decode step of n sequences: verify (n(1 + k) tokens) + draft loop (module docstring)."""
        from dataclasses import replace

        from simulator.engine.routing import lowered_pure, route
        from simulator.engine.spec import verify_graph_mode
        from simulator.engine.predict import simulate
        from simulator.model.spec import draft_for, draft_loop, draft_step

        b = self.ctx_bucket
        key = (n, -(-ctx // b))
        c = self._sdecode.get(key)
        if c is not None:
            return c
        if self.layer_extrapolation:
            raise ValueError("layer_extrapolation does not apply to speculative steps")
        sp, cap = self.setup.spec, self.setup.capture
        q = 1 + sp.k
        cb = max(1, min(key[1] * b, self.max_pos - 1 - 2 * q))
        vgraph, _ = verify_graph_mode(sp.engine, cap.graph, str(cap.backend), sp.k)
        vsetup = self._vsetup
        if vsetup is None:
            vsetup = self._vsetup = replace(self.setup, capture=replace(cap, graph=vgraph))
        r, shape = vsetup.capture.padded(StepShape(n, cb, q_len=q))
        v = self.cache.step_time(vsetup, r.mode, shape)
        step, gpu, cpu, gaps = v.step_s, v.gpu_busy_s, v.cpu_busy_s, v.gpu_gap_s
        if self._draft is None:
            self._draft = draft_for(self.setup.model, sp.draft)
        for st, cnt in draft_loop(self._draft, sp.k, n, cb, self.fusion):
            qq = st.tokens // n
            # the draft's own graph mode (engine/setup.py DRAFT_GRAPH); an eager target (graph none) drafts eagerly
            dr = route(sp.draft_mode if cap.graph != "none" else "none", cap.sizes, st.tokens, True,
                       backend=cap.backend)
            run = draft_step(self._draft, n, cb if qq > 1 else cb + sp.k + 1, self.fusion, q_len=qq,
                             padding=dr.padding) if dr.padding else st
            res, _ = simulate(run, self.costs, dr.mode, pure_decode=lowered_pure(dr.mode, True))
            step += cnt * res.step_s
            gpu += cnt * res.gpu_busy_s
            cpu += cnt * res.cpu_busy_s
            gaps += cnt * res.gpu_gap_s
        self.misses += 1
        c = StepCost(step, gpu, cpu >= gpu + gaps, v.graph_mode, n * q, r.executed, cpu, gaps)
        c = self._with_engine(c, n)
        self._sdecode[key] = c
        return c

    def spec_extra(self, n: int, ctx: int) -> float:
        """Seconds a speculative decode step of n sequences costs over a plain decode step of them (>= 0 is not
        assumed: the two route differently)."""
        return self.spec_decode(n, ctx).step_s - self.plain_decode(n, ctx).step_s

    def plain_decode(self, n: int, ctx: int) -> StepCost:
        """A plain decode-only step of n sequences at mean context ctx (>= 1)."""
        b = self.ctx_bucket
        k = (n, -(-ctx // b))
        c = self._decode.get(k)
        if c is not None:
            return c
        cb = min(k[1] * b, self.max_pos - 1)
        r = self.setup.capture.route_rows(n)
        mode, rows = r.mode, r.executed
        shape = padded_shape(StepShape(n, cb), r)  # padding rows attend to nothing (routing.padded_shape)
        key = (mode, shape)
        c = self._cache.get(key)
        if c is None:
            c = self._run(key, shape, mode, n, rows)
        if c.rows != n:
            c = c._replace(rows=n, padded=rows)
        c = self._with_engine(c, n)
        self._decode[k] = c
        return c

    def _with_engine(self, c: StepCost, seqs: int) -> StepCost:
        """The forward's figures turned into the engine loop's steady-state step (scheduling sync/async)."""
        if self.scheduling == "none":
            return c
        from simulator.engine.steploop import engine_costs, steady_step_s

        ec = self._ec.get(seqs)
        if ec is None:
            ec = self._ec[seqs] = engine_costs(self.costs.profile, seqs, self.sampling)
        step = steady_step_s(c.step_s, c.cpu_busy_s, c.gpu_busy_s + c.gpu_gap_s, ec, self.scheduling)
        host = c.cpu_busy_s + ec.host_s
        return c._replace(step_s=step, cpu_bound=host >= c.gpu_busy_s + c.gpu_gap_s + ec.gpu_s)

    def _mixed_shape(self, mode: str, d: int, p: int, L: int, cb: int) -> tuple[StepShape, int]:
        """A grid point's StepShape as the GPU runs it (clamped to the model's positions, its own padding rows)
        and its rows (d + p * L, of the clamped L)."""
        L = min(L, self.max_pos - 1)  # grid points past the model's position limit are clamped to it
        cb = max(0, min(cb, self.max_pos - L - 1))
        pad = 0
        if mode != "none":
            t = d + p * L
            pad = self._mpads.get(t)
            if pad is None:
                pad = self._mpads[t] = self._route_mixed(t).padding
        return StepShape(d, cb, p, L, pad), d + p * L

    def cell(self, mode: str, p: int, d0: int, d1: int, l0: int, l1: int, c0: int, c1: int) -> tuple:
        """The 8 corners' figures of a mixed-step grid cell, (step s, GPU busy s, CPU-bound, (CPU busy s, GPU gap
        s)) each a tuple over the corners (d, L, ctx in that nesting order), memoised; the corners the memo lacks
        are priced together (`_price`) when the engine is the fast one."""
        key = (mode, p, d0, d1, l0, l1, c0, c1)
        v = self._cells.get(key)
        if v is not None:
            return v
        pts = [self._mixed_shape(mode, a, p, b, c) for a in (d0, d1) for b in (l0, l1) for c in (c0, c1)]
        memo = self._cache
        if self._batched:
            todo: dict[StepShape, tuple] = {}
            for shape, rows in pts:
                if (mode, shape) not in memo and shape not in todo:
                    todo[shape] = (shape, rows, shape.tokens)
            if todo:
                self._price(mode, list(todo.values()))
        cs = [memo.get((mode, shape)) or self._run((mode, shape), shape, mode, rows, shape.tokens)
              for shape, rows in pts]
        v = self._cells[key] = (tuple(c.step_s for c in cs), tuple(c.gpu_busy_s for c in cs),
                                tuple(c.cpu_bound for c in cs), tuple((c.cpu_busy_s, c.gpu_gap_s) for c in cs))
        return v

    def _route_mixed(self, tokens: int):
        return self.setup.capture.route_rows(tokens, pure_decode=False)

    def mixed(self, d: int, p: int, prefill_tokens: int, ctx: int) -> StepCost:
        """A step with `d` decode rows and `p` prefill chunks holding `prefill_tokens` tokens in all, at mean
        context `ctx` (exact: mixed steps interpolate in the context instead of bucketing it)."""
        T = d + prefill_tokens
        rt = self._mroutes.get(T)
        if rt is None:
            r = self._route_mixed(T)
            rt = self._mroutes[T] = (r.mode, r.executed)
        mode, padded = rt
        bd, bc, bl = self._brackets_d, self._brackets_c, self._brackets_l
        d0, d1, wd = bd.get(d) or bd.setdefault(d, bracket(d, D_GRID))
        lk = (prefill_tokens, p)
        l0, l1, wl = bl.get(lk) or bl.setdefault(lk, bracket(prefill_tokens / p, L_GRID))
        c0, c1, wc = bc.get(ctx) or bc.setdefault(ctx, bracket(ctx, C_GRID))
        v = self._cells.get((mode, p, d0, d1, l0, l1, c0, c1)) or self.cell(mode, p, d0, d1, l0, l1, c0, c1)
        st, gp, cb, hg = v
        uc, ul, ud = 1.0 - wc, 1.0 - wl, 1.0 - wd
        step = ((st[0] * uc + st[1] * wc) * ul + (st[2] * uc + st[3] * wc) * wl) * ud + \
               ((st[4] * uc + st[5] * wc) * ul + (st[6] * uc + st[7] * wc) * wl) * wd
        gpu = ((gp[0] * uc + gp[1] * wc) * ul + (gp[2] * uc + gp[3] * wc) * wl) * ud + \
              ((gp[4] * uc + gp[5] * wc) * ul + (gp[6] * uc + gp[7] * wc) * wl) * wd
        near = (wd >= 0.5) * 4 + (wl >= 0.5) * 2 + (wc >= 0.5)  # the nearest grid point decides
        c = StepCost(step, gpu, cb[near], mode, T, padded, *hg[near])
        return self._with_engine(c, d + p) if self.scheduling != "none" else c


def _grid_d() -> list[int]:
    g, x = [0, 1, 2, 4], 8
    while x <= 1 << 20:
        g += [x, x * 3 // 2]
        x *= 2
    return g


def _grid_l() -> list[int]:
    g, i = [16, 32, 48, 64], 1
    while g[-1] < 1 << 20:
        v = int(-(-64 * 2 ** (i / 4) // 16) * 16)
        if v > g[-1]:
            g.append(v)
        i += 1
    return g


def _grid_c() -> list[int]:
    g, x = [0, 256, 512], 1024
    while x <= 1 << 21:
        g += [x, x * 3 // 2]
        x *= 2
    return g


C_GRID = _grid_c()  # context of a mixed step: 0, 256, 512, 1024, 1536, 2048, 3072, 4096, ...
D_GRID = _grid_d()  # decode rows of a mixed step: 0, 1, 2, 4, 8, 12, 16, 24, 32, 48, ...
L_GRID = _grid_l()  # prefill chunk length: 16, 32, 48, 64, then 4 points per octave (multiples of 16)


def bracket(x: float, grid: list[int]) -> tuple[int, int, float]:
    """Grid points lo <= x <= hi and the weight of hi (x below the grid clamps to its first point)."""
    i = bisect.bisect_left(grid, x)
    if i < len(grid) and grid[i] == x:
        return grid[i], grid[i], 0.0
    if i == 0:
        return grid[0], grid[0], 0.0
    lo, hi = grid[i - 1], grid[min(i, len(grid) - 1)]
    return lo, hi, (x - lo) / (hi - lo) if hi > lo else 0.0
