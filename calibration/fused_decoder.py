"""A decoder that launches exactly the `fused` implementation's kernel list (simulator/model/workload.py
`_layer_fused`), built from real fused GPU kernels, so that round ab can time the recipe launchsim prices for
vLLM-style custom ops against a measured step.

Per layer (9 kernels): fused residual-add + RMSNorm (liger-kernel's Triton kernel), packed QKV GEMM (bias folded
into cuBLAS's epilogue where the family has one), one Triton kernel of ours for q/k-norm (Qwen3) + RoPE (from a
precomputed cos/sin cache, as vLLM's rotary op) + the new token's K and V written into the cache (vLLM launches
RoPE and reshape_and_cache as two ops; the recipe counts one, and so does this decoder), SDPA over the cache
(cuDNN, the same call and shapes as calibration/reference_decoder.py, which the profile's attention tables
measured), o_proj GEMM, fused residual-add + RMSNorm, packed gate/up GEMM, liger's fused SiLU-and-mul over the
packed gate/up output, down GEMM. Before the layers: the embedding; after: a fused add + RMSNorm and lm_head on each
sequence's token. The host side differs from vLLM's: liger's and our kernels launch through Triton's Python
launcher, not a C++ custom op, so only the graph rows test the recipe's prices; the eager rows are recorded as
the Triton path's figures.

torch, triton and liger_kernel are imported lazily (the module imports on a machine without them).
"""

from __future__ import annotations

from functools import lru_cache

from simulator.model.models import ModelSpec

EPS = 1e-6
ROPE_THETA = 1e6


@lru_cache(maxsize=None)
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def qknorm_rope_cache(qkv_ptr, qkv_stride, q_out_ptr, kc_ptr, vc_ptr, cos_ptr, sin_ptr, pos_ptr, qn_ptr, kn_ptr,
                          c_b, c_h, c_s, eps,
                          NQ: tl.constexpr, NKV: tl.constexpr, HD: tl.constexpr, HALF: tl.constexpr,
                          PNQ: tl.constexpr, PNKV: tl.constexpr, QK_NORM: tl.constexpr):
        b = tl.program_id(0)
        pos = tl.load(pos_ptr + b)
        row = qkv_ptr + b * qkv_stride
        d = tl.arange(0, HALF)[None, :]
        c = tl.load(cos_ptr + pos * HALF + d)
        s = tl.load(sin_ptr + pos * HALF + d)
        # q heads: norm, rotate, store to q_out [B, NQ, HD]
        hq = tl.arange(0, PNQ)[:, None]
        mq = hq < NQ
        q1 = tl.load(row + hq * HD + d, mask=mq, other=0.0).to(tl.float32)
        q2 = tl.load(row + hq * HD + HALF + d, mask=mq, other=0.0).to(tl.float32)
        if QK_NORM:
            r = tl.rsqrt((tl.sum(q1 * q1, 1) + tl.sum(q2 * q2, 1)) / HD + eps)[:, None]
            q1 = q1 * r * tl.load(qn_ptr + d).to(tl.float32)
            q2 = q2 * r * tl.load(qn_ptr + HALF + d).to(tl.float32)
        qo = q_out_ptr + b * NQ * HD + hq * HD + d
        tl.store(qo, (q1 * c - q2 * s).to(q_out_ptr.dtype.element_ty), mask=mq)
        tl.store(qo + HALF, (q2 * c + q1 * s).to(q_out_ptr.dtype.element_ty), mask=mq)
        # k heads: norm, rotate, store into the cache at pos
        hk = tl.arange(0, PNKV)[:, None]
        mk = hk < NKV
        kb = row + NQ * HD
        k1 = tl.load(kb + hk * HD + d, mask=mk, other=0.0).to(tl.float32)
        k2 = tl.load(kb + hk * HD + HALF + d, mask=mk, other=0.0).to(tl.float32)
        if QK_NORM:
            r = tl.rsqrt((tl.sum(k1 * k1, 1) + tl.sum(k2 * k2, 1)) / HD + eps)[:, None]
            k1 = k1 * r * tl.load(kn_ptr + d).to(tl.float32)
            k2 = k2 * r * tl.load(kn_ptr + HALF + d).to(tl.float32)
        ko = kc_ptr + b * c_b + hk * c_h + pos * c_s + d
        tl.store(ko, (k1 * c - k2 * s).to(kc_ptr.dtype.element_ty), mask=mk)
        tl.store(ko + HALF, (k2 * c + k1 * s).to(kc_ptr.dtype.element_ty), mask=mk)
        # v heads: copied into the cache at pos
        dv = tl.arange(0, HD)[None, :]
        v = tl.load(row + (NQ + NKV) * HD + hk * HD + dv, mask=mk, other=0.0)
        tl.store(vc_ptr + b * c_b + hk * c_h + pos * c_s + dv, v, mask=mk)

    return qknorm_rope_cache


