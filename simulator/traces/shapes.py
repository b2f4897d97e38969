"""Sizing a traced kernel from its recorded input shapes: the cost-model op (flops, bytes, GEMM m/n/k,
attention batch/ctx) of an aten op's `Input Dims`, and those shapes at another batch / context.
Used by the what-ifs (simulator/traces/whatif.py) and the retargeting (simulator/traces/retarget.py)."""

from __future__ import annotations

import math
import re

from simulator.model.costs import CostModel
from simulator.model.kernels import Op, OpClass
from simulator.model.workload_file import KernelEntry
from simulator.traces.classify import EAGER_PATH

US = 1e-6
_ESIZE = {"c10::bfloat16": 2, "c10::half": 2, "float": 4, "double": 8, "long int": 8, "long": 8, "int": 4,
          "short int": 2, "bool": 1, "unsigned char": 1, "signed char": 1, "c10::float8_e4m3fn": 1}
_INDEXED_WRITES = ("index_copy", "index_put", "scatter", "slice_scatter", "select_scatter", "index_add")



def label(k: KernelEntry) -> str:
    """A short readable name: the top-level aten op, else the kernel name without templates."""
    if k.op:
        return k.op
    n = re.sub(r"<.*", "", k.name.replace("void ", ""))
    return n.split("::")[-1][:60] or k.name[:60]


def _is_shape(d) -> bool:
    return isinstance(d, list) and bool(d) and all(isinstance(x, int) for x in d)


def _tensors(dims: list, dtypes: list) -> list[tuple[list[int], int]]:
    """(shape, element bytes) of each tensor input; a tensor list (e.g. cat's inputs) counts each."""
    out = []
    for i, d in enumerate(dims):
        t = str(dtypes[i]).lower() if i < len(dtypes) else ""
        e = _ESIZE.get(t, 2)
        if _is_shape(d):
            out.append((d, e))
        elif isinstance(d, list) and d and all(_is_shape(x) for x in d):
            out.extend((x, e) for x in d)
    return out


def _gpu_s(costs: CostModel, op: Op) -> float:
    """The cost model's time, with byte curves held flat below their first grid point (kernel time is
    flat at small sizes; the roofline floor there need not match the curve's first point)."""
    t = costs.profile.device.tables
    curve = {OpClass.ELEMENTWISE: t.elementwise, OpClass.REDUCTION: t.reduction or t.elementwise,
             OpClass.COPY: t.memcopy or t.elementwise, OpClass.EMBEDDING: t.embedding or t.memcopy,
             OpClass.SAMPLING: t.reduction}.get(op.op_class)
    if curve is not None and op.bytes < curve.bytes[0]:
        return curve.us[0] * US
    return costs.gpu_s(op)


def cost_op(k: KernelEntry, dims: list) -> Op | None:
    """An op with flops/bytes/shape for the cost model, from an aten op's input shapes."""
    cls = OpClass(k.op_class)
    ts = _tensors(dims, k.dtypes or [])
    if not ts:
        return None
    op = (k.shape_op or "").lower()
    path = EAGER_PATH[cls]
    if cls is OpClass.GEMM and len(ts) >= 2:
        (a, e), (b, _) = (ts[-2], ts[-1]) if op.endswith("addmm") else (ts[0], ts[1])
        if op.endswith("linear"):
            m, kk, n = math.prod(a[:-1]), a[-1], b[0]
        elif len(b) == 2:
            m, kk, n = math.prod(a[:-1]), a[-1], b[-1]
        else:  # batched: fold the batch into m for flops and bytes; no table lookup
            bt = math.prod(a[:-2])
            f = 2.0 * bt * a[-2] * a[-1] * b[-1]
            return Op(k.name, cls, path, f, e * bt * (a[-2] * a[-1] + a[-1] * b[-1] + a[-2] * b[-1]))
        return Op(k.name, cls, path, 2.0 * m * n * kk, e * (m * kk + n * kk + m * n), (("k", kk), ("m", m), ("n", n)))
    if cls is OpClass.ATTENTION and "scaled_dot_product" in op and len(ts) >= 2 and len(ts[0][0]) == 4:
        (q, e), (kv, _) = ts[0], ts[1]
        B, H, L, hd = q
        KV, S = kv[1], kv[2]
        shape = (("batch", B), ("ctx", S), ("head_dim", hd), ("heads", H), ("kv_heads", KV), ("q_len", L))
        return Op(k.name, cls, path, 4.0 * B * H * L * S * hd, e * (2 * B * KV * S * hd + 2 * B * H * L * hd), shape)
    if cls is OpClass.EMBEDDING and op.endswith("embedding") and len(ts) >= 2:
        (w, e), (ids, _) = ts[0], ts[1]
        rows = math.prod(ids)
        return Op(k.name, cls, path, 0.0, 2.0 * e * rows * w[-1] + 8.0 * rows)
    if any(w in op for w in _INDEXED_WRITES):
        d, e = ts[-1]
        return Op(k.name, cls, path, float(math.prod(d)), 2.0 * e * math.prod(d))
    big = max(ts, key=lambda t: math.prod(t[0]))
    nbytes = sum(math.prod(d) * e for d, e in ts)
    if not op.endswith("_"):  # an in-place / copy_ op writes its first input, already counted; others write a result
        nbytes += math.prod(big[0]) * big[1]
    return Op(k.name, cls, path, float(math.prod(big[0])), float(nbytes))


def rescale_dims(dims: list, b0: int, b1: int, q_len: int, c0: int | None, c1: int | None, attention: bool) -> list:
    """Input shapes at batch b1 (and context c1): a tensor of rank >= 2 whose leading dim is the
    traced batch (or batch x tokens) is resized; attention's key/value length becomes c1."""
    def one(i, d):
        if not (_is_shape(d) and len(d) >= 2):
            return d
        d = list(d)
        if b0 != b1 and d[0] in (b0, b0 * q_len):
            d[0] = d[0] // b0 * b1
        if attention and c0 and c1 and i in (1, 2) and len(d) == 4 and d[2] == c0:
            d[2] = c1
        return d

    return [[one(i, x) for x in d] if isinstance(d, list) and d and all(_is_shape(x) for x in d) else one(i, d)
            for i, d in enumerate(dims)]
