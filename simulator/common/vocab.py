"""One vocabulary: every fixed set of names a user can write (YAML fields, command-line flags) and the engine
branches on, as `StrEnum`s whose values are the strings of the files, flags and JSON outputs.

Each enum is the one source of its set: the pydantic scenario fields take `literal(E)` (a `Literal` of the
values, so the JSON Schema and the stored values stay plain strings), the CLI takes the enum type
(simulator/cli/choices.py: `--help` lists the values and a bad one is one line naming the flag), and the engine
checks membership against `values(E)` or a tuple derived from it. A member *is* its string (`GraphMode.FULL ==
"full"`, same hash, `str()`, format and JSON), so dictionaries keyed by the strings accept either.

This module sits in `common/` (below every other package) and imports nothing from the simulator.
"""

from __future__ import annotations

import enum
from typing import Literal

try:  # Python >= 3.11
    from enum import StrEnum
except ImportError:  # pragma: no cover  (Python 3.10: the same behaviour for what launchsim uses)
    class StrEnum(str, enum.Enum):
        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


class GraphMode(StrEnum):
    """Configured CUDA-graph mode (simulator/engine/routing.py says which plan mode each step runs in)."""

    NONE = "none"
    FULL = "full"
    FULL_DECODE_ONLY = "full_decode_only"
    PIECEWISE = "piecewise"
    FULL_AND_PIECEWISE = "full_and_piecewise"


class AttentionBackend(StrEnum):
    """Attention backend: whether graph mode `full` captures mixed prefill+decode steps (simulator/engine/routing.py).
    FlashAttention 3 captures mixed batches in a full graph (vLLM AttentionCGSupport.ALWAYS); FlashInfer, FA2 and
    Triton capture uniform-decode batches only (a mixed step under `full` runs eager)."""

    FLASHINFER = "flashinfer"
    FA3 = "fa3"
    FA2 = "fa2"
    TRITON = "triton"


class PlanMode(StrEnum):
    """How one step is launched: eager, one full-graph replay, or graph pieces with attention eager."""

    NONE = "none"
    FULL = "full"
    PIECEWISE = "piecewise"


class Fusion(StrEnum):
    """Fusion level of a model preset's step (simulator/model/workload.py)."""

    NONE = "none"
    PACKED = "packed"
    COMPILED = "compiled"
    FUSED = "fused"


# The defaults of every command (predict, graph-memory, startup, optimize, serve, capacity): vLLM V1's, the engine
# most deployments run (fused ops under torch.compile's custom passes, full CUDA graphs for pure decode steps and
# piecewise graphs around attention for mixed ones). Each command prints the fusion and graph mode it used.
DEFAULT_FUSION = Fusion.FUSED
DEFAULT_GRAPH = GraphMode.FULL_AND_PIECEWISE
DEFAULTS_NAME = "vLLM V1's"


def defaults_note(fusion, graph, impl_default: str | None = None) -> str:
    """'fusion fused (default), graph full (given); defaults: vLLM V1's (fused, full_and_piecewise)'.
    `impl_default`: the implementation whose first level stood in for the default fusion it lacks (the user gave
    `--impl` and no `--fusion`): 'fusion none (hf's first level: hf has no fused), ...'."""
    f, g = str(getattr(fusion, "value", fusion)), str(getattr(graph, "value", graph))

    def mark(v, d):
        return " (default)" if v == d.value else ""

    fm = (f" ({impl_default}'s first level: {impl_default} has no {DEFAULT_FUSION.value})"
          if impl_default and f != DEFAULT_FUSION.value else mark(f, DEFAULT_FUSION))
    return (f"fusion {f}{fm}, graph {g}{mark(g, DEFAULT_GRAPH)}; defaults: {DEFAULTS_NAME} "
            f"({DEFAULT_FUSION.value}, {DEFAULT_GRAPH.value})")


class LayoutPreset(StrEnum):
    """Capture-size presets (simulator/layouts/buckets.py); `all` captures every size up to the maximum."""

    VLLM = "vllm"
    SGLANG = "sglang"
    TRTLLM = "trtllm"
    SEED = "seed"
    POW2 = "pow2"
    ALL = "all"


class Engine(StrEnum):
    """Step engine: the SimPy reference (des) or the vectorised max-plus fast path (fast)."""

    DES = "des"
    FAST = "fast"


class Scheduling(StrEnum):
    """The engine's own host work per step (simulator/engine/steploop.py); `none` (serving only): none."""

    NONE = "none"
    SYNC = "sync"
    ASYNC = "async"


