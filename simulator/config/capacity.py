"""Scenario kind `capacity`: for each configuration (model x profile x fusion x graph mode x layout), the highest
arrival rate that meets latency SLOs, and the replicas a target rate needs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from .base import Strict
from simulator.common import limits as L
from .serve import RunModel
from .specs import LayoutSizes
from .step import FusionName, GraphName


class OptimizeAt(Strict):
    """A layout the study optimizes at its own operating point (simulator/studies/capacity.py)."""

    against: str = Field(description="label of another layout of this scenario (one with `sizes`): the optimized "
                                     "layout gets its graph memory and graph count, starts from its best rate, and "
                                     "is compared with it")
    iterations: int = Field(3, ge=1, le=10, description="most serve -> optimize -> capacity rounds (stops earlier "
                                                         "at a fixed point: the optimizer returns a layout it "
                                                         "already returned)")
    ctx: PositiveInt | None = Field(None, le=L.MAX_CTX, description="context length the optimizer's step costs "
                                    "use, tokens (default: mean prompt + half the mean output)")


class LayoutChoice(Strict):
    label: str = Field(description="name of the layout in the report (e.g. vllm, optimized)")
    sizes: LayoutSizes | None = Field(None, description="capture sizes: a preset name or a list of batch sizes")
    optimize: OptimizeAt | None = Field(None, description="instead of sizes: optimize the layout at the capacity "
                                                          "of another layout (serve there, optimize for the batch "
                                                          "mix, re-check; iterate to a fixed point)")
    note: str = Field("", description="where the layout came from, shown in the report")

    @model_validator(mode="after")
    def _one(self):
        if (self.sizes is None) == (self.optimize is None):
            raise ValueError("give exactly one of sizes or optimize")
        return self


class SLO(Strict):
    percentile: Literal[50, 90, 99] = Field(99, description="which percentile the limits apply to")
    ttft_s: PositiveFloat | None = Field(None, le=L.MAX_SECONDS, description="limit on the TTFT percentile, seconds")
    tpot_ms: PositiveFloat | None = Field(None, le=L.MAX_SECONDS * 1e3, description="limit on the TPOT percentile, milliseconds")

    @model_validator(mode="after")
    def _one(self):
        if self.ttft_s is None and self.tpot_ms is None:
            raise ValueError("give at least one of ttft_s or tpot_ms")
        return self


class SearchSpec(Strict):
    rate_min: PositiveFloat = Field(0.05, le=L.MAX_RATE, description="lowest rate tried, requests/s; failing it: no rate meets")
    rate_max: PositiveFloat = Field(5000.0, le=L.MAX_RATE, description="highest rate tried, requests/s")
    start: PositiveFloat | None = Field(None, le=L.MAX_RATE, description="first rate tried (default: estimated from decode steps)")
    tolerance: float = Field(0.02, gt=0, lt=1, description="stop bisecting when (fail - pass) / pass <= tolerance")
    max_runs: PositiveInt = Field(40, le=1_000, description="most simulations per configuration")

    @model_validator(mode="after")
    def _order(self):
        if self.rate_min >= self.rate_max:
            raise ValueError("rate_min must be below rate_max")
        return self


class CapacityScenario(RunModel):
    kind: Literal["capacity"] = Field(description="scenario type")
    name: str = Field(description="scenario name, used in reports")
    description: str = Field("", description="free text shown in the report")
    models: list[str] = Field(min_length=1, description="model presets or config.json paths")
    tensor_parallel_size: Literal[1, 2, 4, 8] = Field(
        1, description="applies to every model: tensor-parallel GPUs of one NVLink node: each GPU runs a shard "
                       "(heads, KV heads, MLP and vocab / N) plus an all-reduce per attention and MLP block; figures are one GPU's. The "
                       "collective figures are published, not measured (simulator/model/parallel.py)")
    profiles: list[str | None] = Field([None], min_length=1, description="profiles (null: h200, else datasheet-h200)")
    fusion: list[FusionName] = Field(["fused"], min_length=1, description="fusion levels")
    graph: list[GraphName] = Field(["none", "full_and_piecewise"], min_length=1, description="CUDA-graph modes")
    layouts: list[LayoutChoice] = Field(default_factory=lambda: [LayoutChoice(label="vllm", sizes="vllm")],
                                        min_length=1, description="capture layouts (ignored under graph none)")
    slo: SLO = Field(description="latency targets a rate must meet")
    target_rate: PositiveFloat | None = Field(None, le=L.MAX_RATE * 1e6, description="fleet arrival rate to size replicas for, requests/s")
    search: SearchSpec = Field(default_factory=SearchSpec, description="bisection settings")
    curve_fractions: list[Annotated[float, Field(gt=0, le=100)]] = Field([0.25, 0.5, 0.75, 1.1, 1.25], max_length=100, description=(
        "extra rates for the throughput-latency curves, as fractions of each configuration's best rate"))
    workers: int = Field(1, ge=0, le=64, description="processes running configurations in parallel (0: one per core)")

    @model_validator(mode="after")
    def _layouts(self):
        labels = [lay.label for lay in self.layouts]
        if len(set(labels)) != len(labels):
            raise ValueError(f"layout labels must differ, got {labels}")
        fixed = {lay.label for lay in self.layouts if lay.sizes is not None}
        for lay in self.layouts:
            if lay.optimize is not None and lay.optimize.against not in fixed:
                raise ValueError(f"layout '{lay.label}': optimize.against must be the label of a layout with "
                                 f"sizes ({', '.join(sorted(fixed)) or 'none here'}), got "
                                 f"'{lay.optimize.against}'")
            if lay.optimize is not None and self.spec_tokens:
                raise ValueError(f"layout '{lay.label}': optimize with spec_tokens is not modelled (the optimizer "
                                 "sizes plain decode batches, not verify tokens): give the layout's sizes")
        return self
