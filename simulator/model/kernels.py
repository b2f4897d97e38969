"""The unit of work: one host operation (an aten call, a fused custom op, a Triton launch).

An `Op` either launches one GPU kernel or, for views, launches nothing but still costs host time.
Op classes group kernels by how their GPU time scales; launch paths group them by host cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from enum import Enum


class OpClass(str, Enum):
    """What a kernel does, which decides the cost-model formula or table it uses."""

    GEMM = "gemm"
    ATTENTION = "attention"
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"  # norms, mean, softmax-style reductions
    COPY = "copy"  # cat, dtype casts, contiguous copies, KV-cache writes
    EMBEDDING = "embedding"
    SAMPLING = "sampling"
    VIEW = "view"  # host-only: reshape/transpose/slice launch no kernel
    COLLECTIVE = "collective"  # tensor-parallel all-reduce / all-gather (simulator/model/parallel.py)


class LaunchPath(str, Enum):
    """How the host issues an op; each path has its own host cost in the profile."""

    EAGER_ELEMENTWISE = "eager_elementwise"
    EAGER_REDUCTION = "eager_reduction"
    EAGER_GEMM = "eager_gemm"
    EAGER_ATTENTION = "eager_attention"
    EAGER_COPY = "eager_copy"
    EAGER_EMBEDDING = "eager_embedding"
    EAGER_VIEW = "eager_view"
    COMPILED = "compiled"  # an Inductor-generated Triton launch from a compiled wrapper
    COMPILED_EXTERN = "compiled_extern"  # an extern kernel (aten GEMM / attention) called from a compiled wrapper
    CUSTOM_OP = "custom_op"  # a serving engine's hand-fused C++/CUDA op
    RAW = "raw"  # a bare cudaLaunchKernel (toy workloads)
    COLLECTIVE = "collective"  # a tensor-parallel collective (custom all-reduce / NCCL); graph-capturable


MARKER_KEYS = ("graph_break", "verify_part", "roll", "host_sync", "sdpa_call", "sdpa_mask", "triton_like")  # shape keys that mark an op's role, not a size

ROLL = "roll"  # shape key (1): aten's roll of a KV cache (a full sliding window), priced by the profile's roll curve
# shape key (1): the host waits, before this launch's host work, for the GPU to finish every kernel launched before
# it (a pageable host-to-device copy: transformers' sliding-window cache indexes with torch.tensor([-1], device=...))
HOST_SYNC = "host_sync"


# the layer projections a LoRA adapter wraps (workload.py's `lora_rank`; Inductor's name table reads its ops' data flow
# from them): every linear layer of a decoder layer, as PEFT's target_modules="all-linear" (the lm_head excluded) and
# vLLM's LoRA layers; packed levels wrap the packed GEMM
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj", "gate_proj", "up_proj", "gate_up_proj", "down_proj")


ATTENTION_PART = "attention_part"  # shape key (1): a kernel the attention call launches besides its own
# shape key (1): a kernel of its own cost that the SDPA call itself launches before attending (aten's conversion of a
# boolean mask: two scalar fills and a where): eager with the attention call when a piecewise graph cuts at it
# (calibration/measured/h200-round-y: transformers' steps cut at each SDPA call)
SDPA_CALL = "sdpa_call"
# shape key (1): an attention call under a boolean mask over repeated K/V heads (transformers' static cache: cuDNN's
# masked SDPA); a shape with no attention table is read from the nearest table (CostModel.attention_nearest_s)
SDPA_MASK = "sdpa_mask"
# shape key (1): a hand-fused decode kernel (fused add-RMSNorm, q/k-norm + RoPE + cache write, SiLU-and-mul) that is a
# Triton-class kernel, priced by the profile's Triton curves (CostModel.curve_key; round ab)
TRITON_LIKE = "triton_like"


class Traced:
    """Base of a symbolic size (engine/batchbuild.py's Sym, which an op's sizes hold in a traced build):
    `as_float()` stands for float(x), `as_int()` for int(x) and `round_int()` for int(round(x)) (the builders,
    model/workload.py, and Inductor's pass, model/inductor.py, call them on a size that may be one)."""

    __slots__ = ()

    def as_float(self):
        raise NotImplementedError

    def as_int(self):
        raise NotImplementedError

    def round_int(self):
        raise NotImplementedError


@dataclass(frozen=True)
class Op:
    """One host operation. `flops` and `bytes` describe its GPU kernel (zero for views).

    `shape` carries the dimensions a calibrated table needs (e.g. GEMM m, n, k; attention
    batch, ctx, heads, kv_heads, head_dim); the roofline fallback needs only flops and bytes.
    `fixed_gpu_s`, when set, overrides the cost model (toy workloads, imported traces).
    """

    name: str
    op_class: OpClass
    path: LaunchPath
    flops: float = 0.0
    bytes: float = 0.0
    shape: tuple[tuple[str, int], ...] = field(default=())
    fixed_gpu_s: float | None = None
    fixed_host_s: float | None = None

    @property
    def launches_kernel(self) -> bool:
        return self.op_class is not OpClass.VIEW

    def dim(self, key: str, default: int = 0) -> int:
        for k, v in self.shape:
            if k == key:
                return v
        return default

    @property
    def in_attention(self) -> bool:
        """The attention call's own kernel, or one more kernel that call launches (`ATTENTION_PART`: cuDNN SDPA's
        split-KV reduce; `SDPA_CALL`: the SDPA call's mask conversion): what a piecewise graph leaves eager between
        its pieces."""
        return self.op_class is OpClass.ATTENTION or (bool(self.shape) and (
            self.dim(ATTENTION_PART) == 1 or self.dim(SDPA_CALL) == 1))

    @property
    def attention_part(self) -> bool:
        """A kernel inside the attention call's own launch and measured figures (`ATTENTION_PART`), no cost of its
        own: a trace records it within that call."""
        return bool(self.shape) and self.dim(ATTENTION_PART) == 1

    @cached_property
    def structure(self) -> tuple:
        """The op without its sizes: name, class, path, whether fixed times override the cost model, its shape
        keys, and the values of its marker keys (`MARKER_KEYS`). Computed once per op (the builders intern their
        ops, so a sweep meets the same objects again): simulator/model/inductor.py keys its plans by it."""
        return (self.name, self.op_class, self.path, self.fixed_gpu_s is None, self.fixed_host_s is None,
                tuple(k for k, _ in self.shape), tuple(self.dim(k) for k in MARKER_KEYS))

    @cached_property
    def structure_hash(self) -> int:
        return hash(self.structure)

    @cached_property
    def as_compiled_extern(self) -> "Op":
        """This op as a torch.compile'd graph launches it: a GEMM or attention call as an extern kernel of
        Inductor's wrapper (path COMPILED_EXTERN), any other op unchanged. Made once per op object and kept on it
        (the builders intern their ops, so a sweep's steps share it): simulator/model/inductor.py reads it."""
        if self.op_class in (OpClass.GEMM, OpClass.ATTENTION):
            return replace(self, path=LaunchPath.COMPILED_EXTERN)
        return self


@dataclass(frozen=True)
class Step:
    """An ordered list of host ops making one forward step, plus what produced it."""

    ops: tuple[Op, ...]
    label: str = ""
    layers: int = 0
    tokens: int = 0  # tokens processed in this step (batch for decode)

    @property
    def kernels(self) -> int:
        return sum(1 for o in self.ops if o.launches_kernel)

    @property
    def host_calls(self) -> int:
        return len(self.ops)

    def kernel_ops(self) -> list[Op]:
        return [o for o in self.ops if o.launches_kernel]
