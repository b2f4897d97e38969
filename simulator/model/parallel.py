"""Tensor parallelism (`--tp N`, `tensor_parallel_size` in YAML): the per-GPU view of a model and the
collectives a tensor-parallel decode step adds. UNMEASURED: the collective figures are published ones (below,
and calibration/validation/tensor_parallel.md), not launchsim measurements; no multi-GPU machine was available.

Sharding (Megatron-style, as vLLM shards a dense decoder), `shard(model, tp)`:
- attention heads / tp per GPU (must divide evenly);
- KV heads / tp per GPU; when KV heads < tp each GPU keeps one KV head, replicated tp / KV times (vLLM:
  `num_kv_heads = max(1, total_kv_heads // tp)`; tp must then be a multiple of the KV heads);
- intermediate (MLP) size / tp (column-parallel gate/up, row-parallel down);
- vocabulary sharded for the embedding and lm_head (VocabParallelEmbedding / ParallelLMHead): the vocabulary
  padded to a multiple of 64 (vLLM's DEFAULT_VOCAB_PADDING_SIZE), then ceil(padded / tp) rows per GPU;
- hidden size, norms and layer count unchanged (norm weights replicated).
The result is a `ShardedModel` (a `ModelSpec` with `tp` and the full vocabulary), so everything that reads a
`ModelSpec` (the workload builder, graph memory, the KV cache) sees per-GPU shapes and per-GPU bytes:
`weight_bytes` is the weights one GPU holds, `kv_bytes_per_token()` the KV bytes one GPU holds per token.
tp = 1 returns the model itself, so every tp = 1 figure is bit-identical to a run without tensor parallelism.

Collectives in a step (simulator/model/workload.py adds them when the model's tp > 1):
- an all-reduce of T x hidden x dtype bytes after each attention output projection (o_proj) and after each MLP
  down projection: 2 per layer;
- an all-reduce of the embedding output (VocabParallelEmbedding masks out-of-shard tokens, then all-reduces);
- an all-gather of the logits after lm_head (vLLM's LogitsProcessor gathers the vocab shards).
Each is one op of class `collective` on launch path `collective`; under CUDA graphs it is one graph node (vLLM's
custom all-reduce and NCCL both capture into graphs).

GPU time (simulator/model/costs.py `CostModel.collective_s`), from `profile.device.collective`; a profile without
that section refuses a tensor-parallel step (no device's figures are assumed). The shipped profiles carry the
published figures below (calibration/device_sections.py writes them, `measured: false`):
- all-reduce of b bytes over n GPUs: vLLM's custom all-reduce where it applies (n in 2, 4, 6, 8 and
  b <= custom_max_bytes = 8 MiB, vLLM's `CustomAllreduce(max_size=8192 * 1024)`):
      t = custom_latency(n) + b / custom_algbw(n)
  else NCCL ring:
      t = nccl_latency(n) + 2 (n - 1) / n * b / nccl_busbw(n)
- all-gather of an output of b bytes: NCCL ring, t = nccl_latency(n) + (n - 1) / n * b / nccl_busbw(n).
Published figures behind the shipped section (all H100 SXM, which has the same NVLink 4 / NVSwitch fabric as the H200):
- custom all-reduce latency floor 3.7 / 4.8 / 5.9 us at n = 2 / 4 / 8 (512-byte messages, H100, no CUDA graph:
  sgl-project/sglang PR #2904, "custom allreduce" table);
- custom all-reduce bandwidth term from vLLM's own custom all-reduce rows of the same table, 256 KiB -> 1 MiB:
  n=2 12.9 -> 26.6 us, n=4 20.6 -> 40.2 us, n=8 24.1 -> 45.0 us, i.e. 57.4 / 40.1 / 37.6 GB/s of message bytes
  (n = 6 interpolated); those rows ran without CUDA graphs (they include copying the input into the IPC buffer),
  so the slope is an upper bound on in-graph time;
- NCCL ring bus bandwidth 370 GB/s on NVLink 4 (NVIDIA, nccl-tests issue #212: "NCCL can get an effective NVLink
  bandwidth of 370GB/s ... with NCCL_ALGO=RING"; 450 GB/s line rate per direction = 900 GB/s bidirectional);
  366 GB/s measured all-reduce busbw on 4x H100 (waynehacking8 "Where tensor-parallel inference hits the NVLink
  wall", nccl-collectives-bench, 2026-05-31); NVLS would reach ~480 GB/s busbw at 8 GPUs (same #212 comment), not
  used: decode messages never reach the bandwidth regime;
- NCCL small-message latency: no published H100/H200 all_reduce_perf small-size row was found in the sources
  searched; 10 / 12 / 12 / 15 us at n = 2 / 4 / 6 / 8 is an ASSUMPTION (it only matters above 8 MiB, i.e. prefill
  or batches > 512 at hidden 8192, and for the one logits all-gather per step).
Extrapolation to 4 and 8 GPUs: the custom all-reduce figures were published at 2, 4 and 8 GPUs, so no
extrapolation in n; the NCCL ring term scales as 2(n-1)/n, which assumes the NVSwitch gives each GPU its full
NVLink bandwidth at every n (true on HGX H100/H200 boards).

Host cost of launching a collective: one eager launch on the profile's `launch_us["collective"]` if present,
else the path named by `collective.launch_path` (default `custom_op`: vLLM's custom all-reduce is a C++ custom op,
the same kind of call as the hand-fused ops whose launch was measured on the H200). That is a lower bound for
NCCL through torch.distributed. Under graphs the launch disappears into the replay, as for any node.

Not modelled: extra memory of the collectives (vLLM's 8 MiB per-rank IPC buffer, NCCL's internal buffers),
communication/compute overlap, pipeline parallelism, MoE/expert parallelism, multi-node.
"""

