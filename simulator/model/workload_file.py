"""The workload file: one measured step's kernel sequence, written by `launchsim import-trace`.

Format (JSON, `format_version` 1; unknown keys are rejected):
- `format_version` (1), `kind` ("launchsim-workload"), `name`;
- `source`: the trace path, its sha256, the GPU named in the trace, how steps were found;
- `batch`, `q_len`, `ctx`: sequences per step, tokens per sequence, context length, from recorded
  shapes (null when the trace has no shapes; `import-trace --batch` sets batch by hand);
- `steps`: per-step figures of every step found (kernels, host_ms, gpu_ms, step_ms, sync_ms) and
  how the representative step below was chosen;
- `host_tail_us`: host time after the last launch of the step (the step's remaining Python);
- `kernels`: the representative step, in launch order. Each has `name`, `op_class` (gemm,
  attention, elementwise, reduction, copy, embedding, sampling), `gpu_us` (measured kernel
  duration), `host_us` (host time from the previous launch's return to this one's, syncs
  excluded), `op` (top-level aten op), `event` (kernel | gpu_memcpy | gpu_memset), `graph_node`
  (position inside a graph launch, 0 otherwise) and, when the trace recorded shapes, `shape_op`,
  `dims`, `dtypes` (the aten op whose input shapes size this kernel, and those shapes); for the
  calibrated host policy also `path` (launch path charged: the call's path for its first kernel,
  `raw` for further kernels of the same aten call), `host_ops` (host-only top-level aten ops since
  the previous launch) and `gap_us` (traced interpreter time since then, outside every aten op);
- `model` (optional, `import-trace --model`): the model's fields; a trace without recorded shapes
  retargets to other batches / contexts through them (simulator/traces/retarget.py, align.py);
- `host_time`: the host-time policy (`calibrated`, `trace`, `deflate`; see simulator/traces/host.py),
  the profile used at import, the traced and charged host ms, and the tail's host-only ops and
  interpreter µs. Absent in files written before policies existed: those use traced host time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from simulator.common.errors import UserError
from simulator.common.jsonfile import validate_versioned
from simulator.common.jsonfile import field_error, line_of, read_json
from simulator.model.kernels import OpClass
from simulator.common.limits import MAX_BATCH, MAX_CTX, MAX_US
from simulator.common.jsonfile import write_json

FORMAT_VERSION = 1
MAX_KERNELS = 1_000_000  # one step of the largest models launches a few thousand
# collectives (tensor parallelism) are built by simulator/model/parallel.py, not imported from single-GPU traces
CLASS_NAMES = tuple(c.value for c in OpClass if c not in (OpClass.VIEW, OpClass.COLLECTIVE))


class WorkloadFileError(UserError):
    """A workload file that cannot be read or validated."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class KernelEntry(_Strict):
    name: str = Field(description="kernel name as the trace gives it")
    op_class: Literal[CLASS_NAMES] = Field(description="cost class of the kernel")  # type: ignore[valid-type]
    gpu_us: float = Field(ge=0, le=MAX_US, description="measured GPU duration, µs")
    host_us: float = Field(ge=0, le=MAX_US, description="host time charged to this launch, µs")
    op: str = Field("", description="top-level aten op that launched it")
    event: Literal["kernel", "gpu_memcpy", "gpu_memset"] = Field("kernel", description="trace event category")
    graph_node: int = Field(0, ge=0, description="position inside a graph launch (0: first or eager)")
    shape_op: str | None = Field(None, description="aten op whose input shapes size this kernel")
    dims: list | None = Field(None, description="that op's 'Input Dims'")
    dtypes: list | None = Field(None, description="that op's 'Input type'")
    path: str | None = Field(None, description="launch path charged under the calibrated host policy")
    host_ops: int = Field(0, ge=0, description="host-only top-level aten ops since the previous launch")
    gap_us: float = Field(0.0, ge=0, description="traced interpreter µs since the previous launch, outside aten ops")


class StepsInfo(_Strict):
    method: str = Field(description="how step boundaries were found")
    representative: str = Field(description="how the step in `kernels` was built")
    outside_kernels: int = Field(0, ge=0, description="kernels outside every step (partial steps)")
    rows: list[dict] = Field(default_factory=list, description="per-step figures")


class Workload(_Strict):
    format_version: int = Field(description="must be 1")
    kind: Literal["launchsim-workload"] = Field(description="file type")
    name: str = Field(description="workload name (the trace file's stem)")
    source: dict = Field(default_factory=dict, description="trace path, sha256, device")
    batch: int | None = Field(None, ge=1, le=MAX_BATCH, description="sequences per step, from shapes or the import's batch")
    q_len: int | None = Field(None, ge=1, le=MAX_CTX, description="tokens per sequence in the step")
    ctx: int | None = Field(None, ge=1, le=MAX_CTX, description="context length, from attention's key shape")
    steps: StepsInfo
    host_tail_us: float = Field(0.0, ge=0, le=MAX_US, description="host time after the last launch, µs")
    kernels: list[KernelEntry] = Field(min_length=1, description="the representative step, in launch order")
    host_time: dict | None = Field(None, description="host-time policy and its figures (trace_host)")
    model: dict | None = Field(None, description="the model's fields (import-trace's model): hidden_size, "
                                                 "num_hidden_layers, heads, kv_heads, head_dim, intermediate_size, "
                                                 "vocab_size size kernels the trace recorded no shapes for; the "
                                                 "rest (family, norms, biases, packing) pick the recipe its calls "
                                                 "are aligned with")

    @property
    def gpu_ms(self) -> float:
        return sum(k.gpu_us for k in self.kernels) / 1e3

    @property
    def host_ms(self) -> float:
        return (sum(k.host_us for k in self.kernels) + self.host_tail_us) / 1e3


def save_workload(path: str | Path, wl: Workload) -> Path:
    return write_json(path, wl.model_dump(mode="json", exclude_none=True))


def parse_workload(raw: object, where: str = "<workload>", text: str | None = None) -> Workload:
    if isinstance(raw, dict) and raw.get("kind") != "launchsim-workload":
        raise WorkloadFileError(f"{where}:{line_of(text, ('kind',))}: field 'kind': not a launchsim workload (kind "
                                f"is {raw.get('kind')!r}; make one with `launchsim import-trace`)")
    wl = validate_versioned(Workload, raw, where, "format_version", FORMAT_VERSION, WorkloadFileError,
                            "a workload file", text)
    if len(wl.kernels) > MAX_KERNELS:
        raise field_error(where, text, ("kernels",), f"{len(wl.kernels):,} kernels in one step; the limit is "
                          f"{MAX_KERNELS:,}", WorkloadFileError)
    return wl


def load_workload(path: str | Path) -> Workload:
    p = Path(path)
    raw, text = read_json(p, "workload", WorkloadFileError)
    return parse_workload(raw, str(p), text)
