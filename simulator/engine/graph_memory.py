"""Pinned CUDA-graph memory and start-up capture cost of a capture layout; what is left for the KV cache.

Owns: per-graph pool bytes as a function of captured batch size, retained outputs, the shared pool as
engines build it, static input/output buffers, capture time, and the KV-cache budget left after weights,
graphs and workspace. All figures are `memory_reserved` bytes (allocator segments: what engines budget).

Measured inputs (`profile.device.graph_memory[model.name]`, a `GraphMemoryTable`; made by
calibration/build_memory.py from calibration/child_memory.py runs):
- `layouts`: per fusion level and graph mode (full / piecewise), the private pool P(s) of each captured
  size s (each size in its own fresh pool) plus the shared pools the formula below is validated on
  (calibration/validate_memory.py). A size the matching layout measured uses its measured P(s);
  `source` says "measured". Old profiles without `layouts` use `batch`/`private_pool_bytes` for every
  fusion level (as before this model).
- `constants`: W, the capture-stream cuBLAS workspace (32 MiB on the H200: the first capture of a
  process puts it in its pool), alpha and sigma below, with their source. Without a table (or a table without
  constants) the profile's device-wide `device.graph_memory_constants` apply and the parts say "default";
  a profile with neither is refused (GraphMemoryError, one line): no device's constants are assumed.
Otherwise P(s) comes from the allocator-segment formula (`source = "formula"`):
    live set (T = B tokens, e dtype bytes, H hidden, q/kv widths, I intermediate, V vocab):
    residual, hidden 2 x T*H*e; the larger of attention (T*(q+2kv)*e + T*q*e) and MLP (T*2I*e + T*I*e);
    fusion none/packed: two fp32 norm temporaries T*H*4; logits B*V*e (the graph ends with lm_head).
    P(s) = 2 MiB*ceil(small/2 MiB) + 20 MiB*ceil(mid/20 MiB) + sum 2 MiB*ceil(big_i/2 MiB) + 2 MiB
(tensors < 1 MiB share 2 MiB segments, 1-10 MiB share 20 MiB segments, larger ones round to 2 MiB; the
last 2 MiB is the capture's own small segment).

Retained outputs R(s) of a graph after its capture (what later graphs in a shared pool cannot reuse):
    retention `keep` (SGLang keeps its output buffers): the logits B*V*e
    retention `drop` (vLLM keeps a weak reference): nothing
    piecewise, either retention: the last piece boundary's tensors the eager attention reads, residual
    T*H*e + q T*q*e + k, v 2*T*kv*e + rotary cos, sin 2*T*head_dim*e (measured 10768 B/row on qwen3-0.6b,
    this gives 10752; on llama3-8b it gives 20992 against 25104 measured).

Shared pool, sizes s_1 > s_2 > ... captured largest first (each size's graphs in turn; under
full_and_piecewise the full graph first), the first graph g_1 of s_1:
    F = P(g_1) - R(g_1)                         the largest graph's transient blocks, free after capture
    shared = W + sigma + P(s_1) + max(0, sum_{graphs g != g_1} R(g) - alpha*F)
with P(s_1) the largest private pool of the size's graphs: smaller graphs' transients fit in blocks the
largest freed; what they retain stacks on top, less the part that lands in those freed blocks.
alpha = 0.32 was fitted on qwen3-0.6b fusion none (both modes, keep and drop, all 40 cumulative rows)
and scored on llama3-8b and on fusion compiled (calibration/validation/graph_memory.md). sigma (extra
rounding) is held at 0: 2 MiB fits slightly better but would put a one-size shared pool above its private
pool. With sigma = 0 the shared pool never exceeds the private pools (R(g) <= P(g)), keep >= drop, and
adding a size no larger than the largest never lowers it (a larger size can: its pool may be smaller).
Private pools: private = W + sum_s P(s) (W once: the first capture of the process pays it).

Static buffers (allocated once, outside any pool, sized for the largest captured size S): per row
input_ids 8 + positions 8 + slot_mapping 8 + seq_lens 4 bytes + a block-table row of
4 * ceil(max_position_embeddings / 16) bytes, plus the logits buffer S*V*e (derived; the measured bytes
match this on both models).

Graph modes: `none` captures nothing (all zeros). `full`, `full_decode_only`: one graph per size. `piecewise`: per size, the
kernels between attention ops are one graph each (attention stays eager); pieces share the size's pool.
`full_and_piecewise`: both per size.

Capture time of a size = its warm-up runs + capture passes, from simulator/engine/startup.py (`StartupModel.size_s`:
the measured start-up model every command shares; `capture_s` of a layout sums its sizes, compile excluded).

KV cache: `gpu_util * memory - weights - graph memory - workspace` (may be negative: does not fit).

Tensor parallelism (simulator/model/parallel.py): pass the per-GPU model (`shard(model, tp)`); every figure is then one
GPU's: sharded q/kv/MLP widths in the live set, per-GPU weights and KV bytes per token. The logits are the full
vocabulary after the all-gather (plus the local vocab shard lm_head writes before it); the collectives' own
buffers (vLLM's 8 MiB custom all-reduce buffer, NCCL's) are not counted. Measured tables are keyed by the model
name, so a sharded model (`NAME-tpN`) always uses the formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from simulator.common.errors import UserError
from simulator.common.memo import memo
from simulator.common import vocab as V
from simulator.model.models import ModelSpec
from simulator.model.parallel import logits_vocab, tp_of
from simulator.engine.routing import GRAPH_MODES
from simulator.model.profile import GraphMemoryConstants, GraphMemoryTable, Profile
from simulator.model.workload import FUSION_LEVELS, build_step, decode

MiB = 1 << 20
GiB = 1 << 30
SMALL_SEGMENT = 2 * MiB  # caching allocator: small pool segment, for tensors < 1 MiB
MID_SEGMENT = 20 * MiB  # large pool segment for tensors of 1-10 MiB
LARGE_ROUND = 2 * MiB  # tensors >= 10 MiB are rounded up to a multiple of 2 MiB
CAPTURE_SEGMENT = 2 * 1024 * 1024  # a capture's own small segment (see the formula)
BLOCK_SIZE = 16  # KV-cache block size (tokens) used for the block-table row width
DEFAULT_WORKSPACE_BYTES = 1 * GiB  # cuBLAS/attention workspaces + eager activation peak outside graphs
RETENTIONS = V.values(V.POOL_RETENTIONS)
V_EAGER = V.EAGER_FUSIONS


def check_weights_fit(model, profile) -> None:
    """Refuse a model whose weights alone exceed the GPU's memory (per GPU after sharding): start-up, capture and
    the optimizer's memory figures mean nothing for it (a 22,831 GiB config.json passed with exit 0)."""
    cap = profile.device.memory_gib * GiB
    if model.weight_bytes > cap:
        raise GraphMemoryError(f"model {model.name}: {model.weight_bytes / GiB:,.1f} GiB of weights do not fit the "
                               f"{profile.name} GPU's {profile.device.memory_gib:g} GiB (shard it with "
                               f"tensor_parallel_size, or pick a smaller model)")


