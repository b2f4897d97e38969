"""The step knobs every scenario kind shares, declared once: `StepOptions` (a pydantic mixin every kind inherits,
so each knob has one YAML field, one description and, through the commands' generated flags, one flag), and
`build_setup`, the one place a scenario's fields become an `engine.setup.StepSetup` that studies pass whole.

A new step knob: a field here, a field of `StepSetup`, its consumer (the workload builder or the router), and
its test; every study, every YAML kind and every command that builds a setup from these options has it.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Optional, Sequence

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
    impl: Optional[Literal["reference", "hf", "fused"]] = Field(
        None, description="implementation whose op list a step launches (simulator/model/recipes.py): reference = "
                          "launchsim's calibration decoder (fusion none/packed/compiled), hf = Hugging Face "
                          "transformers 5.17's own modeling code with SDPA (none/compiled), fused = vLLM-style custom "
                          "ops (fused); default: fused for fusion fused, else reference")
    kv_cache: Literal["static", "dynamic"] = Field(
        "static", description="impl hf: transformers' StaticCache (attention reads every slot under a mask) or "
                              "DynamicCache (grows by a cat each step)")
    max_cache_len: Optional[Annotated[int, Field(gt=0, le=L.MAX_CTX)]] = Field(
        None, description="impl hf, static cache: its slots (default: the step's context + 1)")
    host_canary_us: Optional[Annotated[float, Field(gt=0, le=1000)]] = Field(
        None, description="your host's tiny-op canary, µs (`launchsim calibrate --host-only` measures it): every host "
                          "cost of the profile scales by it over the calibration machine's canary; default: the "
                          "calibration machine's fast state")
    assume_family: Optional[Literal[SUPPORTED]] = Field(  # type: ignore[valid-type]
        None, description="read a config.json whose model_type/architectures is not a supported family as this "
                          "family (said in the output); without it such a config is refused")

    decode_only: ClassVar[bool] = False  # kinds that price decode-only steps: the mixed-step knobs cannot matter

    @model_validator(mode="after")
    def _recipe_knobs(self):
        if self.impl != "hf" and (self.kv_cache != "static" or self.max_cache_len is not None):
            raise ValueError("kv_cache and max_cache_len are options of impl hf (transformers' caches)")
        if self.kv_cache == "dynamic" and self.max_cache_len is not None:
            raise ValueError("max_cache_len sizes a static cache: leave it out with kv_cache dynamic")
        return self

    @model_validator(mode="after")
    def _mixed_knobs(self):
        if self.decode_only:
            if self.attention_backend != "flashinfer":
                raise ValueError("attention_backend only changes mixed (prefill + decode) steps, which this kind "
                                 "does not run: leave it at flashinfer")
            if self.prefill_layout is not None:
                raise ValueError("prefill_layout only changes mixed (prefill + decode) steps, which this kind does "
                                 "not run: leave it out")
        return self

    def prefill_sizes(self) -> tuple[int, ...] | None:
        from simulator.layouts.prefill import parse_prefill_layout

        sizes = parse_prefill_layout(self.prefill_layout)
        return None if sizes is None else tuple(sizes)


class ShardedStepOptions(StepOptions):
    """`StepOptions` plus tensor parallelism (the kinds whose steps can run sharded)."""

    tensor_parallel_size: Literal[1, 2, 4, 8] = Field(1, description=TP_HELP)


def build_setup(opts: StepOptions, model, profile, fusion: str, graph: str = "none",
                sizes: Sequence[int] | None = None):
    """The `StepSetup` of one configuration (`engine.setup.StepSetup.from_options`: the options read whole)."""
    from simulator.engine.setup import StepSetup

    return StepSetup.from_options(opts, model, profile, fusion, graph, sizes)
