"""Implementations as recipes: the op list a decode step launches, per implementation, as functions of the model
(its family's differences: simulator/model/families.py), the step shape and the cache length.

- `reference` (fusion none / packed / compiled): launchsim's calibration decoder (calibration/reference_decoder.py),
  the op lists of simulator/model/workload.py unchanged for llama / qwen3 layers; other families' math (norm variant
  and count, biases, activation, soft-capping, embedding scale, sliding window) is added to `none` / `packed`; its
  `compiled` list is Inductor's fusion pass over the `none` list (simulator/model/inductor.py `compile_ops`, checked
  on the H200 for llama and qwen3: calibration/validation/inductor.md), for every family.
- `hf` (fusion none / compiled): transformers' own modeling code, SDPA attention, with `cache="static"` (StaticCache
  of `max_cache_len` slots: attention reads every slot under a mask) or `cache="dynamic"` (DynamicCache: the cache
  grows by a cat each step and attention reads ctx + 1 keys with enable_gqa). Source: transformers 5.17, torch 2.11
  (cu130), cuDNN SDPA on an H200; fitted on the measured traces of transformers' Qwen3-0.6B,
  calibration/measured/h200-round-c/hf_qwen3-0.6b_{static,dynamic}_b{1,8}.trace.json.gz (calibration/build_recipes.py
  prints the per-layer sequence and checks this recipe against it). `compiled` is Inductor's fusion pass over the
  eager list (simulator/model/inductor.py `compile_ops`, helper "inductor"'s module); there repeat_kv's copies are
  Triton kernels, priced by the profile's copy curve at the bytes they move (the whole cache read, every repeated
  slot written), not at eager's strided-copy rate (calibration/validation/inductor.md section 5, gap 1).
- `fused` (fusion fused): a serving engine's hand-fused custom ops (vLLM-style), as simulator/model/workload.py had it,
  plus the families' extra norms, soft-capping and embedding scale.

Per-layer kernels of the hf recipe (qwen3-0.6b, static cache, batch 1: 65 ops plus cuBLAS's split-K reduce of
down_proj, which the GEMM tables count = the 66 measured): input RMSNorm 8, q_proj, q-norm 8, k_proj, k-norm 8,
v_proj, RoPE 5 + 5, StaticCache update 5 (arange, add, add_ of the write position; index_copy_ of k and v), repeat_kv
2 (a copy of k and of v to every query head over all slots: SDPA gets a mask, so transformers does not pass
enable_gqa), SDPA's mask handling 3 (two scalar fills, a where over the [B, 1, 1, slots] mask), cuDNN attention 1 or 2
(the split-KV lean_reduction kernel appears while batch x kv heads given to SDPA <= 64: measured at 8, 16, 64
(split) and 128 (not), and only over more than 512 keys: CUDNN_SPLIT_MIN_KEYS), o_proj, residual add, RMSNorm 8, gate_proj, SiLU, up_proj, mul, down_proj, residual add.
Dynamic cache: the 5 cache-update, 2 repeat_kv and 3 mask kernels are replaced by 2 cats (58 measured). Preamble:
embedding, the static cache's causal mask (7 kernels over the slots; none for dynamic), rotary set-up 10. Tail: final
RMSNorm 8, lm_head (and its memset, not modelled). `positions="computed"` (the caller passes no cache_position, as
round f's dynamic steps): 2 kernels more in the preamble.

Timing pieces the profile has no table for, carried here with their measurements: repeat_kv's strided copy rate
(STRIDED_COPY_US), transformers' Python per host call (PYTHON_US_PER_CALL) and the cuDNN plan build of a DynamicCache
step (CUDNN_PLAN_MS); SDPA over repeated heads is priced from the GQA table at rep x the keys (attention_op).

Family pieces from transformers 5.17's source: qwen2's q/k/v bias (one cuBLASLt GEMM with a bias epilogue: bytes,
not kernels), phi3's packed projections and rotary pass-through cat, Gemma's 10-kernel norm, four norms a layer,
GELU-tanh, embedding scale, final soft-capping (3 kernels), gemma3's second rotary set-up. Checked since on round f's
traces (calibration/validation/impl_hf.md): qwen2's bias GEMMs (one addmm each),
phi3's packed projections and pass-through cats, Gemma's norms, GELU-tanh, embedding scale and soft-capping, the
static sliding-window mask (12 kernels: the causal mask's 6, then fill, sub, gt, and, le, and; instead of the causal
mask where every layer slides, besides it where some do) and a sliding layer's cache update (its add_ after the two
index_copy_). Round g's gemma-3-1b traces (batch 1 and 8, ctx 512 = its window; equal kernel by kernel, 2400 kernels a
step): gemma3's two rotary set-ups, six Gemma norms a layer, q/k/v projected before the q/k-norms, one embedding-scale
kernel, no repeat_kv copy with one kv head, a full sliding window's cache roll (roll k/v, index_put_ k/v), and no
cuDNN split-KV reduce over 512 keys (CUDNN_SPLIT_MIN_KEYS).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.model.kernels import LaunchPath as P
from simulator.model.kernels import ATTENTION_PART, SDPA_MASK, OpClass

IMPLS = ("reference", "hf", "fused", "vllm")
POSITIONS = ("given", "computed")  # hf: the caller passes cache_position / position_ids, or transformers derives them
FUSIONS_OF = {"reference": ("none", "packed", "compiled"), "hf": ("none", "compiled"), "fused": ("fused",),
              "vllm": ("fused",)}
CACHES = ("static", "dynamic")


@dataclass(frozen=True)
class Recipe:
    name: str
    fusions: tuple[str, ...]
    source: str  # the code and library versions the op list was taken from
    measured: str  # what checked it
    options: tuple[str, ...] = ()


RECIPES = {
    "reference": Recipe("reference", FUSIONS_OF["reference"],
                        "launchsim's calibration decoder (calibration/reference_decoder.py), torch 2.11",
                        "torch.profiler on an H200 (calibration/measured/h200-decode.json, h200-round-a)"),
    "hf": Recipe("hf", FUSIONS_OF["hf"], "transformers 5.17 modeling code, SDPA, torch 2.11 cu130, cuDNN attention",
                 "calibration/measured/h200-round-c/hf_qwen3-0.6b_{static,dynamic}_b{1,8}.trace.json.gz",
                 ("cache", "max_cache_len", "positions", "compile_dynamic")),
    "fused": Recipe("fused", FUSIONS_OF["fused"], "vLLM-style custom ops (fused add-RMSNorm, fused RoPE + cache "
                    "write, silu_and_mul, one attention kernel)", "kernel counts of vLLM's model runner (issue 7); "
                    "a decoder launching this list, on an H100 (calibration/validation/impl_fused.md, round ab)"),
    "vllm": Recipe("vllm", FUSIONS_OF["vllm"], "vLLM 0.34.0's default decode layer (V1, -O2: Inductor's Triton "
                   "add-RMSNorm, q/k-norm, RoPE and SiLU-and-mul, reshape_and_cache_flash, FlashAttention-3 with its "
                   "split-KV combine, cuBLAS GEMMs) as read from its source",
                   "NOT profiled: read from vLLM 0.34.0's source (calibration/validation/vllm_source_kernels.md); "
                   "its Triton kernels priced as round ab's measured ones are, FA3's forward by the profile's "
                   "(cuDNN) attention tables"),
}
# FlashAttention-3's split count under full CUDA graphs in vLLM 0.34 (its combine kernel then runs at every captured
# decode size; calibration/validation/vllm_source_kernels.md): the combine reads this many fp32 partial outputs a row
FA3_GRAPH_SPLITS = 32

# cuDNN SDPA's split-KV reduction kernel: launched while batch x kv heads (as given to SDPA) is at most this
# (measured on qwen3-0.6b: 8, 16, 64 split; 128 not; the threshold lies in [64, 128))
CUDNN_SPLIT_MAX = 64
# ... and only over more keys than one KV block holds: measured split at 513 keys (qwen3-0.6b DynamicCache at ctx
# 512, round c/f), 576 and 640 (StaticCache); not at 512 (gemma-3-1b's sliding layers over their 512-slot window,
# batch 1 and 8, round g, while its 640-slot full layers split). The bound lies in [512, 513).
CUDNN_SPLIT_MIN_KEYS = 512
# repeat_kv's copy is aten's generic strided elementwise kernel (elementwise_kernel<128, 4> over a 5-d expand), not a
# vectorised copy, and runs at an element rate, not at the copy bandwidth: round c's qwen3-0.6b traces measured
# 5.22 us (1.18 M elements, batch 1) and 23.72 us (9.44 M, batch 8), i.e. t = 2.57 us + elements / 0.446 per ps
# (two points, one model). The profile has no strided-copy table, so this H200 figure is carried here as the op's
# fixed GPU time (another profile keeps it). Round f's held-out llama3-8b b64 (168 M elements) implies ~375 us a copy
# from its step's CUPTI total; the line gives 379.
STRIDED_COPY_US = (2.57, 0.446e6)  # (floor us, elements per us)
# transformers' Python beyond what the profile's per-op launch costs hold (module calls, the cache's and attention
# interface's code), charged per host call (aten op or view) of the recipe: fitted on the two fit models' eager steps
# in round g's fast-host passes (calibration/measured/h200-round-g eager.json, eager2.json, eager3.json: each row
# timed in up to 8 shuffled passes with a canary right before and after each; a pass is fast when both are <= 7.6
# us), static cache, the median over batches 1-64 of (measured - predicted without it) / host calls: qwen3-0.6b 3.50, gemma-2-2b 3.04
# us; the mean (calibration/validate_impl.py `python_per_call_fit`). The same formula on round f's one timing process
# gave 7.1 and 12.9 (10.0, the figure before round g): its medians moved up to 2x between rows under one canary.
# Round g's held-out models give 3.3-4.3 us. Round c's profiled traces give 180-570 us a layer for the same Python in
# other processes (build_recipes.interpreter_excess): host state moves it by 2-3x.
PYTHON_US_PER_CALL = 3.27
# DynamicCache + cuDNN SDPA: a new key length every step, and cuDNN builds an execution plan for each new shape
# (once a step: the layers share it). Fitted on qwen3-0.6b: round f's dynamic rows with cuDNN SDPA (median 67.7 ms)
# less the same rows with it off (38.8 ms).
CUDNN_PLAN_MS = 28.9


def family_extras(m) -> list[str]:
    """The family features beyond the llama / qwen3 layer the reference decoder was measured with (its `compiled`
    level handles them through Inductor's pass; listed so that a preset is seen to have none)."""
    out = []
    if m.norm_kind != "rms":
        out.append("Gemma norms")
    if m.sandwich_norms:
        out.append("four norms a layer")
    if m.final_logit_softcap:
        out.append("logit soft-capping")
    if m.embed_scale_kernels:
        out.append("embedding scale")
    if m.sliding_window:
        out.append("sliding window")
    if m.qkv_bias or m.o_bias or m.mlp_bias:
        out.append("projection biases")
    if m.activation != "silu":
        out.append(f"activation {m.activation}")
    if m.rotary_dim:
        out.append("partial rotary")
    if m.rope_sets != 1:
        out.append("two rotary embeddings")
    return out


# -- family-aware pieces (b: workload._Builder) ------------------------------------------------------------------
def norm(b, name, rows, cols):
    """The family's RMSNorm: 8 kernels (w * x) or Gemma's 10 (x.float(), pow, mean, add eps, rsqrt, mul,
    weight.float(), 1 + w, mul, type_as)."""
    if b.m.norm_kind != "gemma":
        b.rmsnorm_eager(name, rows, cols)
        return
    E = rows * cols
    b.copy(f"{name}.to_fp32", E, 2, 4)
    b.ew(f"{name}.pow", E, 4, 4)
    b.row_mean(f"{name}.mean", rows, cols)
    b.ew(f"{name}.add_eps", rows, 4, 4)
    b.ew(f"{name}.rsqrt", rows, 4, 4)
    b.ew(f"{name}.mul", E, 4 + 4 / cols, 4)
    b.copy(f"{name}.weight_fp32", cols, 2, 4)
    b.ew(f"{name}.one_plus_weight", cols, 4, 4)
    b.ew(f"{name}.mul_weight", E, 4 + 4 / rows, 4)
    b.copy(f"{name}.to_bf16", E, 4, 2)


def act(b, name, elems):
    e = b.e
    b.ew(f"{name}.{b.m.activation}", elems, e, e)


def rope(b, name, heads):
    """transformers' apply_rotary_pos_emb on `heads` heads of T tokens (5 kernels; phi3 adds the cat with the
    pass-through part)."""
    m, T = b.m, b.s.tokens
    b.rope_eager(name, T * heads * m.rope_dim)
    if m.rope_pass_cat or m.rotary_dim:
        b.copy(f"{name}.cat_pass", T * heads * m.head_dim, b.e, b.e)


def embedding(b, path=P.EAGER_EMBEDDING, scale_path=P.EAGER_ELEMENTWISE):
    m, T, e = b.m, b.s.tokens, b.e
    b.add("embedding", OpClass.EMBEDDING, path, 0.0, T * (m.hidden_size * e + 8))
    if m.embed_scale_kernels == 2:
        b.copy("embed_scale.cast", 1, 4, 2, path=scale_path)
    if m.embed_scale_kernels:
        b.ew("embed_scale.mul", T * m.hidden_size, e, e, path=scale_path)


def softcap(b, rows, path=P.EAGER_ELEMENTWISE):
    """Gemma2's final logit soft-capping: logits / cap, tanh, * cap (3 kernels over the logits)."""
    if not b.m.final_logit_softcap:
        return
    from simulator.model.parallel import logits_vocab

    n = rows * logits_vocab(b.m)
    for k in ("div", "tanh", "mul"):
        b.ew(f"logit_softcap.{k}", n, b.e, b.e, path=path)


def keys_of(m, layer: int, keys: int) -> int:
    """Keys a layer's attention reads: `keys`, or the sliding window where the layer slides."""
    return min(keys, m.sliding_window) if m.sliding_at(layer) else keys


def attention_op(b, name, path, keys: int, kv_heads: int, masked: bool, table_kv_heads: int | None = None):
    """One attention kernel over `keys` keys per decode row (`kv_heads` heads of K/V read). `table_kv_heads`: the
    kv heads its table entry is looked up under, at keys x (kv_heads / table_kv_heads) keys: transformers'
    repeat_kv gives SDPA every query head, so cuDNN reads rep x the K/V bytes of the GQA kernel, which the (H, KV)
    table has measured at rep x the context (same heads, same bytes). Checked: qwen3-0.6b b1 576 slots (rep 2)
    8.1 us measured, table 7.9; llama3-8b b8 640 slots (rep 4) 27.5 us measured (round f)."""
    m, s, e = b.m, b.s, b.e
    hd, H = m.head_dim, m.num_attention_heads
    kv_len_pref = s.ctx + s.prefill_len
    flops = 4.0 * H * hd * (s.decode_seqs * keys + s.prefill_seqs * s.prefill_len * (s.ctx + s.prefill_len / 2))
    kv_read = 2 * kv_heads * hd * e * (s.decode_seqs * keys + s.prefill_seqs * kv_len_pref)
    qo = 2 * s.attn_tokens * H * hd * e
    mask = s.seqs * keys * e if masked else 0
    rep = kv_heads // table_kv_heads if table_kv_heads else 1
    b.add(name, OpClass.ATTENTION, path, flops, kv_read + qo + mask,
          batch=s.seqs, q_len=max(1, s.attn_tokens // max(1, s.seqs)), ctx=keys * rep,
          heads=H, kv_heads=kv_heads if table_kv_heads is None else table_kv_heads, head_dim=hd,
          **({"sdpa_kv_heads": kv_heads, "sdpa_keys": keys} if table_kv_heads not in (None, kv_heads) else {}),
          **({SDPA_MASK: 1} if masked else {}))


def split_kv_reduce(b, heads_sdpa, keys: int) -> None:
    """cuDNN SDPA's split-KV reduce kernel, launched while batch x the heads SDPA is given <= CUDNN_SPLIT_MAX over more
    than CUDNN_SPLIT_MIN_KEYS keys. Its launch and GPU time are inside the attention op's measured figures (the
    profile's SDPA host path and attention table were taken at batch 1, where cuDNN splits too): a kernel in the
    count, no cost of its own; eager with the attention call in a piecewise graph (`ATTENTION_PART`, Op.in_attention).
    Interned as every op (`b.add`), so a traced build (engine/batchbuild.py) repeats it as the real one does."""
    s, m, e = b.s, b.m, b.e
    if s.seqs * heads_sdpa <= CUDNN_SPLIT_MAX and keys > CUDNN_SPLIT_MIN_KEYS:
        n = s.attn_tokens * m.num_attention_heads * m.head_dim
        b.add("attention.split_kv_reduce", OpClass.REDUCTION, P.EAGER_REDUCTION, n, n * (8 + e), fixed_gpu_s=0.0,
              fixed_host_s=0.0, **{ATTENTION_PART: 1})


def verify_part(m, s) -> tuple[tuple[str, int], ...]:
    """Shape dims marking an op as a part of transformers' verify-attention block (q_len > 1; none at q_len 1):
    the block's table key, which costs.py checks before pricing the part (`CostModel.hf_verify_covered`)."""
    q = max(1, s.attn_tokens // max(1, s.seqs))  # as attention_op and the workload's attention count it
    if s.q_len <= 1 or q <= 1:
        return ()
    return tuple(sorted({"verify_part": 1, "heads": m.num_attention_heads, "kv_heads": m.num_key_value_heads,
                         "head_dim": m.head_dim, "q_len": q}.items()))


def verify_block_op(b, keys: int) -> None:
    """transformers' SDPA attention of a verify step (q_len = 1 + k) over all `keys` StaticCache slots under a
    boolean mask: priced by the profile's `hf_static` q_len table (calibration/measured/h200-round-g inplace.json,
    transformers' own sdpa_attention_forward timed in place: its repeat_kv copies, SDPA's mask kernels and the
    attention kernel together, so those parts cost nothing more there), or, for a shape with no such table, by the
    roofline of the masked attention over repeated heads with the parts priced on their own (as before)."""
    m, s, e = b.m, b.s, b.e
    hd, H, KV = m.head_dim, m.num_attention_heads, m.num_key_value_heads
    sdpa_kv = H if H > KV else KV  # the heads SDPA reads after repeat_kv
    # flops and bytes exactly as attention_op gives this step (its roofline is the fallback, unchanged)
    flops = 4.0 * H * hd * s.decode_seqs * keys
    nbytes = 2 * sdpa_kv * hd * e * s.decode_seqs * keys + 2 * s.attn_tokens * H * hd * e + s.seqs * keys * e
    b.add("attention", OpClass.ATTENTION, P.EAGER_ATTENTION, flops, nbytes, batch=s.seqs,
          q_len=max(1, s.attn_tokens // max(1, s.seqs)), ctx=keys, heads=H, kv_heads=KV, head_dim=hd, verify=2)


# -- the hf recipe: simulator/model/recipes_hf.py (hf_preamble, hf_layer, hf_tail), imported by the hf build
# (workload._build_hf): a `reference` or `fused` step never compiles it


__all__ = [
    "CACHES",
    "FUSIONS_OF",
    "IMPLS",
    "FA3_GRAPH_SPLITS",
    "RECIPES",
    "Recipe",
    "act",
    "attention_op",
    "embedding",
    "family_extras",
    "keys_of",
    "norm",
    "rope",
    "softcap",
]