class Sampling(StrEnum):
    GREEDY = "greedy"
    TOP_P = "top_p"


class CompileMode(StrEnum):
    """torch.compile mode of the start-up model (simulator/engine/startup.py)."""

    STATIC = "static"
    DYNAMIC = "dynamic"


class CompileInputs(StrEnum):
    """How torch.compile'd code receives the weights and the KV cache (simulator/model/workload.py build_step's
    `compile_inputs`): as arguments of the compiled function, where dynamic=True's symbolic sizes reach them, or
    as the compiled module's parameters and buffers, which Dynamo specialises."""

    ARGUMENTS = "arguments"
    MODULE = "module"


class CompileCache(StrEnum):
    COLD = "cold"
    WARM = "warm"


class Objective(StrEnum):
    """What the capture-size optimizer minimises (simulator/studies/optimize.py)."""

    STEP_TIME = "step-time"
    PADDED_ROWS = "padded-rows"


class Retention(StrEnum):
    """Graph outputs in a shared pool: dropped (vLLM) or kept (SGLang); auto (a flag's default): the layout
    preset's (keep for sglang, else drop)."""

    DROP = "drop"
    KEEP = "keep"
    AUTO = "auto"


class ArrivalProcess(StrEnum):
    POISSON = "poisson"
    GAMMA = "gamma"
    TRACE = "trace"


class LengthKind(StrEnum):
    """Prompt / output length distributions of serving."""

    FIXED = "fixed"
    UNIFORM = "uniform"
    LOGNORMAL = "lognormal"
    CSV = "csv"  # real lengths from a CSV column, resampled with replacement


class HostTime(StrEnum):
    """Host-time policy of an imported trace (simulator/traces/host.py)."""

    CALIBRATED = "calibrated"
    TRACE = "trace"
    DEFLATE = "deflate"


class Dtype(StrEnum):
    """Weight or KV-cache dtype (simulator/model/dtype.py): fp8 = e4m3 with per-tensor scales."""

    BF16 = "bf16"
    FP8 = "fp8"


class Executor(StrEnum):
    LOCAL = "local"
    RAY = "ray"


# subsets, derived from the enums above
LOOP_SCHEDULING: tuple[Scheduling, ...] = (Scheduling.SYNC, Scheduling.ASYNC)  # an engine loop's (predict --steps)
WORKLOAD_FUSIONS: tuple[Fusion, ...] = (Fusion.NONE, Fusion.COMPILED)  # what an imported trace can be rebuilt as
EAGER_FUSIONS: tuple[Fusion, ...] = (Fusion.NONE, Fusion.PACKED)  # fusion levels that launch eagerly
POOL_RETENTIONS: tuple[Retention, ...] = (Retention.DROP, Retention.KEEP)  # what a graph-memory model takes
CAPTURING_MODES: tuple[GraphMode, ...] = tuple(g for g in GraphMode if g is not GraphMode.NONE)
# the presets the optimizer compares its answer with (`all` is no engine's preset)
COMPARED_PRESETS: tuple[LayoutPreset, ...] = (LayoutPreset.VLLM, LayoutPreset.SGLANG, LayoutPreset.TRTLLM,
                                              LayoutPreset.SEED)


def values(e) -> tuple[str, ...]:
    """The plain strings of an enum (or of a tuple of its members), in declaration order."""
    return tuple(str(m.value) for m in e)


def literal(e):
    """`Literal["a", "b", ...]` of an enum's values (or a subset's): the pydantic field type of a choice."""
    return Literal[values(e)]  # type: ignore[valid-type]


def one_of(e) -> str:
    """'a, b or c': the values for an error message."""
    v = values(e)
    return v[0] if len(v) == 1 else f"{', '.join(v[:-1])} or {v[-1]}"


__all__ = ["StrEnum", "GraphMode", "PlanMode", "Fusion", "LayoutPreset", "Engine", "Scheduling", "Sampling",
           "CompileMode", "CompileCache", "Objective", "Retention", "ArrivalProcess", "LengthKind", "HostTime",
           "Executor",
           "LOOP_SCHEDULING", "WORKLOAD_FUSIONS", "EAGER_FUSIONS", "POOL_RETENTIONS", "CAPTURING_MODES", "COMPARED_PRESETS", "values",
           "DEFAULT_FUSION", "DEFAULT_GRAPH", "DEFAULTS_NAME", "defaults_note",
           "literal", "one_of"]
