"""Validate trace import against the GPU: import real torch.profiler traces of the reference decoder,
simulate them, and compare with measured step times.

    python benchmarks/validate_trace_import.py [--profile h200] [--out DIR | --write-shipped]

Checks (all traces recorded on an H200, torch 2.11; qwen3-0.6b, fusion none, ctx 512, eager):
1. target: the calibration trace (calibration/measured/qwen3-0.6b_none_b1_ctx512.trace.json.gz, 3
   steps, batch 1) imported and simulated with `--graph full` vs the measured CUDA-graph replay step
   (.graph.json beside it: p50 of 100 replays, synchronised start to end). Target: within 5%.
2. diagnosis: a profiled replay of the same step captured as a graph
   (trace_import_validation.graph_replay_b1.json.gz): kernel time inside the graph vs the eager
   trace's, and the GPU gap per graph node vs the profile's `graph_node_trace_us` (measured on
   llama3-8b graphs); the graph-full prediction again with this graph's own gap (a what-if).
3. batch what-if: a batch-1 trace with recorded shapes scaled to `--batch 8` vs a batch-8 trace
   (trace_import_validation.eager_shapes_b{1,8}.json.gz) and the measured batch-8 graph replay.
4. fusion what-if: kernels per step after the `compiled` rules vs the kernels Inductor generated
   for the same step (the compiled b1 ctx 512 row of calibration/measured/h200-decode.json).
Writes trace_import_validation.json and .md (atomically) into OUT and prints the markdown.
Exit 2 when the calibration trace or its .graph.json is missing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from simulator.model.costs import CostModel
from simulator.engine.predict import simulate
from simulator.model.profile import Profile, load_profile
from simulator.common.jsonfile import atomic_write_text, write_json
from calibration.jsonio import add_out_args, out_dir
from simulator.traces.importer import import_trace
from simulator.traces.read import read_trace
from simulator.traces.whatif import workload_step
from simulator.traces.workload import workload_from_trace

TARGET = 0.05
MEASURED = Path("calibration/measured")
VALID = Path("calibration/validation")
PREFIX = "trace_import_validation"


def _err(sim: float, meas: float) -> float:
    return round((sim - meas) / meas, 4)


def _sim_ms(step, costs, graph: str) -> float:
    return simulate(step, costs, graph)[0].step_s * 1e3


def target(trace: Path, measured: Path, prof: Profile) -> tuple[dict, object]:
    meta = json.loads(measured.read_text())
    t0 = time.perf_counter()
    wl, imp = workload_from_trace(trace)
    secs = time.perf_counter() - t0
    costs = CostModel(prof)
    step = workload_step(wl, costs).step
    full = _sim_ms(step, costs, "full")
    m = meta["graph_replay_step_ms"]
    return {
        "trace": str(trace), "measured": str(measured),
        "config": {k: meta.get(k) for k in ("model", "fusion", "batch", "ctx", "steps_in_trace", "machine")},
        "import_seconds": round(secs, 3), "kernels_in_trace": len(imp.kernels), "method": imp.method,
        "steps": imp.step_rows, "kernels_per_step": len(wl.kernels), "representative": wl.steps.representative,
        "traced_gpu_ms": round(wl.gpu_ms, 4), "traced_host_ms": round(wl.host_ms, 4),
        "simulated_full_ms": round(full, 4), "simulated_none_ms": round(_sim_ms(step, costs, "none"), 4),
        "measured_graph_replay_ms": m, "measured_eager_unprofiled_ms": meta.get("eager_step_ms_unprofiled"),
        "error": _err(full, m["p50"]), "within_5pct": abs(_err(full, m["p50"])) <= TARGET,
    }, (wl, step)


def diagnosis(graph_trace: Path, wl, prof: Profile, measured_ms: float) -> dict:
    imp = import_trace(read_trace(graph_trace))
    rows = []
    for w in imp.steps:
        ks = imp.kernels[w.i0:w.i1]
        dur = sum(k.dur for k in ks)
        span = ks[-1].ts + ks[-1].dur - ks[0].ts
        rows.append({"kernels": len(ks), "kernel_ms": dur / 1e3, "gpu_span_ms": span / 1e3,
                     "gap_per_node_us": (span - dur) / max(len(ks) - 1, 1)})
    gap = statistics.median(r["gap_per_node_us"] for r in rows)
    kern = statistics.median(r["kernel_ms"] for r in rows)
    raw = json.loads(prof.model_dump_json())
    raw["device"]["graph_node_trace_us"] = gap
    alt = Profile.model_validate(raw)
    costs = CostModel(alt)
    full = _sim_ms(workload_step(wl, costs).step, costs, "full")
    return {"graph_trace": str(graph_trace), "replays": rows, "in_graph_kernel_ms": round(kern, 4),
            "eager_trace_kernel_ms": round(wl.gpu_ms, 4), "kernel_time_ratio": round(kern / wl.gpu_ms, 4),
            "in_graph_gap_per_node_us": round(gap, 4), "profile_graph_node_us": prof.device.graph_node_us,
            "profile_graph_node_trace_us": prof.device.graph_node_trace_us,
            "simulated_full_ms_with_measured_gap": round(full, 4), "error_with_measured_gap": _err(full, measured_ms)}


def batch_check(b1: Path, b8: Path, own: dict, prof: Profile) -> dict:
    w1, _ = workload_from_trace(b1)
    w8, _ = workload_from_trace(b8)
    costs = CostModel(prof)
    wi = workload_step(w1, costs, batch=w8.batch)
    pred_gpu = sum(o.fixed_gpu_s for o in wi.step.kernel_ops()) * 1e3
    full = _sim_ms(wi.step, costs, "full")
    meas = own.get(f"graph_b{w8.batch}_ms", {}).get("p50")
    return {"traces": [str(b1), str(b8)], "from_batch": w1.batch, "to_batch": w8.batch,
            "scaled_kernels": wi.scaled, "unscaled_kernels": len(wi.unscaled),
            "traced_gpu_ms_from": round(w1.gpu_ms, 4), "predicted_gpu_ms": round(pred_gpu, 4),
            "traced_gpu_ms_to": round(w8.gpu_ms, 4), "gpu_error": _err(pred_gpu, w8.gpu_ms),
            "gpu_error_if_unscaled": _err(w1.gpu_ms, w8.gpu_ms),
            "predicted_graph_full_ms": round(full, 4), "measured_graph_replay_ms": meas,
            "graph_full_error": _err(full, meas) if meas else None}


def fusion_check(wl, decode_json: Path, prof: Profile) -> dict | None:
    if not decode_json.exists():
        return None
    rows = json.loads(decode_json.read_text()).get("rows", [])
    row = next((r for r in rows if (r.get("model"), r.get("fusion"), r.get("batch"), r.get("ctx"))
                == ("qwen3-0.6b", "compiled", 1, 512) and r.get("kernels")), None)
    if row is None:
        return None
    costs = CostModel(prof)
    wi = workload_step(wl, costs, fusion="compiled")
    full = _sim_ms(wi.step, costs, "full")
    meas = row["kernels"] + row.get("memsets", 0) + row.get("memcpys", 0)
    g = row.get("graph", {}).get("step_ms", {}).get("p50")
    return {"rule": wi.fusion["rule"], "kernels_eager": wi.fusion["kernels_before"],
            "kernels_after_rule": wi.fusion["kernels_after"], "kernels_inductor": meas,
            "kernel_count_error": _err(wi.fusion["kernels_after"], meas),
            "predicted_compiled_graph_full_ms": round(full, 4), "measured_compiled_graph_ms": g,
            "compiled_graph_error": _err(full, g) if g else None}


def markdown(v: dict) -> str:
    t, p = v["target"], v["profile"]
    m = t["measured_graph_replay_ms"]
    out = [
        "# Trace import validation", "",
        f"Machine: {t['config'].get('machine')}. Profile `{p['name']}` ({p['source']}, {p['date']}): graph node "
        f"{p['graph_node_us']:.3f} µs (beside traced kernel times: {p.get('graph_node_trace_us') or p['graph_node_us']:.3f} µs, "
        f"measured on llama3-8b graph replays, calibration/node_gap.py), eager gap {p['eager_gap_us']:.3f} µs, replay {p['graph_launch_fixed_us']:.2f} µs + "
        f"{p['graph_launch_per_node_us']:.3f} µs/node.", "",
        "## 1. Target: eager trace -> `--graph full` vs measured graph replay", "",
        f"`{t['trace']}`: {t['kernels_in_trace']} GPU events, steps by {t['method']}, {t['kernels_per_step']} "
        f"kernels per step; imported in {t['import_seconds']} s. Traced per step: GPU {t['traced_gpu_ms']:.3f} ms, "
        f"host {t['traced_host_ms']:.3f} ms (under the profiler).", "",
        "| simulated graph full ms | measured replay p50 ms (p10–p90) | error | within 5% |",
        "| ---: | ---: | ---: | :---: |",
        f"| {t['simulated_full_ms']:.3f} | {m['p50']:.3f} ({m['p10']:.3f}–{m['p90']:.3f}) | {t['error'] * 100:+.1f}% | "
        f"{'yes' if t['within_5pct'] else 'no'} |", "",
    ]
    d = v.get("diagnosis")
    if d:
        out += ["## 2. Where the difference comes from (profiled graph replay of the same step)", "",
                f"Inside the graph the kernels ran {d['in_graph_kernel_ms']:.3f} ms (eager trace: "
                f"{d['eager_trace_kernel_ms']:.3f} ms, ratio {d['kernel_time_ratio']:.3f}); the GPU gap per graph node "
                f"was {d['in_graph_gap_per_node_us']:.3f} µs against the profile's {d.get('profile_graph_node_trace_us') or 0:.3f} µs "
                f"(measured on llama3-8b, not on this graph; the microbenchmark's small kernels give "
                f"{d['profile_graph_node_us']:.3f} µs). With this graph's own gap the prediction would be "
                f"{d['simulated_full_ms_with_measured_gap']:.3f} ms ({d['error_with_measured_gap'] * 100:+.1f}%): "
                "a what-if, not the target.", ""]
        if not t["within_5pct"] and abs(d["error_with_measured_gap"]) <= TARGET:
            out += [f"So the miss is the profile's `graph_node_us`: the microbenchmark's small kernels give "
                    f"{d['profile_graph_node_us']:.3f} µs per node, the decoder's own kernels "
                    f"{d['in_graph_gap_per_node_us']:.3f} µs. Calibrating it on a replayed graph of real decoder "
                    "kernels (calibration/build_profile.py) would bring the target within 5%; the importer and "
                    "the kernel times it reads are not the cause (in-graph kernel time is within "
                    f"{abs(d['kernel_time_ratio'] - 1) * 100:.1f}% of the eager trace's).", ""]
    b = v.get("batch")
    if b:
        out += [f"## 3. Batch what-if: batch {b['from_batch']} trace scaled to {b['to_batch']}", "",
                f"{b['scaled_kernels']} kernels scaled, {b['unscaled_kernels']} unscaled. GPU time: predicted "
                f"{b['predicted_gpu_ms']:.3f} ms vs traced at batch {b['to_batch']} {b['traced_gpu_ms_to']:.3f} ms "
                f"({b['gpu_error'] * 100:+.1f}%; leaving every kernel unscaled: {b['gpu_error_if_unscaled'] * 100:+.1f}%). "
                f"Graph full: predicted {b['predicted_graph_full_ms']:.3f} ms vs measured replay "
                f"{b['measured_graph_replay_ms']:.3f} ms ({b['graph_full_error'] * 100:+.1f}%).", ""]
    f = v.get("fusion")
    if f:
        out += ["## 4. Fusion what-if (`--fusion compiled`) vs Inductor", "",
                f"Rule: {f['rule']}. Kernels per step: eager {f['kernels_eager']}, after the rule "
                f"{f['kernels_after_rule']}, Inductor {f['kernels_inductor']} ({f['kernel_count_error'] * 100:+.1f}%). "
                f"Compiled + graph full: predicted {f['predicted_compiled_graph_full_ms']:.3f} ms vs measured "
                f"{f['measured_compiled_graph_ms']:.3f} ms ({f['compiled_graph_error'] * 100:+.1f}%).", ""]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=MEASURED / "qwen3-0.6b_none_b1_ctx512.trace.json.gz")
    ap.add_argument("--measured", type=Path, default=MEASURED / "qwen3-0.6b_none_b1_ctx512.graph.json")
    ap.add_argument("--profile", default=None, help="profile name or path (default: h200, else datasheet-h200)")
    add_out_args(ap)
    a = ap.parse_args(argv)
    a.out = out_dir(a)
    a.out.mkdir(parents=True, exist_ok=True)
    missing = [str(p) for p in (a.trace, a.measured) if not p.exists()]
    if missing:
        print(f"validate_trace_import: missing {', '.join(missing)} (record them on the GPU with "
              "`python3 -m calibration.run_all`)", file=sys.stderr)
        return 2
    prof = load_profile(a.profile)
    tgt, (wl, _) = target(a.trace, a.measured, prof)
    v = {"profile": {"name": prof.name, "source": prof.source, "date": prof.date,
                     "graph_node_us": prof.device.graph_node_us,
                     "graph_node_trace_us": prof.device.graph_node_trace_us, "eager_gap_us": prof.device.eager_gap_us,
                     "graph_launch_fixed_us": prof.host.graph_launch_fixed_us,
                     "graph_launch_per_node_us": prof.host.graph_launch_per_node_us},
         "target": tgt}
    gt = VALID / f"{PREFIX}.graph_replay_b1.json.gz"
    if gt.exists():
        v["diagnosis"] = diagnosis(gt, wl, prof, tgt["measured_graph_replay_ms"]["p50"])
    b1, b8, own = (VALID / f"{PREFIX}.eager_shapes_b1.json.gz", VALID / f"{PREFIX}.eager_shapes_b8.json.gz",
                   VALID / f"{PREFIX}.own_measured.json")
    if b1.exists() and b8.exists():
        v["batch"] = batch_check(b1, b8, json.loads(own.read_text()) if own.exists() else {}, prof)
    fz = fusion_check(wl, MEASURED / "h200-decode.json", prof)
    if fz:
        v["fusion"] = fz
    write_json(a.out / f"{PREFIX}.json", v)
    md = markdown(v)
    atomic_write_text(a.out / f"{PREFIX}.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
