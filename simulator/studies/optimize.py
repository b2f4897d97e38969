"""Bucket-layout optimization study: step costs and graph memory -> an exact optimizer problem -> the best
layout, the presets under the same constraints, Pareto frontiers, and the report (`launchsim optimize`,
scenario kind `buckets`).

Step-time objective: a step of batch b padded to size s costs the simulated step of b sequences and s - b
padding rows (which run the token-wise kernels but attend to nothing, `routing.padded_shape`) under the graph
mode; above the largest size it runs eagerly (graph none). Both come from `stepcost.routed_step` (routing.py
decides the mode and size, stepcost.py the memoised fast-engine time, decode at `ctx`). The DP takes it as
alpha(s) + beta(b): alpha(s) = one sequence padded to s, beta(b) = b sequences over one, padded to the largest
candidate; exact (to 1e-14) where the step's time adds up over its kernels (GPU-bound replays: full graphs),
within 0.2% where host-bound piecewise pieces leave bubbles; `metrics` reports the routed steps themselves.
Padded-rows objective: padded rows per step; the largest size is fixed at max_size.
Memory and capture time come from GraphMemoryModel (shared pool captured largest-first, or private).

Speculative decoding (`spec_tokens` k > 0, issue 21 item 2): sizes count tokens. Candidates are the token sizes
every engine accepts at k (simulator/layouts/spec.py `allowed_sizes`: multiples of 1 + k at tp 1, the same for
vLLM, SGLang and TensorRT-LLM); a decode batch of B sequences is a verify step of B(1 + k) tokens
(StepShape.q_len = 1 + k) padded to the smallest chosen size >= it; alpha(s) = one sequence's verify step padded
to s tokens, beta(B) as above over verify steps. The verify steps run in `engine.spec.verify_graph_mode` (vLLM
with FlashInfer drops FULL to PIECEWISE, said in `spec_notes`). What is NOT in the objective: the draft loop.
Its first pass (B(1 + k) tokens) pads like the verify step, but its k - 1 single-token passes (B tokens) pad to
a different size of the same list, so its cost is not alpha(s) + beta(B) of one size; and acceptance scales
every layout's per-token figure by the same tokens_per_step, so it cannot move the optimum (it is refused).
Presets are the engines' spec-decode lists (spec_layout(engine, k).tokens); memory and capture time are those of
the target's graphs at those token sizes (the draft's own graphs: `launchsim graph-memory --spec-tokens`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from simulator.optimizer import exact as opt
from simulator.layouts.buckets import preset_sizes
from simulator.model.costs import CostModel
from simulator.layouts.distribution import BatchDistribution
from simulator.layouts.engine_syntax import engine_syntax  # noqa: F401  (re-exported: one line per engine)
from simulator.common.errors import UserError
from simulator.common import vocab as V
from simulator.common.limits import MAX_OPTIMIZE_SIZE
from simulator.config.specs import parse_memory_budget  # noqa: F401  (the scenario field's parser)
from simulator.engine.graph_memory import GraphMemoryModel
from simulator.model.models import ModelSpec
from simulator.engine.routing import check_mode
from simulator.engine.setup import Capture, StepSetup
from simulator.engine.stepcost import StepCostCache
from simulator.model.workload import StepShape, decode

PRESETS = V.values(V.COMPARED_PRESETS)
GiB, MiB = float(1 << 30), float(1 << 20)


class OptimizeError(UserError):
    pass


@dataclass
class Inputs:
    dist: BatchDistribution
    model: str | ModelSpec = "qwen3-8b"
    profile: str | None = None
    fusion: str = "fused"
    graph: str = "full"
    ctx: int = 1024
    objective: str = "step-time"
    max_graphs: int = 64
    memory_budget: float | str | None = None  # bytes, or a preset name: that preset's memory
    capture_budget: float | None = None
    max_size: int | None = None
    shared_pool: bool = True
    presets: tuple[str, ...] = PRESETS
    dtype: str = "bf16"  # weights (simulator/model/dtype.py)
    kv_dtype: str = "bf16"
    opts: object = None  # config/stepopts.StepOptions of the scenario (impl, dtypes, ...): the step setup's knobs
    cover_max_size: bool = False  # step-time objective: the largest size must be max_size (mixed steps up to it keep a graph)
    spec_tokens: int = 0  # speculative decoding: k draft tokens per sequence; sizes then count verify tokens


SPEC_PRESETS = ("vllm", "sglang", "trtllm")  # engines with a spec-decode capture rule (layouts/spec.py)


@dataclass
class Setup:
    """Everything the optimizer and the report need, computed once."""

    inp: Inputs
    model: ModelSpec
    gm: GraphMemoryModel
    costs: CostModel
    sizes: np.ndarray
    step: StepSetup | None = None  # the step configuration (engine/setup.py); its capture's sizes vary per call
    cache: StepCostCache | None = None  # this run's step costs
    notes: tuple = ()  # spec: the engine's graph-mode note (verify_graph_mode)

    @property
    def q(self) -> int:
        """Tokens a sequence runs per step: 1 + k (1 without speculation)."""
        return 1 + self.inp.spec_tokens

    def shape(self, b: int):
        """The step of b sequences the layout pads: a decode step, or a verify step of b(1 + k) tokens."""
        return decode(int(b), self.inp.ctx) if self.q == 1 else StepShape(int(b), self.inp.ctx, q_len=self.q)

    def rows(self, batches) -> np.ndarray:
        """The rows (tokens under speculation) of steps of `batches` sequences: what sizes are compared with."""
        return np.asarray(batches, dtype=np.int64) * self.q

    def __post_init__(self):
        if self.step is None:
            self.step = StepSetup.of(self.model, self.costs, self.inp.fusion, Capture(self.inp.graph))
        if self.cache is None:
            self.cache = StepCostCache()

    def step_s(self, b: int, sizes) -> float:
        """A decode step of batch b under the graph mode and captured `sizes` (routed, memoised: stepcost.py)."""
        st = self.step.with_capture(self.step.capture.with_graph(self.step.capture.graph, sizes))
        return self.cache.routed(st, self.shape(b)).step_s

    def steps_s(self, pairs) -> np.ndarray:
        """`step_s(b, sizes)` of each (b, sizes) pair, priced together (`StepCostCache.routed_step_seconds`: each
        step routed by the capture with its own sizes, the steps of one plan mode costed over the batch axis at
        once)."""
        each = [(int(sizes[0]),) if len(sizes) == 1 else tuple(sorted({int(x) for x in sizes}))  # Capture's sizes
                for _, sizes in pairs]
        shapes: dict[int, object] = {}  # one shape object per batch (many pairs share one)
        return self.cache.routed_step_seconds(
            self.step, [shapes[b] if b in shapes else shapes.setdefault(b, self.shape(b)) for b, _ in pairs], each)

    def graph_s(self, s: int) -> float:
        """The DP's alpha: a step of one sequence padded to captured size s (its padding rows attend to nothing,
        so a padded step's cost also depends on its real batch: `real_s`)."""
        return self.step_s(1, (int(s),))

    def real_s(self, b: int, top: int) -> float:
        """The DP's beta: what b real rows cost over one real row, in a step padded to `top` (>= b)."""
        return self.step_s(b, (top,)) - self.step_s(1, (top,))

    def eager_s(self, b: int) -> float:
        """A step of batch b above the largest captured size (the DP's eager term)."""
        return self.step_s(b, ())

    def memory(self, sizes) -> tuple[float, float]:
        lm = self.gm.layout(sizes, self.inp.shared_pool)
        return lm.total_bytes, lm.capture_s


