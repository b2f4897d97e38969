"""Mixture-of-Experts layers: config fields, the kernels of an MoE block at each fusion level, and their GPU time.

Config (Hugging Face config.json, `moe_fields`): num_experts (or Mixtral's num_local_experts), num_experts_per_tok,
moe_intermediate_size (default intermediate_size, as Mixtral), shared_expert_intermediate_size (Qwen2-MoE's shared
expert, with its sigmoid gate), norm_topk_prob. Every layer is sparse (models.unmodelled_field refuses others).

Routing (decode, uniform): each of B tokens picks k of E experts, so the expected number of experts with at least
one token is  a(B) = E * (1 - (1 - k/E)^B)  (each expert is missed by one token with probability 1 - k/E), and the
active experts get t = B k / a tokens each on average. The grouped GEMMs are timed from `device.tables.grouped_gemm`
(measured torch._grouped_mm, the first e experts with t tokens each) at (a, t), log-log between grid points. The
per-expert imbalance of real routing is not modelled (calibration/validate_moe_fp8.py compares routed batches).

Kernels of the MoE block, after the post-attention RMSNorm (the residual add after it is the dense builder's):
- fusion none / packed: transformers' Qwen3-MoE with its grouped_mm experts (the sequence profiled on the H200,
  calibration/measured/h200-round-d/moe_counts.json, 34 kernels): router GEMM, fp32 cast, softmax, top-k (2),
  renorm (sum, div), cast, sort of expert ids (arange, radix sort, floor-div, gather), gather of token rows + copy,
  per-expert offsets (fill, histogram, scan init, scan, compare, clamp, cast), grouped GEMM gate_up with its
  data-prep kernel, SiLU, chunk copy, mul, grouped GEMM down with its data-prep kernel, two elementwise for the
  routing weights, and the un-permute (arange, index_put, gather, sum over k);
- fusion fused: vLLM's fused_moe: router GEMM, topk_softmax, moe_align_block_size, fused_moe (w1), silu_and_mul,
  fused_moe (w2), moe_sum: 7 kernels (a shared expert adds gate_up, silu_and_mul, down, its gate GEMM and a
  sigmoid-mul-add). The fused_moe Triton kernel is timed from the same grouped-GEMM table (not measured itself);
- fusion compiled: refused (torch.compile of an MoE layer was not measured).
Router kernels with a measured routing table (softmax, top-k, sort, gather) take its time at the step's batch;
the rest are timed by the byte curves like every small kernel. Expert weights: all E experts (ModelSpec.params).
"""

from __future__ import annotations

from simulator.model.tables import CLAMP, loglog

from simulator.model.kernels import LaunchPath as P
from simulator.model.kernels import OpClass


def _int_field(cfg, k, bad, zero_ok: bool, cap: int):
    v = cfg.get(k)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (v == 0 and not zero_ok):
        raise bad(k, f"must be a {'non-negative' if zero_ok else 'positive'} integer, got {v!r}")
    if v > cap:
        raise bad(k, f"{v:,} is above the limit of {cap:,}")
    return v


def moe_fields(cfg: dict, bad) -> dict:
    """ModelSpec keyword fields of a config.json's MoE settings ({} for a dense model); `bad(key, msg)` raises.

    A dense config is one with no expert count (num_experts / num_local_experts absent, null or 0) and no top-k or
    expert size. An expert count that is not an integer (a boolean, a list) is refused, as are an empty expert count
    next to num_experts_per_tok / moe_intermediate_size (a MoE config with its experts missing, never read as
    dense), moe_intermediate_size 0, and num_experts and num_local_experts that disagree."""
    present = [k for k in ("num_experts", "num_local_experts") if k in cfg and cfg[k] is not None]
    for k in present:
        v = cfg[k]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise bad(k, f"must be a non-negative integer (0 or null: a dense model), got {v!r}")
    counts = {k: cfg[k] for k in present}
    if len(set(counts.values())) > 1:
        raise bad("num_local_experts", f"num_experts ({counts['num_experts']}) and num_local_experts "
                                       f"({counts['num_local_experts']}) disagree")
    E = next((v for v in counts.values() if v), 0)
    moe_keys = [k for k in ("num_experts_per_tok", "moe_intermediate_size") if cfg.get(k) is not None]
    if not E:
        if moe_keys:
            key = present[0] if present else "num_experts"
            raise bad(key, f"no experts ({cfg.get(key)!r}) but {moe_keys[0]} is set: a Mixture-of-Experts config "
                           "needs a positive expert count (refusing to read it as a dense model)")
        return {}
    key = next(k for k, v in counts.items() if v)
    if key not in cfg:
        key = "num_experts"
    if E > 1 << 12:
        raise bad(key, f"{E:,} is above the limit of {1 << 12:,}")
    if cfg.get("num_experts_per_tok") is None:
        raise bad("num_experts_per_tok", f"missing field (required with {key})")
    out = {"num_experts_per_tok": _int_field(cfg, "num_experts_per_tok", bad, False, 1 << 12)}
    if cfg.get("moe_intermediate_size") is not None:
        out["moe_intermediate_size"] = _int_field(cfg, "moe_intermediate_size", bad, False, 1 << 20)
    else:
        out["moe_intermediate_size"] = _int_field(cfg, "intermediate_size", bad, False, 1 << 20)  # Mixtral
    out["shared_expert_intermediate_size"] = (
        _int_field(cfg, "shared_expert_intermediate_size", bad, True, 1 << 20)
        if cfg.get("shared_expert_intermediate_size") is not None else 0)
    if out["num_experts_per_tok"] > E:
        raise bad("num_experts_per_tok", f"{out['num_experts_per_tok']} is more than the {E} experts")
    norm = cfg.get("norm_topk_prob", False)
    if not isinstance(norm, bool):
        raise bad("norm_topk_prob", f"must be true or false, got {norm!r}")
    return {"num_experts": E, **out, "norm_topk_prob": norm}


