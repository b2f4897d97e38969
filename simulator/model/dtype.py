"""Weight and KV-cache dtypes (`--dtype bf16|fp8`, `--kv-dtype bf16|fp8`; scenario fields `dtype`, `kv_dtype`).

What `fp8` means here (vLLM's FP8 W8A8 path, e4m3, PER-TENSOR scales: one fp32 scale per weight matrix and one
per activation tensor):
- weights: every projection GEMM's weight (q/k/v/o, gate/up/down, every expert) is 1 byte; norms, the MoE
  router, embeddings and lm_head stay bf16 (vLLM does not quantize them). `ModelSpec.weight_bytes` counts this,
  so graph memory, KV-cache capacity and every study see it. The scales' bytes are ignored (a few KB).
- GEMM GPU time: `device.tables.gemm_fp8` (calibration/build_moe_fp8.py: `torch._scaled_mm`, e4m3 x e4m3,
  per-tensor fp32 scales, bf16 out, measured on one H200); where a shape has no table, the roofline with
  twice the bf16 peak and 1-byte weights (unmeasured). The lm_head and router GEMMs stay bf16.
- activation quant before each fp8 GEMM (the GEMM's input is quantized once; q/k/v and gate/up share it):
  * fusion none / packed / compiled: dynamic per-tensor quant as vLLM's eager path does it, two kernels: an
    abs-max reduction and a scale + divide-and-cast, timed from `device.tables.fp8_quant` (measured as eager
    torch ops on the H200; at `compiled` the same two kernels are assumed, not measured);
  * fusion fused: static activation scales, as vLLM's fusion passes need: the quant of the qkv and gate_up
    inputs is fused into the RMSNorm kernel and the quant of the down input into SiLU-and-mul (no extra kernel);
    the attention output still needs one static-quant kernel before o_proj.
- KV cache: bf16 unless `--kv-dtype fp8` (1 byte per element: KV capacity doubles). Attention kernel time stays
  the measured bf16 table's (an fp8-KV attention kernel was not measured).
- MoE experts under fp8: bytes are 1 per weight; the grouped-GEMM time is the measured bf16 table's (an fp8
  grouped GEMM was not measured): an upper bound, stated in the result as `fp8_experts_measured: false`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from simulator.model.tables import REFUSE, loglog

from simulator.common import vocab as V
from simulator.common.errors import UserError

DTYPES = V.values(V.Dtype)
FP8_GEMMS = frozenset({"q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj", "gate_proj", "up_proj", "gate_up_proj",
                       "down_proj", "shared_gate_up_proj", "shared_down_proj"})


class DtypeError(UserError):
    """A dtype launchsim does not model."""


def check_dtype(v, flag: str = "dtype") -> str:
    if v not in DTYPES:
        raise DtypeError(f"{flag} must be one of {', '.join(DTYPES)}, got {v!r}")
    return v


def with_dtype(model, dtype: str = "bf16", kv_dtype: str = "bf16", flag: str = "dtype"):
    """`model` with its weight and KV-cache dtypes set (the model itself when both are bf16)."""
    check_dtype(dtype, flag)
    check_dtype(kv_dtype, flag.replace("dtype", "kv-dtype") if flag.startswith("-") else "kv_" + flag)
    if dtype == model.weight_dtype and kv_dtype == model.kv_dtype:
        return model
    return dataclasses.replace(model, weight_dtype=dtype, kv_dtype=kv_dtype,
                               name=model.name + (f"-{dtype}" if dtype != "bf16" else "")
                               + (f"-kv{kv_dtype}" if kv_dtype != "bf16" else ""))


def dtype_fields(model) -> dict:
    """Fields a JSON result adds: the dtypes, when either is not bf16."""
    if model.weight_dtype == "bf16" and model.kv_dtype == "bf16":
        return {}
    d = {"dtype": model.weight_dtype, "kv_dtype": model.kv_dtype, "fp8_scaling": "per-tensor"}
    if getattr(model, "num_experts", 0) and model.weight_dtype == "fp8":
        d["fp8_experts_measured"] = False
    return d


def quant_ops(b, site: str, rows: int, k: int, fusion: str) -> None:
    """Append the activation-quant kernels before an fp8 GEMM reading a `rows` x `k` input to builder `b`
    (`site`: 'norm' (after an RMSNorm), 'silu' (after SiLU-and-mul) or 'attn' (the attention output))."""
    if b.m.weight_dtype != "fp8":
        return
    from simulator.model.kernels import LaunchPath as P
    from simulator.model.kernels import OpClass

    E = rows * k
    if fusion == "fused":
        if site == "attn":  # static scale: one scale-and-cast kernel
            b.add("static_fp8_quant", OpClass.ELEMENTWISE, P.CUSTOM_OP, E, E * 3, quant=2, m=rows, k=k)
        return
    red, ew = (P.COMPILED, P.COMPILED) if fusion == "compiled" else (P.EAGER_REDUCTION, P.EAGER_ELEMENTWISE)
    b.add(f"fp8_quant.absmax.{site}", OpClass.REDUCTION, red, E, E * 2, quant=1, m=rows, k=k)
    b.add(f"fp8_quant.scale_cast.{site}", OpClass.ELEMENTWISE, ew, E, E * 3, quant=2, m=rows, k=k)


def _loglog(x: float, xs, ys) -> float | None:
    """y(x) in log-log space (simulator/model/tables.py); the FP8 tables (GEMM by m, quant by m and by k) refuse
    outside their grid: None (roofline)."""
    return loglog(x, xs, ys, below=REFUSE, above=REFUSE)


def fp8_gemm_us(tables, n: int, k: int, m: int) -> float | None:
    """µs of a per-tensor fp8 GEMM (m x k) @ (k x n) from `tables.gemm_fp8`, or None outside the table."""
    for t in tables.gemm_fp8:
        if t.n == n and t.k == k:
            return _loglog(m, t.m, t.us)
    return None


def quant_us(tables, part: int, m: int, k: int) -> float | None:
    """µs of one activation-quant kernel (part 1: abs-max, 2: scale + cast) of an m x k input, log-log in m
    within each measured k and then log-log in k between the two nearest k; None outside the measured k or m."""
    rows = sorted(tables.fp8_quant, key=lambda r: r.k)
    if not rows or not (rows[0].k <= k <= rows[-1].k):
        return None

    def at(r):
        return _loglog(m, r.m, r.absmax_us if part == 1 else r.scale_cast_us)

    ks = [r.k for r in rows]
    i = int(np.searchsorted(ks, k))
    if ks[min(i, len(ks) - 1)] == k:
        return at(rows[i])
    lo, hi = rows[i - 1], rows[i]
    a, c = at(lo), at(hi)
    if a is None or c is None:
        return None
    return _loglog(k, [lo.k, hi.k], [a, c])


__all__ = ["DTYPES", "FP8_GEMMS", "DtypeError", "check_dtype", "with_dtype", "dtype_fields", "quant_ops",
           "fp8_gemm_us", "quant_us"]