def setup(inp: Inputs) -> Setup:
    if inp.objective not in V.values(V.Objective):
        raise OptimizeError(f"objective must be {V.one_of(V.Objective)}, got {inp.objective!r}")
    if check_mode(inp.graph) == V.GraphMode.NONE:
        raise OptimizeError(f"graph none captures no graphs: pick {V.one_of(V.CAPTURING_MODES)}")
    if inp.max_graphs < 1:
        raise OptimizeError(f"max_graphs must be >= 1, got {inp.max_graphs}")
    if inp.ctx <= 0:
        raise OptimizeError(f"ctx must be a positive integer, got {inp.ctx}")
    if inp.max_size is not None and inp.max_size <= 0:
        raise OptimizeError(f"max_size must be a positive integer, got {inp.max_size}")
    if inp.capture_budget is not None and not inp.capture_budget > 0:
        raise OptimizeError(f"capture_budget must be a positive number of seconds, got {inp.capture_budget}")
    if inp.max_size is not None and inp.max_size > MAX_OPTIMIZE_SIZE:
        raise OptimizeError(f"max_size {inp.max_size:,} is above the limit of {MAX_OPTIMIZE_SIZE:,}")
    if inp.max_graphs > MAX_OPTIMIZE_SIZE:
        raise OptimizeError(f"max_graphs {inp.max_graphs:,} is above the limit of {MAX_OPTIMIZE_SIZE:,}")
    if inp.max_size is None and inp.dist.max_batch > MAX_OPTIMIZE_SIZE:
        raise OptimizeError(f"{inp.dist.label}: the largest batch, {inp.dist.max_batch:,}, is above the "
                            f"optimizer's limit of {MAX_OPTIMIZE_SIZE:,} candidate sizes: give max_size "
                            f"<= {MAX_OPTIMIZE_SIZE:,}; larger batches then run without a graph")
    k = inp.spec_tokens
    if k:
        from simulator.layouts.spec import check_k

        check_k(k)
        bad = [n for n in inp.presets if n not in SPEC_PRESETS]
        if bad:
            raise OptimizeError(f"presets {bad} have no spec-decode capture rule: with spec_tokens compare "
                                f"{', '.join(SPEC_PRESETS)}")
        if isinstance(inp.memory_budget, str) and inp.memory_budget not in SPEC_PRESETS:
            raise OptimizeError(f"memory_budget preset {inp.memory_budget!r} has no spec-decode capture rule: "
                                f"name one of {', '.join(SPEC_PRESETS)} or give bytes")
    graph, notes = inp.graph, ()
    if k:
        from simulator.engine.spec import verify_graph_mode

        backend = getattr(inp.opts, "attention_backend", "flashinfer") if inp.opts is not None else "flashinfer"
        graph, note = verify_graph_mode("vllm", inp.graph, backend, k)
        notes = (note,) if note else ()
    if inp.opts is not None:  # the scenario's step options, whole (config/stepopts.py)
        from simulator.config.stepopts import build_setup

        step = build_setup(inp.opts, inp.model, inp.profile, inp.fusion, graph)
    else:
        from simulator.model.resolve import resolve_model

        step = StepSetup.of(resolve_model(inp.model, inp.dtype, inp.kv_dtype), inp.profile, inp.fusion,
                            Capture(graph))
    model, costs = step.model, step.costs
    from simulator.engine.graph_memory import check_weights_fit

    check_weights_fit(model, costs.profile)
    gm = GraphMemoryModel(model, costs, inp.fusion, graph)
    if k:
        from simulator.layouts.spec import allowed_sizes

        mx = inp.max_size or inp.dist.max_batch * (1 + k)  # tokens
        if mx > MAX_OPTIMIZE_SIZE:
            raise OptimizeError(f"{inp.dist.label}: the largest verify step, {mx:,} tokens, is above the optimizer's "
                                f"limit of {MAX_OPTIMIZE_SIZE:,}: give max_size (tokens) <= {MAX_OPTIMIZE_SIZE:,}")
        cand = allowed_sizes("vllm", k, mx)
        if not cand:
            raise OptimizeError(f"max_size {mx} is below {1 + k} tokens (one verify step of one sequence at "
                                f"spec_tokens {k}): no capture size fits")
        return Setup(inp, model, gm, costs, np.asarray(cand, dtype=np.int64), step, notes=notes)
    mx = inp.max_size or inp.dist.max_batch
    return Setup(inp, model, gm, costs, np.arange(1, mx + 1), step)