def expected_active_experts(E: int, k: int, B: int) -> float:
    """Expected experts with at least one of B tokens under uniform top-k routing: E (1 - (1 - k/E)^B)."""
    return E * (1.0 - (1.0 - k / E) ** B)


def _loglog(x: float, xs, ys) -> float:
    """y(x) in log-log space (simulator/model/tables.py); the MoE tables (grouped GEMM by tokens per expert and by
    experts, routing by batch) clamp to their grid on both sides: outside it, the nearest measured figure."""
    v = loglog(x, xs, ys, below=CLAMP, above=CLAMP)
    assert v is not None  # clamp never refuses
    return v


def grouped_gemm_us(tables, n: int, k: int, experts: float, tokens: float) -> float | None:
    """µs of one grouped GEMM (k -> n per expert) with `experts` active experts of `tokens` tokens each, from
    `tables.grouped_gemm`: log-log in tokens per expert within each experts row, then log-log in experts (clamped
    to the grid); None where the table has no (n, k)."""
    for t in tables.grouped_gemm:
        if t.n == n and t.k == k:
            col = [_loglog(tokens, t.tokens_per_expert, row) for row in t.us]
            return _loglog(experts, t.experts, col)
    return None


def routing_us(tables, kind: str, batch: int) -> float | None:
    r = tables.moe_routing
    if r is None:
        return None
    return _loglog(batch, r.batch, getattr(r, f"{kind}_us"))


def table_s(tables, op) -> float | None:
    """GPU seconds of an MoE op from the profile's tables, or None (roofline / curves)."""
    if op.dim("grouped"):
        v = grouped_gemm_us(tables, op.dim("n"), op.dim("k"), op.dim("experts_x100") / 100, op.dim("tpe_x100") / 100)
        return None if v is None else v * 1e-6
    kind = dict(ROUTING).get(op.dim("routing"))
    if kind:
        v = routing_us(tables, kind, op.dim("batch"))
        return None if v is None else v * 1e-6 / max(op.dim("parts", 1), 1)
    return None


ROUTING = ((1, "softmax"), (2, "topk"), (3, "argsort"), (4, "gather"))


def _grouped(b, name, n, k, path):
    m, T = b.m, b.s.tokens
    E, K = m.num_experts, m.num_experts_per_tok
    a = expected_active_experts(E, K, T)
    t = T * K / a
    w = 1 if m.weight_dtype == "fp8" else b.e
    b.add(name, OpClass.GEMM, path, 2.0 * T * K * n * k, a * n * k * w + b.e * T * K * (n + k),
          grouped=1, n=n, k=k, experts_x100=round(a * 100), tpe_x100=round(t * 100))


