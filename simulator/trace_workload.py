"""From a trace file to a workload: read, link, find steps, keep the representative step."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .trace_import import ImportedTrace, import_trace, infer_batch, representative
from .trace_read import read_trace
from .workload_file import FORMAT_VERSION, StepsInfo, Workload


def _device(meta: dict) -> str | None:
    props = meta.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        return props[0].get("name")
    return None


def workload_from_trace(path: str | Path, steps: str | int = "auto",
                        batch: int | None = None) -> tuple[Workload, ImportedTrace]:
    """Import `path`; `batch` overrides the batch size read from recorded shapes."""
    p = Path(path)
    imp = import_trace(read_trace(p), steps)
    kernels, tail, how = representative(imp)
    b, q_len, ctx = infer_batch(imp.kernels)
    name = p.name
    for suf in (".gz", ".json"):
        name = name[: -len(suf)] if name.endswith(suf) else name
    wl = Workload(
        format_version=FORMAT_VERSION,
        kind="launchsim-workload",
        name=name,
        source={"trace": str(p), "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
                "device": _device(imp.meta), "kernels_in_trace": len(imp.kernels)},
        batch=batch or b,
        q_len=q_len,
        ctx=ctx,
        steps=StepsInfo(method=imp.method, representative=how, outside_kernels=imp.outside, rows=imp.step_rows),
        host_tail_us=round(float(tail), 4),
        kernels=kernels,
    )
    return wl, imp