def preset_layout(st: Setup, name: str) -> list[int]:
    """A preset's sizes (tokens under speculation: the engine's spec-decode list at k, layouts/spec.py)."""
    if st.inp.spec_tokens:
        from simulator.layouts.spec import spec_layout

        g = "piecewise" if st.step.capture.graph == "piecewise" else "full"
        return list(spec_layout(name, st.inp.spec_tokens, graph=g).tokens)
    return preset_sizes(name)


def memory_budget(st: Setup) -> float | None:
    mb = st.inp.memory_budget
    if isinstance(mb, str):
        if mb not in PRESETS + (V.LayoutPreset.POW2.value,):
            raise OptimizeError(f"memory_budget: {mb!r} is neither bytes nor a preset name")
        return st.memory(preset_layout(st, mb))[0]  # the engine's real list, not cut at the largest batch
    if mb is not None and not mb > 0:
        raise OptimizeError(f"memory_budget must be positive, got {mb}")
    return mb


def build_problem(st: Setup, budget: float | None, max_graphs: int | None = None) -> opt.Problem:
    inp, gm, sizes = st.inp, st.gm, st.sizes
    b, w = inp.dist.as_arrays()
    rows = st.rows(b)  # what sizes are compared with (tokens under speculation); b stays the sequence count
    static = gm.static_buffer_bytes_many(sizes)  # per size, arrays (graph_memory.py: the scalar figures)
    floor = None
    if inp.shared_pool:  # memory = static + max(floor, base + outputs of the other sizes): graph_memory.py
        t_floor, t_base = gm.shared_terms_many(sizes)
        chk = inc = gm.output_bytes_many(sizes)
        floor, static = static + t_floor, static + t_base - inc
    else:  # memory = static + W + sum of pools
        chk = inc = gm.pool_bytes_many(sizes)
        static = static + gm.constants.capture_workspace_bytes
    if inp.objective == "step-time":
        top = int(sizes[-1])
        # graph_s(s), real_s(b, top) and eager_s(b) of every candidate and batch, priced in one pass
        n_s, n_b = sizes.size, b.size
        fit = [int(x) for x, r in zip(b, rows) if r <= top]
        v = st.steps_s([(1, (int(s),)) for s in sizes] + [(1, (top,))] + [(x, (top,)) for x in fit]
                       + [(int(x), ()) for x in b])
        alpha = v[:n_s]
        beta = np.zeros(n_b)
        beta[rows <= top] = v[n_s + 1:n_s + 1 + len(fit)] - v[n_s]
        eager = v[n_s + 1 + len(fit):]
        final_ok = sizes == sizes[-1] if inp.cover_max_size else None
    else:
        alpha, beta, eager = sizes.astype(float), -rows.astype(float), np.zeros(b.size)  # padded rows (tokens)
        final_ok = sizes == sizes[-1]
    return opt.Problem(sizes, rows, w, alpha, beta, eager, max_graphs or inp.max_graphs, final_ok,
                       static=static, mem_chk=chk, mem_inc=inc, mem_floor=floor,
                       capture=gm.capture_s_many(sizes), memory_budget=budget,
                       capture_budget=inp.capture_budget)


