"""A speculative-decoding step: the target's verify step plus the draft loop, and the per-token figures.

    verify:   the target over B sequences x (1 + k) query tokens (StepShape.q_len), routed by the target's graph
              mode and capture sizes in tokens (routing.step_rows counts a verify step's tokens; the engines'
              sizes come from simulator/layouts/spec.py);
    draft:    simulator/model/spec.py `draft_loop` (one pass over the 1 + k verified tokens, k - 1 single-token
              passes), each routed in the draft's own graph mode over the same token sizes: vLLM's drafters run
              piecewise graphs (PRs #17211, #25109), SGLang captures full draft and draft-extend graphs
              (speculative/eagle_draft_cuda_graph_runner.py, eagle_draft_extend_cuda_graph_runner.py), TensorRT-LLM's
              one-model drafters run inside the target's graph (modelled as full graphs);
    tokens_per_step = the acceptance model's E[accepted] + 1; ms_per_token = (verify_ms + draft_ms) / tokens_per_step
              (per sequence: every sequence of the step emits that many tokens on average); plain decode's
              ms_per_token is its step time, so speculation pays where ms_per_token < decode_ms.
Differences from the engines that remain: SGLang's k-pass draft loop is one graph (one replay), modelled here as
k - 1 + 1 replays (one host graph launch, ~10 µs, per extra pass); rejection sampling and the draft's sampling
kernels are not in the step (the engine loop's sampling, simulator/engine/steploop.py, covers the target's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simulator.engine.predict import simulate
from simulator.engine.routing import DEFAULT_BACKEND, lowered_pure, route
from simulator.engine.setup import DRAFT_GRAPH, SetupError, SpecSetup  # noqa: F401 (re-exported)
from simulator.model.models import ModelSpec, load_model
from simulator.model.profile import Profile, load_profile
from simulator.model.spec import Acceptance, Draft, draft_for, draft_loop, draft_step
from simulator.model.workload import StepShape

SpecStepError = SetupError  # a speculative setting that cannot be honoured


# attention backends whose vLLM metadata builder supports only single-token uniform decode in full graphs on the
# H200: FlashInfer without its TRT-LLM kernels (vllm/v1/attention/backends/flashinfer.py `get_cudagraph_support`:
# UNIFORM_BATCH only where `can_use_trtllm_attention`, which needs SM100; else UNIFORM_SINGLE_TOKEN_DECODE)
SINGLE_TOKEN_FULL_BACKENDS = frozenset({"flashinfer"})


def verify_graph_mode(engine: str, graph: str, backend: str, k: int) -> tuple[str, str | None]:
    """The graph mode verify steps actually run in, and the engine's note when it changed. vLLM
    (`CompilationConfig.resolve_cudagraph_mode_and_sizes`, vllm/config/compilation.py): with decode_mode FULL,
    uniform_decode_query_len > 1 and a backend below UNIFORM_BATCH, cudagraph_mode becomes PIECEWISE (attention in
    the splitting ops, V1's default) "is not supported with spec-decode for attention backend ...". The other
    backends (fa2, fa3, triton) are taken to support uniform batches (not read in their sources here); SGLang and
    TensorRT-LLM capture verify graphs as configured."""
    if engine == "vllm" and k > 0 and backend in SINGLE_TOKEN_FULL_BACKENDS and graph in (
            "full", "full_decode_only", "full_and_piecewise"):
        return "piecewise", (f"vLLM: CUDAGraphMode {graph.upper()} is not supported with spec-decode for attention "
                             f"backend {backend} (single-token decode graphs only): verify steps run PIECEWISE")
    return graph, None


@dataclass
class SpecPrediction:
    spec_tokens: int
    verify_ms: float
    draft_ms: float
    tokens_per_step: float
    decode_ms: float | None  # plain decode step at the same batch, graph mode and sizes (None: not asked)
    verify_route: object = None
    draft_passes: list = field(default_factory=list)  # [{"tokens", "count", "padded", "mode", "ms"}]
    verify_graph: str = ""  # the graph mode verify steps ran in (verify_graph_mode)
    notes: list = field(default_factory=list)
    verify: Any = None  # the verify step's engine.predict.Prediction

    @property
    def step_ms(self) -> float:
        return self.verify_ms + self.draft_ms

    @property
    def ms_per_token(self) -> float:
        return self.step_ms / self.tokens_per_step

    def as_dict(self) -> dict:
        d = {"spec_tokens": self.spec_tokens, "verify_ms": self.verify_ms, "draft_ms": self.draft_ms,
             "spec_step_ms": self.step_ms, "tokens_per_step": self.tokens_per_step,
             "ms_per_token": self.ms_per_token, "draft_passes": self.draft_passes, "verify_graph": self.verify_graph,
             "spec_notes": list(self.notes)}
        if self.decode_ms is not None:
            from simulator.model.spec import breakeven_acceptance

            d["decode_ms_per_token"] = self.decode_ms
            d["spec_speedup"] = self.decode_ms / self.ms_per_token
            # the constant acceptance below which this step's speculation costs more per token than plain decode
            d["breakeven_acceptance"] = breakeven_acceptance(self.spec_tokens, self.step_ms / self.decode_ms)
        return d


def predict_spec_setup(setup, batch: int, ctx: int, engine: str = "fast", replicates: int = 0, seed: int = 0,
                       baseline: bool = True, baseline_sizes=None) -> SpecPrediction:
    """Verify + draft figures of one speculative step of `batch` sequences at context `ctx` for a `StepSetup` whose
    `spec` is set: `setup.capture.sizes` are the verify capture sizes in tokens (None: every size captured); the
    draft passes pad to the same token sizes in the draft's graph mode. `baseline`: also the plain decode step at
    `baseline_sizes` (the non-speculative layout; None: every size captured) for the per-token comparison."""
    from dataclasses import replace

    from simulator.engine.predict import predict_setup
    from simulator.model.workload import decode

    spec: SpecSetup = setup.spec
    if spec is None:
        raise SpecStepError("a speculative step needs the setup's spec (spec_tokens > 0)")
    k, cap, costs = spec.k, setup.capture, setup.costs
    vgraph, note = verify_graph_mode(spec.engine, cap.graph, str(cap.backend), k)
    v = predict_setup(replace(setup, capture=replace(cap, graph=vgraph)), StepShape(batch, ctx, q_len=1 + k),
                      engine, replicates, seed)
    d: Draft = draft_for(setup.model, spec.draft)
    passes, draft_ms = [], 0.0
    for st, n in draft_loop(d, k, batch, ctx, setup.fusion):
        q = st.tokens // batch
        r = route(spec.draft_mode, cap.sizes, st.tokens, True, backend=cap.backend)
        run = draft_step(d, batch, ctx if q > 1 else ctx + k + 1, setup.fusion, q_len=q, padding=r.padding) \
            if r.padding else st
        res, _ = simulate(run, costs, r.mode, pure_decode=lowered_pure(r.mode, True))
        ms = res.step_s * 1e3
        draft_ms += n * ms
        passes.append({"tokens": st.tokens, "count": n, "padded": r.padded, "mode": r.mode, "ms": ms})
    base = None
    if baseline:
        plain = replace(setup, spec=None, capture=replace(cap, sizes=None if baseline_sizes is None
                                                          else tuple(sorted(set(baseline_sizes)))))
        base = predict_setup(plain, decode(batch, ctx), engine).result.step_s * 1e3
    return SpecPrediction(k, v.result.step_s * 1e3, draft_ms, spec.acceptance.tokens_per_step, base, v.route, passes,
                          vgraph, [note] if note else [], v)


def predict_spec(model: ModelSpec | str, batch: int, ctx: int, fusion: str, graph: str, spec: SpecSetup,
                 profile: Profile | str | None = None, sizes: list[int] | None = None, *,
                 backend: str = DEFAULT_BACKEND, baseline: bool = True,
                 baseline_sizes: list[int] | None = None) -> SpecPrediction:
    """`predict_spec_setup` for loose arguments: `sizes` the verify capture sizes in tokens."""
    from simulator.engine.setup import Capture, StepSetup

    m = load_model(model) if isinstance(model, str) else model
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    setup = StepSetup.of(m, prof, fusion, Capture.of(graph, sizes, None, backend), spec=spec)
    return predict_spec_setup(setup, batch, ctx, baseline=baseline, baseline_sizes=baseline_sizes)


def spec_request(k: int, acceptance, draft: str = "eagle", layout: str | None = None, max_size: int | None = None,
                 max_num_seqs: int | None = None, tp: int = 1, graph: str = "full") -> tuple[SpecSetup, list | None,
                                                                                           list | None]:
    """(spec, verify sizes, plain-decode sizes) from user-level values: `acceptance` a number, a list or a
    comma-separated string (simulator/model/spec.py Acceptance.parse); `layout` an engine preset (vllm, sglang,
    trtllm: its speculative capture rule, simulator/layouts/spec.py, and its draft graph mode), another layout (its
    sizes taken as verify token counts; the draft routed as vLLM's) or None (every size captured)."""
    from simulator.layouts.buckets import parse_layout
    from simulator.layouts.spec import SPEC_ENGINES, spec_layout

    acc = Acceptance.parse(acceptance, k)
    if layout is None:
        return SpecSetup(k, acc, draft), None, None
    if layout in SPEC_ENGINES:
        L = spec_layout(layout, k, max_size, max_num_seqs, tp=tp,
                        graph="piecewise" if graph == "piecewise" else "full",
                        draft=draft if draft in ("eagle", "mtp") else "model")
        return (SpecSetup(k, acc, draft, engine=layout), list(L.tokens),
                parse_layout(layout, max_size, max_num_seqs, tp=tp))
    sizes = parse_layout(layout, max_size, max_num_seqs, tp=tp)
    return SpecSetup(k, acc, draft), sizes, sizes