class GraphMemoryError(UserError):
    """A bad capture layout, graph mode or retention policy for the memory model."""


def default_retention(layout: str | None) -> str:
    """Output retention an engine's layout preset implies: `keep` for sglang, `drop` (vLLM) otherwise."""
    return "keep" if (layout or "").strip().lower() == "sglang" else "drop"


@dataclass(frozen=True)
class LayoutMemory:
    sizes: tuple[int, ...]
    graphs: int  # len(sizes), x2 under full_and_piecewise
    per_graph_bytes: tuple[float, ...]  # private pool bytes per captured size (both graphs of a size under f&p)
    pool_bytes: float  # total pinned pool bytes (shared or private), capture workspace included
    static_buffer_bytes: float  # static inputs/outputs sized for the largest size
    total_bytes: float  # pool_bytes + static_buffer_bytes
    capture_s: float  # start-up warm-up + capture time of all graphs (simulator/engine/startup.py; compile excluded)
    shared_pool: bool
    graph_mode: str = "full"
    source: str = "formula"  # "formula", "table", or "table at N sizes, formula at M"
    retention: str = "drop"
    parts: dict = field(default_factory=dict)  # name -> {"bytes", "source"}; they sum to total_bytes

    def as_dict(self) -> dict:
        measured = sum(v["bytes"] for v in self.parts.values() if v["source"] == "measured")
        return {
            "sizes": list(self.sizes), "graphs": self.graphs, "graph_mode": self.graph_mode,
            "shared_pool": self.shared_pool, "pool_bytes": self.pool_bytes,
            "static_buffer_bytes": self.static_buffer_bytes, "total_bytes": self.total_bytes,
            "capture_s": self.capture_s, "source": self.source, "retention": self.retention,
            "parts": self.parts, "measured_bytes": measured, "derived_bytes": self.total_bytes - measured,
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
    if fusion in V.EAGER_FUSIONS:
        out += [T * H * 4, T * H * 4]
    if tp_of(model) > 1:  # lm_head's local vocab shard, before the all-gather
        out.append(T * model.vocab_size * e)
    return [float(x) for x in out] + [float(batch * logits_vocab(model) * e)]


def _live_rows(model: ModelSpec, batches: np.ndarray, fusion: str) -> np.ndarray | None:
    """`live_tensors(model, b, fusion)` of each batch b, as the rows of a float array (the same integer products,
    exact in int64, then floats); None where a width is not an int (the scalar function then)."""
    T, e, H, I = batches, model.dtype_bytes, model.hidden_size, model.intermediate_size
    q, kv, V, Vl = model.q_dim, model.kv_dim, model.vocab_size, logits_vocab(model)
    if not all(type(x) is int for x in (e, H, I, q, kv, V, Vl)):
        return None
    # live_tensors' choice, sum(mlp) >= sum(attn): both are T times a constant, so the same at every T > 0
    mlp = 2 * I * e + I * e >= (q + 2 * kv) * e + q * e
    cols = [T * H * e, T * H * e] + ([T * 2 * I * e, T * I * e] if mlp else [T * (q + 2 * kv) * e, T * q * e])
    if fusion in V_EAGER:
        cols += [T * H * 4, T * H * 4]
    if tp_of(model) > 1:
        cols.append(T * V * e)
    cols.append(T * Vl * e)
    return np.stack(cols, axis=1).astype(float)


def _segment_rows(t: np.ndarray) -> np.ndarray:
    """`segment_bytes` of each row of tensor sizes: every size and every partial sum an integer below 2**53 (bytes),
    so the sums are exact in any order and each figure is the scalar one."""
    small = np.where((t > 0) & (t < MiB), t, 0.0).sum(axis=1)
    mid = np.where((t >= MiB) & (t < 10 * MiB), t, 0.0).sum(axis=1)
    big = np.where(t >= 10 * MiB, LARGE_ROUND * np.ceil(t / LARGE_ROUND), 0.0).sum(axis=1)
    return SMALL_SEGMENT * np.ceil(small / SMALL_SEGMENT) + MID_SEGMENT * np.ceil(mid / MID_SEGMENT) + big


def piece_output_bytes(model: ModelSpec, batch: int) -> float:
    """Bytes a piecewise capture leaves allocated: the last piece boundary's residual, q, k, v, cos, sin."""
    m = model
    return float(batch * m.dtype_bytes * (m.hidden_size + m.q_dim + 2 * m.kv_dim + 2 * m.head_dim))


def retained_bytes(model: ModelSpec, batch: int, mode: str, retention: str) -> float:
    """R: bytes one graph (mode `full` or `piecewise`) keeps allocated in its pool after capture."""
    r = float(batch * logits_vocab(model) * model.dtype_bytes) if retention == "keep" else 0.0
    return r + (piece_output_bytes(model, batch) if mode == "piecewise" else 0.0)


_KERNEL_COUNTS = memo("engine.graph_memory._KERNEL_COUNTS", "(kernels, attention kernels) of one decode step by "
                      "(model, fusion): a pure function of those values, shared by every graph-memory model", 256)


def _kernel_counts(model: ModelSpec, fusion: str) -> tuple[int, int]:
    """(kernels, attention kernels) of one decode step; both independent of batch."""
    hit = _KERNEL_COUNTS.get((model, fusion))
    if hit is None:
        hit = _KERNEL_COUNTS.put((model, fusion), _counts(build_step(model, decode(1, 128), fusion)))
    return hit


def _counts(step) -> tuple[int, int]:
    """(kernels, attention kernels) of a step."""
    ks = step.kernel_ops()
    return len(ks), sum(1 for o in ks if o.op_class.value == "attention")


def _constants(profile: Profile, model: ModelSpec, t: GraphMemoryTable | None) -> tuple[GraphMemoryConstants, str]:
    """(the shared-pool constants for `model`, 'measured' (its own table's) or 'default' (the profile's
    device-wide section)); refused where the profile has neither."""
    if t is not None and t.constants is not None:
        return t.constants, "measured"
    c = profile.device.graph_memory_constants
    if c is None:
        raise GraphMemoryError(f"profile {profile.name} has no device.graph_memory_constants and no measured "
                               f"graph_memory table with constants for model {model.name}: its graph pools cannot "
                               f"be given")
    return c, "default"


def _measured_pools(t: GraphMemoryTable | None, fusion: str, w: float) -> dict[str, dict[int, float]]:
    """mode -> {batch: private pool bytes without the capture workspace `w`} for `fusion` from a table."""
    out: dict[str, dict[int, float]] = {}
    if t is None:
        return out
    if not t.layouts:  # an old profile: one fusion-agnostic table, used for both modes
        d = {int(b): float(p) for b, p in zip(t.batch, t.private_pool_bytes)}
        return {"full": d, "piecewise": d}
    for lay in t.layouts:
        if lay.fusion != fusion:
            continue
        d = {int(b): float(p) for b, p in zip(lay.batch, lay.private_reserved)}
        if lay.workspace_in_first:
            d[int(lay.batch[0])] = max(d[int(lay.batch[0])] - w, 0.0)
        out[lay.mode] = d
    return out


class GraphMemoryModel:
    def __init__(self, model: ModelSpec, profile, fusion: str = "fused", graph_mode: str = "full",
                 retention: str = "drop"):
        """`profile`: a Profile, or a CostModel (its profile; the start-up model's eager passes are then memoised in
        that cost model, shared by every model made with it)."""
        from simulator.model.costs import CostModel

        self._given = profile  # what the start-up model is made with: a CostModel shares its memo of eager passes
        if isinstance(profile, CostModel):
            profile = profile.profile
        if fusion not in FUSION_LEVELS:
            raise GraphMemoryError(f"unknown fusion level '{fusion}': use one of {', '.join(FUSION_LEVELS)}")
        if graph_mode not in GRAPH_MODES:
            raise GraphMemoryError(f"unknown graph mode '{graph_mode}': use one of {', '.join(GRAPH_MODES)}")
        if retention not in RETENTIONS:
            raise GraphMemoryError(f"unknown output retention '{retention}': use one of {', '.join(RETENTIONS)}")
        self.model, self.profile, self.fusion, self.graph_mode = model, profile, fusion, graph_mode
        self.retention = retention
        t = profile.device.graph_memory.get(model.name)
        self.table: GraphMemoryTable | None = t
        self.constants, self.constants_source = _constants(profile, model, t)
        self._measured = _measured_pools(t, fusion, self.constants.capture_workspace_bytes)
        self._startup = None
        from simulator.engine.routing import graph_kinds

        self.modes = graph_kinds(graph_mode)  # full_decode_only captures full graphs, as full
        self.graphs_per_size = len(self.modes)
        self.setup = None  # the StepSetup this model was built from (`of`): its recipe decides the nodes

    @classmethod
    def of(cls, setup, retention: str = "drop") -> "GraphMemoryModel":
        """The graph memory of a `StepSetup` (engine/setup.py): its model, profile, fusion, graph mode, and its
        recipe's kernels as the captured nodes (an implementation launches its own kernel count)."""
        gm = cls(setup.model, setup.profile, setup.fusion, setup.capture.graph, retention)
        gm.setup = setup
        return gm

    # -- one captured graph / size ----------------------------------------------------------------
    def _graph_pool(self, batch: int, mode: str) -> tuple[float, bool]:
        """(private pool bytes of one graph, whether the formula gave them rather than a measurement)."""
        d = self._measured.get(mode)
        if d is not None and batch in d:
            return d[batch], False
        return segment_bytes(live_tensors(self.model, batch, self.fusion)) + CAPTURE_SEGMENT, True

    def pool_bytes(self, batch: int) -> float:
        """Private pool bytes of one captured size (both graphs of the size under full_and_piecewise)."""
        _check_batch(batch)
        return float(sum(self._graph_pool(batch, m)[0] for m in self.modes))

    def largest_pool_bytes(self, batch: int) -> float:
        """P(s) of the shared formula: the largest private pool among the size's graphs."""
        return max((self._graph_pool(batch, m)[0] for m in self.modes), default=0.0)

    def output_bytes(self, batch: int) -> float:
        """Bytes all graphs of one size keep allocated in a shared pool after capture (retention, pieces)."""
        return float(sum(retained_bytes(self.model, batch, m, self.retention) for m in self.modes))

    def shared_terms(self, largest: int) -> tuple[float, float]:
        """(floor, base) of a shared pool whose largest size is `largest`, W and sigma included:
        pool = max(floor, base + outputs of every other size); base already holds the largest size's
        graphs after its first (see the module docstring)."""
        c = self.constants
        p1 = self.largest_pool_bytes(largest)
        first = retained_bytes(self.model, largest, self.modes[0], self.retention)
        floor = c.capture_workspace_bytes + c.slack_bytes + p1
        return floor, floor - c.reuse_fraction * (p1 - first) + (self.output_bytes(largest) - first)

    def nodes(self) -> int:
        """Kernel nodes captured per size (full graph + piecewise pieces under full_and_piecewise)."""
        if self.setup is not None:  # the recipe's kernels (an implementation launches its own count)
            k, attn = _counts(self.setup.build(decode(1, 128)))
        else:
            k, attn = _kernel_counts(self.model, self.fusion)
        return sum(k if m == "full" else k - attn for m in self.modes)

    @property
    def startup(self):
        """The start-up model of this model, profile, fusion and graph mode (simulator/engine/startup.py)."""
        if self._startup is None:
            from simulator.engine.startup import StartupModel

            self._startup = (StartupModel.of(self.setup) if self.setup is not None
                             else StartupModel(self.model, self._given, self.fusion, self.graph_mode))
        return self._startup

    def capture_s(self, batch: int) -> float:
        """Warm-up runs + capture of one captured size (both passes under full_and_piecewise), seconds."""
        _check_batch(batch)
        if self.graph_mode == "none":
            return 0.0
        return self.startup.size_s(int(batch))

    # -- the same figures for many sizes at once (the optimizer's candidates): arrays, each element the scalar
    # method's figure --------------------------------------------------------------------------------
    def _sizes_array(self, sizes) -> np.ndarray:
        if isinstance(sizes, np.ndarray) and sizes.ndim == 1 and sizes.dtype.kind == "i" and bool((sizes > 0).all()):
            return sizes.astype(np.int64)  # the optimizer's candidates: checked at once (the loop's values)
        for s in sizes:
            _check_batch(s)
        return np.fromiter((int(s) for s in sizes), np.int64)

    def _pools_many(self, b: np.ndarray, mode: str) -> np.ndarray:
        """`_graph_pool(s, mode)[0]` of each size: measured where the table has the size, else the formula."""
        live = _live_rows(self.model, b, self.fusion)
        if live is None:
            out = np.array([segment_bytes(live_tensors(self.model, int(x), self.fusion)) + CAPTURE_SEGMENT
                            for x in b.tolist()], dtype=float)
        else:
            out = _segment_rows(live) + CAPTURE_SEGMENT
        d = self._measured.get(mode)
        if d:
            for i, x in enumerate(b.tolist()):
                v = d.get(x)
                if v is not None:
                    out[i] = v
        return out

    def _retained_many(self, b: np.ndarray, mode: str) -> np.ndarray:
        """`retained_bytes(model, s, mode, retention)` of each size (integer products, then floats)."""
        m = self.model
        if type(m.dtype_bytes) is not int:
            return np.array([retained_bytes(m, int(x), mode, self.retention) for x in b.tolist()], dtype=float)
        r = (b * logits_vocab(m) * m.dtype_bytes).astype(float) if self.retention == "keep" else np.zeros(b.size)
        if mode == "piecewise":
            r = r + (b * (m.dtype_bytes * (m.hidden_size + m.q_dim + 2 * m.kv_dim + 2 * m.head_dim))).astype(float)
        else:
            r = r + 0.0
        return r

    def pool_bytes_many(self, sizes) -> np.ndarray:
        """`pool_bytes(s)` of each size."""
        b = self._sizes_array(sizes)
        out = np.zeros(b.size)
        for m in self.modes:  # sum() from 0, in the modes' order
            out = out + self._pools_many(b, m)
        return out

    def output_bytes_many(self, sizes) -> np.ndarray:
        """`output_bytes(s)` of each size."""
        b = self._sizes_array(sizes)
        out = np.zeros(b.size)
        for m in self.modes:
            out = out + self._retained_many(b, m)
        return out

    def shared_terms_many(self, sizes) -> tuple[np.ndarray, np.ndarray]:
        """`shared_terms(s)` of each size: (floors, bases)."""
        b = self._sizes_array(sizes)
        c = self.constants
        p1 = np.zeros(b.size)
        for i, m in enumerate(self.modes):  # largest_pool_bytes: max over the size's graphs
            v = self._pools_many(b, m)
            p1 = v if i == 0 else np.maximum(p1, v)
        first = self._retained_many(b, self.modes[0])
        floor = c.capture_workspace_bytes + c.slack_bytes + p1
        return floor, floor - c.reuse_fraction * (p1 - first) + (self.output_bytes_many(sizes) - first)

    def static_buffer_bytes_many(self, sizes) -> np.ndarray:
        """`static_buffer_bytes(s)` of each size."""
        b = self._sizes_array(sizes)
        m = self.model
        row = 8 + 8 + 8 + 4 + 4 * math.ceil(m.max_position_embeddings / BLOCK_SIZE)
        if type(m.dtype_bytes) is not int:
            return np.array([self.static_buffer_bytes(int(x)) for x in b.tolist()], dtype=float)
        return (b * row + b * logits_vocab(m) * m.dtype_bytes).astype(float)

    def capture_s_many(self, sizes) -> np.ndarray:
        """`capture_s(s)` of each size."""
        b = self._sizes_array(sizes)
        if self.graph_mode == "none":
            return np.zeros(b.size)
        return np.asarray(self.startup.sizes_s(b.tolist()), dtype=float)

    def static_buffer_bytes(self, largest: int) -> float:
        m = self.model
        row = 8 + 8 + 8 + 4 + 4 * math.ceil(m.max_position_embeddings / BLOCK_SIZE)
        return float(largest * row + largest * logits_vocab(m) * m.dtype_bytes)

    # -- a layout ---------------------------------------------------------------------------------
    def prefill_pool_bytes(self, tokens: int) -> float:
        """Private pool of one prefill piecewise graph of `tokens` tokens: the formula's live set of `tokens` rows
        without the logits (lm_head runs outside the layer pieces, on the last token of each sequence)."""
        _check_batch(tokens)
        return segment_bytes(live_tensors(self.model, int(tokens), self.fusion)[:-1]) + CAPTURE_SEGMENT

    def prefill_bytes(self, prefill_sizes, largest: int, shared_pool: bool = True) -> tuple[float, int]:
        """(pool bytes, graphs) the prefill piecewise graphs add (SGLang PCG, one per token count T; none unless
        mixed steps run piecewise). Estimate, formula only (the measured tables hold decode graphs, logits
        included): each is a piecewise graph of T rows with pool P'(T) (`prefill_pool_bytes`) that retains its
        last piece boundary's tensors R'(T) = piece_output_bytes(T) (no logits, whatever the retention). Shared
        pool: the largest prefill graph's transient blocks grow the pool by their excess over the decode sizes'
        largest graph, max(0, P'(T_max) - P(s_1)), and every prefill graph's R'(T) stacks on top. Private pools:
        the sum of P'(T). Not measured: the first estimate to check on a GPU."""
        from simulator.engine.routing import plan_mode

        ts = sorted({int(t) for t in prefill_sizes or ()})
        if not ts or plan_mode(self.graph_mode, pure_decode=False) != "piecewise":
            return 0.0, 0
        pools = [self.prefill_pool_bytes(t) for t in ts]
        if not shared_pool:
            return float(sum(pools)), len(ts)
        grow = max(0.0, pools[-1] - self.largest_pool_bytes(largest))
        return grow + float(sum(piece_output_bytes(self.model, t) for t in ts)), len(ts)

    def layout(self, sizes, shared_pool: bool = True, prefill_sizes=None) -> LayoutMemory:
        """`prefill_sizes`: token counts of the prefill piecewise graphs (None: none; `prefill_bytes`)."""
        sizes = tuple(sorted({int(s) for s in sizes}))
        if not sizes:
            raise GraphMemoryError("a capture layout needs at least one size")
        for s in sizes:
            _check_batch(s)
        if self.graph_mode == "none":
            return LayoutMemory(sizes, 0, tuple(0.0 for _ in sizes), 0.0, 0.0, 0.0, 0.0, shared_pool, "none", "none",
                                self.retention, {})
        pools = tuple(self.pool_bytes_many(sizes).tolist())
        meas = [self._measured.get(m) for m in self.modes]  # `_graph_pool`'s test: the formula where unmeasured
        formula = [s for s in sizes if any(d is None or s not in d for d in meas)]
        w, csrc = self.constants.capture_workspace_bytes, self.constants_source
        psrc = lambda s: "formula" if s in formula else "measured"  # noqa: E731
        if shared_pool:
            floor, base = self.shared_terms(sizes[-1])
            rest = sum(self.output_bytes_many(sizes[:-1]).tolist())
            total = max(floor, base + rest)
            p1 = self.largest_pool_bytes(sizes[-1])
            parts = {"largest_graph_pool": {"bytes": p1, "source": psrc(sizes[-1])},
                     "capture_workspace": {"bytes": w, "source": csrc},
                     "segment_slack": {"bytes": self.constants.slack_bytes, "source": csrc + " (fitted)"},
                     "retained_outputs": {"bytes": total - floor, "source": "derived"}}
        else:
            total = w + float(sum(pools))
            meas = sum(p for s, p in zip(sizes, pools) if s not in formula)
            parts = {"private_pools_measured": {"bytes": meas, "source": "measured"},
                     "private_pools_formula": {"bytes": float(sum(pools)) - meas, "source": "formula"},
                     "capture_workspace": {"bytes": w, "source": csrc}}
        pre, npre = self.prefill_bytes(prefill_sizes, sizes[-1], shared_pool)
        if npre:
            total = total + pre
            parts["prefill_graphs"] = {"bytes": pre, "source": "formula"}
        static = self.static_buffer_bytes(sizes[-1])
        parts["static_buffers"] = {"bytes": static, "source": "derived"}
        cap = sum(self.capture_s_many(sizes).tolist())
        if npre:
            cap += sum(p.warmup_s + p.capture_s for t in sorted({int(t) for t in prefill_sizes}) for p in self.startup.prefill_passes(t))
        src = "formula" if len(formula) == len(sizes) else (
            f"table at {len(sizes) - len(formula)} sizes, formula at {len(formula)}" if formula else "table")
        return LayoutMemory(sizes, self.graphs_per_size * len(sizes) + npre, pools, float(total), static,
                            float(total) + static, float(cap), shared_pool, self.graph_mode, src, self.retention,
                            parts)


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
           "live_tensors", "piece_output_bytes", "retained_bytes", "default_retention",
           "DEFAULT_WORKSPACE_BYTES", "RETENTIONS", "GraphMemoryError"]