from __future__ import annotations

import math

from simulator.common.errors import UserError
from simulator.model.models import ModelSpec
from simulator.model.profile import CollectiveSection

TP_SIZES = (1, 2, 4, 8)
VOCAB_PADDING = 64  # vLLM DEFAULT_VOCAB_PADDING_SIZE



class ParallelError(UserError):
    """A tensor-parallel size the model or launchsim cannot use."""


def __getattr__(name: str):
    if name == "ShardedModel":  # model/sharded.py: made by `shard` at tp > 1 (a one-GPU step never loads it)
        from simulator.model.sharded import ShardedModel

        return ShardedModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def tp_of(model: ModelSpec) -> int:
    """The tensor-parallel size a (possibly sharded) model runs at (1 for a plain `ModelSpec`)."""
    return int(getattr(model, "tp", 1) or 1)


def check_tp(tp, flag: str = "tensor_parallel_size") -> int:
    if isinstance(tp, bool) or not isinstance(tp, int) or tp not in TP_SIZES:
        raise ParallelError(f"{flag} must be one of {', '.join(map(str, TP_SIZES))} (GPUs of one NVLink node), "
                            f"got {tp!r}")
    return tp


def kv_heads_per_gpu(model: ModelSpec, tp: int) -> int:
    kv = model.num_key_value_heads
    return kv // tp if kv >= tp else 1


def vocab_per_gpu(model: ModelSpec, tp: int) -> int:
    padded = math.ceil(model.vocab_size / VOCAB_PADDING) * VOCAB_PADDING
    return math.ceil(padded / tp) if tp > 1 else model.vocab_size