def solve(st: Setup, p: opt.Problem, seeds=()) -> opt.Solution:
    try:
        return opt.solve(p, list(seeds))
    except opt.Infeasible as e:
        need = []
        if "memory" in e.smallest:
            need.append(f"the smallest memory budget any layout meets is {e.smallest['memory']:.0f} bytes "
                        f"({e.smallest['memory'] / MiB:.1f} MiB)")
        if "capture" in e.smallest:
            need.append(f"the smallest capture budget any layout meets is {e.smallest['capture']:.4g} s")
        raise OptimizeError(f"no layout meets the budgets: {'; '.join(need) or e}") from None
    except opt.SearchTooLarge as e:
        raise OptimizeError(f"{e}; loosen a budget, lower max_size or max_graphs") from None


def metrics(st: Setup, sizes: list[int]) -> dict:
    """Expected step time, padded rows, waste, eager share, memory and capture time of a layout
    (`stepcost.expected_step`: the sweep reports the same figures from the same function)."""
    b, w = st.inp.dist.as_arrays()
    srt = sorted(int(x) for x in sizes)
    if st.inp.spec_tokens:
        return _spec_metrics(st, srt, b, w)
    e = st.cache.expected(st.step.with_capture(st.step.capture.with_graph(st.step.capture.graph, srt)), b, w,
                          st.inp.ctx, unpadded=False)  # the unpadded steps' figure is not reported
    mem, cap = st.memory(sizes)
    return {"graphs": len(sizes), "step_ms": e.step_s * 1e3, "padded_rows": e.padded_rows,
            "padding_waste": e.waste, "eager_share": e.eager_share, "memory_bytes": mem, "memory_mib": mem / MiB,
            "capture_s": cap}


def prefetch(st: Setup, layouts: list) -> None:
    """Price the steps `metrics` reads for each of `layouts` in one pass (StepCostCache.prefetch_expected): the
    same figures, one batch-axis pricing per plan mode instead of one per layout."""
    if st.inp.spec_tokens:
        return
    b, _ = st.inp.dist.as_arrays()
    cap = st.step.capture
    st.cache.prefetch_expected([st.step.with_capture(cap.with_graph(cap.graph, sorted(int(x) for x in lay)))
                                for lay in layouts], b, st.inp.ctx, unpadded=False)


def _spec_metrics(st: Setup, srt: list[int], b, w) -> dict:
    """`metrics` over verify steps (tokens): the definitions of `StepCostCache.expected`, each step routed and
    costed by `Setup.step_s`'s rule (verify step of b(1 + k) tokens padded to the smallest size >= it)."""
    cap = st.step.capture.with_graph(st.step.capture.graph, tuple(srt))
    setup = st.step.with_capture(cap)
    tot = pad = exe = eag = 0.0
    for x, wt in zip(b, w):
        rs = st.cache.routed(setup, st.shape(int(x)))
        r = rs.route
        tot += wt * rs.step_s
        pad += wt * r.padding
        exe += wt * r.executed
        eag += wt * float(r.padded is None)
    mem, capt = st.memory(srt)
    return {"graphs": len(srt), "step_ms": tot * 1e3, "padded_rows": pad, "padding_waste": pad / exe if exe else 0.0,
            "eager_share": eag, "memory_bytes": mem, "memory_mib": mem / MiB, "capture_s": capt}


