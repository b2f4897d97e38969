"""Scenario kind `serve`: one replica under a request stream (continuous batching), and the pieces that the
`capacity` kind shares with it (arrivals, length distributions, serving-engine limits)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import AliasChoices, Field, PositiveFloat, PositiveInt, model_validator

from .base import Batch, Seed, Strict, Tokens
from .stepopts import StepOptions
from simulator.common import limits as L
from simulator.common import vocab as V
from .step import FusionName, GraphName

from .specs import LayoutSizes


class LengthModel(Strict):
    kind: V.literal(V.LengthKind) = Field("lognormal", description="length distribution (csv: real lengths from "
                                                                    "a file, resampled)")
    value: Tokens | None = Field(None, description="tokens, for kind fixed")
    mean: PositiveFloat | None = Field(None, le=L.MAX_CTX, description="mean tokens, for kind lognormal")
    cv: float = Field(1.0, ge=0, le=1000, description="coefficient of variation, for kind lognormal")
    low: Tokens = Field(1, description="smallest length (uniform bound, lognormal clip)")
    high: Tokens = Field(4096, description="largest length (uniform bound, lognormal clip)")
    file: str | None = Field(None, description="for kind csv: a CSV with a header; a relative path is looked up "
                                               "beside the scenario file first")
    column: str | None = Field(None, description="for kind csv: the column to read (default: the only one)")

    @model_validator(mode="after")
    def _complete(self):
        if self.kind == "fixed" and self.value is None:
            raise ValueError("kind fixed needs 'value'")
        if self.kind == "lognormal" and self.mean is None:
            raise ValueError("kind lognormal needs 'mean'")
        if (self.kind == "csv") != (self.file is not None):
            raise ValueError("kind csv needs 'file' (and only kind csv takes one)")
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        return self

    def to_spec(self):
        from ..serving.arrivals import LengthSpec

        if self.kind == "csv":
            from ..serving.arrivals import load_lengths

            vals, src = load_lengths(self.file, self.column)
            return LengthSpec("csv", 0, 0.0, self.cv, min(vals), max(vals), vals, src)
        return LengthSpec(self.kind, self.value or 0, float(self.mean or 0.0), self.cv, self.low, self.high)


def default_prompt() -> LengthModel:
    return LengthModel(kind="lognormal", mean=512, cv=1.0, low=1, high=4096)


def default_output() -> LengthModel:
    return LengthModel(kind="lognormal", mean=256, cv=1.0, low=1, high=2048)


class ArrivalModel(Strict):
    process: V.literal(V.ArrivalProcess) = Field("poisson", description="arrival process")
    cv: PositiveFloat = Field(1.0, ge=0.001, le=1000, description="coefficient of variation of gamma inter-arrival gaps (>1: bursty)")
    trace: str | None = Field(None, description="CSV trace (timestamp,prompt_tokens,output_tokens), for process trace; "
                                                "a relative path is looked up beside the scenario file first")

    @model_validator(mode="after")
    def _trace(self):
        if self.process == "trace" and not self.trace:
            raise ValueError("process trace needs 'trace' (a CSV file)")
        return self

    def to_spec(self):
        from ..serving.arrivals import ArrivalSpec

        return ArrivalSpec(self.process, self.cv, self.trace)


class EngineLimits(Strict):
    max_num_seqs: Batch = Field(256, description="most sequences in one step")
    max_num_batched_tokens: Tokens = Field(8192, description="token budget of one step")
    chunked_prefill: bool = Field(True, description="split long prompts across steps (off: a prompt must fit whole)")
    max_model_len: Tokens | None = Field(None, description="longest prompt + output (default: model's limit)")
    gpu_memory_utilization: float = Field(
        0.9, gt=0, le=1, validation_alias=AliasChoices("gpu_memory_utilization", "gpu_util"),
        description="share of GPU memory the engine may use (vLLM's name; gpu_util is accepted too)")
    workspace_gib: float = Field(1.0, ge=0, le=1 << 20, description="workspace and activation memory outside graphs, GiB")
    kv_blocks: PositiveInt | None = Field(None, le=1 << 31, description="override the KV-cache size in 16-token blocks")
    ctx_bucket: Tokens = Field(256, description="context bucket of the step-time memo, tokens (rounded up)")
    merge_steps: bool = Field(True, description="merge runs of identical decode steps into one event (same figures)")

    @model_validator(mode="after")
    def _budget(self):
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError("max_num_batched_tokens must be at least max_num_seqs")
        return self


class StabilitySpec(Strict):
    """When a run counts as stable (simulator/serving/capacity.py Stability): capacity rejects unstable rates,
    serve reports `saturated`."""

    throughput_tol: float = Field(0.05, gt=0, lt=1, description="completed throughput must be at least (1 - this) x "
                                                                 "the window's arrival rate")
    backlog_tol: float = Field(0.02, gt=0, le=1, description="requests still waiting for a first token at the "
                                                             "window's end: at most this x the window's arrivals")
    growth_tol: float = Field(0.05, gt=0, le=1, description="the waiting queue's growth over the window's last "
                                                            "half: at most this x the arrival rate")
    unfinished_tol: float = Field(0.001, ge=0, le=1, description="requests unfinished when the run stops: at most "
                                                                  "this x the window's requests")

    def to_stability(self):
        from ..serving.capacity import Stability

        return Stability(self.throughput_tol, self.backlog_tol, self.growth_tol, self.unfinished_tol)


class RunModel(StepOptions):
    """Timing and seeds common to `serve` and `capacity`."""

    # serving runs speculative steps (simulator/serving/: verify + draft priced per step, tokens per step drawn per
    # sequence from the acceptance model, k + 1 KV slots per sequence per step)
    spec_ok: ClassVar[bool] = True

    duration_s: PositiveFloat = Field(60.0, le=L.MAX_SECONDS, description="seconds of arrivals to simulate")
    warmup_frac: float = Field(0.1, ge=0, lt=1, description="leading share of the run left out of the metrics")
    drain_s: float | None = Field(None, ge=0, le=L.MAX_SECONDS, description="how long to keep serving after arrivals stop (default: duration)")
    seed: Seed = Field(0, description="root of the SeedSequence all streams and replications spawn from")
    replications: PositiveInt = Field(1, le=100, description="independent runs (seeds spawned from the root)")
    arrivals: ArrivalModel = Field(default_factory=ArrivalModel, description="arrival process")
    prompt: LengthModel = Field(default_factory=default_prompt, description="prompt length distribution")
    output: LengthModel = Field(default_factory=default_output, description="output length distribution")
    engine: EngineLimits = Field(default_factory=EngineLimits, description="serving-engine limits")
    scheduling: V.literal(V.Scheduling) = Field(
        "none", description="the engine's own host work per step (simulator/engine/steploop.py): none = the forward pass "
                            "only; sync = schedule, input copies, sampling, .tolist() and detokenise run back to back "
                            "with the forward; async = that host work overlaps the previous step's GPU work")
    sampling: V.literal(V.Sampling) = Field("greedy", description="sampling the engine runs each step "
                                                                       "(with scheduling sync/async)")
    stability: StabilitySpec = Field(default_factory=StabilitySpec, description="when a run counts as stable "
                                     "(not saturated)")


DEFAULT_RATE = 10.0  # requests/s: serve's rate when none is given (printed as a default in its summary)


class ServeScenario(RunModel):
    kind: Literal["serve"] = Field(description="scenario type")
    name: str = Field(description="scenario name, used in reports")
    description: str = Field("", description="free text shown in the report")
    model: str = Field(description="model preset or config.json path")
    tensor_parallel_size: Literal[1, 2, 4, 8] = Field(
        1, description="tensor-parallel GPUs of one NVLink node: each GPU runs a shard (heads, KV heads, MLP and "
                       "vocab / N) plus an all-reduce per attention and MLP block; figures are one GPU's. The "
                       "collective figures are published, not measured (simulator/model/parallel.py)")
    profile: str | None = Field(None, description="profile name or path (default: h200, else datasheet-h200)")
    fusion: FusionName = Field("fused", description="fusion level of the served model")
    graph: GraphName = Field("full_and_piecewise", description="CUDA-graph mode")
    layout: LayoutSizes = Field("vllm", description="capture sizes: a preset (vllm, sglang, ...) or a list")
    rate: PositiveFloat | None = Field(None, le=L.MAX_RATE, description=f"mean arrival rate, requests/s (default "
                                       f"{DEFAULT_RATE:g} for poisson/gamma; trace: its own rate, or rescale to this)")

    @property
    def rate_used(self) -> float | None:
        """The rate a run uses: the given one, else DEFAULT_RATE (trace arrivals: None, the trace's own)."""
        if self.rate is not None or self.arrivals.process == "trace":
            return self.rate
        return DEFAULT_RATE
