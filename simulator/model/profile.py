"""Device profiles: the JSON files that hold every cost figure the simulator uses.

A profile has a `host` section (what the CPU pays to launch, by path: depends on the host CPU) and a
`device` section (what the GPU pays: ceilings, gaps, measured kernel-time tables). The two can be
recombined (`combine`) so a user can recalibrate the host on their own box and keep a shipped device.
Validation on load turns any schema problem into one `ProfileError` line naming file and field.

Loading cost (a `predict` process loads one profile): the annotations here are evaluated when the module runs
(no `from __future__ import annotations`), so pydantic reads types instead of parsing and evaluating strings, and
the models' validators are built on the first validation (`defer_build`), the nested ones inside the
`Profile` validator rather than each on its own: 16M fewer instructions for importing this module and loading
h200.json (of ~1.65G for `predict --json`; valgrind cachegrind, Ir).
"""

from simulator.common.errors import UserError
from simulator.common.jsonfile import validate_versioned
from simulator.model.profile_check import check_profile, read_profile_file
from simulator.model.profile_moe import Fp8QuantTable, GroupedGemmTable, RoutingTable

import hashlib
import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION = 1
PROFILE_DIR = Path(__file__).resolve().parents[1] / "profiles"  # package data of simulator
DEFAULT_PROFILE = "h200"  # measured; falls back to datasheet-h200 until it exists


class ProfileError(UserError):
    """A profile that cannot be found, parsed or validated."""


def _empty_list() -> list:
    """A new empty list: the default of the list fields below. A Python function rather than the builtin `list`:
    pydantic reads a default factory's signature, and for a builtin inspect parses its text signature with
    tokenize, whose regular expressions compiled on that first use cost ~10 ms of a `predict` process."""
    return []


def _empty_dict() -> dict:
    """A new empty dict: the default of the dict fields below (see `_empty_list`)."""
    return {}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Spread(_Strict):
    """A measured distribution in microseconds: median plus percentiles."""

    p50: float = Field(ge=0, description="median, µs")
    p10: float | None = Field(None, ge=0, description="10th percentile, µs (defaults to p50)")
    p90: float | None = Field(None, ge=0, description="90th percentile, µs (defaults to p50)")
    n: int | None = Field(None, description="number of samples behind the figure")

    def q(self, quantile: float) -> float:
        lo = self.p10 if self.p10 is not None else self.p50
        hi = self.p90 if self.p90 is not None else self.p50
        if quantile <= 0.1:
            return lo
        if quantile >= 0.9:
            return hi
        if quantile <= 0.5:
            return lo + (self.p50 - lo) * (quantile - 0.1) / 0.4
        return self.p50 + (hi - self.p50) * (quantile - 0.5) / 0.4


class ProfilerOverhead(_Strict):
    """How much a torch.profiler session inflates host time, measured (same steps, profiled vs not)."""

    factor: float = Field(ge=1, description="profiled host time / un-profiled host time of the same steps")
    source: str = Field("", description="what was measured, where (file, rows)")


class ByBatch(_Strict):
    """A figure in µs measured at a few batch sizes: linear between points, linear extrapolation from the
    nearest two outside them (never below 0); one point is a constant."""

    batch: list[int] = Field(min_length=1, description="batch sizes, strictly increasing")
    us: list[float] = Field(min_length=1, description="µs at each batch size")

    @model_validator(mode="after")
    def _same_len(self):
        if len(self.batch) != len(self.us) or any(b2 <= b1 for b1, b2 in zip(self.batch, self.batch[1:])):
            raise ValueError("batch and us must have equal length, batch strictly increasing")
        return self

    def at(self, b: float) -> float:
        xs, ys = self.batch, self.us
        if len(xs) == 1:
            return float(ys[0])
        i = 0 if b <= xs[0] else len(xs) - 2 if b >= xs[-1] else max(i for i in range(len(xs) - 1) if xs[i] <= b)
        x0, x1, y0, y1 = xs[i], xs[i + 1], ys[i], ys[i + 1]
        return max(0.0, y0 + (y1 - y0) * (b - x0) / (x1 - x0))


