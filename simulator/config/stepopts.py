"""The step knobs every scenario kind shares, declared once: `StepOptions` (a pydantic mixin every kind inherits,
so each knob has one YAML field, one description and, through the commands' generated flags, one flag), and
`build_setup`, the one place a scenario's fields become an `engine.setup.StepSetup` that studies pass whole.

A new step knob: a field here, a field of `StepSetup`, its consumer (the workload builder or the router), and
its test; every study, every YAML kind and every command that builds a setup from these options has it.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Sequence

from pydantic import Field, model_validator

from simulator.common import vocab as V
from .base import Strict
from .specs import ATTENTION_BACKEND_HELP, PREFILL_LAYOUT_HELP, PrefillLayout

TP_HELP = ("tensor-parallel GPUs of one NVLink node: each GPU runs a shard (heads, KV heads, MLP and vocab / N) plus an "
           "all-reduce per attention and MLP block; figures are one GPU's (simulator/model/parallel.py)")


class StepOptions(Strict):
    """Knobs of the step itself (not of the study around it)."""

    dtype: V.literal(V.Dtype) = Field("bf16", description="weight dtype: fp8 = e4m3 projection weights with "
                                                           "per-tensor scales (simulator/model/dtype.py)")
    kv_dtype: V.literal(V.Dtype) = Field("bf16", description="KV-cache dtype (fp8: 1 byte per element)")
    attention_backend: V.literal(V.AttentionBackend) = Field("flashinfer", description=ATTENTION_BACKEND_HELP)
    prefill_layout: PrefillLayout = Field(None, description=PREFILL_LAYOUT_HELP)

    decode_only: ClassVar[bool] = False  # kinds that price decode-only steps: the mixed-step knobs cannot matter

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
    """The `StepSetup` of one configuration: `model` (name, path or ModelSpec) resolved with the options' dtypes and
    tensor parallelism (`model/resolve.py`), `profile` (name, path, Profile or CostModel), `fusion`, and the capture:
    `graph`, decode `sizes` (None: every size captured), the options' prefill sizes and attention backend."""
    from simulator.engine.setup import Capture, StepSetup
    from simulator.model.resolve import resolve_model

    m = resolve_model(model, opts.dtype, opts.kv_dtype, getattr(opts, "tensor_parallel_size", 1))
    prefill = opts.prefill_sizes() if graph != "none" else None
    return StepSetup.of(m, profile, fusion, Capture.of(graph, sizes, prefill, opts.attention_backend))