def shard(model: ModelSpec, tp: int, flag: str = "tensor_parallel_size") -> ModelSpec:
    """The per-GPU `ModelSpec` of `model` at tensor-parallel size `tp` (the model itself at tp = 1)."""
    check_tp(tp, flag)
    if tp == 1:
        return model
    if tp_of(model) != 1:
        raise ParallelError(f"{flag}: model {model.name} is already sharded (tp {tp_of(model)})")
    H, KV, I = model.num_attention_heads, model.num_key_value_heads, model.intermediate_size
    if getattr(model, "num_experts", 0):
        raise ParallelError(f"{flag} {tp}: {model.name} is a Mixture-of-Experts model; sharding its experts (tensor "
                            f"or expert parallelism) is not modelled yet: use {flag} 1")
    if H % tp:
        raise ParallelError(f"{flag} {tp}: {model.name} has {H} attention heads, not divisible by {tp}")
    if KV >= tp and KV % tp:
        raise ParallelError(f"{flag} {tp}: {model.name} has {KV} KV heads, not divisible by {tp}")
    if KV < tp and tp % KV:
        raise ParallelError(f"{flag} {tp}: {model.name} has {KV} KV heads; {tp} is not a multiple of them, so they "
                            f"cannot be replicated evenly")
    if I % tp:
        raise ParallelError(f"{flag} {tp}: {model.name} has intermediate_size {I}, not divisible by {tp}")
    from simulator.model.sharded import ShardedModel

    base = {f: getattr(model, f) for f in ModelSpec.__dataclass_fields__}
    base.update(name=f"{model.name}-tp{tp}", num_attention_heads=H // tp, num_key_value_heads=kv_heads_per_gpu(model, tp),
                intermediate_size=I // tp, vocab_size=vocab_per_gpu(model, tp))
    return ShardedModel(**base, tp=tp, full_vocab_size=model.vocab_size, base_name=model.name)


def weight_bytes_per_gpu(model: ModelSpec, tp: int) -> int:
    """Weight bytes one GPU holds at tensor-parallel size `tp`."""
    return shard(model, tp).weight_bytes


def kv_bytes_per_token_per_gpu(model: ModelSpec, tp: int) -> int:
    """KV-cache bytes one GPU holds per token (all layers, K and V) at tensor-parallel size `tp`."""
    return shard(model, tp).kv_bytes_per_token()


def logits_vocab(model: ModelSpec) -> int:
    """Width of the logits a step ends with (the full vocabulary after the all-gather)."""
    return int(getattr(model, "full_vocab_size", 0) or model.vocab_size)


def require_collective(c: CollectiveSection | None, n: int) -> CollectiveSection:
    """The profile's collective section, or a ParallelError naming the missing field (no default is assumed)."""
    if c is None:
        raise ParallelError(f"tensor parallelism over {n} GPUs needs collective figures: the profile has no "
                            f"device.collective section (calibration/device_sections.py writes the published NVLink 4 "
                            f"figures into the shipped profiles)")
    return c


def collective_gpu_s(c: CollectiveSection | None, kind: str, nbytes: float, n: int) -> float:
    """Seconds of GPU time of one collective (`all_reduce` of an nbytes message, or `all_gather` of an nbytes
    output) over n GPUs, by the formulas in the module docstring; `c` None (a profile without
    `device.collective`) is refused."""
    if n <= 1:
        return 0.0
    c = require_collective(c, n)

    def at(d: dict, key: int) -> float:
        if key in d:
            return float(d[key])
        ks = sorted(d)  # nearest published n (linear between neighbours)
        lo = max((k for k in ks if k < key), default=ks[0])
        hi = min((k for k in ks if k > key), default=ks[-1])
        return float(d[lo]) if lo == hi else float(d[lo] + (d[hi] - d[lo]) * (key - lo) / (hi - lo))

    lat_n, bw_n = at(c.nccl_latency_us, n) * 1e-6, at(c.nccl_busbw_gbps, n) * 1e9
    if kind == "all_gather":
        return lat_n + (n - 1) / n * nbytes / bw_n
    if n in c.custom_world_sizes and nbytes <= c.custom_max_bytes:
        return at(c.custom_latency_us, n) * 1e-6 + nbytes / (at(c.custom_algbw_gbps, n) * 1e9)
    return lat_n + 2 * (n - 1) / n * nbytes / bw_n


def collective_measured(profile) -> bool:
    """Whether the profile's collective figures were measured (False for the published defaults)."""
    c = profile.device.collective
    return bool(c is not None and c.measured)


def tp_fields(model: ModelSpec, profile) -> dict:
    """The fields a JSON result adds for tensor parallelism: `tp`, and when tp > 1 `collective_measured`."""
    tp = tp_of(model)
    return {"tp": tp} if tp == 1 else {"tp": tp, "collective_measured": collective_measured(profile)}


def sglang_max_capture(tp: int) -> int:
    """SGLang's default `cuda_graph_max_bs` on 80-160 GB GPUs: 256 at TP < 4, 512 at TP >= 4 (ANCHORS.md)."""
    return 512 if tp >= 4 else 256


__all__ = ["shard", "ShardedModel",  # noqa: F822  (model/sharded.py, through __getattr__)
           "tp_of", "check_tp", "weight_bytes_per_gpu", "kv_bytes_per_token_per_gpu",
           "collective_gpu_s", "require_collective", "logits_vocab", "collective_measured", "tp_fields", "sglang_max_capture", "ParallelError", "TP_SIZES"]