class EngineStepUs(_Strict):
    """The engine's own host work around each forward pass (simulator/engine/steploop.py), measured by
    calibration/scripts/engine_loop.py on a vLLM-style decode loop; µs per step unless named otherwise."""

    schedule: ByBatch = Field(description="scheduling the step (which sequences, block bookkeeping)")
    prep: ByBatch = Field(description="building the step's inputs in persistent pinned host buffers")
    copy_launch_us: float = Field(ge=0, description="host cost of one copy_(non_blocking=True) launch (H2D into a "
                                                    "graph's static input, or the D2H of the sampled tokens)")
    copy_gpu_us: float = Field(ge=0, description="device time of one such small copy")
    h2d_copies: int = Field(3, ge=0, description="H2D copies per step (token ids, positions, cache slots)")
    sample_host: dict[str, ByBatch] = Field(description="host time to launch the sampling ops, by method "
                                                        "(greedy, top_p)")
    sample_gpu: dict[str, ByBatch] = Field(description="device time of the sampling kernels, by method")
    sample_kernels: dict[str, int] = Field(description="kernels the sampling launches, by method")
    tolist: ByBatch = Field(description="host time of `.tolist()` beyond waiting for the tokens")
    detokenize: ByBatch = Field(description="detokenising and streaming the new tokens")
    source: str = Field("", description="where the figures came from")


class CompileFit(_Strict):
    """torch.compile wall time of a decode step as `fixed_s + per_node_s * nodes` (simulator/engine/startup.py)."""

    fixed_s: float = Field(ge=0, description="seconds independent of the model's size")
    per_node_s: float = Field(ge=0, description="seconds per node of the compiled step (its eager kernel count)")
    nodes: list[int] = Field(default_factory=_empty_list, description="node counts of the measured rows behind the fit; "
                                                               "outside their range the figure is an extrapolation")
    source: str = Field("", description="the measured rows behind the two figures")
    validated_nodes: list[int] = Field(default_factory=_empty_list, description="node counts of held-out measured rows "
                                                                         "(not used for the fit) the fit was checked on")


class StartupFigures(_Strict):
    """Start-up cost figures (simulator/engine/startup.py), from calibration/scripts/engine_loop.py's `capture` and `compile`
    sections; calibration/validate_startup.py compares the model with every measured row."""

    warmup_runs: int = Field(2, ge=0, description="eager warm-up runs before each capture (engines do 1-2; the "
                                                   "measurement did 2)")
    capture_host_ratio: float = Field(gt=0, description="capture wall time of one graph / launchsim's predicted host "
                                                        "time of one eager pass of the same step")
    compile_static_cold: CompileFit | None = Field(None, description="torch.compile, dynamic=False, empty cache")
    compile_static_warm: CompileFit | None = Field(None, description="torch.compile, dynamic=False, cache filled")
    compile_dynamic_cold: CompileFit | None = Field(None, description="torch.compile, dynamic=True, empty cache")
    compile_dynamic_warm: CompileFit | None = Field(None, description="torch.compile, dynamic=True, cache filled")
    compile_dynamic_note: str = Field("", description="what the dynamic=True figures rest on, or why there are none")
    source: str = Field("", description="where the figures came from")


class HostCanary(_Strict):
    """The host tiny-op canary (calibration/hygiene.py `canary()`: median host µs of `a * b` on 1 KB) of the
    process the host figures were measured in, and the calibration machine's fast and slow host states.
    `with_host_canary` scales every host cost by (a user's canary / `calibration_us`)."""

    calibration_us: float = Field(gt=0, description="canary of the process whose microbenchmarks gave the host figures")
    fast_us: float = Field(gt=0, description="the calibration machine's fast host state (canary µs)")
    slow_us: float = Field(gt=0, description="the calibration machine's slow host state (canary µs)")
    assumed_us: float | None = Field(None, gt=0, description="the canary this profile's host figures are scaled to "
                                                             "(absent: calibration_us, the profile as measured)")
    source: str = Field("", description="where each figure was measured")

    @model_validator(mode="after")
    def _order(self):
        if self.slow_us < self.fast_us:
            raise ValueError("slow_us must be >= fast_us")
        return self


