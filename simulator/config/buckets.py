"""Scenario kind `buckets`: the best capture sizes for a batch-size distribution (`launchsim optimize`
as a file). The distribution is inline (histogram or samples) or a CSV path: `batch` or `batch,count`
columns, such as the batch_log.csv a `serve` run writes."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Union

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from .base import Tokens
from .stepopts import StepOptions
from simulator.common import limits as L
from simulator.common import vocab as V
from .distspecs import DistributionSpec
from .step import FusionName, GraphName

PresetName = V.literal(V.COMPARED_PRESETS + (V.LayoutPreset.POW2,))


class BucketsScenario(StepOptions):
    decode_only = True  # a grid of decode steps: mixed-step knobs refused (config/stepopts.py)
    # spec_tokens: studies/optimize.py searches token sizes the engines accept and prices verify steps; acceptance
    # scales every layout's per-token figure alike (cannot move the optimum) and the draft loop is not in the
    # objective, so both are refused
    spec_ok: ClassVar[bool] = True
    spec_needs_acceptance: ClassVar[bool] = False
    kind: Literal["buckets"] = Field(description="scenario type")
    name: str = Field(description="scenario name, used in reports")
    description: str = Field("", description="free text shown in the report")
    distribution: DistributionSpec = Field(description="the batch-size distribution to optimize for")
    model: str = Field(description="model preset or config.json path")
    profile: str | None = Field(None, description="profile name or path (default: h200)")
    fusion: FusionName = Field("fused", description="fusion level of the step whose cost is optimized")
    graph: GraphName = Field("full_and_piecewise", description="graph mode of captured sizes (not none; default "
                                                               "vLLM V1's, as every command's)")
    ctx: Tokens = Field(1024, description="context length of every sequence, tokens")
    objective: V.literal(V.Objective) = Field(
        "step-time", description="step-time: expected step time (eager above the largest size); padded-rows: "
                                 "expected padded rows per step (largest size fixed at max_size)")
    max_graphs: PositiveInt = Field(64, le=L.MAX_OPTIMIZE_SIZE, description="most capture sizes (K)")
    memory_budget: Union[Annotated[int, Field(gt=0, le=L.MAX_BYTES)], str, None] = Field(
        None, description="pinned graph-memory budget: bytes, '512MiB', '1GiB', or a preset name meaning "
                          "'as much as that preset's layout needs'")
    capture_budget: PositiveFloat | None = Field(None, le=L.MAX_SECONDS, description="start-up capture budget, seconds: "
                                          "warm-up runs + capture of every graph (simulator/engine/startup.py), compile excluded")
    max_size: Annotated[int, Field(gt=0, le=L.MAX_OPTIMIZE_SIZE)] | None = Field(None, description="largest candidate size (default: largest batch seen)")
    shared_pool: bool = Field(True, description="graphs share one memory pool (vLLM, SGLang); false: private pools")
    presets: list[PresetName] = Field(["vllm", "sglang", "trtllm", "seed"], description="presets to compare")

    @model_validator(mode="after")
    def _spec_draft(self):
        if self.spec_tokens and self.draft != "eagle":
            raise ValueError("draft: the buckets objective prices the target's verify steps only (the draft loop is "
                             "not in it), so the draft cannot change the optimum: leave it out")
        return self