def _violations(st: Setup, p: opt.Problem, sizes: list[int], mem: float, cap: float) -> str | None:
    why = []
    if len(sizes) > p.max_graphs:
        why.append(f"{len(sizes)} graphs > max graphs {p.max_graphs}")
    if p.memory_budget is not None and mem > p.memory_budget:
        why.append(f"memory {mem / MiB:.1f} MiB > budget {p.memory_budget / MiB:.1f} MiB")
    if p.capture_budget is not None and cap > p.capture_budget:
        why.append(f"capture {cap:.3g} s > budget {p.capture_budget:.3g} s")
    mx = int(st.sizes[-1])
    top_rows = st.inp.dist.max_batch * st.q
    if st.inp.max_size is not None and top_rows > mx:
        below = [x for x in sizes if x <= mx]
        top = max(below) if below else 0
        over = [x for x in sizes if x > mx]
        if over and top_rows > top:  # batches above max size replay a graph the optimum may not have
            why.append(f"replays size {over[0]} > max size {mx}")
    if st.inp.objective == "padded-rows" and sizes[-1] < int(st.sizes[-1]):
        why.append(f"largest size {sizes[-1]} < max size {int(st.sizes[-1])} (padded-rows gives every batch a graph)")
    return "; ".join(why) or None


def _count_grid(K: int) -> list[int]:
    if K <= 16:
        return list(range(1, K + 1))
    ks = sorted({int(round(x)) for x in np.geomspace(1, K, 14)} | {K})
    return ks


def preset_objective(st: Setup, p: opt.Problem, sizes: list[int]) -> float:
    """`opt.objective` of a layout whose sizes may exceed the candidates 1..max size: a batch pads to the smallest
    size >= it, so beyond max size only the first larger size (the one the largest batches pad to) matters; its
    alpha is computed the way the candidates' are (one sequence padded to it; padded rows: the size itself)."""
    mx = int(st.sizes[-1])
    s = sorted(int(x) for x in sizes)
    used = [x for x in s if x <= mx] + [x for x in s if x > mx][:1]
    cand = {int(c): a for c, a in zip(p.sizes, p.alpha)}
    for x in used:
        if x not in cand:
            cand[x] = st.graph_s(x) if st.inp.objective == "step-time" else float(x)
    arr = np.asarray(used, dtype=np.int64)
    if not arr.size or not len(p.batches):
        return float(sum(w * ea for w, ea in zip(p.weights, p.eager)))
    i = np.searchsorted(arr, p.batches, side="left")
    a = np.asarray([cand[x] for x in used], dtype=float)[np.minimum(i, arr.size - 1)]
    terms = np.asarray(p.weights, dtype=float) * np.where(i >= arr.size, p.eager, a + p.beta)
    return float(np.cumsum(terms)[-1])  # the batches' terms added in order from 0.0, as a loop adds them


def _cover_note(lay: list[int], max_batch: int) -> str:
    below = [x for x in lay if x <= max_batch]
    first = min(x for x in lay if x > max_batch)
    if below and below[-1] == max_batch:
        return "none is replayed by this distribution"
    return f"batches above {below[-1]} pad to {first}, the larger ones are never replayed" if below else \
        f"every batch pads to {first}, the larger ones are never replayed"


