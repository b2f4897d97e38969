"""Scenario kind `sweep`: a grid over model x profile x fusion x graph mode x capture layout x batch-size
distribution x graph-memory budget, run in parallel, resumable, reported as CSV, JSON and HTML."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Union

from pydantic import Field, PositiveInt, field_validator, model_validator

from .base import Batch, Strict, Tokens
from .stepopts import StepOptions
from simulator.common import limits as L
from simulator.common import vocab as V
from .specs import ATTENTION_BACKEND_HELP, PREFILL_LAYOUT_HELP, PrefillLayout  # noqa: F401
from .distspecs import LayoutSpec, NamedDistribution
from .specs import parse_bytes
from .step import FusionName, GraphName



class MixedSpec(Strict):
    share: float = Field(ge=0, le=1, description="fraction of steps that also carry a prefill chunk")
    prefill_seqs: Batch = Field(1, description="sequences prefilling in a mixed step")
    prefill_len: Tokens = Field(256, description="tokens each prefilling sequence adds")


class SweepScenario(StepOptions):
    kind: Literal["sweep"] = Field(description="scenario type")
    name: str = Field(description="scenario name, used in reports")
    description: str = Field("", description="free text shown in the report")
    models: list[str] = Field(min_length=1, description="model presets or config.json paths")
    profiles: list[str] = Field(["datasheet-h200"], min_length=1, description="profile names or paths")
    fusion: list[FusionName] = Field(["fused"], min_length=1, description="fusion levels")
    graph: list[GraphName] = Field(["none", "full"], min_length=1, description="graph modes")
    layouts: list[LayoutSpec] = Field(min_length=1, description="capture layouts to compare")
    distributions: list[NamedDistribution] = Field(min_length=1, description="batch-size distributions")
    budgets: list[Union[int, str]] = Field(["1GiB"], min_length=1, validate_default=True,
                                           description="pinned graph-memory budgets (bytes or '256MiB'/'1GiB')")
    ctx: Tokens = Field(1024, description="context length of every decoding sequence, tokens")
    mixed: MixedSpec | None = Field(None, description="optional share of mixed (decode + prefill) steps")
    shared_pool: bool = Field(True, description="one graph pool shared by all sizes (captured largest-first)")
    gpu_util: float = Field(0.9, gt=0, le=1, description="fraction of GPU memory the engine may use")
    workspace_bytes: Union[int, str] = Field("1GiB", validate_default=True, description="memory for workspaces and eager activations")
    executor: V.literal(V.Executor) = Field("local", description="local processes or a Ray cluster")
    workers: PositiveInt = Field(2, le=L.MAX_WORKERS, description="parallel worker processes (local) or Ray CPUs when starting Ray")
    chunk: PositiveInt = Field(64, le=1_000_000, description="grid points per task sent to a worker")
    # speculative decoding as sweep axes (issue 21 item 4): studies/sweep.py and sweep/grid.py run each point's
    # verify step + draft loop (engine/spec.py predict_spec_setup) per batch size
    spec_ok: ClassVar[bool] = True
    spec_tokens: list[Annotated[int, Field(ge=0, le=64)]] = Field(
        [0], min_length=1, description="axis: draft tokens k per sequence per step (0: plain decode); with k > 0 a "
                                       "layout that names an engine (vllm, sglang, trtllm) is its spec-decode list "
                                       "in tokens (simulator/layouts/spec.py), other layouts count verify tokens")
    acceptance: list[Annotated[float, Field(ge=0, le=1)]] | None = Field(
        None, min_length=1, description="axis, with spec_tokens > 0: constant per-token acceptance probabilities "
                                        "(tokens per step (1 - a^(k+1)) / (1 - a)); points at k = 0 ignore it, "
                                        "one per distinct rest of the grid")

    @model_validator(mode="after")
    def _mixed_knobs(self):  # replaces StepOptions' check of spec_tokens (here a list) and acceptance
        if any(self.spec_tokens):
            if self.acceptance is None:
                raise ValueError("spec_tokens > 0 needs acceptance (a list of per-token probabilities)")
            if self.mixed is not None and self.mixed.share:
                raise ValueError("mixed: speculative points price decode verify steps only; leave mixed out with "
                                 "spec_tokens > 0")
        elif self.acceptance is not None or self.draft != "eagle":
            raise ValueError("acceptance and draft apply to speculative decoding: they need spec_tokens > 0")
        if len(set(self.spec_tokens)) != len(self.spec_tokens):
            raise ValueError(f"spec_tokens: duplicate value in {self.spec_tokens}")
        if self.acceptance is not None and len(set(self.acceptance)) != len(self.acceptance):
            raise ValueError(f"acceptance: duplicate value in {self.acceptance}")
        return self

    def spec_acceptance(self):
        raise ValueError("a sweep's acceptance is an axis: each point builds its own (studies/sweep.py)")

    @field_validator("budgets")
    @classmethod
    def _budgets(cls, v):
        return [parse_bytes(x) for x in v]

    @field_validator("workspace_bytes")
    @classmethod
    def _ws(cls, v):
        return parse_bytes(v)

    @model_validator(mode="after")
    def _grid(self):
        n = 1
        for xs in (self.models, self.profiles, self.fusion, self.graph, self.layouts, self.distributions,
                   self.budgets, self.spec_tokens, self.acceptance or [None]):
            n *= len(xs)
        if n > 1_000_000:
            raise ValueError(f"the grid has {n:,} points; the limit is 1,000,000")
        return self

    @model_validator(mode="after")
    def _unique_names(self):
        for what, items in (("layouts", self.layouts), ("distributions", self.distributions)):
            names = [x.name for x in items]
            dup = {n for n in names if names.count(n) > 1}
            if dup:
                raise ValueError(f"{what}: duplicate name {sorted(dup)[0]!r}")
        return self