def _pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def qknorm_rope_cache(m: ModelSpec, qkv, q_out, kc, vc, cos, sin, pos, qn, kn):
    """One launch: q (normed, rotated) into q_out [B, nq, hd]; k (normed, rotated) and v into the caches
    [B, nkv, slots, hd] at each row's position `pos` [B]."""
    B = qkv.shape[0]
    hd = m.head_dim
    _kernel()[(B,)](qkv, qkv.stride(0), q_out, kc, vc, cos, sin, pos, qn, kn,
                    kc.stride(0), kc.stride(1), kc.stride(2), EPS,
                    NQ=m.num_attention_heads, NKV=m.num_key_value_heads, HD=hd, HALF=hd // 2,
                    PNQ=_pow2(m.num_attention_heads), PNKV=_pow2(m.num_key_value_heads), QK_NORM=bool(m.qk_norm))


def reference_qknorm_rope_cache(m: ModelSpec, qkv, cos, sin, pos, qn, kn):
    """The same function in plain torch, fp32 (the check): (q [B, nq, hd], k [B, nkv, hd], v [B, nkv, hd])."""
    import torch

    B = qkv.shape[0]
    nq, nkv, hd = m.num_attention_heads, m.num_key_value_heads, m.head_dim
    x = qkv.float()
    q = x[:, :nq * hd].view(B, nq, hd)
    k = x[:, nq * hd:(nq + nkv) * hd].view(B, nkv, hd)
    v = x[:, (nq + nkv) * hd:].view(B, nkv, hd)

    def norm(t, w):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + EPS) * w.float()

    if m.qk_norm:
        q, k = norm(q, qn), norm(k, kn)
    c = cos[pos].float()[:, None, :]
    s = sin[pos].float()[:, None, :]

    def rot(t):
        t1, t2 = t[..., :hd // 2], t[..., hd // 2:]
        return torch.cat((t1 * c - t2 * s, t2 * c + t1 * s), dim=-1)

    return rot(q), rot(k), v


class FusedDecoder:
    """Random bf16 weights of `m` (std 0.02), a cache of `slots` positions per sequence (random, never zeros), and a
    decode step of `batch` sequences writing position slots - 1 and attending over all `slots` keys."""

    def __init__(self, m: ModelSpec, batch: int, slots: int, device: str = "cuda", seed: int = 0):
        import torch

        self.m, self.B, self.slots = m, batch, slots
        g = torch.Generator(device=device).manual_seed(seed)
        bf = torch.bfloat16

        def rnd(*shape):
            return torch.randn(*shape, device=device, dtype=bf, generator=g) * 0.02

        H, q, kv, In, hd = m.hidden_size, m.q_dim, m.kv_dim, m.intermediate_size, m.head_dim
        self.layers = []
        for _ in range(m.num_hidden_layers):
            self.layers.append({
                "ln1": 1 + rnd(H), "ln2": 1 + rnd(H), "qkv": rnd(q + 2 * kv, H),
                "qkv_b": rnd(q + 2 * kv) if m.qkv_bias else None, "o": rnd(H, q),
                "o_b": rnd(H) if m.o_bias else None, "gate_up": rnd(2 * In, H), "down": rnd(H, In),
                "qn": 1 + rnd(hd), "kn": 1 + rnd(hd),
                "kc": torch.randn(batch, m.num_key_value_heads, slots, hd, device=device, dtype=bf, generator=g),
                "vc": torch.randn(batch, m.num_key_value_heads, slots, hd, device=device, dtype=bf, generator=g),
            })
        self.embed = rnd(m.vocab_size, H)
        self.lm_head = self.embed if m.tie_word_embeddings else rnd(m.vocab_size, H)
        self.final = 1 + rnd(H)
        inv = 1.0 / (ROPE_THETA ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
        ang = torch.arange(slots + 1, device=device, dtype=torch.float32)[:, None] * inv[None, :]
        self.cos, self.sin = ang.cos().contiguous(), ang.sin().contiguous()
        self.ids = torch.randint(0, m.vocab_size, (batch,), device=device, generator=g)
        self.pos = torch.full((batch,), slots - 1, device=device, dtype=torch.int64)
        self.zero = torch.zeros(batch, H, device=device, dtype=bf)
        self.q_out = torch.empty(batch, m.num_attention_heads, hd, device=device, dtype=bf)

    def step(self):
        import torch.nn.functional as F
        from liger_kernel.ops.fused_add_rms_norm import fused_add_rms_norm_forward
        from liger_kernel.ops.swiglu import swiglu_fused_gate_up_forward

        m, B = self.m, self.B
        nq, hd = m.num_attention_heads, m.head_dim
        x, res = F.embedding(self.ids, self.embed), self.zero
        for L in self.layers:
            h, res = fused_add_rms_norm_forward(x, res, L["ln1"], EPS, 0.0, "llama")[:2]
            qkv = F.linear(h, L["qkv"], L["qkv_b"])
            qknorm_rope_cache(m, qkv, self.q_out, L["kc"], L["vc"], self.cos, self.sin, self.pos, L["qn"], L["kn"])
            a = F.scaled_dot_product_attention(self.q_out.view(B, nq, 1, hd), L["kc"], L["vc"], enable_gqa=True)
            x = F.linear(a.transpose(1, 2).reshape(B, nq * hd), L["o"], L["o_b"])
            h, res = fused_add_rms_norm_forward(x, res, L["ln2"], EPS, 0.0, "llama")[:2]
            x = F.linear(swiglu_fused_gate_up_forward(F.linear(h, L["gate_up"]))[1], L["down"])
        h = fused_add_rms_norm_forward(x, res, self.final, EPS, 0.0, "llama")[0]
        return F.linear(h, self.lm_head)

    def check(self) -> dict:
        """The Triton q/k/v kernel against reference_qknorm_rope_cache on fresh random inputs, every output element
        poisoned first: relative errors of q, the cache's k and v rows."""
        import torch

        m, B = self.m, self.B
        g = torch.Generator(device="cuda").manual_seed(12345)
        qkv = torch.randn(B, m.q_dim + 2 * m.kv_dim, device="cuda", dtype=torch.bfloat16, generator=g)
        L = self.layers[0]
        pos = torch.randint(0, self.slots, (B,), device="cuda", generator=g)
        self.q_out.fill_(float("nan"))
        kc, vc = L["kc"].clone(), L["vc"].clone()
        kc[torch.arange(B), :, pos] = float("nan")
        vc[torch.arange(B), :, pos] = float("nan")
        qknorm_rope_cache(m, qkv, self.q_out, kc, vc, self.cos, self.sin, pos, L["qn"], L["kn"])
        torch.cuda.synchronize()
        q, k, v = reference_qknorm_rope_cache(m, qkv, self.cos, self.sin, pos, L["qn"], L["kn"])
        rows = torch.arange(B, device="cuda")

        def rel(a, b):
            return float((a.float() - b).norm() / b.norm())

        out = {"q": rel(self.q_out, q), "k": rel(kc[rows, :, pos], k), "v": rel(vc[rows, :, pos], v)}
        untouched = torch.ones_like(kc[..., 0], dtype=torch.bool)
        untouched[rows, :, pos] = False
        out["cache_untouched_equal"] = bool(torch.equal(kc[untouched], L["kc"][untouched]))
        return out