class HostSection(_Strict):
    cpu: str = Field(description="host CPU model the host figures were measured on")
    launch_us: dict[str, Spread] = Field(description="host time per launched op, by launch path")
    graph_launch_fixed_us: float = Field(ge=0, description="host cost of one CUDA-graph replay call")
    graph_launch_per_node_us: float = Field(0.0, ge=0, description="extra host cost per graph node")
    compiled_entry_us: float = Field(0.0, ge=0, description="per-call cost of entering a torch.compile region")
    compiled_wrapper_us: float = Field(
        0.0, ge=0, description="extra host cost per kernel of Inductor's generated wrapper beyond the compiled "
                               "microbenchmarks (buffer allocations, reinterpret views); the profile notes say how "
                               "it was obtained")
    capture_per_node_ms: float = Field(0.0, ge=0, description="capture + instantiate time per node of a microbenchmark "
                                                             "graph (calibration/streams.py), ms; start-up time comes "
                                                             "from `startup` (simulator/engine/startup.py), not from this")
    step_factor: Spread | None = Field(
        None, description="per-step multiplier on all host costs (p50 = 1): host-speed drift between steps "
                          "(frequency, noisy neighbours) that per-op noise cannot produce")
    profiler_overhead: ProfilerOverhead | None = Field(
        None, description="measured host-time inflation under torch.profiler; `import-trace`'s deflate host-time policy "
                          "divides traced host durations by its factor")
    engine_step_us: EngineStepUs | None = Field(
        None, description="the engine's host work around each forward pass (multi-step simulation); without it "
                          "launchsim uses estimates and says so")
    startup: StartupFigures | None = Field(
        None, description="start-up cost: warm-up runs, capture time per graph, torch.compile time (`launchsim "
                          "startup`); without it start-up questions are refused (no device's figures are assumed)")
    canary: HostCanary | None = Field(
        None, description="host tiny-op canary of the calibration process and the machine's fast/slow states "
                          "(`host_scaled` scales the host lane to another machine's canary)")
    source: str = Field("", description="where the host figures came from")


class Curve(_Strict):
    """Kernel time as a function of bytes moved, measured on a grid."""

    bytes: list[float] = Field(min_length=2)
    us: list[float] = Field(min_length=2)

    @model_validator(mode="after")
    def _same_len(self):
        if len(self.bytes) != len(self.us) or any(b2 <= b1 for b1, b2 in zip(self.bytes, self.bytes[1:])):
            raise ValueError("bytes and us must have equal length, bytes strictly increasing")
        bad = [(i, v) for i, v in enumerate(self.us) if not v > 0]
        if bad:  # a kernel takes time: 0 µs would make it free (and breaks the log-log interpolation)
            raise ValueError(f"us[{bad[0][0]}] is {bad[0][1]}: a measured kernel time must be > 0 µs")
        if any(not b > 0 for b in self.bytes):
            raise ValueError("bytes must be > 0 (log-log interpolation)")
        return self


class GemmTable(_Strict):
    n: int
    k: int
    m: list[int] = Field(min_length=1)
    us: list[float] = Field(min_length=1)
    kernels: list[int] | None = Field(
        None, description="GPU kernels one call launches at each m (2 where cuBLAS picks split-K + reduce)")

    @model_validator(mode="after")
    def _same_len(self):
        if len(self.m) != len(self.us) or (self.kernels is not None and len(self.kernels) != len(self.m)):
            raise ValueError("m, us (and kernels) must have equal length")
        return self


class GemmGrid(_Strict):
    """bf16 GEMMs measured over a grid of (n, k) chosen by a rule, not from any model (calibration/scripts/round_k.py:
    every n, k in 256..4096 step 256, ..4096..8192 step 512, ..16384 step 1024), at one shared m axis, in the GEMM
    tables' own method. Read where `gemm` holds no table of that (n, k), and by the fallback of shapes neither holds
    (simulator/model/gemm_model.py). Checked here, not by the generic walk (profile_check skips it: 20k values)."""

    m: list[int] = Field(min_length=1)
    shapes: list[tuple[int, int]] = Field(min_length=1, description="(n, k) of each row, each once")
    us: list[list[Annotated[float, Field(gt=0, allow_inf_nan=False)]]] = Field(
        description="us[i][j]: shapes[i] at m[j] (finite, > 0: checked in pydantic's core, not a Python loop)")
    kernels: list[list[Annotated[int, Field(ge=1)]]] | None = Field(
        None, description="kernels one call launches, as GemmTable.kernels")
    source: str = ""

    @model_validator(mode="after")
    def _shape(self):
        if any(b <= a for a, b in zip(self.m, self.m[1:])) or self.m[0] < 1:
            raise ValueError("m must be positive and strictly increasing")
        if len(set(self.shapes)) != len(self.shapes) or any(n < 1 or k < 1 for n, k in self.shapes):
            raise ValueError("shapes must be distinct positive (n, k) pairs")
        for name, rows in (("us", self.us), ("kernels", self.kernels)):
            if rows is not None and (len(rows) != len(self.shapes) or any(len(r) != len(self.m) for r in rows)):
                raise ValueError(f"{name} must be len(shapes) rows of len(m) values")
        return self


