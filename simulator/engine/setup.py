"""The step's configuration as one value: `StepSetup` (what a step is) and `Capture` (how it is captured).

Owns the value objects every study passes whole instead of 8-13 loose arguments:

- `Capture(graph, sizes, prefill_sizes, backend)`: the configured graph mode, the captured decode sizes (None:
  every size captured, no padding; () : none), SGLang-style prefill token sizes and the attention backend.
  `capture.route(shape)` is `routing.route_shape` with these: the one place a step is routed; the plan builders
  then take the routed *plan mode* only (`plan.lower`, `tiling.tiled_lower`).
- `StepSetup(model, costs, fusion, impl, capture)`: the model after dtype and sharding, the profile's cost model
  (its content digest is part of the identity, the object is not), the implementation recipe and fusion level,
  the implementation's cache options, the capture, and `compile_dynamic` (torch.compile's dynamic=True/False for
  fusion `compiled`: `build` passes it to Inductor's pass and marks every compiled launch with the measured
  dynamic wrapper cost, inductor.DYNAMIC_WRAPPER_EXTRA_US; None: vLLM's, False). Frozen and hashable; `build_key` (model, fusion, impl: what decides the op list) and
  `cost_key` (+ profile digest: what decides a step's cost under a plan mode) are the memo keys of
  `stepcost.StepCostCache`.

A new step knob is a field here (and of `config/stepopts.StepOptions`, which builds this): every study receives
it because every study receives the setup.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

from simulator.common import vocab as V
from simulator.common.errors import UserError
from simulator.common.memo import memo
from simulator.engine.routing import (DEFAULT_BACKEND, Route, check_backend, check_mode, padded_shape, route,
                                      route_shape)
from simulator.model.costs import CostModel
from simulator.model.kernels import LaunchPath, Op, Step
from simulator.model.models import ModelSpec
from simulator.model.profile import Digest, Profile, load_profile, profile_digest  # noqa: F401  (re-exported)
from simulator.model.workload import StepShape, build_step, impl_of

_NAMED = memo("engine.setup._NAMED", "profiles loaded by name or path (None: the default), each with its one "
               "CostModel and digest: every setup of a named profile in the process shares that cost model's memos", 64)


def _load_named(name: str | None) -> tuple[Profile, CostModel, Digest]:
    """A profile by name or path (None: the default), its cost model and its digest (computed when first used)."""
    hit = _NAMED.get(name)
    if hit is None:
        p = load_profile(name)
        costs = CostModel(p)
        hit = _NAMED.put(name, (p, costs, costs.digest))
    return hit


def load_cached_profile(name: str | None) -> tuple[Profile, CostModel, str]:
    """A profile by name or path (None: the default), its cost model and its digest."""
    p, costs, digest = _load_named(name)
    return p, costs, str(digest)


def load_cached_costs(name: str | None) -> tuple[Profile, CostModel]:
    """`load_cached_profile` without the digest (the same cached load: the digest is made when first asked for)."""
    return _load_named(name)[:2]


def _resolve(profile: str | None | Profile | CostModel) -> tuple[Profile, CostModel, Digest]:
    """A name: the process's cached load (`_load_named`). A CostModel: itself, with the digest it carries. A
    Profile: a new CostModel of it (pass the CostModel instead to share one cost model's memos and digest)."""
    if profile is None or isinstance(profile, str):
        return _load_named(profile)
    if isinstance(profile, CostModel):
        return profile.profile, profile, profile.digest
    if isinstance(profile, Profile):
        costs = CostModel(profile)
        return profile, costs, costs.digest
    raise TypeError(f"a profile name, Profile or CostModel, got {type(profile).__name__}")


def resolve(profile: str | None | Profile | CostModel) -> tuple[Profile, CostModel, str]:
    """(Profile, CostModel, digest) of a profile name or path, a Profile or a CostModel."""
    p, costs, digest = _resolve(profile)
    return p, costs, str(digest)


_HOST_NAMED = memo("engine.setup._HOST_NAMED", "named profiles with their host lane moved to a host canary, by "
                    "(name, canary_us): a sweep's points share one scaled profile, cost model and digest", 64)


def _host_resolved_named(name: str | None, canary_us: float) -> tuple[Profile, CostModel, str]:
    hit = _HOST_NAMED.get((name, canary_us))
    if hit is None:
        from simulator.model.profile import host_scaled

        hit = _HOST_NAMED.put((name, canary_us), resolve(host_scaled(_load_named(name)[0], canary_us)))
    return hit


def host_resolved(profile, canary_us: float) -> tuple[Profile, CostModel, str]:
    """`resolve` of the profile with its host lane moved to a host of canary `canary_us` (model/profile.host_scaled);
    memoised for profile names (a sweep's points share one scaled profile and its digest)."""
    if profile is None or isinstance(profile, str):
        return _host_resolved_named(profile, float(canary_us))
    from simulator.model.profile import host_scaled

    return resolve(host_scaled(_resolve(profile)[0], float(canary_us)))


class SetupError(UserError):
    """A step configuration that cannot be honoured."""


DYNAMIC_WRAPPER = "dynamic_wrapper"  # shape key of a launch through torch.compile(dynamic=True)'s wrapper
_COMPILED_PATHS = (LaunchPath.COMPILED, LaunchPath.COMPILED_EXTERN)


def _dynamic_wrapped(step: Step) -> Step:
    """`step` with every compiled kernel launch marked DYNAMIC_WRAPPER (shared Op objects stay shared)."""
    memo: dict[int, Op] = {}

    def mark(o: Op) -> Op:
        if o.path not in _COMPILED_PATHS or not o.launches_kernel:
            return o
        hit = memo.get(id(o))
        if hit is None:
            hit = memo[id(o)] = replace(o, shape=tuple(sorted(o.shape + ((DYNAMIC_WRAPPER, 1),))))
        return hit

    return replace(step, ops=tuple(mark(o) for o in step.ops))


def _sizes(sizes: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if sizes is None else tuple(sorted({int(s) for s in sizes}))


@dataclass(frozen=True)
class Capture:
    """How steps are captured: graph mode, decode sizes, prefill token sizes, attention backend."""

    graph: str = V.GraphMode.NONE.value
    sizes: tuple[int, ...] | None = None  # None: every size captured (no padding); (): nothing captured
    prefill_sizes: tuple[int, ...] | None = None
    backend: str = DEFAULT_BACKEND.value

    def __post_init__(self):
        object.__setattr__(self, "graph", str(check_mode(str(self.graph))))
        object.__setattr__(self, "backend", str(check_backend(str(self.backend))))
        object.__setattr__(self, "sizes", _sizes(self.sizes))
        object.__setattr__(self, "prefill_sizes", _sizes(self.prefill_sizes))

    @classmethod
    def of(cls, graph: str, sizes: Sequence[int] | None = None, prefill_sizes: Sequence[int] | None = None,
           backend: str = DEFAULT_BACKEND) -> "Capture":
        return cls(graph, _sizes(sizes), _sizes(prefill_sizes), backend)

    def route(self, shape: StepShape) -> Route:
        """Where a step goes: its captured size and plan mode (`routing.route_shape`)."""
        return route_shape(self.graph, self.sizes, shape, backend=self.backend, prefill_sizes=self.prefill_sizes)

    def route_rows(self, rows: int, pure_decode: bool = True) -> Route:
        """`routing.route` of a step of `rows` rows (sequences of a decode step, tokens of a mixed step)."""
        return route(self.graph, self.sizes, rows, pure_decode, backend=self.backend,
                     prefill_sizes=self.prefill_sizes)

    def padded(self, shape: StepShape) -> tuple[Route, StepShape]:
        """The route and the step as the GPU runs it (padding rows added)."""
        r = self.route(shape)
        return r, padded_shape(shape, r)

    def with_graph(self, graph: str, sizes: Sequence[int] | None = None) -> "Capture":
        return replace(self, graph=graph, sizes=_sizes(sizes))


DRAFT_GRAPH = {"vllm": "piecewise", "sglang": "full", "trtllm": "full"}  # the draft's graph mode per engine
# (vLLM's drafters run piecewise graphs, PRs #17211, #25109; SGLang captures full draft and draft-extend graphs,
# speculative/eagle_draft_cuda_graph_runner.py; TensorRT-LLM's one-model drafters run inside the target's graph)


@dataclass(frozen=True)
class SpecSetup:
    """Speculative decoding of a step (simulator/engine/spec.py): k draft tokens, the acceptance model
    (simulator/model/spec.py), the draft (eagle | mtp | a model preset or config.json), whose capture and routing
    rules apply (`engine`: vllm, sglang, trtllm) and the draft's graph mode (None: the engine's, DRAFT_GRAPH)."""

    k: int
    acceptance: object  # simulator.model.spec.Acceptance (frozen, hashable)
    draft: str = "eagle"
    engine: str = "vllm"
    draft_graph: str | None = None

    def __post_init__(self):
        from simulator.model.spec import check_k

        check_k(self.k)
        if getattr(self.acceptance, "k", None) != self.k:
            raise SetupError(f"acceptance has {getattr(self.acceptance, 'k', '?')} per-position probabilities for "
                             f"spec_tokens {self.k}")
        if self.engine not in DRAFT_GRAPH:
            raise SetupError(f"engine must be one of {', '.join(DRAFT_GRAPH)}, got '{self.engine}'")
        if self.draft_graph is not None:
            check_mode(self.draft_graph)

    @property
    def draft_mode(self) -> str:
        return self.draft_graph or DRAFT_GRAPH[self.engine]


@dataclass(frozen=True)
class StepSetup:
    """One step configuration, passed whole: model (sharded, dtyped), costs, fusion, implementation, capture, and
    speculative decoding (`spec`, None: plain decode; `capture.sizes` then count verify tokens)."""

    model: ModelSpec
    costs: CostModel = field(compare=False, hash=False, repr=False)
    digest: str | Digest  # the profile's content digest (stepcost.profile_digest): equal profiles share memo entries
    fusion: str = V.Fusion.NONE.value
    impl: str | None = None  # model/recipes.py; None: the one the fusion level implies (workload.impl_of)
    capture: Capture = field(default_factory=Capture)
    cache: str = "static"  # impl hf: transformers' StaticCache or DynamicCache
    max_cache_len: int | None = None  # impl hf, static cache: slots (None: the step's context + 1)
    spec: SpecSetup | None = None  # speculative decoding (engine/spec.py); None: plain decode
    compile_dynamic: bool | None = None  # fusion compiled: torch.compile dynamic=True/False (None: vLLM's, False)
    compile_inputs: str | None = None  # with dynamic: weights/cache as "arguments" or "module" state (workload.py)
    lora_rank: int = 0  # a LoRA adapter of this rank on every layer projection (workload.py lora_delta); 0: none
    recipe: str = field(default="", init=False, compare=False)  # the implementation built: impl, or the implied one

    def __post_init__(self):
        if self.fusion not in V.values(V.Fusion):
            raise SetupError(f"unknown fusion level '{self.fusion}': use one of {', '.join(V.values(V.Fusion))}")
        object.__setattr__(self, "fusion", str(self.fusion))
        object.__setattr__(self, "recipe", impl_of(self.fusion, self.impl))  # refuses a pair the recipes lack

    @classmethod
    def of(cls, model: ModelSpec, profile=None, fusion: str = "none", capture: Capture | None = None,
           impl: str | None = None, cache: str = "static", max_cache_len: int | None = None,
           spec: SpecSetup | None = None, compile_dynamic: bool | None = None,
           compile_inputs: str | None = None, lora_rank: int = 0) -> "StepSetup":
        """A setup from a model and a profile name / path / Profile / CostModel (None: the default profile)."""
        _, costs, digest = _resolve(profile)  # the digest made when a memo key first needs it
        return cls(model, costs, digest, fusion, impl, capture or Capture(), cache, max_cache_len, spec,
                   compile_dynamic, compile_inputs, lora_rank)

    @classmethod
    def from_options(cls, opts, model, profile, fusion: str, graph: str = "none",
                     sizes: Sequence[int] | None = None, spec_engine: str = "vllm") -> "StepSetup":
        """The setup of one configuration from a scenario's step options (config/stepopts.StepOptions, read by
        field name: dtype, kv_dtype, tensor_parallel_size, assume_family, attention_backend, prefill_layout, impl,
        kv_cache, max_cache_len, spec_tokens, acceptance, draft, compile_dynamic): `model` (name, path or ModelSpec) resolved
        (model/resolve.py), `profile` (name, path, Profile or CostModel), `fusion`, and the capture: `graph`, decode
        `sizes` (None: every size captured; with spec_tokens they count verify tokens), the prefill sizes and
        attention backend; with spec_tokens the speculative setup (`spec_engine`: whose draft routing applies)."""
        from simulator.layouts.prefill import parse_prefill_layout
        from simulator.model.resolve import resolve_model

        m = resolve_model(model, opts.dtype, opts.kv_dtype, getattr(opts, "tensor_parallel_size", 1),
                          opts.assume_family)
        pre = parse_prefill_layout(opts.prefill_layout) if graph != "none" else None
        if getattr(opts, "host_canary_us", None) is not None:  # the user's host: the profile's host lane rescaled
            profile = host_resolved(profile, float(opts.host_canary_us))[1]
        spec = None
        if getattr(opts, "spec_tokens", 0) and getattr(opts, "acceptance", None) is not None:
            spec = SpecSetup(opts.spec_tokens, opts.spec_acceptance(), opts.draft, engine=spec_engine)
        return cls.of(m, profile, fusion, Capture.of(graph, sizes, pre, opts.attention_backend), impl=opts.impl,
                      cache=opts.kv_cache, max_cache_len=opts.max_cache_len, spec=spec,
                      compile_dynamic=getattr(opts, "compile_dynamic", None),
                      compile_inputs=getattr(opts, "compile_inputs", None), lora_rank=opts.lora_rank)

    @property
    def profile(self):
        return self.costs.profile

    @property
    def dynamic(self) -> bool:
        """Whether the step is torch.compile'd with dynamic=True (compile_dynamic at fusion compiled; the config
        layer refuses compile_dynamic for other levels, derived setups such as `with_fusion("none")` drop it)."""
        return bool(self.compile_dynamic) and self.fusion == V.Fusion.COMPILED.value

    @property
    def _options_key(self) -> tuple:
        """The knobs past the recipe's that decide the op list, in the memo keys (absent at their defaults)."""
        return ((("dynamic",) + ((self.compile_inputs,) if self.compile_inputs else ())) if self.dynamic else ()) + (
            (("lora", self.lora_rank),) if self.lora_rank else ())

    @property
    def build_key(self) -> tuple:
        """What decides the op list of a step of a given shape."""
        return (self.model, self.fusion, self.recipe, self.cache, self.max_cache_len) + self._options_key

    @property
    def cost_key(self) -> tuple:
        """What decides a step's cost under a given plan mode (the capture does not: it decides the mode)."""
        return (self.model, self.digest, self.fusion, self.recipe, self.cache, self.max_cache_len) + self._options_key

    def build(self, shape: StepShape) -> Step:
        """The step's ordered host ops (model/workload.py); compiled with dynamic=True, every compiled launch
        carries shape key `DYNAMIC_WRAPPER` (CostModel.host_s adds the dynamic wrapper's extra cost to it)."""
        step = build_step(self.model, shape, self.fusion, self.recipe, cache=self.cache,
                          max_cache_len=self.max_cache_len, compile_dynamic=self.dynamic,
                          compile_inputs=self.compile_inputs if self.dynamic else None, lora_rank=self.lora_rank)
        return _dynamic_wrapped(step) if self.dynamic else step

    @property
    def fusion_levels(self) -> tuple[str, ...]:
        """The fusion levels this setup's model and implementation build (model/workload.py fusion_levels)."""
        from simulator.model.workload import fusion_levels

        return fusion_levels(self.model, self.impl, self.lora_rank)

    def kernels_per_layer(self) -> int:
        """Kernels launched per decoder layer of this setup's op list (the preamble and head excluded), at batch 1
        and context 128 with the cache at its default length (model/workload.py layer_kernels), with every knob of
        the setup applied."""
        from simulator.model.workload import layer_kernels

        s = replace(self, max_cache_len=None)
        return layer_kernels(lambda layers, shape: s.with_layers(layers).build(shape))

    def with_layers(self, layers: int) -> "StepSetup":
        return replace(self, model=replace(self.model, num_hidden_layers=layers))

    def with_model(self, model: ModelSpec) -> "StepSetup":
        return replace(self, model=model)

    def with_fusion(self, fusion: str) -> "StepSetup":
        return replace(self, fusion=fusion)

    def with_capture(self, capture: Capture) -> "StepSetup":
        return replace(self, capture=capture)
