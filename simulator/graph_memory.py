"""Pinned CUDA-graph memory and start-up capture cost of a capture layout; what is left for the KV cache.

Owns: per-graph pool bytes as a function of captured batch size, static input/output buffers, private
versus shared pools, capture time, and the KV-cache budget left after weights, graphs and workspace.

Where the figures come from
- Measured: `profile.device.graph_memory[model.name]` (a `GraphMemoryTable`: pool bytes and optionally
  capture seconds per captured batch). A size the table measured uses its measured pool bytes; any other
  size uses the formula below (pool bytes are a step function of batch, following the allocator's
  segments, so interpolating between measured points is worse than the formula: on the H200 table,
  linear interpolation gave 31% MAPE on the unmeasured batches, the formula about 6%). Capture seconds
  are interpolated in batch (clamped below, extrapolated linearly above).
- Otherwise the formula below (`source = "formula"`).

Formula (decode step, T = B tokens, e = dtype bytes, H hidden, q/kv projection widths, I intermediate,
V vocab). A captured graph's private pool holds the peak live set of its intermediate tensors (the
allocator reuses freed blocks inside one capture), plus the logits the head writes:
    residual, hidden     2 tensors of T*H*e
    attention block      qkv T*(q+2kv)*e + attention output T*q*e
    MLP block            gate/up T*2I*e + activation output T*I*e      (the larger block is live at peak)
    eager levels only    (fusion none/packed) two fp32 RMSNorm temporaries of T*H*4
    logits               B*V*e
Each tensor is rounded as PyTorch's CUDA caching allocator does: tensors < 1 MiB share 2 MiB small
segments, tensors of 1-10 MiB share 20 MiB segments, larger tensors are rounded up to 2 MiB each.
    pool(B) = 2 MiB * ceil(small/2 MiB) + 20 MiB * ceil(mid/20 MiB) + sum(2 MiB * ceil(big_i/2 MiB))
              + 2 MiB
The last term is one more small segment that every capture allocates for its own bookkeeping tensors;
it was added after comparing with the measured pools at batch 1, 4, 16, 64, 256 (H200), which are
therefore not used to score the formula (calibration/validate.py).

Shared pool, captured largest-first: later (smaller) graphs allocate inside blocks the larger ones freed,
except for each graph's output, which stays allocated for as long as the graph lives (the engine reads it
after replay). The output kept is the last hidden state, B*H*e (the logits are copied to the static buffer).
With sizes s_1 > s_2 > ... captured in that order:
    shared_total = max_k ( pool(s_k) + sum_{j<k} out(s_j) )        (private: sum_k pool(s_k))
which is the largest graph's pool plus the outputs of all the others.

Static buffers (allocated once, outside any pool, sized for the largest captured size S): per row
input_ids 8 + positions 8 + slot_mapping 8 + seq_lens 4 bytes + a block-table row of
4 * ceil(max_position_embeddings / 16) bytes, plus the logits buffer S*V*e, which dominates.

Graph modes: `none` captures nothing (all zeros). `full`: one graph per size with every kernel as a node.
`piecewise`: per size, the kernels between attention ops become one graph each (attention stays eager);
pieces share the size's pool. `full_and_piecewise`: both sets per size, so the graph count, the private
pool bytes and the retained outputs double (in a shared pool the second graph of a size reuses the first's
freed blocks, so only its output adds).

Capture time per graph = `profile.host.capture_per_node_ms` * nodes (kernels from the workload builder),
unless the table has measured `capture_s` per batch (interpolated as above).

KV cache: `gpu_util * memory - weights - graph memory - workspace` (may be negative: does not fit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .errors import UserError
from .models import ModelSpec
from .plan import GRAPH_MODES
from .profile import GraphMemoryTable, Profile
from .workload import FUSION_LEVELS, build_step, decode

MiB = 1 << 20
GiB = 1 << 30
SMALL_SEGMENT = 2 * MiB  # caching allocator: small pool segment, for tensors < 1 MiB
MID_SEGMENT = 20 * MiB  # large pool segment for tensors of 1-10 MiB
LARGE_ROUND = 2 * MiB  # tensors >= 10 MiB are rounded up to a multiple of 2 MiB
CAPTURE_SEGMENT = 2 * 1024 * 1024  # a capture's own small segment (see the formula)
BLOCK_SIZE = 16  # KV-cache block size (tokens) used for the block-table row width
DEFAULT_WORKSPACE_BYTES = 1 * GiB  # cuBLAS/attention workspaces + eager activation peak outside graphs


class GraphMemoryError(UserError):
    """A bad capture layout or graph mode for the memory model."""


@dataclass(frozen=True)
class LayoutMemory:
    sizes: tuple[int, ...]
    graphs: int  # len(sizes), x2 under full_and_piecewise
    per_graph_bytes: tuple[float, ...]  # private pool bytes per captured size (both graphs of a size under f&p)
    pool_bytes: float  # total pinned pool bytes (shared or private)
    static_buffer_bytes: float  # static inputs/outputs sized for the largest size
    total_bytes: float  # pool_bytes + static_buffer_bytes
    capture_s: float  # start-up capture time of all graphs
    shared_pool: bool
    graph_mode: str = "full"
    source: str = "formula"  # "formula", "table", or "table at N sizes, formula at M"

    def as_dict(self) -> dict:
        return {
            "sizes": list(self.sizes), "graphs": self.graphs, "graph_mode": self.graph_mode,
            "shared_pool": self.shared_pool, "pool_bytes": self.pool_bytes,
            "static_buffer_bytes": self.static_buffer_bytes, "total_bytes": self.total_bytes,
            "capture_s": self.capture_s, "source": self.source,
        }


def segment_bytes(tensors: list[float]) -> float:
    """Bytes the CUDA caching allocator reserves for a live set of tensors (see module docstring)."""
    small = sum(t for t in tensors if 0 < t < MiB)
    mid = sum(t for t in tensors if MiB <= t < 10 * MiB)
    big = [t for t in tensors if t >= 10 * MiB]
    return float(SMALL_SEGMENT * math.ceil(small / SMALL_SEGMENT) + MID_SEGMENT * math.ceil(mid / MID_SEGMENT)
                 + sum(LARGE_ROUND * math.ceil(t / LARGE_ROUND) for t in big))


def live_tensors(model: ModelSpec, batch: int, fusion: str) -> list[float]:
    """The peak live set of a decode step at `batch` (bytes per tensor), logits included."""
    T, e, H, I = batch, model.dtype_bytes, model.hidden_size, model.intermediate_size
    attn = [T * (model.q_dim + 2 * model.kv_dim) * e, T * model.q_dim * e]
    mlp = [T * 2 * I * e, T * I * e]
    out = [T * H * e, T * H * e] + (mlp if sum(mlp) >= sum(attn) else attn)
    if fusion in ("none", "packed"):
        out += [T * H * 4, T * H * 4]
    return [float(x) for x in out] + [float(batch * model.vocab_size * e)]


@lru_cache(maxsize=256)
def _kernel_counts(model: ModelSpec, fusion: str) -> tuple[int, int]:
    """(kernels, attention kernels) of one decode step; both independent of batch."""
    step = build_step(model, decode(1, 128), fusion)
    ks = step.kernel_ops()
    return len(ks), sum(1 for o in ks if o.op_class.value == "attention")


def _interp(xs: list[int], ys: list[float], x: float) -> tuple[float, bool]:
    """Linear interpolation; clamp below; linear extrapolation above. Returns (value, extrapolated)."""
    if len(xs) == 1:
        return float(ys[0]), x > xs[0]
    if x <= xs[0]:
        return float(ys[0]), False
    if x <= xs[-1]:
        return float(np.interp(x, xs, ys)), False
    slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    return float(ys[-1] + slope * (x - xs[-1])), True


class GraphMemoryModel:
    def __init__(self, model: ModelSpec, profile: Profile, fusion: str = "fused", graph_mode: str = "full"):
        if fusion not in FUSION_LEVELS:
            raise GraphMemoryError(f"unknown fusion level '{fusion}': use one of {', '.join(FUSION_LEVELS)}")
        if graph_mode not in GRAPH_MODES:
            raise GraphMemoryError(f"unknown graph mode '{graph_mode}': use one of {', '.join(GRAPH_MODES)}")
        self.model, self.profile, self.fusion, self.graph_mode = model, profile, fusion, graph_mode
        t = profile.device.graph_memory.get(model.name)
        self.table: GraphMemoryTable | None = t
        if t is not None:
            order = np.argsort(t.batch)
            self._tb = [int(t.batch[i]) for i in order]
            self._tp = [float(t.private_pool_bytes[i]) for i in order]
            self._tc = [float(t.capture_s[i]) for i in order] if t.capture_s else None
        self.graphs_per_size = 0 if graph_mode == "none" else (2 if graph_mode == "full_and_piecewise" else 1)

    # -- one captured size ------------------------------------------------------------------------
    def _one_pool(self, batch: int) -> tuple[float, bool]:
        """(pool bytes, whether the formula gave them rather than a measurement)."""
        if self.table is not None and batch in self._tb:
            return self._tp[self._tb.index(batch)], False
        return segment_bytes(live_tensors(self.model, batch, self.fusion)) + CAPTURE_SEGMENT, True

    def pool_bytes(self, batch: int) -> float:
        """Private pool bytes of one captured size (both graphs of the size under full_and_piecewise)."""
        _check_batch(batch)
        return self._one_pool(batch)[0] * self.graphs_per_size

    def output_bytes(self, batch: int) -> float:
        """Bytes a graph keeps allocated in a shared pool after its capture (its hidden-state output)."""
        return float(batch * self.model.hidden_size * self.model.dtype_bytes)

    def nodes(self) -> int:
        """Kernel nodes captured per size (full graph + piecewise pieces under full_and_piecewise)."""
        k, attn = _kernel_counts(self.model, self.fusion)
        if self.graph_mode == "none":
            return 0
        if self.graph_mode == "full":
            return k
        if self.graph_mode == "piecewise":
            return k - attn
        return k + (k - attn)

    def capture_s(self, batch: int) -> float:
        """Capture + instantiate time of one captured size (both graphs under full_and_piecewise)."""
        _check_batch(batch)
        if self.graph_mode == "none":
            return 0.0
        if self.table is not None and self._tc is not None:
            return _interp(self._tb, self._tc, batch)[0] * self.graphs_per_size
        return self.profile.host.capture_per_node_ms * 1e-3 * self.nodes()

    def static_buffer_bytes(self, largest: int) -> float:
        m = self.model
        row = 8 + 8 + 8 + 4 + 4 * math.ceil(m.max_position_embeddings / BLOCK_SIZE)
        return float(largest * row + largest * m.vocab_size * m.dtype_bytes)

    # -- a layout ---------------------------------------------------------------------------------
    def layout(self, sizes, shared_pool: bool = True) -> LayoutMemory:
        sizes = tuple(sorted({int(s) for s in sizes}))
        if not sizes:
            raise GraphMemoryError("a capture layout needs at least one size")
        for s in sizes:
            _check_batch(s)
        if self.graph_mode == "none":
            return LayoutMemory(sizes, 0, tuple(0.0 for _ in sizes), 0.0, 0.0, 0.0, 0.0, shared_pool, "none", "none")
        g = self.graphs_per_size
        pools, extra = [], []
        for s in sizes:
            v, ex = self._one_pool(s)
            pools.append(v * g)
            if ex:
                extra.append(s)
        if shared_pool:
            total, kept = 0.0, 0.0
            for s, p in zip(reversed(sizes), reversed(pools)):  # largest first
                for _ in range(g):  # under full_and_piecewise the size's second graph reuses the first's blocks
                    total = max(total, kept + p / g)
                    kept += self.output_bytes(s)
        else:
            total = float(sum(pools))
        static = self.static_buffer_bytes(sizes[-1])
        cap = sum(self.capture_s(s) for s in sizes)
        src = "formula" if self.table is None or len(extra) == len(sizes) else (
            f"table at {len(sizes) - len(extra)} sizes, formula at {len(extra)}" if extra else "table")
        return LayoutMemory(sizes, g * len(sizes), tuple(pools), float(total), static, float(total) + static,
                            float(cap), shared_pool, self.graph_mode, src)


def _check_batch(batch: int) -> None:
    if not isinstance(batch, (int, np.integer)) or batch <= 0:
        raise GraphMemoryError(f"captured batch sizes must be positive integers, got {batch!r}")


def kv_cache_bytes(model: ModelSpec, profile: Profile, layout_memory: LayoutMemory,
                   workspace_bytes: float = DEFAULT_WORKSPACE_BYTES, gpu_util: float = 0.9) -> float:
    """GPU memory left for the KV cache: gpu_util * memory - weights - graph memory - workspace.

    Negative when the weights, graphs and workspace alone exceed the usable memory."""
    if not 0 < gpu_util <= 1:
        raise GraphMemoryError(f"gpu_util must be in (0, 1], got {gpu_util}")
    usable = profile.device.memory_gib * GiB * gpu_util
    return float(usable - model.weight_bytes - layout_memory.total_bytes - workspace_bytes)


def kv_cache_tokens(model: ModelSpec, kv_bytes: float) -> int:
    """Tokens of KV cache that fit in `kv_bytes` (0 when it is not positive)."""
    return max(0, int(kv_bytes // model.kv_bytes_per_token()))


__all__ = ["LayoutMemory", "GraphMemoryModel", "kv_cache_bytes", "kv_cache_tokens", "segment_bytes",
           "live_tensors", "DEFAULT_WORKSPACE_BYTES", "GraphMemoryError"]