class AttentionTable(_Strict):
    heads: int
    kv_heads: int
    head_dim: int
    q_len: int = Field(1, ge=1, description="query tokens per sequence (1: decode; 1 + k: a speculative verify "
                                            "step); ctx counts keys, past + these q_len")
    layout: Literal["reference", "hf_static"] = Field(
        "reference", description="q_len > 1 only. reference: SDPA over ctx keys, causal within the new tokens, K/V "
        "heads as stored (enable_gqa); hf_static: transformers' sdpa_attention_forward over every StaticCache slot "
        "under a boolean mask (ctx counts slots), its two repeat_kv copies and SDPA's mask handling included")
    batch: list[int] = Field(min_length=1)
    ctx: list[int] = Field(min_length=1)
    us: list[list[float]] = Field(description="us[i][j] for batch[i], ctx[j]")

    @model_validator(mode="after")
    def _shape(self):
        if len(self.us) != len(self.batch) or any(len(r) != len(self.ctx) for r in self.us):
            raise ValueError("us must be len(batch) rows of len(ctx) values")
        return self


class RowMeanTable(_Strict):
    """aten's row mean (`x.mean(-1, keepdim=True)` over fp32 x[rows, cols]: RMSNorm's mean in eager code) by rows and
    row length, measured in the tables' method (calibration/scripts/round_t.py, calibration/build_row_mean.py). Not
    a function of bytes: aten's reduce gives a block up to `step_below_rows` rows (the largest power of two <= rows),
    a warp per row reducing cols / 32 values each, and splits a row across warps from a row length on (`breaks`).
    Read by simulator/model/costs.py `row_mean_us`: rows below `step_below_rows` at the grid row <= rows (the block
    aten picks), above it linear between grid rows and x rows / top row above the grid; cols linear between grid
    points of one segment between breaks, never across a break; cols outside the grid: not read (the byte curve)."""

    rows: list[int] = Field(min_length=2, description="grid rows, increasing (powers of two)")
    cols: list[int] = Field(min_length=2, description="grid row lengths, increasing")
    us: list[list[Annotated[float, Field(gt=0, allow_inf_nan=False)]]] = Field(
        description="us[i][j]: device us at rows[i], cols[j]")
    breaks: list[int] = Field(default_factory=_empty_list,
                              description="row lengths where aten changes launch: a grid col >= a break is not "
                                          "interpolated with one below it")
    step_below_rows: int = Field(16, ge=1, description="rows below this are read at the grid row <= rows")
    source: str = ""

    @model_validator(mode="after")
    def _shape(self):
        for name, a in (("rows", self.rows), ("cols", self.cols)):
            if a[0] < 1 or any(y <= x for x, y in zip(a, a[1:])):
                raise ValueError(f"{name} must be positive and strictly increasing")
        if len(self.us) != len(self.rows) or any(len(r) != len(self.cols) for r in self.us):
            raise ValueError("us must be len(rows) rows of len(cols) values")
        if any(b <= self.cols[0] or b > self.cols[-1] or b not in self.cols for b in self.breaks):
            raise ValueError("each break must be a grid col above the first")
        if self.rows[0] != 1:
            raise ValueError("rows must start at 1 (every row count below the step is read at a grid row)")
        return self


