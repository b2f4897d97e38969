"""calibration/scripts/engine_loop.py's output -> the profile's `host.engine_step_us` (CPU only, no torch):

    python -m calibration.build_engine calibration/measured/h200-engine/engine_loop.json   # prints the section
    python -m calibration.make_profiles                                                    # rebuilds h200.json

Nothing is fitted: each figure is a measured median (p50 of the per-part host times of the sync loop's parts
pass, graph full, where the forward is one replay and the engine's parts stand alone), per batch size:
- schedule, prep, detokenize: the parts of those names;
- copy_launch_us: the `h2d` part / the number of H2D copies, median over batches; copy_gpu_us: the device time
  of one small H2D copy (events behind a sleeping stream), median over batches;
- sample_host / sample_gpu, per method (greedy, top_p): the `sample` part of that method's run, and the
  sampling kernels' device time by events; sample_kernels: the kernel-launching calls of the sampler;
- tolist: the sync `tolist` part (on an idle GPU: it launches the D2H copy, waits for it and converts) minus
  one copy launch and one copy's device time, which the loop model charges separately (never below 0).
`startup_figures` collects the capture and compile rows (and the compiles that did not finish) for the start-up
model; simulator/engine/startup.py's `derive` turns them into the profile's `host.startup` (make_profiles.py).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def _run(row: dict, graph: str, sampling: str, sched: str) -> dict | None:
    for r in row.get("runs", []):
        if r.get("graph") == graph and r.get("sampling") == sampling and r.get("scheduling") == sched:
            return r
    return None


def engine_section(data: dict, source: str = "calibration/scripts/engine_loop.py") -> dict:
    """The `host.engine_step_us` section from an engine_loop.json (raises ValueError if it has no usable rows)."""
    ops = data.get("loop_ops") or {"greedy": 1, "top_p": 13, "h2d_copies": 3}
    h2d = int(ops.get("h2d_copies", 3))
    cols: dict[str, list] = {}
    copy_launch, copy_gpu = [], []
    for row in sorted((r for r in data.get("loop", []) if "batch" in r and r.get("runs")), key=lambda r: r["batch"]):
        base = _run(row, "full", "greedy", "sync") or _run(row, "none", "greedy", "sync")
        dev = row.get("device_us") or {}
        if base is None or not dev:
            continue
        p = base["parts_us"]
        b = row["batch"]
        cl = p["h2d"]["p50"] / max(h2d, 1)
        cg = dev["h2d_copy"]["p50"]
        copy_launch.append(cl)
        copy_gpu.append(cg)
        for name in ("schedule", "prep"):
            cols.setdefault(name, []).append((b, p[name]["p50"]))
        cols.setdefault("detokenize", []).append((b, p["detok"]["p50"]))
        cols.setdefault("tolist_raw", []).append((b, p["tolist"]["p50"]))
        for m in ("greedy", "top_p"):
            r = _run(row, "full", m, "sync")
            if r is not None and f"sample_{m}" in dev:
                cols.setdefault(f"sample_host_{m}", []).append((b, r["parts_us"]["sample"]["p50"]))
                cols.setdefault(f"sample_gpu_{m}", []).append((b, dev[f"sample_{m}"]["p50"]))
    if not copy_launch:
        raise ValueError("engine_loop.json has no loop rows with parts and device times")
    cl, cg = statistics.median(copy_launch), statistics.median(copy_gpu)

    def bb(pts, minus: float = 0.0) -> dict:
        return {"batch": [b for b, _ in pts], "us": [max(0.0, v - minus) for _, v in pts]}

    methods = [m for m in ("greedy", "top_p") if f"sample_host_{m}" in cols]
    batches = [b for b, _ in cols["schedule"]]
    return {
        "schedule": bb(cols["schedule"]), "prep": bb(cols["prep"]),
        "copy_launch_us": cl, "copy_gpu_us": cg, "h2d_copies": h2d,
        "sample_host": {m: bb(cols[f"sample_host_{m}"]) for m in methods},
        "sample_gpu": {m: bb(cols[f"sample_gpu_{m}"]) for m in methods},
        "sample_kernels": {m: int(ops.get(m, 1)) for m in methods},
        "tolist": bb(cols["tolist_raw"], cl + cg), "detokenize": bb(cols["detokenize"]),
        "source": f"{source}: p50 of the sync loop's per-part host times (graph full), qwen3-0.6b ctx 512, batches "
                  f"{batches}; device times by CUDA events; nothing fitted",
    }


def startup_figures(data: dict) -> dict:
    """Capture (warm-up + capture per graph) and compile rows, as measured, for the start-up model."""
    cap = [{k: r[k] for k in ("model", "layers", "batch", "order", "repeat", "warmup_s", "capture_s")}
           for r in data.get("capture", []) if "capture_s" in r]
    comp = [{k: r.get(k) for k in ("model", "layers", "batch", "dynamic", "cache", "compile_s", "second_call_s")}
            for r in data.get("compile", []) if "compile_s" in r]
    missing = [{k: r.get(k) for k in ("model", "layers", "dynamic", "cache", "error", "skipped") if k in r}
               for r in data.get("compile", []) if "compile_s" not in r]
    return {"capture": cap, "compile": comp, "compile_not_measured": missing}


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m calibration.build_engine ENGINE_LOOP_JSON", file=sys.stderr)
        return 2
    data = json.loads(Path(args[0]).read_text())
    print(json.dumps({"engine_step_us": engine_section(data, args[0]), "startup": startup_figures(data)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
