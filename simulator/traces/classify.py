"""Op classes of traced kernels, from the kernel name and the aten ops that launched it.

Rules, first match wins (names compared lower-case):
1. an explicit `launchsim.op_class` argument on the kernel event (traces written by export-trace);
2. `gpu_memcpy` / `gpu_memset` events -> copy;
3. by the launching aten ops (innermost or top-level): embedding -> embedding; topk, sort,
   multinomial, argmax -> sampling; scaled_dot_product / attention -> attention;
4. by the kernel name: flash, fmha, sdpa, attention, attn -> attention (checked before gemm, since
   attention kernels are often cutlass-based); gemm, gemv, cutlass, cublas, sm90_xmma, xmma, nvjet,
   triton_tem (Inductor matmul templates) -> gemm; topk, sort, multinomial, sampl -> sampling;
   triton_red, triton_per, reduce, norm, mean, softmax, welford -> reduction; copy, catarray, cat_, index,
   gather, scatter, transpose -> copy; everything else (vectorized/unrolled elementwise,
   triton_poi) -> elementwise.
"""

from __future__ import annotations

from simulator.model.kernels import LaunchPath, OpClass

_ATEN_RULES: tuple[tuple[OpClass, tuple[str, ...]], ...] = (
    (OpClass.EMBEDDING, ("aten::embedding",)),
    (OpClass.SAMPLING, ("aten::topk", "aten::sort", "aten::multinomial", "aten::argmax")),
    (OpClass.ATTENTION, ("scaled_dot_product", "attention")),
)

_NAME_RULES: tuple[tuple[OpClass, tuple[str, ...]], ...] = (
    (OpClass.ATTENTION, ("flash", "fmha", "sdpa", "attention", "attn")),
    (OpClass.GEMM, ("gemm", "gemv", "cutlass", "cublas", "sm90_xmma", "xmma", "nvjet", "triton_tem")),
    (OpClass.SAMPLING, ("topk", "sort", "multinomial", "sampl")),
    (OpClass.REDUCTION, ("triton_red", "triton_per", "reduce", "norm", "mean", "softmax", "welford")),
    (OpClass.COPY, ("copy", "catarray", "cat_", "index", "gather", "scatter", "transpose")),
)

EAGER_PATH = {
    OpClass.GEMM: LaunchPath.EAGER_GEMM,
    OpClass.ATTENTION: LaunchPath.EAGER_ATTENTION,
    OpClass.ELEMENTWISE: LaunchPath.EAGER_ELEMENTWISE,
    OpClass.REDUCTION: LaunchPath.EAGER_REDUCTION,
    OpClass.COPY: LaunchPath.EAGER_COPY,
    OpClass.EMBEDDING: LaunchPath.EAGER_EMBEDDING,
    OpClass.SAMPLING: LaunchPath.EAGER_REDUCTION,
    OpClass.VIEW: LaunchPath.EAGER_VIEW,
}


def classify(kernel: str, cat: str = "kernel", ops: tuple[str, ...] = (), hint: str | None = None) -> OpClass:
    """The op class of one GPU event. `ops` are the names of the cpu ops that launched it."""
    if hint:
        try:
            return OpClass(hint)
        except ValueError:
            pass
    if cat in ("gpu_memcpy", "gpu_memset"):
        return OpClass.COPY
    lops = [o.lower() for o in ops if o]
    for cls, keys in _ATEN_RULES:
        if any(k in o for o in lops for k in keys):
            return cls
    k = kernel.lower()
    for cls, keys in _NAME_RULES:
        if any(s in k for s in keys):
            return cls
    return OpClass.ELEMENTWISE
