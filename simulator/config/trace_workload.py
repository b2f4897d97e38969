"""Scenario kind `workload`: an imported trace (a workload file from `launchsim import-trace`) in
place of a preset model, over a grid of graph modes, fusion what-ifs and batch sizes. `launchsim predict --workload`
fills it (one point of the grid) from the predict flags that have a field here."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from .base import Batch, Seed, Strict, Tokens, seed_needs_replicates
from simulator.common import limits as L
from simulator.common import vocab as V
from .step import EngineName, GraphName


class WorkloadScenario(Strict):
    kind: Literal["workload"] = Field(description="scenario type")
    name: str = Field(description="scenario name, used in reports")
    description: str = Field("", description="free text shown in the report")
    workload: str = Field(description="workload file written by `launchsim import-trace` (path, relative to "
                                      "the working directory)")
    profile: str | None = Field(None, description="profile name or path (default: h200)")
    graph: list[GraphName] = Field(["none"], min_length=1, description="graph modes to compare")
    fusion: list[V.literal(V.WORKLOAD_FUSIONS)] = Field(["none"], min_length=1,
                                                      description="none (as traced) or compiled (fusion rules)")
    batch: list[Batch] | None = Field(None, min_length=1, max_length=10_000,
                                            description="batch sizes to scale to (default: the traced batch)")
    ctx: Tokens | None = Field(None, description="context length to scale attention to (default: traced)")
    engine: EngineName = Field("fast", description="engine (des = SimPy reference)")
    replicates: int = Field(0, ge=0, le=L.MAX_REPLICATES, description="host-noise replicates for a p10/p50/p90 "
                                                                      "band of each row (0: off)")
    seed: Seed = Field(0, description="seed of the host-noise generator")
    timeline_launches: PositiveInt = Field(18, le=100_000, description="how many first launches the timeline shows")

    @model_validator(mode="after")
    def _seed(self):
        seed_needs_replicates(self)
        return self