class Tables(_Strict):
    gemm: list[GemmTable] = Field(default_factory=_empty_list)
    gemm_grid: GemmGrid | None = Field(None, description="GEMMs over a rule-chosen (n, k) grid (round k)")
    attention: list[AttentionTable] = Field(default_factory=_empty_list)
    elementwise: Curve | None = None
    reduction: Curve | None = None
    row_mean: RowMeanTable | None = Field(
        None, description="aten's row mean by (rows, row length) (round t); absent: norms' means on the reduction curve")
    memcopy: Curve | None = None
    roll: Curve | None = Field(
        None, description="aten's roll of a KV cache by bytes read + written (round w: a full sliding window's "
                          "step); absent: rolls on the memcopy curve")
    embedding: Curve | None = None
    # Inductor's generated kernels (simulator/model/inductor.py: ops named `triton_poi:` / `triton_per:` / `triton_red:`
    # on the compiled launch path), measured as the eager curves are (calibration/scripts/round_i.py job_triton);
    # without them a fused kernel is priced on the eager curve of its class, as before round i
    triton_pointwise: Curve | None = Field(None, description="Inductor pointwise kernels (triton_poi) by bytes")
    triton_reduction: Curve | None = Field(None, description="Inductor persistent reductions (triton_per) by bytes")
    triton_reduction_loop: Curve | None = Field(None, description="Inductor looped reductions (triton_red) by bytes")
    # FP8 and MoE kernels (simulator/model/profile_moe.py, simulator/model/dtype.py, simulator/model/moe.py)
    gemm_fp8: list[GemmTable] = Field(default_factory=_empty_list, description="per-tensor-scaled e4m3 GEMMs, bf16 out")
    fp8_quant: list[Fp8QuantTable] = Field(default_factory=_empty_list)
    grouped_gemm: list[GroupedGemmTable] = Field(default_factory=_empty_list)
    moe_routing: RoutingTable | None = None


class GraphMemoryLayoutTable(_Strict):
    """Measured graph pools of one (fusion, graph mode) for one model (calibration/child_memory.py):
    `memory_reserved` growth per captured batch, private and shared (largest first, cumulative)."""

    fusion: str
    mode: Literal["full", "piecewise"]
    ctx: int | None = None
    batch: list[int] = Field(min_length=1, description="captured sizes, ascending")
    private_reserved: list[float] = Field(description="each size in its own fresh pool, in ascending order")
    private_allocated: list[float] | None = None
    workspace_in_first: bool = Field(
        False, description="private_reserved[0] includes the once-per-process capture-stream workspace")
    shared_keep_reserved: list[float] | None = Field(
        None, description="one pool, largest first, outputs kept: cumulative after capturing sizes >= batch[i]")
    shared_drop_reserved: list[float] | None = Field(None, description="as shared_keep, outputs released")
    shared_keep_allocated: list[float] | None = None
    shared_drop_allocated: list[float] | None = None

    @model_validator(mode="after")
    def _lengths(self):
        n = len(self.batch)
        for k in ("private_reserved", "private_allocated", "shared_keep_reserved", "shared_drop_reserved",
                  "shared_keep_allocated", "shared_drop_allocated"):
            v = getattr(self, k)
            if v is not None and len(v) != n:
                raise ValueError(f"{k} must have one value per batch ({n})")
        return self


class GraphMemoryConstants(_Strict):
    """Constants of the shared-pool formula (simulator/engine/graph_memory.py), with where they came from."""

    capture_workspace_bytes: float = Field(ge=0, description="cuBLAS workspace of the capture stream, paid "
                                                             "once per process inside the first pool")
    reuse_fraction: float = Field(ge=0, le=1, description="share of the largest graph's freed transient "
                                                          "blocks that smaller graphs' retained outputs reuse")
    slack_bytes: float = Field(ge=0, description="segment rounding a shared pool adds over its largest graph")
    source: str = ""


class GraphMemoryTable(_Strict):
    """Measured pool bytes of one captured decode step per batch size, for one model.

    `batch`/`private_pool_bytes` is the original (fusion-agnostic) table; `layouts` (optional) holds the
    per fusion/graph-mode measurements and `constants` the shared-pool formula's constants."""

    batch: list[int] = Field(min_length=1)
    private_pool_bytes: list[float] = Field(description="pool bytes when the graph has its own pool")
    shared_pool_total_bytes: list[float] | None = Field(
        None, description="cumulative pool bytes when sizes up to batch[i] are captured largest-first into one pool"
    )
    capture_s: list[float] | None = Field(None, description="capture + instantiate wall time per graph, s")
    nodes: int | None = Field(None, description="kernel nodes in the captured graph")
    layouts: list[GraphMemoryLayoutTable] = Field(default_factory=_empty_list)
    constants: GraphMemoryConstants | None = None
    static_buffers: dict | None = Field(None, description="measured static buffers: largest, bytes, reserved")
    formula: str | None = Field(None, description="the shared/private pool formula these figures feed")
    source: str = ""


