"""Scenario kind `step`: model presets over a grid of batch, fusion and graph modes (`launchsim predict` fills it
from its flags: one grid point). The `toy` kind is config/toy.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from .base import Batch, Seed, Strict, Tokens, seed_needs_replicates
from .stepopts import ShardedStepOptions
from simulator.common import vocab as V

MAX_STEP_SIMULATIONS = 50_000  # about a minute of fast-engine steps
FusionName = V.literal(V.Fusion)
GraphName = V.literal(V.GraphMode)  # routing.py states what each runs
EngineName = V.literal(V.Engine)


class TimelineSpec(Strict):
    batch: Batch = Field(1, description="batch size whose step timeline the report draws")
    fusion: FusionName = Field("none", description="fusion level of the drawn timeline")
    graph: GraphName = Field("none", description="graph mode of the drawn timeline")
    launches: PositiveInt = Field(18, le=100_000, description="how many first launches the timeline shows")


class StepScenario(ShardedStepOptions):
    decode_only = True  # a grid of decode steps: mixed-step knobs refused (config/stepopts.py)
    kind: Literal["step"] = Field(description="scenario type")
    name: str = Field(description="scenario name, used in reports")
    description: str = Field("", description="free text shown in the report")
    model: str = Field(description="model preset (qwen3-0.6b, qwen3-8b, llama3-8b, llama3-70b) or config.json path")
    profile: str | None = Field(None, description="profile name or path (default: h200)")
    fusion: list[FusionName] = Field(["none"], min_length=1, description="fusion levels to compare")
    graph: list[GraphName] = Field(["none"], min_length=1, description="graph modes to compare")
    batch: list[Batch] = Field([1], min_length=1, max_length=10_000, description="decode batch sizes")
    ctx: Tokens = Field(1024, description="context length of every sequence, tokens")
    engine: EngineName = Field("fast", description="engine for the grid (des = SimPy reference)")
    replicates: int = Field(0, ge=0, le=1000, description="host-noise replicates for p10/p90 bands (0: off)")
    seed: Seed = Field(0, description="seed of the host-noise generator")
    timeline: TimelineSpec = Field(default_factory=TimelineSpec, description="which step the timeline shows")

    @model_validator(mode="after")
    def _grid(self):
        seed_needs_replicates(self)
        sims = len(self.fusion) * len(self.graph) * len(self.batch) * max(1, self.replicates)
        if sims > MAX_STEP_SIMULATIONS:
            raise ValueError(f"fusion x graph x batch x replicates = {sims:,} simulations; the limit is "
                             f"{MAX_STEP_SIMULATIONS:,}")
        return self
