"""Workload builders: a model + a step shape + a fusion level -> an ordered list of host ops.

Fusion levels (names are part of the interface):
- `none`: Hugging Face transformers-style eager decoder (RMSNorm as 8 kernels, separate projections,
  RoPE via rotate_half, q/k-norm where the model has it, static KV-cache writes, SDPA with GQA).
- `packed`: as `none` but QKV is one GEMM and gate/up is one GEMM.
- `compiled`: what torch.compile (Inductor) leaves of the `none` list: simulator/model/inductor.py's fusion pass
  (GEMMs and attention extern, pointwise chains and reductions fused with their producers/consumers), checked
  kernel by kernel against Inductor's output on an H200 with torch 2.11 (calibration/validation/inductor.md:
  round a's 28-layer qwen3-0.6b steps, round f's reference and transformers steps, dynamic True and False).
- `fused`: a serving engine's hand-fused custom ops (fused add-RMSNorm, fused RoPE + cache write,
  silu_and_mul, one attention kernel, packed QKV and gate/up).
The per-layer kernel lists below are the model; calibration/reference_decoder.py implements the
same lists in PyTorch so that the profiler can check the counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from simulator.common import vocab as V
from simulator.common.errors import UserError
from simulator.common.memo import memo
from simulator.model import recipes as R
from simulator.model.dtype import FP8_GEMMS, quant_ops
from simulator.model.kernels import LaunchPath as P
from simulator.model.kernels import LORA_TARGETS, SDPA_CALL, TRITON_LIKE, Op, OpClass, Step, Traced
from simulator.model.models import ModelSpec
from simulator.model.parallel import logits_vocab, tp_of

FUSION_LEVELS = V.values(V.Fusion)


class WorkloadError(UserError):
    """A step shape the model cannot run (zero sizes, context beyond the model's limit)."""


@dataclass(frozen=True)
class StepShape:
    """Who is in the step: `decode_seqs` sequences each adding one token at context `ctx`, plus
    optionally `prefill_seqs` sequences each adding `prefill_len` tokens (a mixed batch), plus `padding`
    dummy rows up to a captured graph's size (`routing.padded_shape`). Padding rows run every token-wise
    kernel (GEMMs, norms, elementwise, KV write, lm_head) but attend to nothing: vLLM gives a padded slot
    seq_len 0 and an empty query (`seq_lens[num_reqs:].fill(0)`, `query_start_loc` padded flat in
    gpu_model_runner._prepare_inputs), so the attention kernel reads the real rows' KV only.
    `q_len` > 1: a speculative verify step, each decode sequence runs 1 + k query tokens (its last token and k
    draft tokens, causal among themselves; simulator/model/spec.py) and takes logits for each of them."""

    decode_seqs: int
    ctx: int
    prefill_seqs: int = 0
    prefill_len: int = 0
    padding: int = 0
    q_len: int = 1

    def __hash__(self) -> int:
        """The hash the dataclass would make (of the fields' tuple), kept in the instance after the first call: a
        shape keys several memos on its way through the step-cost path (stepcost.py, batched.py), each lookup a
        hash. `routing.with_padding`, which copies a shape's __dict__, drops it."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = self.__dict__["_hash"] = hash((self.decode_seqs, self.ctx, self.prefill_seqs, self.prefill_len,
                                               self.padding, self.q_len))
        return h

    @property
    def tokens(self) -> int:
        """Rows the token-wise kernels run: real tokens + padding rows."""
        return self.decode_seqs * self.q_len + self.prefill_seqs * self.prefill_len + self.padding

    @property
    def attn_tokens(self) -> int:
        """Query rows the attention kernel runs (padding rows excluded)."""
        return self.decode_seqs * self.q_len + self.prefill_seqs * self.prefill_len

    @property
    def seqs(self) -> int:
        """Real sequences (padding rows excluded)."""
        return self.decode_seqs + self.prefill_seqs

    @property
    def is_pure_decode(self) -> bool:
        return self.prefill_seqs == 0


def decode(batch: int, ctx: int) -> StepShape:
    return StepShape(decode_seqs=batch, ctx=ctx)


_INTERN = memo("model.workload._INTERN", """Ops the builders made, by (position in the step, fields): a step of
another shape whose op at that position has the same fields gets the same (immutable) Op object, so steps over the
batch axis share their unchanged ops (a GEMM of the same rows, say) and the costing memos find them by identity.
Values are exactly those of a fresh Op; the position keeps two equal ops of one step distinct objects.""", 200_000)


TRACING = [False]  # set while engine/batchbuild.py traces a build: `_Builder.add` keeps symbolic sizes


def _float(x):
    return x.as_float() if isinstance(x, Traced) else float(x)


_LORA_TARGETS = frozenset(LORA_TARGETS)  # kernels.py: the projections an adapter wraps
LORA_IMPLS = ("reference", "hf")  # the implementations whose adapter is modelled (PEFT's forward: `lora_delta`)


class _Builder:
    def __init__(self, m: ModelSpec, shape: StepShape, lora_rank: int = 0):
        self.m, self.s, self.ops = m, shape, []
        self.e = m.dtype_bytes
        self.tp = tp_of(m)  # tensor parallelism: `m` is one GPU's shard (simulator/model/parallel.py)
        self.quant_fusion: str | None = None
        self.lora = lora_rank

    def add(self, name, cls, path, flops=0.0, nbytes=0.0, *, fixed_gpu_s=None, fixed_host_s=None, **shape):
        ops = self.ops
        if TRACING[0]:  # a traced build (engine/batchbuild.py): symbolic sizes, nothing interned
            ops.append(Op(name, cls, path, _float(flops), _float(nbytes), tuple(sorted(shape.items())), fixed_gpu_s,
                          fixed_host_s))
            return
        key = (len(ops), name, cls, path, float(flops), float(nbytes), tuple(sorted(shape.items())), fixed_gpu_s,
               fixed_host_s)
        op = _INTERN.get(key)
        if op is None:
            op = _INTERN.put(key, Op(name, cls, path, key[4], key[5], key[6], fixed_gpu_s, fixed_host_s))
        ops.append(op)

    def gemm(self, name, m, n, k, path=P.EAGER_GEMM, bias=False):
        """A GEMM (m x k) @ (k x n); `bias`: a bias vector added in the GEMM's epilogue (cuBLASLt addmm: one
        kernel, n more bytes read and m * n more flops)."""
        e = self.e
        bx = {"bias": 1} if bias else {}
        bf, bb = (m * n, n * e) if bias else (0, 0)
        if self.m.weight_dtype == "fp8" and name in FP8_GEMMS:  # simulator/model/dtype.py: 1-byte A and B
            self.add(name, OpClass.GEMM, path, 2.0 * m * n * k + bf, m * k + n * k + e * m * n + bb, m=m, n=n, k=k,
                     fp8=1, **bx)
        else:
            self.add(name, OpClass.GEMM, path, 2.0 * m * n * k + bf, e * (m * k + n * k + m * n) + bb, m=m, n=n, k=k,
                     **bx)
        if self.lora and name in _LORA_TARGETS:
            self.lora_delta(name, m, n, k)

    def lora_delta(self, name, m, n, k):
        """PEFT's LoRA forward after a wrapped projection, `result + lora_B(lora_A(x)) * scaling` (peft/tuners/
        lora/layer.py Linear.forward, dropout 0: nn.Identity): the shrink GEMM (m x k) @ (k x r), the expand GEMM
        (m x r) @ (r x n), the scaling multiply and the add, 4 kernels in bf16 (an fp8 model's adapter too). Names:
        `lora_A.<proj>`, `lora_B.<proj>`, `lora_scale.<proj>`, `<proj>.lora_add` (Inductor's name table reads the
        data flow from them: model/inductor.py)."""
        r, e = self.lora, 2
        self.add(f"lora_A.{name}", OpClass.GEMM, P.EAGER_GEMM, 2.0 * m * r * k, e * (m * k + r * k + m * r), m=m, n=r,
                 k=k)
        self.add(f"lora_B.{name}", OpClass.GEMM, P.EAGER_GEMM, 2.0 * m * n * r, e * (m * r + n * r + m * n), m=m, n=n,
                 k=r)
        self.ew(f"lora_scale.{name}", m * n, e, e)
        self.ew(f"{name}.lora_add", m * n, 2 * e, e)

    def quant(self, site, rows, k, fusion):
        # fp8 only (simulator/model/dtype.py); `quant_fusion`: the level whose quant kernels the step launches (the
        # reference `compiled` step is built as `none` and then compiled: its quant kernels are Inductor's)
        quant_ops(self, site, rows, k, self.quant_fusion or fusion)

    def ew(self, name, elems, in_b, out_b, path=P.EAGER_ELEMENTWISE, cls=OpClass.ELEMENTWISE, **shape):
        """An elementwise-like kernel touching `elems` elements, `in_b` bytes read and `out_b` written each."""
        self.add(name, cls, path, elems, elems * (in_b + out_b), **shape)

    def red(self, name, elems, in_b, out_b, path=P.EAGER_REDUCTION, **shape):
        self.ew(name, elems, in_b, out_b, path, OpClass.REDUCTION, **shape)

    def row_mean(self, name, rows, cols):
        """aten's `x.mean(-1, keepdim=True)` over fp32 x[rows, cols] (a norm's mean): its shape carries rows and
        the row length, which price it (costs.row_mean_us: aten picks its launch by both, not by bytes)."""
        self.red(name, rows * cols, 4, 4 / cols, rows=rows, cols=cols)

    def copy(self, name, elems, in_b, out_b, path=P.EAGER_COPY, **shape):
        self.ew(name, elems, in_b, out_b, path, OpClass.COPY, **shape)

    def all_reduce(self, name, rows):
        """Tensor parallelism: all-reduce `rows` x hidden activations across the tp GPUs (nothing at tp = 1)."""
        if self.tp > 1:
            self.add(name, OpClass.COLLECTIVE, P.COLLECTIVE, 0.0, rows * self.m.hidden_size * self.e, ranks=self.tp)

    def all_gather_logits(self, rows):
        """Tensor parallelism: gather the vocab-sharded logits of `rows` sequences (nothing at tp = 1)."""
        if self.tp > 1:
            self.add("lm_head.all_gather", OpClass.COLLECTIVE, P.COLLECTIVE, 0.0,
                     rows * logits_vocab(self.m) * self.e, ranks=self.tp, gather=1)

    def view(self, name, n=1):
        for _ in range(n):
            self.add(name, OpClass.VIEW, P.EAGER_VIEW)

    # -- composite pieces -------------------------------------------------------------------------
    def rmsnorm_eager(self, name, rows, cols):
        """HF RMSNorm: upcast, pow, mean, add eps, rsqrt, mul, downcast, mul by weight (8 kernels)."""
        E = rows * cols
        self.copy(f"{name}.to_fp32", E, 2, 4)
        self.ew(f"{name}.pow", E, 4, 4)
        self.row_mean(f"{name}.mean", rows, cols)
        self.ew(f"{name}.add_eps", rows, 4, 4)
        self.ew(f"{name}.rsqrt", rows, 4, 4)
        self.ew(f"{name}.mul", E, 4 + 4 / cols, 4)
        self.copy(f"{name}.to_bf16", E, 4, 2)
        self.ew(f"{name}.mul_weight", E, 2, 2)

    def rope_eager(self, name, elems):
        """q*cos + rotate_half(q)*sin with rotate_half = cat(-x2, x1): 5 kernels, 4 views."""
        e = self.e
        self.view(f"{name}.slice", 2)
        self.ew(f"{name}.mul_cos", elems, 2 * e, e)
        self.ew(f"{name}.neg", elems / 2, e, e)
        self.copy(f"{name}.cat", elems, e, e)
        self.ew(f"{name}.mul_sin", elems, 2 * e, e)
        self.ew(f"{name}.add", elems, 2 * e, e)

    def attention(self, path, layer=0, sdpa=False):
        m, s, e = self.m, self.s, self.e
        hd, H, KV = m.head_dim, m.num_attention_heads, m.num_key_value_heads
        # decode rows: one query each over ctx past keys + its own (just written) key (a sliding layer: at most
        # the window); verify rows (q_len > 1): query i of a sequence over ctx + i + 1 keys (causal among the 1 + k
        # new tokens); prefill rows: causal over ctx + own chunk.
        q = s.q_len
        keys = min(s.ctx + q, m.sliding_window) if m.sliding_at(layer) else s.ctx + q
        kv_len_pref = s.ctx + s.prefill_len
        dec_pairs = q * s.ctx + q * (q + 1) / 2  # query-key pairs per decode sequence (= ctx + 1 at q_len 1)
        flops = 4.0 * H * hd * (s.decode_seqs * dec_pairs + s.prefill_seqs * s.prefill_len * (s.ctx + s.prefill_len / 2))
        kv_read = 2 * KV * hd * e * (s.decode_seqs * keys + s.prefill_seqs * kv_len_pref)
        qo = 2 * s.attn_tokens * H * hd * e  # padding rows attend to nothing (StepShape)
        extra = {"verify": 1} if q > 1 else {}  # costs.py: verify attention needs the profile's q_len tables
        self.add(
            "attention", OpClass.ATTENTION, path, flops, kv_read + qo,
            batch=s.seqs, q_len=max(1, s.attn_tokens // max(1, s.seqs)), ctx=keys,
            heads=H, kv_heads=KV, head_dim=hd, **extra,
        )
        if sdpa and q == 1 and not s.prefill_seqs:
            # the reference decoder's SDPA (enable_gqa) runs cuDNN, which adds its split-KV reduce under the hf
            # recipe's rule (seen on this code's own form too: calibration/measured/h200-traces/splitkv_probe.json,
            # enable_gqa at 576-4096 keys, split while batch x kv heads <= 64; the independent decoder at 513 keys,
            # b1 split, b64 not, round h/i)
            R.split_kv_reduce(self, KV, keys)


def _layer_eager(b: _Builder, packed: bool, layer: int = 0) -> None:
    """The reference decoder's layer (56 kernels for qwen3-0.6b), with the family's math (simulator/model/recipes.py:
    Gemma norms, four norms a layer, biases, activation, partial rotary); llama / qwen3 layers are unchanged."""
    m, T, e = b.m, b.s.tokens, b.e
    H, q, kv, I = m.hidden_size, m.q_dim, m.kv_dim, m.intermediate_size
    hd = m.head_dim
    lvl = "packed" if packed else "none"
    R.norm(b, "input_norm", T, H)
    b.quant("norm", T, H, lvl)
    if packed:
        b.gemm("qkv_proj", T, q + 2 * kv, H, bias=m.qkv_bias)
        b.view("qkv.split", 3)
    else:
        b.gemm("q_proj", T, q, H, bias=m.qkv_bias)
        b.gemm("k_proj", T, kv, H, bias=m.qkv_bias)
        b.gemm("v_proj", T, kv, H, bias=m.qkv_bias)
    b.view("qkv.view_transpose", 6)
    if m.qk_norm:
        R.norm(b, "q_norm", T * m.num_attention_heads, hd)
        R.norm(b, "k_norm", T * m.num_key_value_heads, hd)
    b.view("rope.unsqueeze", 2)
    if m.rotary_dim:
        R.rope(b, "rope_q", m.num_attention_heads)
        R.rope(b, "rope_k", m.num_key_value_heads)
    else:
        b.rope_eager("rope_q", T * q)
        b.rope_eager("rope_k", T * kv)
    b.copy("cache_write_k", T * kv, e, e)
    b.copy("cache_write_v", T * kv, e, e)
    b.view("cache.slice", 2)
    b.attention(P.EAGER_ATTENTION, layer, sdpa=True)
    b.view("attn.transpose", 1)
    if b.s.attn_tokens == b.s.seqs:  # one query per sequence: the transposed output is already contiguous
        b.view("attn.contiguous", 1)
    else:
        b.copy("attn.contiguous", T * q, e, e)
    b.view("attn.reshape", 1)
    b.quant("attn", T, q, lvl)
    b.gemm("o_proj", T, H, q, bias=m.o_bias)
    b.all_reduce("o_proj.all_reduce", T)
    if m.sandwich_norms:
        R.norm(b, "post_attn_norm", T, H)
    b.ew("residual_add", T * H, 2 * e, e)
    R.norm(b, "post_norm", T, H)
    if m.is_moe:  # simulator/model/moe.py: transformers' sparse block
        from simulator.model.moe import block_hf  # only a MoE model's build loads moe.py

        block_hf(b)
        b.ew("residual_add", T * H, 2 * e, e)
        return
    b.quant("norm", T, H, lvl)
    if packed:
        b.gemm("gate_up_proj", T, 2 * I, H, bias=m.mlp_bias)
        b.view("gate_up.chunk", 2)
    else:
        b.gemm("gate_proj", T, I, H, bias=m.mlp_bias)
        b.gemm("up_proj", T, I, H, bias=m.mlp_bias)
    b.ew("silu" if m.activation == "silu" else m.activation, T * I, e, e)
    b.ew("mul", T * I, 2 * e, e)
    b.quant("silu", T, I, lvl)
    b.gemm("down_proj", T, H, I, bias=m.mlp_bias)
    b.all_reduce("down_proj.all_reduce", T)
    if m.sandwich_norms:
        R.norm(b, "post_mlp_norm", T, H)
    b.ew("residual_add", T * H, 2 * e, e)


def _layer_fused(b: _Builder, layer: int = 0, vllm: bool = False) -> None:
    """vLLM-style custom ops: 9 kernels per layer (q/k-norm folds into the RoPE kernel); Gemma's post-sublayer
    norms are two more RMSNorm kernels (vLLM's Gemma2: the post norms take no residual), biases fold into the
    GEMMs, the activation is the family's *_and_mul.
    `vllm`: vLLM 0.34.0's default decode layer as read from its source (recipes.RECIPES['vllm']; not profiled): 11
    kernels (Llama), 12 with Qwen3's q/k-norm: the q/k-norm and q/k RoPE are Inductor's combo kernels, and the cache
    write (reshape_and_cache_flash, one kernel for K and V) and FA3's split-KV combine are kernels of their own,
    launched by the attention ops vLLM's piecewise graphs leave eager (SDPA_CALL: eager with the attention call)."""
    m, T, e = b.m, b.s.tokens, b.e
    H, q, kv, I = m.hidden_size, m.q_dim, m.kv_dim, m.intermediate_size
    X = P.CUSTOM_OP
    TL = {TRITON_LIKE: 1}  # Triton-class kernels: priced by the profile's Triton curves (costs.CostModel.curve_key)
    b.red("fused_add_rmsnorm", T * H, 3 * e, 2 * e, path=X, **TL)
    b.gemm("qkv_proj", T, q + 2 * kv, H, bias=m.qkv_bias)
    if vllm:
        if m.qk_norm:
            b.red("qk_norm", T * (q + kv), e, e, path=X, **TL)
        b.ew("rotary_embedding", T * (q + kv), e, e, path=X, **TL)
        b.add("reshape_and_cache_flash", OpClass.COPY, X, 0.0, 2 * T * 2 * kv * e, **{SDPA_CALL: 1})
    else:
        b.red("fused_rope_cache_write", T * (q + 2 * kv), e, e, path=X, **TL)
    b.attention(P.EAGER_ATTENTION, layer)
    if vllm:  # FA3's split-KV combine over S fp32 partial outputs (and their log-sum-exps) a query row
        rows, S = b.s.attn_tokens * m.num_attention_heads, R.FA3_GRAPH_SPLITS
        b.add("attention.fa3_combine", OpClass.REDUCTION, X, rows * m.head_dim * S,
              rows * (S * (m.head_dim + 1) * 4 + m.head_dim * e), **{SDPA_CALL: 1})
    b.quant("attn", T, q, "fused")  # fp8: RMSNorm+quant and SiLU-mul+quant are fused; this one is not
    b.gemm("o_proj", T, H, q, bias=m.o_bias)
    b.all_reduce("o_proj.all_reduce", T)
    if m.sandwich_norms:
        b.red("rmsnorm", T * H, e, e, path=X, **TL)
    b.red("fused_add_rmsnorm", T * H, 3 * e, 2 * e, path=X, **TL)
    if m.is_moe:  # simulator/model/moe.py: vLLM's fused_moe
        from simulator.model.moe import block_fused  # only a MoE model's build loads moe.py

        block_fused(b)
        return
    b.gemm("gate_up_proj", T, 2 * I, H, bias=m.mlp_bias)
    b.ew("silu_and_mul" if m.activation == "silu" else "gelu_and_mul", T * I, 2 * e, e, path=X, **TL)
    b.gemm("down_proj", T, H, I, bias=m.mlp_bias)
    b.all_reduce("down_proj.all_reduce", T)
    if m.sandwich_norms:
        b.red("rmsnorm", T * H, e, e, path=X, **TL)


def impl_of(fusion: str, impl: str | None) -> str:
    """The implementation a (fusion, impl) pair names: impl None is the one the fusion level implies (fused ->
    fused, else reference), so build_step(model, shape, fusion) keeps its meaning. Refuses a pair the recipe does
    not have, one line."""
    if fusion not in FUSION_LEVELS:
        raise WorkloadError(f"unknown fusion level '{fusion}': use one of {', '.join(FUSION_LEVELS)}")
    if impl is None:
        return "fused" if fusion == "fused" else "reference"
    if impl not in R.IMPLS:
        raise WorkloadError(f"unknown implementation '{impl}': use one of {', '.join(R.IMPLS)}")
    if fusion not in R.FUSIONS_OF[impl]:
        raise WorkloadError(f"fusion '{fusion}' does not exist for implementation '{impl}': its fusion levels are "
                            f"{', '.join(R.FUSIONS_OF[impl])}")
    return impl


def fusion_levels(model: ModelSpec, impl: str | None, lora_rank: int = 0) -> tuple[str, ...]:
    """The fusion levels `build_step` builds for `model` under implementation `impl` (None: every level, each its
    implied recipe): the recipe's, less `compiled` for an MoE model (refused: not measured) and `fused` with a LoRA
    adapter (vLLM's punica kernels: not modelled)."""
    levels = FUSION_LEVELS if impl is None else R.FUSIONS_OF[impl]
    return tuple(f for f in levels if not (model.is_moe and f == "compiled")
                 and not (lora_rank and impl_of(f, impl) not in LORA_IMPLS))


def _check_options(impl: str, cache: str, max_cache_len: int | None, shape: StepShape) -> int:
    if cache not in R.CACHES:
        raise WorkloadError(f"unknown cache '{cache}': use one of {', '.join(R.CACHES)}")
    if impl != "hf" and (cache != "static" or max_cache_len is not None):
        raise WorkloadError(f"cache / max_cache_len are options of implementation 'hf', not '{impl}'")
    need = shape.ctx + max(1, shape.prefill_len, shape.q_len)
    if max_cache_len is None:
        return need
    if isinstance(max_cache_len, bool) or not isinstance(max_cache_len, int) or max_cache_len <= 0:
        raise WorkloadError(f"max_cache_len must be a positive integer, got {max_cache_len!r}")
    if cache == "dynamic":
        raise WorkloadError("max_cache_len applies to the static cache only (a dynamic cache holds ctx + 1 keys)")
    if max_cache_len < need:
        raise WorkloadError(f"max_cache_len {max_cache_len} is smaller than the step's context ({need})")
    return max_cache_len


def build_step(model: ModelSpec, shape: StepShape, fusion: str, impl: str | None = None, *, cache: str = "static",
               max_cache_len: int | None = None, positions: str = "given", compile_dynamic: bool = False,
               compile_inputs: str | None = None, lora_rank: int = 0) -> Step:
    """The ordered host ops of one forward step of `model` over `shape` at fusion level `fusion` of implementation
    `impl` (simulator/model/recipes.py: reference: none / packed / compiled; hf: none / compiled; fused: fused;
    None: fused for `fused`, else reference). hf's options: `cache` "static" (StaticCache of `max_cache_len` slots,
    default the step's context + 1) or "dynamic"; `positions` "given" (the caller passes cache_position and
    position_ids, as generate() does) or "computed" (transformers derives them: 2 kernels more); `compile_dynamic`
    for its `compiled` level. `compile_inputs` (with `compile_dynamic`): how the compiled code receives the weights and
    the KV cache, "arguments" (dynamic=True's symbolic sizes reach them) or "module" (parameters and buffers of the
    compiled module, which Dynamo specialises); None: the recipe's own (reference arguments, hf module).
    `lora_rank` > 0: a LoRA adapter of that rank on every projection of each layer (`_Builder.lora_delta`, PEFT's
    forward), implementations reference and hf, dense models, one GPU."""
    impl = impl_of(fusion, impl)
    if lora_rank:
        _check_lora(model, impl, lora_rank)
    if compile_inputs is not None and compile_inputs not in V.values(V.CompileInputs):
        raise WorkloadError(f"unknown compile_inputs '{compile_inputs}': use one of "
                            f"{', '.join(V.values(V.CompileInputs))}")
    if positions not in R.POSITIONS:
        raise WorkloadError(f"unknown positions '{positions}': use one of {', '.join(R.POSITIONS)}")
    if positions != "given" and impl != "hf":
        raise WorkloadError(f"positions is an option of implementation 'hf', not '{impl}'")
    if shape.decode_seqs < 0 or shape.prefill_seqs < 0 or shape.padding < 0 or shape.seqs <= 0:
        raise WorkloadError(f"batch must be a positive integer, got {shape.seqs}")
    if shape.ctx <= 0 and shape.prefill_seqs == 0:
        raise WorkloadError(f"context must be a positive integer, got {shape.ctx}")
    if shape.prefill_seqs and shape.prefill_len <= 0:
        raise WorkloadError(f"prefill_len must be positive, got {shape.prefill_len}")
    if isinstance(shape.q_len, bool) or not isinstance(shape.q_len, int) or shape.q_len < 1:
        raise WorkloadError(f"q_len (1 + spec_tokens) must be a positive integer, got {shape.q_len!r}")
    if shape.q_len > 1 and shape.prefill_seqs:
        raise WorkloadError("a speculative verify step (q_len > 1) mixed with prefill rows is not modelled")
    new = max(1, shape.prefill_len, shape.q_len)
    total_ctx = shape.ctx + new
    if total_ctx > model.max_position_embeddings:
        raise WorkloadError(
            f"context {shape.ctx} (+{new} new) exceeds {model.name}'s "
            f"max_position_embeddings {model.max_position_embeddings}"
        )
    slots = _check_options(impl, cache, max_cache_len, shape)
    if model.is_moe and fusion == "compiled":
        raise WorkloadError(f"fusion 'compiled' is not modelled for the MoE model {model.name} (torch.compile of "
                            "an MoE layer was not measured): use none, packed or fused")
    if impl == "hf":
        return _build_hf(model, shape, fusion, cache, slots, compile_dynamic, positions, compile_inputs, lora_rank)
    b = _Builder(model, shape, lora_rank)
    T, H = shape.tokens, model.hidden_size
    # reference `compiled`: the `none` list of the same step, then Inductor's fusion pass (simulator/model/inductor.py
    # compile_ops, checked against Inductor's kernels on the H200: calibration/validation/inductor.md); its fp8
    # activation-quant kernels are the compiled ones (dtype.py)
    eager = fusion in V.EAGER_FUSIONS or fusion == "compiled"
    if fusion == "compiled":
        b.quant_fusion = "compiled"
    R.embedding(b, scale_path=P.CUSTOM_OP if fusion == "fused" else P.EAGER_ELEMENTWISE)
    b.all_reduce("embedding.all_reduce", T)
    if eager:
        for _ in range(model.rope_sets):
            _rotary_preamble_eager(b)

    def layer(i):
        if eager:
            _layer_eager(b, packed=(fusion == "packed"), layer=i)
        else:
            _layer_fused(b, layer=i, vllm=(impl == "vllm"))

    _layers(b, model, shape, layer, fresh_first=False)
    # logits for each sequence's last token (each of a verify sequence's q_len tokens) and each padding row
    last = shape.decode_seqs * shape.q_len + shape.prefill_seqs + shape.padding
    if eager:
        R.norm(b, "final_norm", T, H)
        b.gemm("lm_head", last, model.vocab_size, H)
    else:
        b.red("final_add_rmsnorm", T * H, 3 * model.dtype_bytes, model.dtype_bytes, path=P.CUSTOM_OP,
              **{TRITON_LIKE: 1})
        b.gemm("lm_head", last, model.vocab_size, H)
    b.all_gather_logits(last)
    R.softcap(b, last, path=P.EAGER_ELEMENTWISE)
    ops = tuple(b.ops)
    if fusion == "compiled":
        ops = _compiled(ops, compile_dynamic, compile_inputs)
    label = f"{model.name} {fusion} seqs={shape.seqs} tokens={T} ctx={shape.ctx}" + (
        f" q_len={shape.q_len}" if shape.q_len > 1 else "")
    return Step(ops, label=label, layers=model.num_hidden_layers, tokens=T)


def _compiled(ops: tuple[Op, ...], dynamic: bool, inputs: str | None = None) -> tuple[Op, ...]:
    """Inductor's pass over an eager op list (its scheduling is memoised inside compile_ops, by the list's
    structure; a memo here, keyed by the op tuple, would hash every field of every op on each call: slower than
    the pass with a memoised plan)."""
    from simulator.model.inductor import compile_ops

    return tuple(compile_ops(ops, dynamic, dynamic_inputs=_symbolic_inputs(inputs)))


def _symbolic_inputs(inputs: str | None) -> bool | None:
    """inductor.compile_ops's `dynamic_inputs` for a `compile_inputs` value (vocab.CompileInputs; None: its own rule
    by the op list). Arguments: symbolic sizes reach the weights and cache (the reference decoder, measured); module:
    Dynamo specialises them (transformers and the gpt-fast style independent decoder, measured: the same kernels
    with dynamic True and False)."""
    return None if inputs is None else inputs == V.CompileInputs.ARGUMENTS


def layers_repeat(model: ModelSpec, shape: StepShape, slots: int | None = None) -> bool:
    """Layers 1..L-1 build the same ops at this shape (what layer tiling assumes): false where sliding-window
    layers read fewer keys than full ones (gemma2 past its window, say). `slots`: an hf static cache's length."""
    keys = max(slots or 0, shape.ctx + max(1, shape.prefill_len, shape.q_len))
    kinds = {model.sliding_at(i) and model.sliding_window < keys for i in range(1, model.num_hidden_layers)}
    return len(kinds) <= 1


def _layers(b: _Builder, model: ModelSpec, shape: StepShape, layer, fresh_first: bool = True) -> None:
    """Emit every layer: layer 0 built fresh, then one built list per kind of layer (full attention, or sliding
    where the window is shorter than the keys) repeated (the same Op objects), in the model's layer order."""
    L = model.num_hidden_layers
    keys = shape.ctx + max(1, shape.prefill_len, shape.q_len)
    if L > 1 and not fresh_first and not (model.sliding_window and model.sliding_window < keys and any(
            model.sliding_at(i) for i in range(L))):
        start = len(b.ops)  # every layer of one kind (full attention): layer 0 built, then repeated L - 1 times
        layer(0)
        b.ops.extend(b.ops[start:] * (L - 1))
        return
    built: dict[bool, list] = {}
    for i in range(L):
        kind = model.sliding_at(i) and model.sliding_window < keys
        if i > 0 and kind in built:
            b.ops.extend(built[kind])
            continue
        start = len(b.ops)
        layer(i)
        if i > 0 or not fresh_first:
            built[kind] = b.ops[start:]
        if i == 0 and fresh_first:
            continue


def _check_lora(model: ModelSpec, impl: str, rank: int) -> None:
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise WorkloadError(f"lora_rank must be a non-negative integer, got {rank!r}")
    if impl not in LORA_IMPLS:
        raise WorkloadError(f"lora_rank: implementation '{impl}' runs vLLM's punica LoRA kernels, which are not "
                            "modelled; LoRA is modelled for implementations reference and hf (PEFT's forward)")
    if model.is_moe:
        raise WorkloadError(f"lora_rank: LoRA on the MoE model {model.name}'s experts is not modelled")
    if tp_of(model) > 1:
        raise WorkloadError("lora_rank: LoRA under tensor parallelism (sharded adapters and their collectives) is "
                            "not modelled: use tensor_parallel_size 1")


def _build_hf(model: ModelSpec, shape: StepShape, fusion: str, cache: str, slots: int, compile_dynamic: bool,
              positions: str = "given", compile_inputs: str | None = None, lora_rank: int = 0) -> Step:
    """transformers' own decoder (simulator/model/recipes.py, recipes_hf.py); `compiled`: Inductor's pass over it."""
    if shape.prefill_seqs:
        raise WorkloadError("implementation 'hf' models decode steps only (a mixed prefill batch is a serving "
                            "engine's step): use implementation 'reference' or 'fused'")
    if shape.padding:
        raise WorkloadError("implementation 'hf' has no padded graph rows (transformers runs the batch it is given)")
    b = _Builder(model, shape, lora_rank)
    if b.tp > 1:
        raise WorkloadError(f"implementation 'hf' runs transformers on one GPU; {model.name} is a tensor-parallel "
                            f"shard (tp {b.tp}): use implementation 'reference' or 'fused'")
    if model.weight_dtype != "bf16" or model.kv_dtype != "bf16":
        raise WorkloadError("implementation 'hf' was measured in bf16 only (weight_dtype / kv_dtype fp8 are "
                            "modelled for 'reference' and 'fused')")
    from simulator.model import recipes_hf as RH  # only an hf build loads the hf recipe

    RH.hf_preamble(b, cache, slots, positions)

    def layer(i):
        RH.hf_layer(b, i, cache, slots)

    _layers_hf(b, model, shape, layer, cache, slots)
    RH.hf_tail(b)
    ops = tuple(b.ops)
    if fusion == "compiled":
        try:
            from simulator.model.inductor import compile_ops
        except ImportError as exc:
            raise WorkloadError("fusion 'compiled' of implementation 'hf' needs Inductor's fusion pass "
                                "(simulator/model/inductor.py), which this build does not have") from exc
        ops = tuple(compile_ops(list(ops), compile_dynamic, dynamic_inputs=_symbolic_inputs(compile_inputs)))
    label = f"{model.name} hf/{cache} {fusion} seqs={shape.seqs} tokens={shape.tokens} ctx={shape.ctx}"
    return Step(ops, label=label, layers=model.num_hidden_layers, tokens=shape.tokens)


def _layers_hf(b, model, shape, layer, cache, slots) -> None:
    keys = slots if cache == "static" else shape.ctx + 1
    built: dict[bool, list] = {}
    for i in range(model.num_hidden_layers):
        kind = model.sliding_at(i) and model.sliding_window < keys
        if kind in built:
            b.ops.extend(built[kind])
            continue
        start = len(b.ops)
        layer(i)
        built[kind] = b.ops[start:]


def _rotary_preamble_eager(b: _Builder) -> None:
    """HF rotary embedding forward: positions.float(), inv_freq @ pos, cat, cos, sin, scale, cast."""
    T, hd = b.s.tokens, b.m.head_dim
    n = T * hd
    b.view("rotary.expand", 2)
    b.copy("rotary.pos_float", T, 8, 4)
    b.gemm("rotary.matmul", T, hd // 2, 1)
    b.view("rotary.transpose", 1)
    b.copy("rotary.cat", n, 4, 4)
    b.ew("rotary.cos", n, 4, 4)
    b.ew("rotary.sin", n, 4, 4)
    b.ew("rotary.cos_scale", n, 4, 4)
    b.ew("rotary.sin_scale", n, 4, 4)
    b.copy("rotary.cos_cast", n, 4, 2)
    b.copy("rotary.sin_cast", n, 4, 2)


def toy_step(layers: int, kernels_per_layer: int, launch_s: float, kernel_s: float) -> Step:
    """Textbook arithmetic: `layers * kernels_per_layer` identical raw launches."""
    if layers <= 0 or kernels_per_layer <= 0:
        raise WorkloadError("toy workload needs positive layers and kernels_per_layer")
    if launch_s < 0 or kernel_s < 0:
        raise WorkloadError("toy launch and kernel times must be non-negative")
    op = Op("toy_kernel", OpClass.ELEMENTWISE, P.RAW, fixed_gpu_s=kernel_s, fixed_host_s=launch_s)
    n = layers * kernels_per_layer
    return Step((op,) * n, label=f"toy {layers}x{kernels_per_layer}", layers=layers, tokens=1)


def kernels_per_layer(model: ModelSpec, fusion: str, impl: str | None = None, **options) -> int:
    """Kernels launched per decoder layer (the preamble and head excluded), at batch 1 and context 128: the third
    layer's (`layer_kernels`)."""
    from dataclasses import replace

    return layer_kernels(lambda layers, shape: build_step(replace(model, num_hidden_layers=layers), shape, fusion,
                                                          impl, **options))


def layer_kernels(build: Callable[[int, StepShape], Step]) -> int:
    """Kernels of the third decoder layer of what `build(layers, shape)` builds, at batch 1 and context 128: 3 layers
    less 2 (by then a model with sliding and full layers, gemma2, has its preamble's masks for both; at context 128
    its layers are alike). The one rule for kernels per layer (kernels_per_layer, StepSetup.kernels_per_layer)."""
    shape = decode(1, 128)
    return build(3, shape).kernels - build(2, shape).kernels
