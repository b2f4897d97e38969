"""An independent decode-step decoder for held-out checks of launchsim's `compiled` level (issue 20).

Written apart from calibration/reference_decoder.py and calibration/hf_decoder.py, in gpt-fast's style: one
nn.Module per block, separate q/k/v nn.Linear without bias, per-head q/k RMSNorm where the family has it (Qwen3),
RoPE on interleaved (even, odd) pairs from a precomputed cos/sin table indexed by `input_pos`, preallocated KV
cache buffers [B, kv_heads, max_len, head_dim] written with index_copy_ at `input_pos`, SDPA (enable_gqa, no
mask: one query token attends every slot it reads) over the first ctx + 1 cache slots (a Python int fixed when the
caches are set up, so a compiled step is specialised to it), SwiGLU MLP, final norm and lm_head (tied to the embedding or not, per config). Norms are torch's F.rms_norm.

Two configs (CONFIGS): qwen3-0.6b's shapes and llama-3.2-1b's (calibration/configs/hf/llama-3.2-1b.json: llama3
RoPE scaling, no q/k norm). bf16, random weights. torch is imported inside functions only, so this module imports
on a CPU machine without torch.

    m, idx, input_pos = build("qwen3-0.6b", batch=4, max_len=640, ctx=512)   # cuda, random weights and cache
    logits = m(idx, input_pos)   # idx [B, 1] int64; input_pos [1] int64 = ctx, the slot the new token writes
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Config:
    name: str
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn_dim: int
    vocab: int
    eps: float
    rope_theta: float
    qk_norm: bool
    tied: bool
    rope_llama3: tuple[float, float, float, int] | None = None  # factor, low_freq, high_freq, original max pos


CONFIGS = {
    "qwen3-0.6b": Config("qwen3-0.6b", 1024, 28, 16, 8, 128, 3072, 151936, 1e-6, 1e6, True, True),
    "llama-3.2-1b": Config("llama-3.2-1b", 2048, 16, 32, 8, 64, 8192, 128256, 1e-5, 5e5, False, True,
                           (32.0, 1.0, 4.0, 8192)),
}


def config(name: str, layers: int | None = None) -> Config:
    c = CONFIGS[name]
    return replace(c, n_layers=layers) if layers else c


def _inv_freq(c: Config):
    """RoPE inverse frequencies (head_dim / 2 of them), with llama3's wavelength-band scaling where configured."""
    inv = [1.0 / (c.rope_theta ** (2 * i / c.head_dim)) for i in range(c.head_dim // 2)]
    if c.rope_llama3 is None:
        return inv
    factor, lo, hi, orig = c.rope_llama3
    lo_wl, hi_wl = orig / lo, orig / hi
    out = []
    for f in inv:
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(f)
        elif wl > lo_wl:
            out.append(f / factor)
        else:
            s = (orig / wl - lo) / (hi - lo)
            out.append((1 - s) * f / factor + s * f)
    return out


def _modules():
    """The nn.Module classes (defined on first use so the module imports without torch)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class KVCache(nn.Module):
        def __init__(self, batch, kv_heads, max_len, head_dim, dtype):
            super().__init__()
            shape = (batch, kv_heads, max_len, head_dim)
            self.register_buffer("k", torch.zeros(shape, dtype=dtype), persistent=False)
            self.register_buffer("v", torch.zeros(shape, dtype=dtype), persistent=False)

        def update(self, input_pos, k, v):
            self.k.index_copy_(2, input_pos, k)
            self.v.index_copy_(2, input_pos, v)
            return self.k, self.v

    def rope(x, cs):
        # x [B, 1, H, D]; cs [1, D/2, 2] (cos, sin) at input_pos; rotates interleaved (even, odd) pairs in fp32
        xs = x.float().reshape(*x.shape[:-1], -1, 2)
        cs = cs.view(1, xs.size(1), 1, xs.size(3), 2)
        out = torch.stack([xs[..., 0] * cs[..., 0] - xs[..., 1] * cs[..., 1],
                           xs[..., 1] * cs[..., 0] + xs[..., 0] * cs[..., 1]], dim=-1)
        return out.flatten(3).type_as(x)

    class Attention(nn.Module):
        def __init__(self, c: Config):
            super().__init__()
            self.c = c
            self.wq = nn.Linear(c.dim, c.n_heads * c.head_dim, bias=False)
            self.wk = nn.Linear(c.dim, c.n_kv_heads * c.head_dim, bias=False)
            self.wv = nn.Linear(c.dim, c.n_kv_heads * c.head_dim, bias=False)
            self.wo = nn.Linear(c.n_heads * c.head_dim, c.dim, bias=False)
            if c.qk_norm:
                self.q_norm = nn.Parameter(torch.ones(c.head_dim))
                self.k_norm = nn.Parameter(torch.ones(c.head_dim))
            self.cache = None
            self.kv_len = 0

        def forward(self, x, cs, input_pos):
            c = self.c
            b, t, _ = x.shape
            q = self.wq(x).view(b, t, c.n_heads, c.head_dim)
            k = self.wk(x).view(b, t, c.n_kv_heads, c.head_dim)
            v = self.wv(x).view(b, t, c.n_kv_heads, c.head_dim)
            if c.qk_norm:
                q = F.rms_norm(q, (c.head_dim,), self.q_norm, c.eps)
                k = F.rms_norm(k, (c.head_dim,), self.k_norm, c.eps)
            q, k = rope(q, cs), rope(k, cs)
            q, k, v = (z.transpose(1, 2) for z in (q, k, v))
            kc, vc = self.cache.update(input_pos, k, v)
            n = self.kv_len
            y = F.scaled_dot_product_attention(q, kc[:, :, :n], vc[:, :, :n], enable_gqa=True)
            return self.wo(y.transpose(1, 2).reshape(b, t, c.n_heads * c.head_dim))

    class FeedForward(nn.Module):
        def __init__(self, c: Config):
            super().__init__()
            self.w1 = nn.Linear(c.dim, c.ffn_dim, bias=False)  # gate
            self.w3 = nn.Linear(c.dim, c.ffn_dim, bias=False)  # up
            self.w2 = nn.Linear(c.ffn_dim, c.dim, bias=False)  # down

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self, c: Config):
            super().__init__()
            self.eps = c.eps
            self.attention = Attention(c)
            self.feed_forward = FeedForward(c)
            self.attention_norm = nn.Parameter(torch.ones(c.dim))
            self.ffn_norm = nn.Parameter(torch.ones(c.dim))

        def forward(self, x, cs, input_pos):
            d = (x.size(-1),)
            h = x + self.attention(F.rms_norm(x, d, self.attention_norm, self.eps), cs, input_pos)
            return h + self.feed_forward(F.rms_norm(h, d, self.ffn_norm, self.eps))

    class Transformer(nn.Module):
        def __init__(self, c: Config):
            super().__init__()
            self.c = c
            self.tok_embeddings = nn.Embedding(c.vocab, c.dim)
            self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layers))
            self.norm = nn.Parameter(torch.ones(c.dim))
            self.output = None if c.tied else nn.Linear(c.dim, c.vocab, bias=False)

        def setup_caches(self, batch, max_len, ctx):
            c = self.c
            dt = self.tok_embeddings.weight.dtype
            dev = self.tok_embeddings.weight.device
            for blk in self.layers:
                blk.attention.cache = KVCache(batch, c.n_kv_heads, max_len, c.head_dim, dt).to(dev)
                blk.attention.kv_len = ctx + 1
            inv = torch.tensor(_inv_freq(c), dtype=torch.float32, device=dev)
            ang = torch.outer(torch.arange(max_len, device=dev, dtype=torch.float32), inv)
            self.register_buffer("rope_cs", torch.stack([ang.cos(), ang.sin()], dim=-1).to(dt), persistent=False)

        def forward(self, idx, input_pos):
            cs = self.rope_cs[input_pos]  # [1, D/2, 2]
            x = self.tok_embeddings(idx)
            for blk in self.layers:
                x = blk(x, cs, input_pos)
            x = F.rms_norm(x, (x.size(-1),), self.norm, self.c.eps)
            w = self.tok_embeddings.weight if self.output is None else self.output.weight
            return F.linear(x, w)

    return Transformer


def build(name: str, batch: int, max_len: int, ctx: int, layers: int | None = None, seed: int = 0):
    """The decoder on cuda in bf16 with random weights (normal, std 0.02; norms 1) and random cache contents in every
    slot below `ctx` (the past); `max_len` cache slots. Returns (model, idx [B, 1], input_pos [1] = ctx)."""
    import torch

    c = config(name, layers)
    torch.manual_seed(seed)
    with torch.device("meta"):
        m = _modules()(c).to(torch.bfloat16)
    m = m.to_empty(device="cuda")
    with torch.no_grad():
        for n, p in m.named_parameters():
            if n.endswith("norm"):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)
    m.setup_caches(batch, max_len, ctx)
    g = torch.Generator(device="cuda").manual_seed(seed + batch)
    with torch.no_grad():
        for blk in m.layers:
            for t in (blk.attention.cache.k, blk.attention.cache.v):
                t[:, :, :ctx].normal_(generator=g)
    m.eval().requires_grad_(False)
    idx = torch.randint(0, c.vocab, (batch, 1), device="cuda", generator=g)
    input_pos = torch.tensor([ctx], device="cuda", dtype=torch.long)
    return m, idx, input_pos


def share(model, batch: int, max_len: int, ctx: int, seed: int = 0):
    """Point an already built model at fresh caches for another batch (weights shared); returns (idx, input_pos)."""
    import torch

    c = model.c
    model.setup_caches(batch, max_len, ctx)
    g = torch.Generator(device="cuda").manual_seed(seed + batch)
    with torch.no_grad():
        for blk in model.layers:
            for t in (blk.attention.cache.k, blk.attention.cache.v):
                t[:, :, :ctx].normal_(generator=g)
    idx = torch.randint(0, c.vocab, (batch, 1), device="cuda", generator=g)
    return idx, torch.tensor([ctx], device="cuda", dtype=torch.long)
