"""A plain-PyTorch decoder with random bf16 weights, written op for op as simulator/model/workload.py
describes the fusion levels, so that torch.profiler can check the workload model's kernel lists.

- `none`: Hugging Face transformers-style eager code: RMSNorm as 8 kernels (to fp32, pow, mean,
  add eps, rsqrt, mul, to bf16, mul weight), separate q/k/v and gate/up projections, q/k-norm for
  qwen3, rotate_half RoPE, a static KV cache written with `index_copy_`, SDPA with `enable_gqa`,
  the rotary cos/sin preamble, a final norm and lm_head on each sequence's last token.
- `packed`: the same with one QKV GEMM (split into views) and one gate/up GEMM (chunked).
- `compiled`: `torch.compile` of the `none` step function (Inductor, default mode).

The cache is static (one [batch, kv_heads, ctx, head_dim] buffer per layer for K and V), the new
token is written at position ctx-1 and attention reads the ctx keys, so one decode step has fixed
shapes and can be captured as a CUDA graph. Weights are plain tensors, no nn.Module per op, so the
host cost per op is the aten dispatch the microbenchmarks measure. torch is imported lazily.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.model.models import PRESETS, ModelSpec  # stdlib-only module, safe on the GPU machine

EPS = 1e-6


def _rmsnorm(x, w):
    import torch

    dt = x.dtype
    h = x.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + EPS)
    return w * h.to(dt)


def _rotate_half(x):
    import torch

    d = x.shape[-1] // 2
    x1 = x[..., :d]
    x2 = x[..., d:]
    return torch.cat((-x2, x1), dim=-1)


def _rope(x, cos, sin):
    return (x * cos) + (_rotate_half(x) * sin)


@dataclass
class Weights:
    embed: object
    lm_head: object
    inv_freq: object
    final_norm: object
    layers: list  # dicts: ln1, ln2, qkv, q, k, v, o, gate_up, gate, up, down, qn, kn


def make_weights(m: ModelSpec, device="cuda", seed=0, lora_rank: int = 0) -> Weights:
    """Random bf16 weights (std 0.02). Packed and unpacked projections share storage: the
    unpacked q/k/v and gate/up weights are contiguous row slices of the packed ones. `lora_rank` > 0: every
    layer also carries a LoRA adapter per projection (`_lin`), drawn after the base weights (which stay the same)."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    bf = torch.bfloat16

    def rnd(*shape):
        return (torch.randn(*shape, device=device, dtype=bf, generator=g) * 0.02)

    H, q, kv, I, hd = m.hidden_size, m.q_dim, m.kv_dim, m.intermediate_size, m.head_dim
    layers = []
    for _ in range(m.num_hidden_layers):
        qkv = rnd(q + 2 * kv, H)
        gu = rnd(2 * I, H)
        layers.append({
            "ln1": torch.ones(H, device=device, dtype=bf), "ln2": torch.ones(H, device=device, dtype=bf),
            "qkv": qkv, "q": qkv[:q], "k": qkv[q:q + kv], "v": qkv[q + kv:],
            "o": rnd(H, q), "gate_up": gu, "gate": gu[:I], "up": gu[I:], "down": rnd(H, I),
            "qn": torch.ones(hd, device=device, dtype=bf), "kn": torch.ones(hd, device=device, dtype=bf),
        })
    embed = rnd(m.vocab_size, H)
    lm_head = embed if m.tie_word_embeddings else rnd(m.vocab_size, H)
    if lora_rank:  # PEFT's shapes: lora_A.weight [r, in], lora_B.weight [out, r]; scaling lora_alpha / r (alpha 2r)
        r, dims = lora_rank, {"q": (q, H), "k": (kv, H), "v": (kv, H), "qkv": (q + 2 * kv, H), "o": (H, q),
                              "gate": (I, H), "up": (I, H), "gate_up": (2 * I, H), "down": (H, I)}
        for L in layers:
            L["lora"] = {key: (rnd(r, k_in), rnd(n_out, r), 2.0) for key, (n_out, k_in) in dims.items()}
    inv_freq = 1.0 / (1e6 ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
    return Weights(embed, lm_head, inv_freq, torch.ones(H, device=device, dtype=bf), layers)


def make_cache(m: ModelSpec, batch: int, ctx: int, device="cuda"):
    """Static KV cache: per layer a K and a V buffer of [batch, kv_heads, ctx, head_dim], random
    (never zeros: zeros can run faster than real data)."""
    import torch

    shape = (batch, m.num_key_value_heads, ctx, m.head_dim)
    return [(torch.randn(shape, device=device, dtype=torch.bfloat16),
             torch.randn(shape, device=device, dtype=torch.bfloat16)) for _ in range(m.num_hidden_layers)]


def _rotary(m: ModelSpec, w: Weights, position_ids, dtype):
    """HF LlamaRotaryEmbedding.forward: cos/sin [B, 1, head_dim]."""
    import torch

    B = position_ids.shape[0]
    inv = w.inv_freq[None, :, None].float().expand(B, -1, 1)
    pos = position_ids[:, None, :].float()
    freqs = (inv.float() @ pos.float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos() * 1.0
    sin = emb.sin() * 1.0
    return cos.to(dtype), sin.to(dtype)


def _lin(h, L: dict, key: str):
    """F.linear(h, L[key]); with an adapter, PEFT's LoRA forward (peft/tuners/lora/layer.py Linear.forward, dropout
    0): result + lora_B(lora_A(x)) * scaling, four kernels: two GEMMs, the multiply, the add."""
    import torch.nn.functional as F

    y = F.linear(h, L[key])
    lo = L.get("lora")
    if lo is None:
        return y
    a, b, scaling = lo[key]
    return y + F.linear(F.linear(h, a), b) * scaling


def _pre_attention(m: ModelSpec, L: dict, x, cos, sin, kc, vc, cache_pos, packed: bool):
    """Norm, q/k/v projections, q/k-norm, RoPE and the KV-cache write of one layer: (q, k_all, v_all)."""

    B = x.shape[0]
    nq, nkv, hd = m.num_attention_heads, m.num_key_value_heads, m.head_dim
    h = _rmsnorm(x, L["ln1"])
    if packed:
        qkv = _lin(h, L, "qkv")
        q, k, v = qkv.split([m.q_dim, m.kv_dim, m.kv_dim], dim=-1)
    else:
        q = _lin(h, L, "q")
        k = _lin(h, L, "k")
        v = _lin(h, L, "v")
    q = q.view(B, 1, nq, hd)
    k = k.view(B, 1, nkv, hd)
    v = v.view(B, 1, nkv, hd)
    if m.qk_norm:
        q = _rmsnorm(q, L["qn"])
        k = _rmsnorm(k, L["kn"])
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    q = _rope(q, c, s)
    k = _rope(k, c, s)
    kc.index_copy_(2, cache_pos, k)
    vc.index_copy_(2, cache_pos, v)
    ctx = kc.shape[2]
    return q, kc[:, :, :ctx], vc[:, :, :ctx]


def _attention(q, kk, vv):
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, kk, vv, enable_gqa=True)


def _post_attention(m: ModelSpec, L: dict, a, residual, packed: bool):
    """Output projection, residual add and the MLP block of one layer: the layer's output."""
    import torch.nn.functional as F

    B = a.shape[0]
    a = a.transpose(1, 2).contiguous()
    a = a.reshape(B, 1, m.q_dim)
    x = residual + _lin(a, L, "o")
    residual = x
    h = _rmsnorm(x, L["ln2"])
    if packed:
        gu = _lin(h, L, "gate_up")
        g, u = gu.chunk(2, dim=-1)
    else:
        g = _lin(h, L, "gate")
        u = _lin(h, L, "up")
    return residual + _lin(F.silu(g) * u, L, "down")


def _head(w: Weights, x):
    import torch.nn.functional as F

    x = _rmsnorm(x, w.final_norm)
    return F.linear(x[:, -1, :], w.lm_head)


def decode_step(m: ModelSpec, w: Weights, cache, input_ids, position_ids, cache_pos, packed: bool = False):
    """One decode step: input_ids/position_ids [B, 1] int64, cache_pos [1] int64 (= ctx - 1).
    Returns logits [B, vocab] of each sequence's (only) token."""
    import torch.nn.functional as F

    x = F.embedding(input_ids, w.embed)
    cos, sin = _rotary(m, w, position_ids, x.dtype)
    for li, L in enumerate(w.layers):
        kc, vc = cache[li]
        q, kk, vv = _pre_attention(m, L, x, cos, sin, kc, vc, cache_pos, packed)
        x = _post_attention(m, L, _attention(q, kk, vv), x, packed)
    return _head(w, x)


def decode_pieces(m: ModelSpec, w: Weights, cache, input_ids, position_ids, cache_pos, packed: bool = False,
                  compile_fn=None):
    """The same step cut at attention, as vLLM's piecewise graphs cut it: a list of callables to run
    in order; the even ones are graph pieces, the odd ones attention (run eagerly). They pass tensors
    through `state`; the last piece leaves the logits in state['out']. With `compile_fn` (e.g.
    torch.compile) each piece body is compiled once and reused for every layer."""
    import torch.nn.functional as F

    st: dict = {}
    wrap = compile_fn or (lambda f: f)

    def first(ids, pos, L0, kc, vc, cpos):
        x = F.embedding(ids, w.embed)
        cos, sin = _rotary(m, w, pos, x.dtype)
        q, kk, vv = _pre_attention(m, L0, x, cos, sin, kc, vc, cpos, packed)
        return x, cos, sin, q, kk, vv

    def mid(a, res, L, Ln, cos, sin, kc, vc, cpos):
        x = _post_attention(m, L, a, res, packed)
        q, kk, vv = _pre_attention(m, Ln, x, cos, sin, kc, vc, cpos, packed)
        return x, q, kk, vv

    def last(a, res, L):
        return _head(w, _post_attention(m, L, a, res, packed))

    first_c, mid_c, last_c = wrap(first), wrap(mid), wrap(last)
    n = len(w.layers)
    out = []

    def p_first():
        kc, vc = cache[0]
        st["x"], st["cos"], st["sin"], st["q"], st["kk"], st["vv"] = first_c(
            input_ids, position_ids, w.layers[0], kc, vc, cache_pos)

    def p_attn():
        st["a"] = _attention(st["q"], st["kk"], st["vv"])

    def p_mid(i):
        def run():
            kc, vc = cache[i + 1]
            st["x"], st["q"], st["kk"], st["vv"] = mid_c(st["a"], st["x"], w.layers[i], w.layers[i + 1],
                                                         st["cos"], st["sin"], kc, vc, cache_pos)
        return run

    def p_last():
        st["out"] = last_c(st["a"], st["x"], w.layers[n - 1])

    out.append(p_first)
    for i in range(n - 1):
        out += [p_attn, p_mid(i)]
    out += [p_attn, p_last]
    return out, st


class Runner:
    """A model at one fusion level with a static cache for (batch, ctx): `step()` runs one decode
    step eagerly (or through the compiled function); `capture()` records it as CUDA graph(s):
    `mode="full"` one graph of the whole step, `mode="piecewise"` one graph per piece between
    attention ops (attention stays eager), as vLLM's piecewise mode does. `replay()` runs what
    was captured. `dynamic` picks torch.compile's dynamic-shape mode for fusion `compiled`."""

    _compiled: dict = {}

    def __init__(self, model: str | ModelSpec, fusion: str, batch: int, ctx: int, weights: Weights | None = None,
                 cache=None, device="cuda", dynamic: bool = True, lora_rank: int = 0):
        import torch

        self.m = PRESETS[model] if isinstance(model, str) else model
        if fusion not in ("none", "packed", "compiled"):
            raise ValueError(f"reference decoder has no fusion level '{fusion}'")
        self.fusion, self.batch, self.ctx, self.dynamic = fusion, batch, ctx, dynamic
        self.w = weights if weights is not None else make_weights(self.m, device, lora_rank=lora_rank)
        self.cache = cache if cache is not None else make_cache(self.m, batch, ctx, device)
        g = torch.Generator(device=device).manual_seed(batch * 7919 + ctx)
        self.ids = torch.randint(0, self.m.vocab_size, (batch, 1), device=device, generator=g)
        self.pos = torch.full((batch, 1), ctx - 1, device=device, dtype=torch.long)
        self.cpos = torch.tensor([ctx - 1], device=device, dtype=torch.long)
        self.fn = self._fn()
        self.graph = None
        self.pieces = None

    def _compile(self, f):
        import torch

        return torch.compile(f, dynamic=self.dynamic, fullgraph=True)

    def _fn(self):
        m = self.m
        if self.fusion == "compiled":
            key = (m.name, m.num_hidden_layers, self.dynamic, "lora" in self.w.layers[0])
            if key not in Runner._compiled:
                def f(w, cache, ids, pos, cpos):
                    return decode_step(m, w, cache, ids, pos, cpos, packed=False)
                Runner._compiled[key] = self._compile(f)
            return Runner._compiled[key]
        packed = self.fusion == "packed"
        return lambda w, cache, ids, pos, cpos: decode_step(m, w, cache, ids, pos, cpos, packed=packed)

    def step(self):
        return self.fn(self.w, self.cache, self.ids, self.pos, self.cpos)

    def _piece_list(self):
        comp = self._compile if self.fusion == "compiled" else None
        return decode_pieces(self.m, self.w, self.cache, self.ids, self.pos, self.cpos,
                             packed=self.fusion == "packed", compile_fn=comp)

    def capture(self, pool=None, warmup: int = 2, mode: str = "full"):
        """Capture one step (after `warmup` runs on a side stream); returns the graph (full) or the
        list of piece graphs (piecewise)."""
        import torch

        if mode == "piecewise":
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            fns, st = self._piece_list()
            with torch.cuda.stream(s):
                for _ in range(warmup):
                    for f in fns:
                        f()
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            self.pieces = []
            for i, f in enumerate(fns):
                if i % 2 == 0:
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g, pool=pool):
                        f()
                    self.pieces.append((g, None))
                else:
                    f()
                    self.pieces.append((None, f))
            self.out = st.get("out")
            self._piece_state = st
            return [g for g, _ in self.pieces if g is not None]
        self.graph, self.out = warm_then_capture(self.step, warmup, pool)
        return self.graph

    def replay(self):
        if self.pieces is not None:
            for g, f in self.pieces:
                g.replay() if g is not None else f()
        else:
            self.graph.replay()

    def release(self):
        self.graph = self.pieces = self.out = None
        self._piece_state = None


def warm_then_capture(step, warmup: int = 2, pool=None):
    """Run `step` `warmup` times on a side stream (as engines warm up before capturing), then capture one
    call as a CUDA graph; returns (graph, the captured call's output)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool):
        out = step()
    return g, out


def model_spec(name: str, quick: bool = False) -> ModelSpec:
    """A preset; under `--quick` (a pipeline check, not a measurement) cut to 2 layers so compiles are fast."""
    import dataclasses

    m = PRESETS[name]
    return dataclasses.replace(m, num_hidden_layers=2) if quick else m