def block_hf(b) -> None:
    """transformers' Qwen3-MoE sparse block (grouped_mm experts), after the post-attention norm."""
    m, T, e = b.m, b.s.tokens, b.e
    H, E, K, I = m.hidden_size, m.num_experts, m.num_experts_per_tok, m.moe_intermediate_size
    TK = T * K
    b.gemm("router", T, E, H)
    b.copy("router.to_fp32", T * E, 2, 4)
    b.add("router.softmax", OpClass.REDUCTION, P.EAGER_REDUCTION, T * E, T * E * 8, routing=1, batch=T)
    for i in (1, 2):
        b.add(f"router.topk.{i}", OpClass.REDUCTION, P.EAGER_REDUCTION, T * E, T * E * 4, routing=2, batch=T,
              parts=2)
    if m.norm_topk_prob:
        b.red("router.renorm_sum", TK, 4, 4 / K)
        b.ew("router.renorm_div", TK, 8, 4)
    b.copy("router.weights_cast", TK, 4, 2)
    b.ew("dispatch.arange", TK, 0, 8)
    b.add("dispatch.sort", OpClass.REDUCTION, P.EAGER_REDUCTION, TK, TK * 16, routing=3, batch=T)
    b.ew("dispatch.floor_div", TK, 8, 8)
    b.ew("dispatch.gather_ids", TK, 8, 8)
    b.add("dispatch.gather_rows", OpClass.COPY, P.EAGER_COPY, TK * H, TK * H * 2 * e, routing=4, batch=T)
    b.copy("dispatch.copy", TK, 8, 8)
    b.ew("offsets.fill", E, 0, 4)
    b.red("offsets.histogram", TK, 8, 4 * E / max(TK, 1))
    b.ew("offsets.scan_init", E, 0, 4)
    b.red("offsets.scan", E, 4, 4)
    b.ew("offsets.compare", E, 8, 1)
    b.ew("offsets.clamp", E, 8, 8)
    b.ew("offsets.cast", E, 8, 4)
    b.ew("experts.prepare_gate_up", E, 8, 8)
    _grouped(b, "experts.gate_up", 2 * I, H, P.EAGER_GEMM)
    b.ew("experts.silu", TK * I, e, e)
    b.copy("experts.chunk", TK * I, e, e)
    b.ew("experts.mul", TK * I, 2 * e, e)
    b.ew("experts.prepare_down", E, 8, 8)
    _grouped(b, "experts.down", H, I, P.EAGER_GEMM)
    b.ew("combine.weights", TK * H, e, e)
    b.ew("combine.mul", TK * H, 2 * e, e)
    b.ew("combine.arange", TK, 0, 8)
    b.copy("combine.index_put", TK * H, e, e)
    b.ew("combine.gather", TK, 8, 8)
    b.red("combine.sum_k", TK * H, e, e / K)
    _shared_eager(b)


def _shared_eager(b) -> None:
    m, T, e = b.m, b.s.tokens, b.e
    S, H = m.shared_expert_intermediate_size, m.hidden_size
    if not S:
        return
    b.gemm("shared_gate_proj", T, S, H)
    b.gemm("shared_up_proj", T, S, H)
    b.ew("shared.silu", T * S, e, e)
    b.ew("shared.mul", T * S, 2 * e, e)
    b.gemm("shared_down_proj", T, H, S)
    b.gemm("shared_expert_gate", T, 1, H)
    b.ew("shared.sigmoid", T, e, e)
    b.ew("shared.gate_mul", T * H, 2 * e, e)
    b.ew("shared.add", T * H, 2 * e, e)


def block_fused(b) -> None:
    """vLLM's fused_moe path, after the fused add-RMSNorm."""
    m, T, e = b.m, b.s.tokens, b.e
    H, E, K, I = m.hidden_size, m.num_experts, m.num_experts_per_tok, m.moe_intermediate_size
    TK, X = T * K, P.CUSTOM_OP
    b.gemm("router", T, E, H)
    b.red("topk_softmax", T * E, e, 8 * K / E, path=X)
    b.red("moe_align_block_size", TK, 4, 8, path=X)
    _grouped(b, "fused_moe.w1", 2 * I, H, X)
    b.ew("silu_and_mul", TK * I, 2 * e, e, path=X)
    _grouped(b, "fused_moe.w2", H, I, X)
    b.red("moe_sum", TK * H, e, e / K, path=X)
    S = m.shared_expert_intermediate_size
    if S:
        b.gemm("shared_gate_up_proj", T, 2 * S, H)
        b.ew("shared.silu_and_mul", T * S, 2 * e, e, path=X)
        b.gemm("shared_down_proj", T, H, S)
        b.gemm("shared_expert_gate", T, 1, H)
        b.ew("shared.sigmoid_mul_add", T * H, 3 * e, e, path=X)


__all__ = [
    "block_fused",
    "block_hf",
    "expected_active_experts",
    "grouped_gemm_us",
    "moe_fields",
    "routing_us",
    "table_s",
]
