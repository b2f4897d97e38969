"""Fusion what-if on an imported kernel sequence: which neighbouring kernels Inductor-like rules merge.

RULE: elementwise, reduction, copy and embedding kernels are fusible; GEMM, attention and sampling
kernels and memcpy/memset events are barriers (Inductor leaves matmuls and attention to extern
kernels and does not fuse across them). A maximal run of fusible kernels between two barriers
merges into as few kernels as two limits allow: a merged kernel holds at most ONE reduction (a
second reduction starts a new kernel, since reductions over different tensors need their own
loop), and an in-place indexed write into an existing buffer (index_copy_, index_put_, scatter:
KV-cache writes) ends its kernel. The merged kernel takes the longest member's GPU time (it still
streams the group's largest tensor once; the other members' traffic folds into that pass) and
is a reduction if it holds one. On the reference decoder's trace this gives 15 kernels per layer
where Inductor generated 16 (calibration/validation/trace_import_validation.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.model.kernels import OpClass

FUSIBLE = (OpClass.ELEMENTWISE, OpClass.REDUCTION, OpClass.COPY, OpClass.EMBEDDING)
INDEXED_WRITES = ("index_copy", "index_put", "scatter")
RULE = ("runs of elementwise/reduction/copy/embedding kernels between GEMM, attention, sampling kernels and "
        "memcpy/memset events merge; a merged kernel holds at most one reduction and ends after an in-place "
        "indexed write (index_copy_/index_put_/scatter); its GPU time is its longest member's")


@dataclass(frozen=True)
class Fused:
    name: str
    op_class: OpClass
    gpu_us: float
    members: tuple[int, ...]  # indices into the input sequence


def fusible(op_class: OpClass, event: str = "kernel") -> bool:
    return op_class in FUSIBLE and event == "kernel"


def _merged(kernels, run: list[int]) -> Fused:
    if len(run) == 1:
        i = run[0]
        return Fused(kernels[i][0], kernels[i][1], kernels[i][2], (i,))
    cls = [kernels[i][1] for i in run]
    c = (OpClass.REDUCTION if OpClass.REDUCTION in cls
         else OpClass.COPY if all(x is OpClass.COPY for x in cls) else OpClass.ELEMENTWISE)
    return Fused("fused(" + " + ".join(kernels[i][0] for i in run) + ")", c, max(kernels[i][2] for i in run),
                 tuple(run))


def fuse(kernels: list[tuple[str, OpClass, float, str]]) -> list[Fused]:
    """kernels: (label, class, gpu_us, event) in launch order -> the merged sequence."""
    out: list[Fused] = []
    run: list[int] = []
    has_red = False

    def flush():
        nonlocal has_red
        if run:
            out.append(_merged(kernels, run))
        run.clear()
        has_red = False

    for i, (label, cls, _, ev) in enumerate(kernels):
        if not fusible(cls, ev):
            flush()
            out.append(Fused(label, cls, kernels[i][2], (i,)))
            continue
        if cls is OpClass.REDUCTION and has_red:
            flush()
        run.append(i)
        has_red = has_red or cls is OpClass.REDUCTION
        if any(w in label.lower() for w in INDEXED_WRITES):
            flush()
    flush()
    return out


def summary(kernels: list[tuple[str, OpClass, float, str]], fused: list[Fused]) -> dict:
    """Kernels before/after and the merged runs grouped by pattern, most kernels saved first."""
    groups: dict[tuple, dict] = {}
    for f in fused:
        if len(f.members) < 2:
            continue
        key = tuple(kernels[i][0] for i in f.members)
        g = groups.setdefault(key, {"pattern": " + ".join(key), "members": len(key), "count": 0, "saved": 0,
                                    "gpu_us_before": 0.0, "gpu_us_after": 0.0})
        g["count"] += 1
        g["saved"] += len(key) - 1
        g["gpu_us_before"] += sum(kernels[i][2] for i in f.members)
        g["gpu_us_after"] += f.gpu_us
    rows = sorted(groups.values(), key=lambda g: (-g["saved"], g["pattern"]))
    for g in rows:
        g["gpu_us_before"] = round(g["gpu_us_before"], 3)
        g["gpu_us_after"] = round(g["gpu_us_after"], 3)
    return {"rule": RULE, "kernels_before": len(kernels), "kernels_after": len(fused),
            "saved": len(kernels) - len(fused), "groups": rows}
