"""Scenario kinds `step` (model presets over a grid of batch, fusion and graph modes) and `toy`
(textbook arithmetic: layers x kernels at a fixed launch cost and kernel time)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from .base import Batch, Micros, Seed, Strict, Tokens
from simulator.common import limits as L

MAX_STEP_SIMULATIONS = 50_000  # about a minute of fast-engine steps
FusionName = Literal["none", "packed", "compiled", "fused"]
# the graph modes of routing.GRAPH_MODES (routing.py states what each runs)
GraphName = Literal["none", "full", "full_decode_only", "piecewise", "full_and_piecewise"]


class TimelineSpec(Strict):
    batch: Batch = Field(1, description="batch size whose step timeline the report draws")
    fusion: FusionName = Field("none", description="fusion level of the drawn timeline")
    graph: GraphName = Field("none", description="graph mode of the drawn timeline")
    launches: PositiveInt = Field(18, le=100_000, description="how many first launches the timeline shows")


class StepScenario(Strict):
    kind: Literal["step"] = Field(description="scenario type")
    name: str = Field(description="scenario name, used in reports")
    description: str = Field("", description="free text shown in the report")
    model: str = Field(description="model preset (qwen3-0.6b, qwen3-8b, llama3-8b, llama3-70b) or config.json path")
    tensor_parallel_size: Literal[1, 2, 4, 8] = Field(
        1, description="tensor-parallel GPUs of one NVLink node: each GPU runs a shard (heads, KV heads, MLP and "
                       "vocab / N) plus an all-reduce per attention and MLP block; figures are one GPU's. The "
                       "collective figures are published, not measured (simulator/model/parallel.py)")
    dtype: Literal["bf16", "fp8"] = Field("bf16", description="weight dtype: fp8 = e4m3 projection weights with "
                                          "per-tensor scales (simulator/model/dtype.py)")
    kv_dtype: Literal["bf16", "fp8"] = Field("bf16", description="KV-cache dtype (fp8: 1 byte per element)")
    profile: str | None = Field(None, description="profile name or path (default: h200)")
    fusion: list[FusionName] = Field(["none"], min_length=1, description="fusion levels to compare")
    graph: list[GraphName] = Field(["none"], min_length=1, description="graph modes to compare")
    batch: list[Batch] = Field([1], min_length=1, max_length=10_000, description="decode batch sizes")
    ctx: Tokens = Field(1024, description="context length of every sequence, tokens")
    engine: Literal["des", "fast"] = Field("fast", description="engine for the grid (des = SimPy reference)")
    replicates: int = Field(0, ge=0, le=1000, description="host-noise replicates for p10/p90 bands (0: off)")
    seed: Seed = Field(0, description="seed of the host-noise generator")
    timeline: TimelineSpec = Field(default_factory=TimelineSpec, description="which step the timeline shows")

    @model_validator(mode="after")
    def _grid(self):
        sims = len(self.fusion) * len(self.graph) * len(self.batch) * max(1, self.replicates)
        if sims > MAX_STEP_SIMULATIONS:
            raise ValueError(f"fusion x graph x batch x replicates = {sims:,} simulations; the limit is "
                             f"{MAX_STEP_SIMULATIONS:,}")
        return self


class FusedKernel(Strict):
    name: str = Field(description="name of the fused kernel")
    replaces: list[str] = Field(min_length=1, max_length=1000, description="the unfused kernels it replaces")


class ToyCase(Strict):
    label: str = Field(description="case name")
    layers: PositiveInt = Field(le=L.MAX_TOY_KERNELS, description="decoder layers")
    kernels_per_layer: PositiveInt = Field(le=L.MAX_TOY_KERNELS, description="kernel launches per layer")
    launch_us: Micros = Field(description="host cost of each launch, µs")
    kernel_us: Micros | None = Field(None, description="GPU time of each kernel at batch 1, µs")
    gpu_busy_ms: float | None = Field(None, ge=0, le=L.MAX_US, description="total GPU time of the step at batch 1, "
                                                                          "ms (split evenly)")
    gap_us: Micros = Field(0.0, description="GPU gap before each kernel, µs")
    queue_depth: PositiveInt = Field(1024, le=1 << 20, description="launch-queue capacity")
    kernel_us_per_seq: Micros = Field(0.0, description="GPU time each kernel adds per sequence beyond the first, "
                                                        "µs (the batch axis: kernel time = kernel_us + (batch - 1) "
                                                        "x this)")
    fused_kernels_per_layer: PositiveInt | None = Field(None, le=L.MAX_TOY_KERNELS, description=(
        "kernel launches per layer with fusion on (needed when the scenario's fusion includes true; default: "
        "the number of rows of fusion_table)"))
    fusion_table: list[FusedKernel] | None = Field(None, max_length=1000, description=(
        "which kernels of a layer each fused kernel replaces (shown in the report); the replaced kernels must "
        "add up to kernels_per_layer"))
    fused_gpu_scale: float = Field(1.0, gt=0, le=1, description=(
        "share of a layer's GPU time left after fusion (1: fusion only saves launches; below 1: it also saves "
        "memory traffic)"))
    graph_launch_us: Micros | None = Field(None, description="host cost of one graph replay, µs (default launch_us)")

    @model_validator(mode="after")
    def _one_time(self):
        if (self.kernel_us is None) == (self.gpu_busy_ms is None):
            raise ValueError("give exactly one of kernel_us or gpu_busy_ms")
        if self.layers * self.kernels_per_layer > L.MAX_TOY_KERNELS:
            raise ValueError(f"layers x kernels_per_layer = {self.layers * self.kernels_per_layer:,} kernels; the "
                             f"limit is {L.MAX_TOY_KERNELS:,}")
        if self.fusion_table is not None:
            n = sum(len(k.replaces) for k in self.fusion_table)
            if n != self.kernels_per_layer:
                raise ValueError(f"fusion_table replaces {n} kernels; kernels_per_layer is {self.kernels_per_layer}")
            if self.fused_kernels_per_layer not in (None, len(self.fusion_table)):
                raise ValueError(f"fused_kernels_per_layer {self.fused_kernels_per_layer} differs from the "
                                 f"{len(self.fusion_table)} rows of fusion_table")
        return self

    @property
    def fused_per_layer(self) -> int | None:
        if self.fusion_table is not None:
            return len(self.fusion_table)
        return self.fused_kernels_per_layer

    def kernel_s_at(self, batch: int) -> float:
        """GPU time of one unfused kernel at `batch`."""
        return self.kernel_s + (batch - 1) * self.kernel_us_per_seq * 1e-6

    @property
    def kernels(self) -> int:
        return self.layers * self.kernels_per_layer

    @property
    def kernel_s(self) -> float:
        if self.kernel_us is not None:
            return self.kernel_us * 1e-6
        return self.gpu_busy_ms * 1e-3 / self.kernels


class ToyScenario(Strict):
    kind: Literal["toy"] = Field(description="scenario type")
    name: str = Field(description="scenario name")
    description: str = Field("", description="free text shown in the report")
    engine: Literal["des", "fast"] = Field("des", description="engine")
    cases: list[ToyCase] = Field(min_length=1, max_length=1000, description="cases to simulate")
    fusion: list[bool] = Field([False], min_length=1, max_length=2, description=(
        "fusion toggle values to simulate (true: each layer launches fused_kernels_per_layer kernels)"))
    graph: list[bool] = Field([False], min_length=1, max_length=2, description=(
        "CUDA-graph toggle values to simulate (true: the whole step is one replay of graph_launch_us)"))
    batch: list[Batch] = Field([1], min_length=1, max_length=64, description=(
        "batch sizes (each kernel's GPU time grows by kernel_us_per_seq per extra sequence)"))
    timeline_launches: PositiveInt = Field(18, le=100_000, description="how many first launches the timeline shows")

    @model_validator(mode="after")
    def _total(self):
        runs = len(set(self.fusion)) * len(set(self.graph)) * len(set(self.batch))
        n = sum(c.kernels for c in self.cases) * runs
        if n > 2 * L.MAX_TOY_KERNELS:
            raise ValueError(f"the cases x fusion x graph x batch add up to {n:,} kernels; the limit is "
                             f"{2 * L.MAX_TOY_KERNELS:,}")
        if True in self.fusion:
            for i, c in enumerate(self.cases):
                if c.fused_per_layer is None:
                    raise ValueError(f"cases[{i}] ('{c.label}'): fusion true needs fused_kernels_per_layer or "
                                     f"fusion_table")
        return self