class CollectiveSection(_Strict):
    """GPU time of tensor-parallel collectives (simulator/model/parallel.py has the formulas). Optional: without it
    a tensor-parallel step (tp > 1) is refused. The shipped profiles carry published NVLink 4 figures
    (calibration/device_sections.py), `measured` false."""

    measured: bool = Field(False, description="true only when these figures were measured on this device")
    interconnect: str = Field("", description="the GPU-to-GPU fabric the figures describe")
    custom_max_bytes: float = Field(8 * 1024 * 1024, ge=0, description="largest all-reduce message the custom "
                                                                        "(one-/two-shot) all-reduce takes, bytes")
    custom_world_sizes: list[int] = Field([2, 4, 6, 8], description="GPU counts the custom all-reduce supports")
    custom_latency_us: dict[int, float] = Field(description="custom all-reduce fixed time by GPU count, µs")
    custom_algbw_gbps: dict[int, float] = Field(description="custom all-reduce message bytes per second by GPU "
                                                            "count, GB/s")
    nccl_latency_us: dict[int, float] = Field(description="NCCL ring fixed time by GPU count, µs")
    nccl_busbw_gbps: dict[int, float] = Field(description="NCCL ring bus bandwidth by GPU count, GB/s")
    launch_path: str = Field("custom_op", description="host launch path whose figure a collective's launch reuses "
                                                      "when host.launch_us has no 'collective' entry")
    source: str = Field("", description="where each figure comes from")

    @model_validator(mode="after")
    def _positive(self):
        for k in ("custom_latency_us", "custom_algbw_gbps", "nccl_latency_us", "nccl_busbw_gbps"):
            d = getattr(self, k)
            if not d or any(n < 2 or v < 0 for n, v in d.items()):
                raise ValueError(f"{k} needs GPU counts >= 2 with non-negative values")
            if k.endswith("gbps") and any(v <= 0 for v in d.values()):
                raise ValueError(f"{k} values must be positive")
        return self


class DeviceSection(_Strict):
    gpu: str
    memory_gib: float = Field(gt=0)
    peak_bf16_tflops: float = Field(gt=0, description="dense bf16 tensor-core peak")
    hbm_tbps: float = Field(gt=0, description="HBM bandwidth, TB/s")
    gemm_efficiency: float = Field(gt=0, le=1, description="achieved fraction of peak for the roofline fallback")
    bw_efficiency: float = Field(gt=0, le=1, description="achieved fraction of HBM bandwidth for the fallback")
    min_kernel_us: float = Field(ge=0, description="floor on any kernel's GPU time")
    eager_gap_us: float = Field(ge=0, description="GPU gap between back-to-back eager kernels in one stream")
    graph_node_us: float = Field(ge=0, description="GPU gap per kernel node inside a replayed graph")
    graph_node_trace_us: float | None = Field(
        None, ge=0, description="per-node gap between different decoder kernels in a replayed graph as CUPTI "
                                "shows it; used beside kernel times read from a trace (default graph_node_us)")
    graph_launch_latency_us: float | None = Field(
        None, ge=0, description="device time from a graph replay reaching the GPU to its first node starting "
                                "(1-node graph by events minus one node); default eager_gap_us")
    launch_queue_depth: int = Field(1024, ge=1, description="pending launches before the host blocks")
    tables: Tables = Field(default_factory=Tables)
    graph_memory: dict[str, GraphMemoryTable] = Field(default_factory=_empty_dict)
    collective: CollectiveSection | None = Field(
        None, description="tensor-parallel collective figures (optional: without them tp > 1 is refused)")
    graph_memory_constants: GraphMemoryConstants | None = Field(
        None, description="shared-pool formula constants for a model without its own measured graph_memory table "
                          "(optional: without them such a model's graph memory is refused)")
    source: str = Field("", description="where the device figures came from")


class Profile(_Strict):
    schema_version: int = Field(description="must equal the simulator's profile schema version")
    name: str
    source: Literal["datasheet", "measured", "derived"]
    derived_from: str | None = None
    date: str
    notes: str = ""
    environment: dict = Field(default_factory=_empty_dict)
    host: HostSection
    device: DeviceSection

    def with_host_canary(self, canary_us: float) -> "Profile":
        """This profile with every host cost scaled by canary_us / the calibration process's canary (see
        `host_scaled`); device figures unchanged."""
        return host_scaled(self, canary_us)


