"""The `hf` recipe (transformers' own modeling code, SDPA): the preamble, one decoder layer and the tail of an hf
step, as simulator/model/recipes.py describes it (its module docstring: the kernels each part launches, where they
were measured). Apart from recipes.py so that a step of another implementation does not compile it: the hf build
(workload._build_hf) imports it."""

from __future__ import annotations

from simulator.model.kernels import LaunchPath as P
from simulator.model.kernels import SDPA_CALL, Op, OpClass
from simulator.model import recipes as R  # read when called: calibration sets the fitted constants on recipes.py


# -- the hf recipe --------------------------------------------------------------------------------------------------
def hf_preamble(b, cache: str, slots: int, positions: str = "given") -> None:
    """Embedding (+ Gemma's scale), the cache positions when the caller passes none (`positions="computed"`:
    transformers' arange + add from the cache length; round f's dynamic-cache steps), the static cache's causal mask
    over the slots (and the sliding mask where a layer slides), rotary set-up (10 kernels a rotary embedding)."""
    m, T, hd = b.m, b.s.tokens, b.m.head_dim
    start = len(b.ops)
    R.embedding(b)
    b.all_reduce("embedding.all_reduce", T)
    if positions == "computed":
        b.ew("cache_position.arange", 1, 0, 8)
        b.ew("cache_position.add", 1, 8, 8)
    if cache == "static":
        # transformers builds one mask per layer type present: the causal one where a layer attends fully, the
        # sliding-window one (the causal kernels plus the window compare) where a layer slides
        kinds = {m.sliding_at(i) for i in range(m.num_hidden_layers)}
        for i in sorted(kinds):
            tag = "mask" if not i else "sliding_mask"
            for j in range(3):
                b.ew(f"{tag}.arange", 1, 0, 8)
            b.ew(f"{tag}.add", 1, 8, 8)
            b.ew(f"{tag}.arange_kv", slots, 0, 8)
            b.ew(f"{tag}.add_kv", slots, 8, 8)
            if i:  # round f (phi3, gemma2): the window's lower bound, then the causal bound, each and-ed in
                b.ew(f"{tag}.fill", 1, 0, 1)
                b.ew(f"{tag}.sub", slots, 8, 8)
                b.ew(f"{tag}.gt", slots, 16, 1)
                b.ew(f"{tag}.and_window", slots, 2, 1)
            b.ew(f"{tag}.le", slots, 16, 1)
            if i:
                b.ew(f"{tag}.and_causal", slots, 2, 1)
    rd = m.rope_dim
    for r in range(m.rope_sets):
        tag = "rotary" if r == 0 else "rotary_local"
        n = T * rd
        b.view(f"{tag}.expand", 2)
        b.copy(f"{tag}.inv_freq_float", rd // 2, 4, 4)
        b.copy(f"{tag}.pos_float", T, 8, 4)
        b.gemm(f"{tag}.matmul", T, rd // 2, 1)
        b.view(f"{tag}.transpose", 1)
        b.copy(f"{tag}.cat", n, 4, 4)
        b.ew(f"{tag}.cos", n, 4, 4)
        b.ew(f"{tag}.cos_scale", n, 4, 4)
        b.ew(f"{tag}.sin", n, 4, 4)
        b.ew(f"{tag}.sin_scale", n, 4, 4)
        b.copy(f"{tag}.cos_cast", n, 4, 2)
        b.copy(f"{tag}.sin_cast", n, 4, 2)
    del hd
    python(b, "python.preamble", len(b.ops) - start)
    if cache == "dynamic":
        b.ops.append(Op("sdpa.cudnn_plan", OpClass.VIEW, P.EAGER_VIEW, fixed_host_s=R.CUDNN_PLAN_MS * 1e-3))


def hf_layer(b, layer: int, cache: str, slots: int) -> None:
    """One transformers decoder layer (eager, SDPA)."""
    from simulator.model.moe import block_hf

    m, s, T, e = b.m, b.s, b.s.tokens, b.e
    H, q, kv, I, hd = m.hidden_size, m.q_dim, m.kv_dim, m.intermediate_size, m.head_dim
    Hq, KV = m.num_attention_heads, m.num_key_value_heads
    start = len(b.ops)
    R.norm(b, "input_layernorm", T, H)
    if m.packed_qkv:
        b.gemm("qkv_proj", T, q + 2 * kv, H, bias=m.qkv_bias)
        b.view("qkv.slice", 3)
        b.view("qkv.view_transpose", 6)
        if m.qk_norm:
            R.norm(b, "q_norm", T * Hq, hd)
            R.norm(b, "k_norm", T * KV, hd)
    else:
        # Gemma3Attention projects q, k and v first, then q-norm and k-norm (round g's gemma-3-1b trace); Qwen3
        # norms each projection as it comes (round c)
        proj_first = m.qk_norm and m.norm_kind == "gemma"
        for name, n, heads in (("q", q, Hq), ("k", kv, KV), ("v", kv, KV)):
            b.gemm(f"{name}_proj", T, n, H, bias=m.qkv_bias)
            b.view(f"{name}.view_transpose", 2)
            if m.qk_norm and name != "v" and not proj_first:
                R.norm(b, f"{name}_norm", T * heads, hd)
        if proj_first:
            R.norm(b, "q_norm", T * Hq, hd)
            R.norm(b, "k_norm", T * KV, hd)
    b.view("rope.unsqueeze", 2)
    R.rope(b, "rope_q", Hq)
    R.rope(b, "rope_k", KV)
    rep = Hq // KV
    if cache == "static":
        keys = R.keys_of(m, layer, slots)
        sliding = m.sliding_at(layer)
        if sliding and s.ctx >= keys:
            # a sliding layer whose window is full (the new position >= its min(window, slots) slots): the cache
            # rolls by one and the new token is written into the last slot, no position arithmetic (round g,
            # gemma-3-1b at ctx 512 = its window: roll, roll, index_put_, index_put_). The rolls run aten's
            # roll_cuda_kernel, a fifth of a copy's bandwidth (round w: the profile's roll curve); the index is
            # torch.tensor([-1], device=...), a pageable host-to-device copy the host waits on: the GPU drains
            # before the first write's host work (HOST_SYNC; it is also why such a step cannot be captured as
            # a CUDA graph: round g gemma-3-1b, round v phi-3-mini at ctx 2048)
            for t in ("k", "v"):
                b.copy(f"cache.roll_{t}", s.seqs * KV * keys * hd, e, e, roll=1)
            b.copy("cache.index_put_k", T * kv, e, e, host_sync=1)
            b.copy("cache.index_put_v", T * kv, e, e)
        else:
            b.ew("cache.arange", 1, 0, 8)
            b.ew("cache.pos_add", 1, 8, 8)
            if not sliding:  # round f: a sliding layer's cache advances its position after the writes
                b.ew("cache.pos_add_", 1, 8, 8)
            b.copy("cache.index_copy_k", T * kv, e, e)
            b.copy("cache.index_copy_v", T * kv, e, e)
            if sliding:
                b.ew("cache.pos_add_", 1, 8, 8)
        # a verify step (q_len > 1): the repeat_kv copies and SDPA's mask kernels are parts of the measured
        # hf_static verify-attention block (costs.py prices them inside it where the profile has that table)
        part = R.verify_part(m, s)
        # repeat_kv: SDPA gets a mask, so no enable_gqa; an expand + reshape copies every slot, except with one kv
        # head, where the reshape of the expanded [B, 1, rep, S, D] is a view (round g: gemma-3-1b launches no copy)
        if rep > 1 and KV > 1:
            for t in ("k", "v"):
                b.view(f"repeat_kv_{t}.expand", 1)
                n = s.seqs * Hq * keys * hd
                b.ops.append(Op(f"repeat_kv_{t}", OpClass.COPY, P.EAGER_COPY, n, n * (e / rep + e), part,
                                fixed_gpu_s=(R.STRIDED_COPY_US[0] + n / R.STRIDED_COPY_US[1]) * 1e-6))
        # SDPA's own conversion of the boolean mask, launched inside the SDPA call (eager in a piecewise cut)
        call = {**dict(part), SDPA_CALL: 1}
        b.add("sdpa.mask_fill", OpClass.ELEMENTWISE, P.EAGER_ELEMENTWISE, 1, e, **call)
        b.add("sdpa.mask_fill", OpClass.ELEMENTWISE, P.EAGER_ELEMENTWISE, 1, e, **call)
        n = s.seqs * keys
        b.add("sdpa.mask_where", OpClass.ELEMENTWISE, P.EAGER_ELEMENTWISE, n, n * (1 + 2 * e / max(keys, 1) + e),
              **call)
        heads_sdpa, masked = Hq if rep > 1 else KV, True
    else:
        keys = R.keys_of(m, layer, s.ctx + 1)
        for t in ("k", "v"):  # DynamicCache.update: torch.cat([past, new], dim=-2)
            b.copy(f"cache.cat_{t}", s.seqs * KV * keys * hd, e, e)
        heads_sdpa, masked = KV, False
    if cache == "static" and s.q_len > 1:
        R.verify_block_op(b, keys)
    else:
        R.attention_op(b, "attention", P.EAGER_ATTENTION, keys, heads_sdpa, masked, table_kv_heads=KV)
    R.split_kv_reduce(b, heads_sdpa, keys)
    b.view("attn.transpose_reshape", 2)
    b.gemm("o_proj", T, H, q, bias=m.o_bias)
    b.all_reduce("o_proj.all_reduce", T)
    if m.sandwich_norms:
        R.norm(b, "post_attention_layernorm", T, H)
    b.ew("residual_add", T * H, 2 * e, e)
    R.norm(b, "pre_feedforward_layernorm" if m.sandwich_norms else "post_attention_layernorm", T, H)
    if m.is_moe:
        block_hf(b)
        b.ew("residual_add", T * H, 2 * e, e)
        return
    if m.packed_gate_up:
        b.gemm("gate_up_proj", T, 2 * I, H, bias=m.mlp_bias)
        b.view("gate_up.chunk", 2)
        R.act(b, "act", T * I)
    else:
        b.gemm("gate_proj", T, I, H, bias=m.mlp_bias)
        R.act(b, "act", T * I)
        b.gemm("up_proj", T, I, H, bias=m.mlp_bias)
    b.ew("mul", T * I, 2 * e, e)
    b.gemm("down_proj", T, H, I, bias=m.mlp_bias)
    b.all_reduce("down_proj.all_reduce", T)
    if m.sandwich_norms:
        R.norm(b, "post_feedforward_layernorm", T, H)
    b.ew("residual_add", T * H, 2 * e, e)
    python(b, "python.layer", len(b.ops) - start)


def python(b, name: str, calls: int) -> None:
    """transformers' Python around `calls` host calls (recipes.PYTHON_US_PER_CALL each): one host-only op."""
    b.ops.append(Op(name, OpClass.VIEW, P.EAGER_VIEW, fixed_host_s=R.PYTHON_US_PER_CALL * calls * 1e-6))


def hf_tail(b) -> None:
    m, T = b.m, b.s.tokens
    last = b.s.seqs + b.s.padding
    start = len(b.ops)
    R.norm(b, "final_norm", T, m.hidden_size)
    b.gemm("lm_head", last, m.vocab_size, m.hidden_size)
    b.all_gather_logits(last)
    R.softcap(b, last)
    python(b, "python.tail", len(b.ops) - start)
