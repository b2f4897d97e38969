"""Validate trace import against the GPU: import the reference decoder's eager torch.profiler trace,
simulate it with `--graph full` (and `none`), and compare with the measured step times.

    python benchmarks/validate_trace_import.py [--measured calibration/measured] [--profile h200]
                                               [--out calibration/validation]

Inputs (written on an H200 by `python3 -m calibration.run_all`): MEASURED/trace.json.gz (eager
decode steps of qwen3-0.6b, fusion none, batch 1, ctx 512) and MEASURED/measured.json whose
`trace` entry holds the same configuration's measured eager and CUDA-graph replay step times
(p10/p50/p90 of single synchronised steps). Writes trace_import_validation.json and .md
(atomically) into OUT and prints the comparison. Target: graph-full prediction within 5% of the
measured replay step. Exit 2 when the inputs are missing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from simulator.costs import CostModel
from simulator.models import load_model
from simulator.predict import simulate
from simulator.profile import load_profile
from simulator.report import atomic_write_text, write_json
from simulator.trace_whatif import workload_step
from simulator.trace_workload import workload_from_trace
from simulator.workload import build_step, decode

TARGET = 0.05


def _err(sim: float, meas: float) -> float:
    return (sim - meas) / meas


def validate(measured_dir: Path, profile: str | None) -> dict:
    trace = measured_dir / "trace.json.gz"
    meta = json.loads((measured_dir / "measured.json").read_text()).get("trace") or {}
    t0 = time.perf_counter()
    wl, imp = workload_from_trace(trace)
    import_s = time.perf_counter() - t0
    prof = load_profile(profile)
    costs = CostModel(prof)
    step = workload_step(wl, costs).step
    sims = {g: simulate(step, costs, g)[0] for g in ("none", "full", "piecewise")}
    model = meta.get("model", "qwen3-0.6b")
    preset = build_step(load_model(model), decode(meta.get("batch", 1), meta.get("ctx", 512)), meta.get("fusion", "none"))
    rows = imp.step_rows
    med = sorted(r["step_ms"] for r in rows)[len(rows) // 2]
    out = {
        "trace": str(trace),
        "profile": {"name": prof.name, "source": prof.source, "date": prof.date,
                    "graph_node_us": prof.device.graph_node_us, "eager_gap_us": prof.device.eager_gap_us,
                    "graph_launch_fixed_us": prof.host.graph_launch_fixed_us,
                    "graph_launch_per_node_us": prof.host.graph_launch_per_node_us},
        "config": {k: meta.get(k) for k in ("model", "fusion", "batch", "ctx", "steps")},
        "import": {"seconds": round(import_s, 3), "kernels_in_trace": len(imp.kernels), "method": imp.method,
                   "steps": rows, "representative": wl.steps.representative, "kernels_per_step": len(wl.kernels),
                   "preset_kernels": preset.kernels, "traced_host_ms": wl.host_ms, "traced_gpu_ms": wl.gpu_ms,
                   "traced_step_ms_median": med,
                   "classes": {c: sum(k.op_class == c for k in wl.kernels) for c in sorted({k.op_class for k in wl.kernels})}},
        "simulated": {g: r.as_dict() for g, r in sims.items()},
        "comparison": [],
    }
    checks = [("graph full (target)", "full", meta.get("graph_replay_step_ms")),
              ("eager (graph none)", "none", meta.get("eager_step_ms"))]
    for label, g, m in checks:
        if not m:
            continue
        sim = sims[g].step_s * 1e3
        e = _err(sim, m["p50"])
        out["comparison"].append({"what": label, "simulated_ms": round(sim, 4), "measured_p50_ms": m["p50"],
                                  "measured_p10_ms": m.get("p10"), "measured_p90_ms": m.get("p90"),
                                  "error": round(e, 4), "within_5pct": abs(e) <= TARGET})
    return out


def markdown(v: dict) -> str:
    imp, prof = v["import"], v["profile"]
    lines = [
        "# Trace import validation",
        "",
        f"Trace: `{v['trace']}` ({v['config']}). Imported in {imp['seconds']} s: {imp['kernels_in_trace']} kernels, "
        f"steps by {imp['method']}; {imp['kernels_per_step']} kernels per step (the preset workload model has "
        f"{imp['preset_kernels']}). Representative step: {imp['representative']}.",
        "",
        f"Traced per step: host {imp['traced_host_ms']:.3f} ms, GPU {imp['traced_gpu_ms']:.3f} ms, wall "
        f"{imp['traced_step_ms_median']:.3f} ms (median).",
        "",
        f"Profile `{prof['name']}` ({prof['source']}, {prof['date']}): graph node {prof['graph_node_us']} µs, eager gap "
        f"{prof['eager_gap_us']} µs, replay {prof['graph_launch_fixed_us']} µs + {prof['graph_launch_per_node_us']} "
        "µs/node.",
        "",
        "| what | simulated ms | measured p50 ms (p10–p90) | error | within 5% |",
        "| --- | ---: | ---: | ---: | :---: |",
    ]
    for c in v["comparison"]:
        lines.append(f"| {c['what']} | {c['simulated_ms']:.3f} | {c['measured_p50_ms']:.3f} "
                     f"({c['measured_p10_ms']:.3f}–{c['measured_p90_ms']:.3f}) | {c['error'] * 100:+.1f}% | "
                     f"{'yes' if c['within_5pct'] else 'no'} |")
    lines += ["", "Simulated (ms): " + "; ".join(f"{g}: step {r['step_ms']:.3f}, cpu {r['cpu_ms']:.3f}, gpu "
                                                  f"{r['gpu_ms']:.3f}" for g, r in v["simulated"].items()), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", type=Path, default=Path("calibration/measured"))
    ap.add_argument("--profile", default=None, help="profile name or path (default: h200, else datasheet-h200)")
    ap.add_argument("--out", type=Path, default=Path("calibration/validation"))
    a = ap.parse_args(argv)
    need = [a.measured / "trace.json.gz", a.measured / "measured.json"]
    missing = [str(p) for p in need if not p.exists()]
    if missing:
        print(f"validate_trace_import: missing {', '.join(missing)} (record them on the GPU with "
              "`python3 -m calibration.run_all`)", file=sys.stderr)
        return 2
    v = validate(a.measured, a.profile)
    write_json(a.out / "trace_import_validation.json", v)
    md = markdown(v)
    atomic_write_text(a.out / "trace_import_validation.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