def profile_path(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix == ".json" or p.exists():
        return p
    return PROFILE_DIR / f"{name_or_path}.json"


def available_profiles() -> list[Path]:
    return sorted(PROFILE_DIR.glob("*.json"))


def load_profile(name_or_path: str | None = None) -> Profile:
    """Load and validate a profile by name (from simulator/profiles) or path."""
    if name_or_path is None:
        name_or_path = DEFAULT_PROFILE if profile_path(DEFAULT_PROFILE).exists() else "datasheet-h200"
    path = profile_path(name_or_path)
    if not path.exists():
        names = ", ".join(p.stem for p in available_profiles())
        raise ProfileError(f"unknown profile '{name_or_path}': no file {path} (available: {names})")
    raw, text = read_profile_file(path, ProfileError)
    return parse_profile(raw, str(path), text)


def parse_profile(raw: object, where: str = "<profile>", text: str | None = None) -> Profile:
    check_profile(raw, where, text, ProfileError)  # generic: finite, sorted axes, matching lengths (profile_check)
    prof = validate_versioned(Profile, raw, where, "schema_version", SCHEMA_VERSION, ProfileError, "a profile", text)
    from simulator.common.jsonfile import field_error
    from .kernels import LaunchPath

    known = {p.value for p in LaunchPath}
    for k in prof.host.launch_us:
        if k not in known:  # a misspelt path is never read: the op falls back or fails far from the file
            raise field_error(where, text, ("host", "launch_us", k), f"unknown launch path '{k}': use one of "
                              f"{', '.join(sorted(known))}", ProfileError)
    return prof


def combine(host_from: Profile, device_from: Profile) -> Profile:
    """A profile with one profile's host section and another's device section."""
    return device_from.model_copy(
        update={
            "name": f"{host_from.name}-host+{device_from.name}-device",
            "host": host_from.host,
            "notes": f"host section from {host_from.name}, device section from {device_from.name}",
        }
    )


MAX_CANARY_US = 1e4  # a tiny eager op costing 10 ms is not a host state, it is a broken measurement


def _canary_of(profile: Profile) -> HostCanary:
    c = profile.host.canary
    if c is None:
        raise ProfileError(f"profile '{profile.name}': field host.canary is absent: the profile records no host "
                           "canary, so its host lane cannot be scaled to another machine's (recalibrate, or use "
                           "a profile that records one)")
    return c


def _check_canary_us(canary_us: float) -> float:
    import math

    try:
        x = float(canary_us)
    except (TypeError, ValueError):
        raise ProfileError(f"host canary must be a number of µs, got {canary_us!r}") from None
    if not math.isfinite(x) or x <= 0 or x > MAX_CANARY_US:
        raise ProfileError(f"host canary must be a positive number of µs up to {MAX_CANARY_US:g}, got {canary_us!r}")
    return x


def host_factor(profile: Profile, canary_us: float) -> float:
    """The factor `host_scaled` applies: canary_us / the canary of the profile's calibration process."""
    return _check_canary_us(canary_us) / _canary_of(profile).calibration_us


def host_scaled(profile: Profile, canary_us: float) -> Profile:
    """`profile` with its host lane moved to a machine whose tiny-op canary is `canary_us`.

    Every host cost is multiplied by f = canary_us / host.canary.calibration_us (the figures are scaled from
    the profile as measured, so scaling twice does not compound): launch_us spreads (p10, p50, p90), graph
    replay fixed and per-node cost, compiled entry and wrapper cost, capture per node, the engine loop's host
    figures (schedule, prep, copy launch, sampling launch, tolist, detokenize) and torch.compile's wall-time
    fits. Unchanged: every device figure, and the ratios (step_factor, profiler_overhead factor,
    capture_host_ratio: these multiply host costs that are already scaled). Host time an imported trace
    recorded itself (traced interpreter gaps) is not a profile figure and is not scaled."""
    c = _canary_of(profile)
    base = c.calibration_us
    # figures already scaled to assumed_us are moved from there: the result depends only on canary_us
    f = _check_canary_us(canary_us) / (c.assumed_us or base)
    h = profile.host

    def spread(s: Spread) -> Spread:
        return s.model_copy(update={k: (None if getattr(s, k) is None else getattr(s, k) * f)
                                    for k in ("p10", "p50", "p90")})

    def by_batch(b: ByBatch) -> ByBatch:
        return b.model_copy(update={"us": [u * f for u in b.us]})

    upd = {
        "launch_us": {k: spread(v) for k, v in h.launch_us.items()},
        "graph_launch_fixed_us": h.graph_launch_fixed_us * f,
        "graph_launch_per_node_us": h.graph_launch_per_node_us * f,
        "compiled_entry_us": h.compiled_entry_us * f,
        "compiled_wrapper_us": h.compiled_wrapper_us * f,
        "capture_per_node_ms": h.capture_per_node_ms * f,
        "canary": c.model_copy(update={"assumed_us": None if canary_us == base else float(canary_us)}),
    }
    if h.engine_step_us is not None:
        e = h.engine_step_us
        upd["engine_step_us"] = e.model_copy(update={
            "schedule": by_batch(e.schedule), "prep": by_batch(e.prep), "copy_launch_us": e.copy_launch_us * f,
            "sample_host": {k: by_batch(v) for k, v in e.sample_host.items()},
            "tolist": by_batch(e.tolist), "detokenize": by_batch(e.detokenize)})
    if h.startup is not None:
        st = h.startup
        fits = {k: getattr(st, k).model_copy(update={"fixed_s": getattr(st, k).fixed_s * f,
                                                     "per_node_s": getattr(st, k).per_node_s * f})
                for k in ("compile_static_cold", "compile_static_warm", "compile_dynamic_cold", "compile_dynamic_warm")
                if getattr(st, k) is not None}
        upd["startup"] = st.model_copy(update=fits)
    stem = profile.name.split("@host-canary-")[0]
    name = stem if canary_us == base else f"{stem}@host-canary-{float(canary_us):g}us"
    return profile.model_copy(update={"name": name, "host": h.model_copy(update=upd)})


def canary_band(profile: Profile) -> tuple[float, float]:
    """(fast, slow): the calibration machine's fast- and slow-state host canaries, µs. An eager prediction's host
    band is the profile scaled to each (`host_scaled(profile, fast)`, `host_scaled(profile, slow)`)."""
    c = _canary_of(profile)
    return c.fast_us, c.slow_us


def assumed_canary(profile: Profile) -> float | None:
    """The canary (µs) this profile's host lane assumes, for printing the host state; None if it records none."""
    c = profile.host.canary
    return None if c is None else (c.assumed_us or c.calibration_us)


def host_state(profile: Profile) -> str:
    """One phrase naming the host state a prediction with this profile assumes (for printed outputs)."""
    c = profile.host.canary
    if c is None:
        return f"host as profile '{profile.name}' measured it (no host canary recorded)"
    if c.assumed_us is None:
        return (f"host canary {c.calibration_us:.2f} µs (the calibration machine's fast state; its slow state "
                f"{c.slow_us:.2f} µs)")
    return (f"host canary {c.assumed_us:.2f} µs (host costs x {c.assumed_us / c.calibration_us:.3f} from the "
            f"calibration's {c.calibration_us:.2f} µs)")


# -- a profile's content digest (the step-time memo keys' profile part) ------------------------------
def profile_digest(p: Profile) -> str:
    """A digest of a profile's content: equal profiles share step-time memo entries, different ones never do."""
    return hashlib.sha256(json.dumps(p.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:16]


class Digest:
    """`profile_digest(profile)`, computed on first use and then kept: the digest of a measured profile (its
    model_dump and sorted json.dumps of ~33k values, ~15 ms) is part of every step-time memo key, but a single
    `predict` uses no memo, so `StepSetup.of` carries this instead of the text. It hashes and compares as the
    digest's text (a setup holding it and one holding the text are equal, and find the same memo entries), and
    pickles as that text (a plain str on the other side)."""

    __slots__ = ("_profile", "_text")

    def __init__(self, profile: Profile):
        self._profile: Profile | None = profile
        self._text: str | None = None

    def __str__(self) -> str:
        if self._text is None:
            assert self._profile is not None
            self._text, self._profile = profile_digest(self._profile), None
        return self._text

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Digest):
            return other is self or str(self) == str(other)
        return str(self) == other if isinstance(other, str) else NotImplemented

    def __hash__(self) -> int:
        return hash(str(self))

    def __repr__(self) -> str:
        return repr(str(self))

    def __reduce__(self):
        return str, (str(self),)
