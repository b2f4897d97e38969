"""Fusion what-if on an imported kernel sequence: which neighbouring kernels Inductor-like rules merge.

RULE: kernels of class elementwise, reduction or copy (real kernels, not memcpy/memset events)
are fusible; GEMM, attention, embedding and sampling kernels and memcpy/memset events are
barriers (Inductor leaves matmuls and attention to extern kernels and does not fuse across them).
Every maximal run of consecutive fusible kernels between two barriers becomes ONE kernel. The
merged kernel takes the longest member's GPU time (it must still stream the run's largest tensor
once; every other member's traffic is folded into that pass) and is a reduction if any member is
one. This is an upper bound on what Inductor fuses: it may split a run where reductions have
different shapes, so the real kernel count can be a little higher.
"""

from __future__ import annotations

from dataclasses import dataclass

from .kernels import OpClass

FUSIBLE = (OpClass.ELEMENTWISE, OpClass.REDUCTION, OpClass.COPY)
RULE = ("each maximal run of consecutive elementwise/reduction/copy kernels between GEMM, attention, "
        "embedding, sampling kernels or memcpy/memset events merges into one kernel whose GPU time is "
        "the run's longest member")


@dataclass(frozen=True)
class Fused:
    name: str
    op_class: OpClass
    gpu_us: float
    members: tuple[int, ...]  # indices into the input sequence


def fusible(op_class: OpClass, event: str = "kernel") -> bool:
    return op_class in FUSIBLE and event == "kernel"


def fuse(kernels: list[tuple[str, OpClass, float, str]]) -> list[Fused]:
    """kernels: (label, class, gpu_us, event) in launch order -> the merged sequence."""
    out: list[Fused] = []
    run: list[int] = []

    def flush():
        if not run:
            return
        if len(run) == 1:
            i = run[0]
            out.append(Fused(kernels[i][0], kernels[i][1], kernels[i][2], (i,)))
        else:
            cls = [kernels[i][1] for i in run]
            c = (OpClass.REDUCTION if OpClass.REDUCTION in cls
                 else OpClass.COPY if all(x is OpClass.COPY for x in cls) else OpClass.ELEMENTWISE)
            out.append(Fused("fused(" + " + ".join(kernels[i][0] for i in run) + ")", c,
                             max(kernels[i][2] for i in run), tuple(run)))
        run.clear()

    for i, (_, cls, _, ev) in enumerate(kernels):
        if fusible(cls, ev):
            run.append(i)
        else:
            flush()
            out.append(Fused(kernels[i][0], cls, kernels[i][2], (i,)))
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
