"""Start-up cost of an engine: torch.compile, the warm-up runs before each capture, and CUDA-graph capture.

One model for every command that reports start-up time (`launchsim startup`, `graph-memory`, the sweep's
`capture_s`, the optimizer's `--capture-budget`, the capacity report): they all call `StartupModel`.

Measured inputs: `profile.host.startup` (a `StartupFigures`, built by calibration/make_profiles.py from the
`capture` and `compile` sections of calibration/measured/h200-engine/engine_loop.json: H200, clean process,
no profiler; calibration/fit_startup.py derives them). A profile without that section is refused (StartupError, one
line): no device's figures are assumed. The shipped derived and datasheet profiles carry the H200 figures, their
`source` saying "H200 measured, applied to <profile> by assumption" (calibration/device_sections.py).

Per capture pass of one size b (fusion F, context `ctx`, default 512 as measured):

    warmup_s  = warmup_runs * eager_step_s(b)        eager_step_s: launchsim's own predicted step time of the
                                                     step run without graphs at fusion F (fast engine), so it
                                                     follows the model, the fusion level and the batch
    capture_s = capture_host_ratio * eager_host_s    eager_host_s: the predicted host time of that eager pass
                                                     (capture runs the forward's host code once, recording
                                                     instead of launching; no kernel runs)

`warmup_runs` defaults to 2 (the measurement did 2; SGLang does 2, vLLM 1-2). Why a host-time ratio and
not a per-graph constant or a per-node figure: capture replays the forward's host code, so a fused step
(255 nodes) cannot take as long as an eager one (1587); launchsim's host model already knows each fusion
level's launch path. On the two measured models the capture times are alike (means 19.4 ms both, rows
17-22 ms) while the node counts differ by 22% (1587 vs 1299) — the data does not resolve per-node
scaling, and the row-to-row spread (+-15%) is larger than the difference. The ratio is derived from the
qwen3-0.6b rows only; the llama3-8b rows and the engine loop's full-graph rows (2 warm-ups + capture)
validate it (calibration/validate_startup.py).

Graph modes: `full` is one capture pass per size; `piecewise` is also one pass per size (the forward runs
once under capture, each piece is captured as the forward reaches it, attention runs eagerly in between,
so the host runs the whole forward); `full_and_piecewise` is two passes per size, each with its own
warm-ups. `none` captures nothing. If the graph-memory table of the profile has measured `capture_s` per
batch (old profiles), it replaces the capture part (interpolated in batch).

Prefill sizes (SGLang's piecewise graphs by token count, simulator/layouts/prefill.py; `prefill_sizes`): one
piecewise capture pass per prefill size T, with its own warm-ups, as the piecewise rule above (`mode` of the pass:
`prefill`, `batch`: T tokens). Its eager pass is launchsim's eager step of T rows (every token-wise kernel runs
T rows; the attention of a real prefill differs). Counted only where mixed steps run piecewise (graph modes
piecewise and full_and_piecewise: routing.plan_mode); elsewhere no mixed step would use them.

Not modelled: the first eager run of a batch shape new to the process costs more (42-49 ms above the
modelled eager step on the llama3-8b capture rows, orders 0-2; the qwen3-0.6b shapes had already run in that process). It depends on
which kernels are new (lazy module loading, cuBLAS heuristics) and shrinks as sizes share kernels, so
launchsim reports it as a note, not a figure; those first warm-ups are excluded from validation.

torch.compile (fusion `compiled` only; `--compile static|dynamic`, `--compile-cache cold|warm`):

    compile_s = fixed_s + per_node_s * nodes         nodes: the eager (fusion none) kernel count of the step
                                                     being compiled (what dynamo traces)

one line per (mode, cache), least squares over its fit rows (calibration/fit_startup.py fits the constants and
scores them; this module only applies them). Measured (H200, calibration/measured/h200-round-d
and -e, one machine, each compile in a fresh process with a fresh Inductor/Triton cache, then again warm):
Inductor fullgraph at batch 8. dynamic=False: qwen3-0.6b cut to 2 layers and llama3-8b cut to 2 and 8 layers
are the fit rows; qwen3-0.6b at its full 28 layers and llama3-8b at its full 32 are held out and validate the
fit (two model sizes; calibration/validate_startup.py). dynamic=True: qwen3-0.6b at 2 and 28 layers, both rows
used for the line (no held-out row: a third was not run for lack of GPU time; the figure says so). Cold
compile time is not a clean function of node count (Inductor compiles each distinct Triton kernel once, so
qwen3-0.6b's extra norms cost more than llama's extra nodes): the cold line is a fit across models, and its
held-out errors are the honest spread. Static compile specialises on the batch shape; engines that compile
one graph per captured size pay more — launchsim counts one compile and says so.

total_s = compile_s + the warm-up and capture of every pass over all sizes.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from simulator.common.errors import UserError
from simulator.common import vocab as V
from simulator.model.models import ModelSpec
from simulator.model.profile import Profile, StartupFigures
from simulator.model.tables import CLAMP, EXTRAPOLATE, linear

DEFAULT_CTX = 512  # context of the measured warm-ups and captures
COMPILE_MODES = V.values(V.CompileMode)
COMPILE_CACHES = V.values(V.CompileCache)


class StartupError(UserError):
    """A start-up question launchsim cannot answer from measurements (bad mode, unmeasured compile)."""


# --------------------------------------------------------------------------------------------- eager pass
EagerFn = Callable[[int], tuple[float, float]]  # batch -> (step_s, host_s) of one eager pass


def _costs_of(profile):
    """A CostModel as given, or a new one of a Profile."""
    from simulator.model.costs import CostModel

    return profile if isinstance(profile, CostModel) else CostModel(profile)


def _eager_point(model: ModelSpec, costs, fusion: str, ctx: int, batch: int) -> tuple[float, float]:
    """(step_s, host_s) of one decode step run eagerly (graph none), from launchsim's fast engine; memoised in the
    cost model (`costs.memos["eager_pass"]`: (model, fusion, ctx) -> {batch: figures}), so every start-up model made
    with one cost model shares the points."""
    memo = costs.memos.get("eager_pass")
    if memo is None:
        memo = costs.memos["eager_pass"] = {}
    key = (model, fusion, ctx)
    pts = memo.get(key)
    if pts is None:
        if len(memo) > 256:
            memo.clear()
        pts = memo[key] = {}
    if batch not in pts:
        from simulator.engine.predict import simulate
        from simulator.model.workload import build_step, decode

        res, _ = simulate(build_step(model, decode(batch, ctx), fusion), costs, "none")
        pts[batch] = (float(res.step_s), float(res.cpu_busy_s))
    return pts[batch]


def eager_pass(model: ModelSpec, profile, fusion: str, batch: int, ctx: int = DEFAULT_CTX) -> tuple[float, float]:
    """(step_s, host_s) of an eager pass at `batch`: simulated at powers of two, linear in between (so a
    search over thousands of sizes costs a dozen simulations; exact at every power of two). `profile`: a CostModel
    (its memo of eager points is shared) or a Profile (a cost model made for this call)."""
    costs = _costs_of(profile)
    return _pow2_interp(lambda b: _eager_point(model, costs, fusion, ctx, b), batch)


def _pow2_many(point, batches: list[int]) -> tuple:
    """`_pow2_interp(point, b)` of each batch (positive ints) as two float arrays (step_s, host_s): the points at the
    powers of two read once each, in the order the scalar loop first reads them, and the same float operations
    elementwise (int / int is numpy's correctly rounded quotient, as Python's, far below 2**53)."""
    import numpy as np

    los = [1 << (b.bit_length() - 1) for b in batches]
    pts: dict[int, tuple[float, float]] = {}
    for b, lo in zip(batches, los):
        if lo not in pts:
            pts[lo] = point(lo)
        if lo != b and 2 * lo not in pts:
            pts[2 * lo] = point(2 * lo)
    B = np.asarray(batches, dtype=np.int64)
    LO = np.asarray(los, dtype=np.int64)
    exact = B == LO
    hi = [lo if e else 2 * lo for lo, e in zip(los, exact.tolist())]
    pa = np.asarray([pts[lo] for lo in los], dtype=float).reshape(-1, 2)
    pb = np.asarray([pts[h] for h in hi], dtype=float).reshape(-1, 2)
    f = (B - LO) / LO
    step = np.where(exact, pa[:, 0], pa[:, 0] + f * (pb[:, 0] - pa[:, 0]))
    host = np.where(exact, pa[:, 1], pa[:, 1] + f * (pb[:, 1] - pa[:, 1]))
    return step, host


def _pow2_interp(point, batch: int) -> tuple[float, float]:
    """`point(b)` -> (step_s, host_s) at the powers of two around `batch`, linear in between (exact at them)."""
    if batch < 1:
        raise StartupError(f"captured batch sizes must be positive integers, got {batch!r}")
    lo = 1 << (int(batch).bit_length() - 1)
    a = point(lo)
    if lo == batch:
        return a
    b = point(2 * lo)
    f = (batch - lo) / lo
    return a[0] + f * (b[0] - a[0]), a[1] + f * (b[1] - a[1])


def compile_nodes(model: ModelSpec) -> int:
    """Nodes of the compiled step: its eager (fusion none) kernel count, which follows depth and width."""
    from simulator.model.workload import build_step, decode

    return len(build_step(model, decode(1, 128), "none").kernel_ops())


# --------------------------------------------------------------------------------------------- model
@dataclass(frozen=True)
class PassCost:
    batch: int
    mode: str  # full | piecewise
    warmup_s: float
    capture_s: float

    def as_dict(self) -> dict:
        return {"batch": self.batch, "mode": self.mode, "warmup_s": self.warmup_s, "capture_s": self.capture_s}


@dataclass(frozen=True)
class StartupResult:
    compile_s: float
    warmup_s: float
    capture_s: float
    total_s: float
    graphs: int
    passes: tuple[PassCost, ...]
    compile_measured: bool  # compile_s inside the measured range (0 without torch.compile counts as measured)
    notes: tuple[str, ...] = ()
    source: str = ""
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"compile_s": self.compile_s, "warmup_s": self.warmup_s, "capture_s": self.capture_s,
                "total_s": self.total_s, "graphs": self.graphs, **self.extra,
                "compile_measured": self.compile_measured, "per_graph": [p.as_dict() for p in self.passes],
                "notes": list(self.notes), "source": self.source}


def figures(profile: Profile) -> tuple[StartupFigures, bool]:
    """(the profile's start-up figures, True); a profile without `host.startup` is refused (the bool is kept for
    callers written when an H200 default stood in: it is always True now)."""
    st = profile.host.startup
    if st is None:
        raise StartupError(f"profile {profile.name} has no host.startup section (warm-up runs, capture ratio, "
                           f"torch.compile lines): start-up and capture time cannot be given for it")
    return st, True


class StartupModel:
    @classmethod
    def of(cls, setup, ctx: int = DEFAULT_CTX, warmup_runs: int | None = None) -> "StartupModel":
        """The start-up model of a `StepSetup` (engine/setup.py): its warm-up passes are its recipe's eager steps
        (fast engine, interpolated between powers of two as `eager_pass`)."""
        from simulator.engine.predict import run_engine
        from simulator.engine.plan import lower
        from simulator.engine.timeline import summarize
        from simulator.model.workload import decode

        pts: dict[int, tuple[float, float]] = {}

        def point(b: int) -> tuple[float, float]:
            if b not in pts:
                r = summarize(run_engine(lower(setup.build(decode(b, ctx)), setup.costs, "none")))
                pts[b] = (float(r.step_s), float(r.cpu_busy_s))
            return pts[b]

        m = cls(setup.model, setup.profile, setup.fusion, setup.capture.graph, ctx, warmup_runs)
        m.setup = setup
        m._point = point
        return m

    def __init__(self, model: ModelSpec, profile, fusion: str = "fused", graph_mode: str = "full",
                 ctx: int = DEFAULT_CTX, warmup_runs: int | None = None, eager: EagerFn | None = None):
        """`profile`: a Profile, or a CostModel (its profile; the eager passes are then memoised in it, shared by
        every start-up model made with it). `eager(batch) -> (step_s, host_s)` replaces launchsim's eager pass
        (tests)."""
        from simulator.model.costs import CostModel

        from simulator.engine.routing import GRAPH_MODES
        from simulator.model.workload import FUSION_LEVELS

        if fusion not in FUSION_LEVELS:
            raise StartupError(f"unknown fusion level '{fusion}': use one of {', '.join(FUSION_LEVELS)}")
        if graph_mode not in GRAPH_MODES:
            raise StartupError(f"unknown graph mode '{graph_mode}': use one of {', '.join(GRAPH_MODES)}")
        if warmup_runs is not None and warmup_runs < 0:
            raise StartupError(f"warm-up runs must be >= 0, got {warmup_runs}")
        self._costs = profile if isinstance(profile, CostModel) else None  # made at the first eager pass
        if isinstance(profile, CostModel):
            profile = profile.profile
        self.model, self.profile, self.fusion, self.graph_mode, self.ctx = model, profile, fusion, graph_mode, ctx
        self.fig, self.own = figures(profile)
        self.warmup_runs = self.fig.warmup_runs if warmup_runs is None else int(warmup_runs)
        from simulator.engine.routing import graph_kinds

        self.modes = graph_kinds(graph_mode)  # full_decode_only captures full graphs, as full
        # the eager pass's figure at a power of two, which `_eager` interpolates between (`sizes_s` reads the points
        # once and interpolates over arrays); None where the caller gave its own `eager`
        self._point: Callable[[int], tuple[float, float]] | None = None if eager else self._default_point
        self._eager: EagerFn = eager or self._interpolated
        self.setup = None
        t = profile.device.graph_memory.get(model.name)
        self._table: tuple[list[int], list[float]] | None = None
        if t is not None and t.capture_s:
            pts = sorted(zip(t.batch, t.capture_s))
            self._table = ([int(b) for b, _ in pts], [float(c) for _, c in pts])

    def _interpolated(self, batch: int) -> tuple[float, float]:
        """The eager pass at `batch`: `_point` at the powers of two around it, linear in between (`eager_pass`)."""
        assert self._point is not None
        return _pow2_interp(self._point, batch)

    def _default_point(self, b: int) -> tuple[float, float]:
        """launchsim's eager step at a power of two (`eager_pass`'s points, memoised in the cost model)."""
        if self._costs is None:
            self._costs = _costs_of(self.profile)
        return _eager_point(self.model, self._costs, self.fusion, self.ctx, b)

    def _capture_one(self, batch: int, host_s: float) -> float:
        if self._table is not None:
            return _interp(*self._table, batch)
        return self.fig.capture_host_ratio * host_s

    def passes(self, batch: int) -> tuple[PassCost, ...]:
        """The capture passes of one size (none, one, or two under full_and_piecewise)."""
        if not isinstance(batch, numbers.Integral) or isinstance(batch, bool) or batch <= 0:
            raise StartupError(f"captured batch sizes must be positive integers, got {batch!r}")
        batch = int(batch)
        if not self.modes:
            return ()
        step_s, host_s = self._eager(batch)
        w, c = self.warmup_runs * step_s, self._capture_one(batch, host_s)
        return tuple(PassCost(batch, m, w, c) for m in self.modes)

    def prefill_passes(self, tokens: int) -> tuple[PassCost, ...]:
        """The capture pass of one prefill size of `tokens` tokens (none unless mixed steps run piecewise)."""
        if not isinstance(tokens, numbers.Integral) or isinstance(tokens, bool) or tokens <= 0:
            raise StartupError(f"prefill sizes must be positive integers, got {tokens!r}")
        from simulator.engine.routing import plan_mode

        if plan_mode(self.graph_mode, pure_decode=False) != "piecewise":
            return ()
        step_s, host_s = self._eager(int(tokens))
        return (PassCost(int(tokens), "prefill", self.warmup_runs * step_s, self._capture_one(int(tokens), host_s)),)

    def size_s(self, batch: int) -> float:
        """Warm-up + capture seconds of one captured size (all its passes): what a capture budget counts."""
        return float(sum(p.warmup_s + p.capture_s for p in self.passes(batch)))

    def sizes_s(self, batches) -> list[float]:
        """`size_s(b)` of each batch, without a PassCost per pass (the same sums); over arrays where the eager pass
        is the interpolation between powers of two (`_pow2_many`: the same figures)."""
        batches = list(batches)
        if self.modes and self._point is not None and len(batches) > 1 and all(
                type(b) is int and b > 0 for b in batches):
            import numpy as np

            step_s, host_s = _pow2_many(self._point, batches)
            cap = (self.fig.capture_host_ratio * host_s if self._table is None else
                   np.asarray([_interp(*self._table, b) for b in batches], dtype=float))
            x = self.warmup_runs * step_s + cap
            tot = np.zeros(len(batches))  # sum() over the passes, from 0
            for _ in self.modes:
                tot = tot + x
            return tot.tolist()
        out = []
        for batch in batches:
            if not isinstance(batch, numbers.Integral) or isinstance(batch, bool) or batch <= 0:
                raise StartupError(f"captured batch sizes must be positive integers, got {batch!r}")
            if not self.modes:
                out.append(0.0)
                continue
            b = int(batch)
            step_s, host_s = self._eager(b)
            x = self.warmup_runs * step_s + self._capture_one(b, host_s)
            v: float = 0  # sum() over the passes, from 0
            for _ in self.modes:
                v += x
            out.append(float(v))
        return out

    def compile(self, mode: str = "static", cache: str = "cold") -> tuple[float, bool, str]:
        """(compile_s, measured, note) of torch.compile for this model (0 unless fusion is `compiled`); measured is
        False where the node count lies outside the measured rows' (an extrapolation of the fit)."""
        if mode not in COMPILE_MODES:
            raise StartupError(f"compile: unknown mode {mode!r}: use {V.one_of(V.CompileMode)}")
        if cache not in COMPILE_CACHES:
            raise StartupError(f"compile_cache: unknown state {cache!r}: use {V.one_of(V.CompileCache)}")
        if self.fusion != "compiled":
            return 0.0, True, f"fusion {self.fusion} runs without torch.compile: compile_s is 0"
        if mode == "dynamic":
            fit = self.fig.compile_dynamic_cold if cache == "cold" else self.fig.compile_dynamic_warm
            if fit is None:
                raise StartupError(f"compile dynamic: {self.fig.compile_dynamic_note or 'not measured'}; launchsim "
                                   f"has no figure for it: use compile static")
        else:
            fit = self.fig.compile_static_cold if cache == "cold" else self.fig.compile_static_warm
        if fit is None:
            raise StartupError(f"profile {self.profile.name} has no measured {cache}-cache compile time")
        if self.setup is not None:  # the recipe's eager (fusion none) kernels: what Inductor traces
            from simulator.model.workload import decode

            n = len(self.setup.with_fusion("none").build(decode(1, 128)).kernel_ops())
        else:
            n = compile_nodes(self.model)
        known = list(fit.nodes) + list(fit.validated_nodes)
        inside = bool(known) and min(known) <= n <= max(known)
        where = (f"within the measured {min(known)}-{max(known)} nodes" if inside else
                 f"extrapolated beyond the measured {min(known)}-{max(known)} nodes" if known else
                 "no node range recorded")
        return (fit.fixed_s + fit.per_node_s * n, inside,
                f"torch.compile {mode}, {cache} cache: {fit.fixed_s:.4g} s + {fit.per_node_s * 1e3:.3g} ms x {n} "
                f"nodes, {where} (one compile; engines that compile per captured size pay it per size)")

    def layout(self, sizes: Iterable[int], compile_mode: str = "static", cache: str = "cold",
               prefill_sizes: Iterable[int] | None = None) -> StartupResult:
        """`prefill_sizes`: token counts of the prefill piecewise graphs (None: none), captured after the sizes."""
        sizes = tuple(sorted({int(s) for s in sizes}, reverse=True))  # captured largest first
        if not sizes:
            raise StartupError("a capture layout needs at least one size")
        comp, measured, cnote = self.compile(compile_mode, cache)
        passes = tuple(p for s in sizes for p in self.passes(s))
        pre = tuple(p for t in sorted({int(t) for t in prefill_sizes or ()}, reverse=True)
                    for p in self.prefill_passes(t))
        passes += pre
        w = float(sum(p.warmup_s for p in passes))
        c = float(sum(p.capture_s for p in passes))
        notes = [cnote]
        if self.graph_mode == "none":
            notes.append("graph mode none: nothing is captured")
        if "piecewise" in self.modes:
            notes.append("piecewise: one capture pass per size (the forward runs once; its pieces are captured "
                         "in turn, attention eager in between)")
        if pre:
            notes.append(f"prefill sizes: {len(pre)} piecewise capture pass(es) by token count (SGLang PCG), each "
                         "warmed up on launchsim's eager step of that many rows")
        elif prefill_sizes:
            notes.append(f"prefill sizes ignored: graph mode {self.graph_mode} runs no mixed step piecewise")
        notes.append(f"{self.warmup_runs} warm-up run(s) per capture pass, each launchsim's eager step time at "
                     f"ctx {self.ctx}")
        notes.append("not included: the first run of a batch shape new to the process (42-49 ms above the eager "
                     "step on llama3-8b, 3 rows), weights loading, KV-cache allocation")
        src = self.fig.source if self._table is None else (
            self.fig.source + "; capture part from the graph-memory table's measured capture_s")
        return StartupResult(comp, w, c, comp + w + c, len(passes), passes, measured, tuple(notes), src)


def _interp(xs: list[int], ys: list[float], x: float) -> float:
    """Measured capture seconds by batch (simulator/model/tables.py `linear`): clamp below the first size, the
    last two points' slope carried on above the last."""
    v = linear(x, xs, ys, below=CLAMP, above=EXTRAPOLATE)
    assert v is not None  # neither policy refuses
    return v


__all__ = ["StartupModel", "StartupResult", "PassCost", "StartupError", "DEFAULT_CTX",
           "COMPILE_MODES", "COMPILE_CACHES", "eager_pass", "compile_nodes", "figures"]
