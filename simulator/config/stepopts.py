"""The step knobs every scenario kind shares, declared once: `StepOptions` (a pydantic mixin every kind inherits,
so each knob has one YAML field, one description and, through the commands' generated flags, one flag), and
`build_setup`, the one place a scenario's fields become an `engine.setup.StepSetup` that studies pass whole.

A new step knob: a field here, a field of `StepSetup`, its consumer (the workload builder or the router), and
its test; every study, every YAML kind and every command that builds a setup from these options has it.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Optional, Sequence, Union

from pydantic import Field, model_validator

from simulator.common import limits as L
from simulator.common import vocab as V
from simulator.model.families import SUPPORTED
from .base import Strict
from .specs import ATTENTION_BACKEND_HELP, PREFILL_LAYOUT_HELP, PrefillLayout

TP_HELP = ("tensor-parallel GPUs of one NVLink node: each GPU runs a shard (heads, KV heads, MLP and vocab / N) plus an "
           "all-reduce per attention and MLP block; figures are one GPU's (simulator/model/parallel.py)")


class StepOptions(Strict):
    """Knobs of the step itself (not of the study around it)."""

    dtype: V.literal(V.Dtype) = Field(  # type: ignore[valid-type]
        "bf16", description="weight dtype: fp8 = e4m3 projection weights with "
                                                           "per-tensor scales (simulator/model/dtype.py)")
    kv_dtype: V.literal(V.Dtype) = Field(  # type: ignore[valid-type]
        "bf16", description="KV-cache dtype (fp8: 1 byte per element)")
    attention_backend: V.literal(V.AttentionBackend) = Field(  # type: ignore[valid-type]
        "flashinfer", description=ATTENTION_BACKEND_HELP)
    prefill_layout: PrefillLayout = Field(None, description=PREFILL_LAYOUT_HELP)
    impl: Optional[Literal["reference", "hf", "fused", "vllm"]] = Field(
        None, description="implementation whose op list a step launches (simulator/model/recipes.py): reference = "
                          "launchsim's calibration decoder (fusion none/packed/compiled), hf = Hugging Face "
                          "transformers 5.17's own modeling code with SDPA (none/compiled), fused = vLLM-style custom "
                          "ops (fused), vllm = vLLM 0.34.0's default decode layer as read from its source, not "
                          "profiled (fused); default: fused for fusion fused, else reference. With impl given and fusion "
                          "left out, a kind whose fusion default the implementation lacks takes the "
                          "implementation's first level (hf, reference: none; fused, vllm: fused)")
    kv_cache: Literal["static", "dynamic"] = Field(
        "static", description="impl hf: transformers' StaticCache (attention reads every slot under a mask) or "
                              "DynamicCache (grows by a cat each step)")
    max_cache_len: Optional[Annotated[int, Field(gt=0, le=L.MAX_CTX)]] = Field(
        None, description="impl hf, static cache: its slots (default: the step's context + 1)")
    host_canary_us: Optional[Annotated[float, Field(gt=0, le=1000)]] = Field(
        None, description="your host's tiny-op canary, µs (`launchsim calibrate` in its host-only mode measures it): every host "
                          "cost of the profile scales by it over the calibration machine's canary; default: the "
                          "calibration machine's fast state")
    assume_family: Optional[Literal[SUPPORTED]] = Field(  # type: ignore[valid-type]
        None, description="read a config.json whose model_type/architectures is not a supported family as this "
                          "family (said in the output); without it such a config is refused")

    # vLLM's default: vllm/compilation/wrapper.py calls torch.compile(..., fullgraph=True, dynamic=False) and
    # decorators.py marks only the token dimension of input_ids / positions dynamic (torch._dynamo.mark_dynamic on
    # dynamic_arg_dims); weights and the KV cache (behind the attention custom op) keep static sizes, which is
    # dynamic=False's kernel list in model/inductor.py (its dynamic=True differs where sizes reach cache and weights)
    compile_dynamic: Optional[bool] = Field(
        None, description="fusion compiled: torch.compile's dynamic=True (symbolic sizes: the reference decoder's "
                          "k-norm and RoPE-k stay apart, +1 kernel a layer, and every launch pays 1.28 µs more wrapper "
                          "cost, measured) or False; default: vLLM's (dynamic=False with the token dimension marked "
                          "dynamic, which Inductor's kernels here do not change: False)")
    compile_inputs: Optional[V.literal(V.CompileInputs)] = Field(  # type: ignore[valid-type]
        None, description="with compile_dynamic true: how your compiled code receives the weights and the KV cache: "
                          "arguments of the compiled function (dynamic=True's symbolic sizes reach them: the reference "
                          "decoder) or module (parameters and buffers of the compiled nn.Module, which Dynamo "
                          "specialises: transformers, gpt-fast, vLLM; the kernels are dynamic=False's); default: "
                          "the implementation's own (reference arguments, hf module)")

    lora_rank: int = Field(0, ge=0, le=512, description="a LoRA adapter of this rank on every linear projection of "
                           "each layer (q, k, v, o, gate, up, down; packed levels: qkv and gate_up), PEFT's forward "
                           "base(x) + lora_B(lora_A(x)) * scaling: two GEMMs, the scaling and the add a projection "
                           "(compiled: Inductor fuses the last two); implementations reference and hf, dense models, "
                           "one GPU (simulator/model/workload.py lora_delta). Step time only: the adapter's "
                           "weights (r x (k + n) bf16 a projection: 19 MiB for qwen3-0.6b at rank 16) are not added "
                           "to the memory and KV-capacity figures; 0: none")

    spec_tokens: int = Field(0, ge=0, le=64, description="speculative decoding: k draft tokens verified per sequence "
                                                       "per step (the target runs 1 + k query tokens; capture sizes "
                                                       "count tokens: simulator/layouts/spec.py); 0: plain decode")
    draft: str = Field("eagle", description="with spec_tokens: the draft, eagle | mtp (a one-layer head with the "
                                            "target's dimensions) or a draft model preset / config.json")
    acceptance: Union[float, list[float], str, None] = Field(
        None, description="with spec_tokens: per-token acceptance probability, or k per-position (conditional) "
                          "probabilities '0.9,0.7,0.5'; tokens per step = 1 + sum of their running products")

    decode_only: ClassVar[bool] = False  # kinds that price decode-only steps: the mixed-step knobs cannot matter
    spec_ok: ClassVar[bool] = False  # kinds whose study runs speculative steps (the others refuse spec_tokens)
    spec_needs_acceptance: ClassVar[bool] = True  # capture kinds (graph memory, start-up) do not

    @model_validator(mode="before")
    @classmethod
    def _fusion_follows_impl(cls, data):
        """impl given, fusion not: the kind's fusion default stands if the implementation has it, else the
        implementation's first level (so `--impl hf` alone is transformers' eager code, not a refusal)."""
        if not isinstance(data, dict) or data.get("fusion") is not None or "fusion" not in cls.model_fields:
            return data
        from simulator.model.recipes import FUSIONS_OF

        levels = FUSIONS_OF.get(data.get("impl"))  # type: ignore[call-overload]
        if not levels:
            return data
        default = cls.model_fields["fusion"].get_default(call_default_factory=True)
        many = isinstance(default, list)
        if not set(default if many else [default]) <= set(levels):
            data = {**data, "fusion": [levels[0]] if many else levels[0]}
        return data

    @model_validator(mode="after")
    def _recipe_knobs(self):
        if self.impl != "hf" and (self.kv_cache != "static" or self.max_cache_len is not None
                                  or "kv_cache" in self.model_fields_set):  # given, even at its default: unread
            raise ValueError("kv_cache and max_cache_len are options of impl hf (transformers' caches)")
        if self.kv_cache == "dynamic" and self.max_cache_len is not None:
            raise ValueError("max_cache_len sizes a static cache: leave it out with kv_cache dynamic")
        if self.lora_rank and (self.impl not in (None, *_lora_impls()) or "fused" in self._fusions()):
            raise ValueError("lora_rank is modelled for implementations reference and hf (PEFT's forward); fusion "
                             "fused / impl fused or vllm would run vLLM's punica LoRA kernels, which are not "
                             "modelled: leave fused out")
        return self

    @model_validator(mode="after")
    def _compile_knob(self):
        fusions = self._fusions()
        if self.compile_dynamic is not None and fusions and "compiled" not in fusions:
            raise ValueError(f"compile_dynamic applies to fusion compiled (torch.compile); fusion "
                             f"{', '.join(fusions)} compiles nothing: leave it out")
        if self.compile_inputs is not None and self.compile_dynamic is not True:
            raise ValueError("compile_inputs applies to torch.compile with dynamic=True only (symbolic sizes; "
                             "compile_dynamic true): leave compile_inputs out otherwise")
        return self

    @model_validator(mode="after")
    def _mixed_knobs(self):
        if self.decode_only:
            # under speculation the backend decides vLLM's verify graph mode (engine/spec.py verify_graph_mode)
            if self.attention_backend != "flashinfer" and not (self.spec_tokens and self.spec_ok):
                raise ValueError("attention_backend only changes mixed (prefill + decode) steps, which this kind "
                                 "does not run: leave it at flashinfer")
            if self.prefill_layout is not None:
                raise ValueError("prefill_layout only changes mixed (prefill + decode) steps, which this kind does "
                                 "not run: leave it out")
        if self.spec_tokens:
            if not self.spec_ok:
                raise ValueError(f"spec_tokens: kind '{getattr(self, 'kind', '?')}' does not run speculative steps "
                                 "yet (predict does)")
            if not self.spec_needs_acceptance:
                if self.acceptance is not None:
                    raise ValueError("acceptance does not change what a layout captures or pins: leave it out")
            elif self.acceptance is None:
                raise ValueError("spec_tokens needs acceptance (a probability or one per draft token)")
            else:
                self.spec_acceptance()  # refuses a bad value or a list of the wrong length here
        elif self.acceptance is not None or self.draft != "eagle" or "draft" in self.model_fields_set:
            raise ValueError("acceptance and draft apply to speculative decoding: they need spec_tokens > 0")
        return self

    @model_validator(mode="after")
    def _sizes_need_graphs(self):
        """Capture sizes given for graph none (the kinds with one graph mode and one layout): nothing is captured,
        so they would be ignored (predict printed padded: null; serve did not even read a bad layout). Under
        speculation a layout naming an engine also picks its draft routing: not refused there."""
        if getattr(self, "graph", None) == "none" and not self.spec_tokens:
            for f in ("layout", "prefill_layout"):
                if f in self.model_fields_set and getattr(self, f, None) is not None:
                    raise ValueError(f"{f} gives capture sizes, but graph none captures nothing: leave {f} out, "
                                     "or pick a graph mode")
            if self.attention_backend != "flashinfer":  # it decides which steps a graph captures (routing.py)
                raise ValueError("attention_backend decides what CUDA graphs capture, but graph none "
                                 "captures nothing: leave attention_backend out, or pick a graph mode")
        return self

    def _fusions(self) -> list[str]:
        """The kind's fusion level(s) as a list (a kind has one level or a list; [] where it has no fusion field)."""
        f = getattr(self, "fusion", None)
        return [f] if isinstance(f, str) else list(f or ())

    def spec_acceptance(self):
        """The acceptance model (simulator/model/spec.py Acceptance) of spec_tokens draft tokens."""
        from simulator.model.spec import Acceptance, SpecError

        try:
            return Acceptance.parse(self.acceptance, self.spec_tokens)
        except SpecError as e:
            raise ValueError(str(e)) from None

    def prefill_sizes(self) -> tuple[int, ...] | None:
        from simulator.layouts.prefill import parse_prefill_layout

        sizes = parse_prefill_layout(self.prefill_layout)
        return None if sizes is None else tuple(sizes)


def _lora_impls() -> tuple[str, ...]:
    from simulator.model.workload import LORA_IMPLS  # read only where a scenario sets lora_rank

    return LORA_IMPLS


class ShardedStepOptions(StepOptions):
    """`StepOptions` plus tensor parallelism (the kinds whose steps can run sharded)."""

    tensor_parallel_size: Literal[1, 2, 4, 8] = Field(1, description=TP_HELP)


def build_setup(opts: StepOptions, model, profile, fusion: str, graph: str = "none",
                sizes: Sequence[int] | None = None, spec_engine: str = "vllm"):
    """The `StepSetup` of one configuration (`engine.setup.StepSetup.from_options`: the options read whole; with
    spec_tokens, `sizes` count verify tokens and `spec_engine` names whose draft routing applies)."""
    from simulator.engine.setup import StepSetup

    return StepSetup.from_options(opts, model, profile, fusion, graph, sizes, spec_engine)