def run(inp: Inputs, frontier: bool = True) -> dict:
    st = setup(inp)
    budget = memory_budget(st)
    p = build_problem(st, budget)
    mx = int(st.sizes[-1])
    # presets at the engines' real sizes (issue 22): not cut at the largest batch, which would run the batches
    # between it and the preset's next size eagerly and understate the preset's memory
    preset_layouts = {n: preset_layout(st, n) for n in inp.presets}
    cands = set(int(c) for c in st.sizes)
    seeds = [[x for x in v if x in cands] for v in preset_layouts.values()]
    best = solve(st, p, [v for v in seeds if v])
    top_rows = inp.dist.max_batch * st.q  # the largest step's rows (tokens under speculation)
    prefetch(st, [best.sizes, *preset_layouts.values()])
    m_best = metrics(st, best.sizes)
    presets = {}
    for name, lay in preset_layouts.items():
        m = metrics(st, lay)
        val = preset_objective(st, p, lay)
        why = _violations(st, p, lay, m["memory_bytes"], m["capture_s"])
        above = [x for x in lay if x > top_rows]
        presets[name] = {"sizes": lay, "objective": val, "feasible": why is None, "reason": why,
                         "gain_pct": 100.0 * (val - best.objective) / val if val > 0 else 0.0,
                         "sizes_above_max_batch": len(above),
                         "note": (f"{len(above)} of its {len(lay)} sizes lie above the largest "
                                  f"{'verify step' if st.q > 1 else 'batch'} ({top_rows}): all captured (memory, "
                                  f"capture time); {_cover_note(lay, top_rows)}" if above else ""), **m}
    result = {
        "inputs": {"distribution": inp.dist.label, "steps_support": len(inp.dist.sizes), "model": st.model.name,
                   "profile": st.gm.profile.name, "fusion": inp.fusion, "graph": inp.graph, "ctx": inp.ctx,
                   "objective": inp.objective, "max_graphs": inp.max_graphs, "memory_budget_bytes": budget,
                   "memory_budget_spec": inp.memory_budget, "capture_budget_s": inp.capture_budget,
                   "max_size": mx, "shared_pool": inp.shared_pool, "candidates": int(st.sizes.size)},
        "sizes": best.sizes, "objective": best.objective,
        "objective_unit": "s per step" if inp.objective == "step-time" else "padded rows per step",
        "method": best.method, "labels": best.labels, **{f"best_{k}": v for k, v in m_best.items()},
        "engine_syntax": engine_syntax(best.sizes), "presets": presets,
    }
    if inp.spec_tokens:
        # vLLM's list counts tokens; SGLang's and TensorRT-LLM's count requests (each runs 1 + k tokens)
        req = [x // st.q for x in best.sizes]
        syn = engine_syntax(req)
        syn["vllm"] = result["engine_syntax"]["vllm"]
        result.update(engine_syntax=syn, spec_tokens=inp.spec_tokens, sizes_unit="tokens", sizes_requests=req,
                      spec_notes=list(st.notes) + [
                          "objective: verify steps only (the draft loop's single-token passes pad to other sizes "
                          "of the list; not in the objective)"])
        result["inputs"]["spec_tokens"] = inp.spec_tokens
    if frontier:
        result["frontier_graphs"], result["frontier_memory"] = frontiers(st, p, presets)
    return result


def frontiers(st: Setup, p: opt.Problem, presets: dict) -> tuple[list[dict], list[dict]]:
    """Exact optima (a) at each graph count under the budgets, (b) at each memory budget under the count."""
    by_k = []
    for k in _count_grid(p.max_graphs):
        try:
            s = opt.solve(replace(p, max_graphs=k))
        except (opt.Infeasible, opt.SearchTooLarge):
            continue
        mem, cap = st.memory(s.sizes)
        by_k.append({"graphs_max": k, "graphs": len(s.sizes), "objective": s.objective, "memory_mib": mem / MiB,
                     "capture_s": cap, "sizes": " ".join(map(str, s.sizes))})
    p0 = replace(p, memory_budget=None)
    lo = float(min(st.memory([int(c)])[0] for c in (st.sizes if st.inp.objective == "step-time" else st.sizes[-1:])))
    hi = st.memory(opt.solve(p0).sizes)[0]
    grid = set(np.linspace(lo, hi, 10).tolist())
    grid |= {v["memory_bytes"] for v in presets.values() if v.get("memory_bytes") and lo <= v["memory_bytes"] <= hi}
    by_m = []
    for m in sorted(grid):
        try:
            s = opt.solve(replace(p0, memory_budget=m))
        except (opt.Infeasible, opt.SearchTooLarge):
            continue
        mem, cap = st.memory(s.sizes)
        by_m.append({"memory_budget_mib": m / MiB, "memory_mib": mem / MiB, "objective": s.objective,
                     "graphs": len(s.sizes), "capture_s": cap, "sizes": " ".join(map(str, s.sizes))})
    return by_k, by_m


def inputs_from_scenario(sc, **over):
    kw = dict(model=sc.model, profile=sc.profile, fusion=sc.fusion, graph=sc.graph, ctx=sc.ctx,
              objective=sc.objective, max_graphs=sc.max_graphs, memory_budget=parse_memory_budget(sc.memory_budget),
              capture_budget=sc.capture_budget, max_size=sc.max_size, shared_pool=sc.shared_pool,
              presets=tuple(sc.presets), dtype=sc.dtype, kv_dtype=sc.kv_dtype, opts=sc,
              spec_tokens=getattr(sc, "spec_tokens", 0))
    if getattr(sc, "spec_tokens", 0) and "presets" not in sc.model_fields_set:
        kw["presets"] = SPEC_PRESETS  # the engines' spec-decode lists (the default list's seed has no such rule)
    kw.update({k: v for k, v in over.items() if v is not None})
    return Inputs(sc.distribution.build(), **kw)


def preset_rows(result: dict) -> list[dict]:
    """The optimum and each preset, one row each (gain: how much lower the optimum's objective is); `optimize`'s
    table and the `buckets` scenario's summary."""
    nan = float("nan")
    rows = [{"layout": "optimum", "graphs": result["best_graphs"], "objective": result["objective"],
             "step_ms": result["best_step_ms"], "padded_rows": result["best_padded_rows"],
             "eager_pct": 100.0 * result["best_eager_share"], "above_max_batch": 0,
             "memory_mib": result["best_memory_mib"], "capture_s": result["best_capture_s"], "gain_pct": 0.0,
             "feasible": "yes"}]
    rows += [{"layout": n, "graphs": v.get("graphs", 0), "objective": v.get("objective", nan),
              "step_ms": v.get("step_ms", nan), "padded_rows": v.get("padded_rows", nan),
              "eager_pct": 100.0 * v.get("eager_share", nan), "above_max_batch": v.get("sizes_above_max_batch", 0),
              "memory_mib": v.get("memory_mib", nan), "capture_s": v.get("capture_s", nan),
              "gain_pct": v.get("gain_pct", nan), "feasible": "yes" if v["feasible"] else v["reason"]}
             for n, v in result["presets"].items()]
    return rows


def run_buckets_scenario(sc, out: Path | None) -> dict:
    """Runner of the `buckets` scenario kind."""
    inp = inputs_from_scenario(sc)
    result = run(inp, frontier=out is not None)
    result["scenario"] = sc.model_dump(mode="json")
    cols = ["layout", "graphs", "objective", "eager_pct", "above_max_batch", "memory_mib", "capture_s", "gain_pct",
            "feasible"]
    result["summary"] = [{k: r[k] for k in cols} for r in preset_rows(result)]
    result["summary_columns"] = cols
    if out is not None:
        write_outputs(result, inp.dist, out, f"launchsim: {sc.name}", sc.description)
    return result


# -- report ----------------------------------------------------------------------------------------
def write_outputs(result: dict, dist: BatchDistribution, out: Path, title: str, intro: str = "") -> None:
    from simulator.report import charts
    from simulator.report import figjson as fj
    from simulator.report.html import table_html, write_csv, write_html
    from simulator.common.jsonfile import write_json
    import html

    write_json(out / "result.json", result)
    fg, fm = result.get("frontier_graphs", []), result.get("frontier_memory", [])
    write_csv(out / "frontier.csv", [{"axis": "graphs", **r} for r in fg] + [{"axis": "memory", **r} for r in fm])
    unit = result["objective_unit"]
    scale = 1e3 if unit.startswith("s") else 1.0
    ylab = "expected step time (ms)" if scale == 1e3 else unit
    feas = {n: v for n, v in result["presets"].items() if "objective" in v}
    figs = []
    for key, rows, xk, xt in (("graphs", fg, "graphs", "number of graphs"), ("memory", fm, "memory_mib",
                                                                            "pinned graph memory (MiB)")):
        f = charts.lines_figure({"exact optimum": ([r[xk] for r in rows], [r["objective"] * scale for r in rows])},
                                f"Pareto frontier: objective vs {xt}", xt, ylab)
        px = [v["graphs"] if key == "graphs" else v["memory_mib"] for v in feas.values()]
        symbols = ["diamond-open", "square-open", "triangle-up-open", "circle-open", "x-thin-open", "pentagon-open",
                   "hexagon-open", "triangle-down-open"]
        for i, (n, v) in enumerate(feas.items()):  # one legend entry per preset: labels never overprint
            # open markers of decreasing size: presets at the same point stay visible inside one another
            fj.add_trace(f, fj.trace("scatter", x=[px[i]], y=[v["objective"] * scale], mode="markers",
                                     name=f"preset {n}", marker=dict(size=18 - 3 * (i % 4),
                                                                     symbol=symbols[i % len(symbols)],
                                                                     line=dict(width=2)),
                                     hovertext=f"{n}: {v['objective'] * scale:.4g}"))
        bx = result["best_graphs"] if key == "graphs" else result["best_memory_mib"]
        fj.add_trace(f, fj.trace("scatter", x=[bx], y=[result["objective"] * scale], mode="markers", name="chosen",
                                 marker=dict(size=14, symbol="star")))
        # zoomed to the data (gains are tenths of a percent: from zero they would be invisible); the axis title
        # says so, and the table below gives the figures
        ys = [r["objective"] * scale for r in rows] + [v["objective"] * scale for v in feas.values()] + \
            [result["objective"] * scale]
        lo, hi = min(ys), max(ys)
        pad = max((hi - lo) * 0.08, abs(hi) * 1e-4)
        fj.update_axes(f, "y", range=[lo - pad, hi + pad], title=f"{ylab} (axis zoomed to the data)")
        figs.append(f)
    b, w = dist.as_arrays()
    d = fj.figure(fj.trace("bar", x=b, y=w, name="share of steps"))
    charts.vlines(d, result["sizes"], 0.0, float(max(w)) if len(w) else 1.0, "chosen capture sizes")
    fj.update_layout(d, title="Batch-size distribution (bars) and the chosen capture sizes (dotted)",
                     xaxis=dict(title="batch"), yaxis=dict(title="share of steps"), height=380)
    figs.insert(0, d)
    inp = result["inputs"]
    best_row = {"layout": "optimum", "graphs": result["best_graphs"], "objective": result["objective"],
                "step_ms": result["best_step_ms"], "padded_rows": result["best_padded_rows"],
                "padding_waste": result["best_padding_waste"], "eager_share": result["best_eager_share"],
                "memory_mib": result["best_memory_mib"], "capture_s": result["best_capture_s"],
                "gain_over_preset_pct": 0.0, "sizes_above_max_batch": 0, "feasible": True, "reason": ""}
    rows = [best_row] + [{"layout": n, "graphs": v.get("graphs", 0), "objective": v.get("objective", float("nan")),
                          "step_ms": v.get("step_ms", float("nan")), "padded_rows": v.get("padded_rows", float("nan")),
                          "padding_waste": v.get("padding_waste", float("nan")),
                          "eager_share": v.get("eager_share", float("nan")), "memory_mib": v.get("memory_mib", float("nan")),
                          "capture_s": v.get("capture_s", float("nan")), "gain_over_preset_pct": v.get("gain_pct", float("nan")),
                          "sizes_above_max_batch": v.get("sizes_above_max_batch", 0),
                          "feasible": v["feasible"], "reason": v["reason"] or v.get("note", "")}
                         for n, v in result["presets"].items()]
    syn = result["engine_syntax"]
    snippets = ("<h2>Ready to paste</h2>"
                f"<p>Chosen sizes ({len(result['sizes'])}): <code>{html.escape(str(result['sizes']))}</code></p>"
                f"<p>vLLM (<code>compilation_config.cudagraph_capture_sizes</code>):</p><pre>{html.escape(syn['vllm'])}</pre>"
                f"<p>SGLang 0.5.20+ (per-phase decode flags):</p><pre>{html.escape(syn['sglang_decode'])}</pre>"
                f"<p>SGLang before 0.5.20:</p><pre>{html.escape(syn['sglang'])}</pre>"
                f"<p>TensorRT-LLM (extra LLM API options YAML):</p><pre>{html.escape(syn['trtllm'])}</pre>")
    budget = inp["memory_budget_bytes"]
    cons = (f"Objective {inp['objective']} ({unit}); model {inp['model']}, fusion {inp['fusion']}, graph "
            f"{inp['graph']}, ctx {inp['ctx']}, profile {inp['profile']}; "
            + (f"candidates 1..{inp['max_size']}; " if not inp.get('spec_tokens') else
               f"spec_tokens {inp['spec_tokens']}: candidates multiples of {1 + inp['spec_tokens']} up to "
               f"{inp['max_size']} tokens, verify steps priced ({'; '.join(result.get('spec_notes', []))}); ")
            + f"max graphs {inp['max_graphs']}; memory budget "
            f"{'none' if budget is None else f'{budget / MiB:.1f} MiB'}"
            f"{' (' + str(inp['memory_budget_spec']) + ' preset)' if isinstance(inp['memory_budget_spec'], str) else ''}; "
            f"capture budget {inp['capture_budget_s'] or 'none'}; {'shared' if inp['shared_pool'] else 'private'} pools. "
            f"Exact optimum ({result['method']}).")
    write_html(out / "report.html", title, figs,
               [f"<p>{html.escape(cons)}</p>", table_html(rows, "Chosen layout and presets under the same inputs "
                                                          "(gain = how much lower the optimum's objective is)"),
                snippets, table_html(fg, "Frontier: exact optimum at each graph limit (same budgets)"),
                table_html(fm, "Frontier: exact optimum at each memory budget (same graph limit)")],
               intro=intro)
