"""Cross-implementation check: Hugging Face transformers' own Qwen3 decoder, imported from a trace,
against clean timings of the same steps.

    python3 -m calibration.validate_hf [--profile h200] [--host-time calibrated] [--out DIR | --write-shipped]

Inputs (recorded on the H200, see calibration/child_counts.py job eager and child_timing.py `hf_rows`):
- traces `calibration/measured/h200-round-a/hf_qwen3-0.6b_eager_b{1,8}.trace.json.gz`: 3 eager decode steps,
  each followed by a synchronize, record_shapes on, StaticCache with max_cache_len 576 (ctx 512 + 64);
- clean timings `calibration/measured/h200-round-b/timing.json` key "hf": the same steps in a process
  that never profiled, max_cache_len 1024 (ctx 512 + 512).
Method: import each trace under the host-time policy (default calibrated: host from the profile),
correct every kernel whose recorded input shapes span the cache slots (SDPA's kernels, HF's repeat_kv
copies, mask ops) from 576 to 1024 slots with the profile's cost model (attention table, byte
curves), then simulate eager (`graph none`: synchronised start to end, the `isolated` regime) and a
full CUDA-graph replay, and compare with the clean p50s. Nothing is fitted to these timings.
Targets: eager within 15%, full-graph what-if within 5%. Also: kernels per step in the trace vs
launchsim's own workload builder (qwen3-0.6b, fusion none), per layer by aten op.
Writes hf_crosscheck.json and .md into OUT and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from simulator.model.costs import CostModel
from simulator.model.kernels import LaunchPath, Op, OpClass
from simulator.model.models import PRESETS
from simulator.engine.predict import simulate
from simulator.model.profile import Profile, load_profile
from simulator.common.jsonfile import atomic_write_text, write_json
from calibration.jsonio import add_out_args, out_dir
from simulator.traces.host import describe, host_breakdown
from simulator.traces.whatif import _gpu_s, cost_op, workload_step
from simulator.traces.workload import workload_from_trace
from simulator.model.workload import build_step, decode

ROUND_A = Path("calibration/measured/h200-round-a")
TIMING = Path("calibration/measured/h200-round-b/timing.json")
MODEL = "qwen3-0.6b"
TARGETS = {"eager": 0.15, "full": 0.05}
US = 1e-6


def _err(sim: float, meas: float) -> float:
    return round((sim - meas) / meas, 4)


def _swap(dims, old: int, new: int):
    if isinstance(dims, list):
        return [_swap(d, old, new) for d in dims]
    return new if dims == old else dims


def _attention_ratio(costs: CostModel, k, old: int, new: int) -> float | None:
    """t(new slots) / t(old slots) from the profile's attention table (heads, model kv heads, head_dim)."""
    q = k.dims[0]
    m = PRESETS[MODEL]
    ts = []
    for ctx in (old, new):
        op = Op("sdpa", OpClass.ATTENTION, LaunchPath.EAGER_ATTENTION, shape=(
            ("batch", q[0]), ("ctx", ctx), ("head_dim", q[3]), ("heads", q[1]), ("kv_heads", m.num_key_value_heads),
            ("q_len", q[2])))
        ts.append(costs.table_s(op))
    return None if None in ts or ts[0] <= 0 else ts[1] / ts[0]


def slot_correction(wl, costs: CostModel, old: int, new: int) -> tuple[list[float], dict]:
    """GPU µs of each kernel with the cache at `new` slots instead of `old`, and the effect by group.

    A kernel is affected when a tensor in its recorded input shapes has a dimension equal to `old`
    (checked to be no model dimension). Attention kernels take the attention table's ratio; the rest
    the byte-curve / roofline ratio of their op at the new shapes (trace_whatif.cost_op)."""
    m = PRESETS[MODEL]
    dims_of_model = {m.hidden_size, m.intermediate_size, m.head_dim, m.num_attention_heads, m.num_key_value_heads,
                     m.vocab_size, m.q_dim, m.kv_dim}
    if old in dims_of_model:
        raise SystemExit(f"validate_hf: max_cache_len {old} equals a model dimension; cannot tell slots apart")
    out, effect = [], {}
    for k in wl.kernels:
        g = k.gpu_us
        if k.dims and _swap(k.dims, old, new) != k.dims:
            if k.op_class == OpClass.ATTENTION.value:
                r = _attention_ratio(costs, k, old, new)
                key = "attention (table ratio)"
            else:
                a, b = cost_op(k, k.dims), cost_op(k, _swap(k.dims, old, new))
                r = _gpu_s(costs, b) / _gpu_s(costs, a) if a is not None and b is not None else None
                key = f"{k.op} (cost-model ratio)"
            if r is not None:
                e = effect.setdefault(key, {"kernels": 0, "traced_us": 0.0, "corrected_us": 0.0})
                e["kernels"] += 1
                e["traced_us"] += g
                e["corrected_us"] += g * r
                g *= r
        out.append(g)
    for e in effect.values():
        e["traced_us"], e["corrected_us"] = round(e["traced_us"], 2), round(e["corrected_us"], 2)
    return out, effect


def kernel_counts(wl, costs: CostModel, layers: int) -> dict:
    """Kernels per step: the trace vs launchsim's builder (fusion none), and per layer by aten op."""
    step = build_step(PRESETS[MODEL], decode(wl.batch or 1, 512), "none")
    ours = costs.step_kernels(step.ops)
    hf_ops = Counter(k.op or k.name for k in wl.kernels)
    return {"trace_kernels": len(wl.kernels), "launchsim_kernels": ours,
            "trace_per_layer": round(len(wl.kernels) / layers, 2), "launchsim_per_layer": round(ours / layers, 2),
            "trace_by_op": dict(hf_ops.most_common()),
            "launchsim_by_name": dict(Counter(o.name for o in step.ops if o.launches_kernel).most_common())}


def one(trace: Path, row: dict, prof: Profile, policy: str) -> dict:
    costs = CostModel(prof)
    wl, imp = workload_from_trace(trace, host_time=policy, profile=prof)
    old, new = wl.ctx, row["max_cache_len"]
    gpu, effect = slot_correction(wl, costs, old, new)
    wl_c = wl.model_copy(deep=True)
    for k, g in zip(wl_c.kernels, gpu):
        k.gpu_us = g
    res = {"trace": str(trace), "batch": wl.batch, "kernels": len(wl.kernels), "steps": imp.step_rows,
           "traced_gpu_ms": round(wl.gpu_ms, 4), "corrected_gpu_ms": round(sum(gpu) / 1e3, 4),
           "slots_traced": old, "slots_measured": new, "slot_effect": effect,
           "traced_host_ms": round(wl.host_ms, 4), "charged_host_ms": host_breakdown(wl_c, costs)}
    pred = {}
    for graph in ("none", "full"):
        r, _ = simulate(workload_step(wl_c, costs).step, costs, graph)
        pred[graph] = r.step_s * 1e3
    trace_wl = wl_c.model_copy(deep=True)
    trace_wl.host_time = {**(wl_c.host_time or {}), "policy": "trace"}
    r, _ = simulate(workload_step(trace_wl, costs).step, costs, "none")
    meas_e, meas_f = row["eager"]["isolated"]["step_ms"], row["full"]["isolated"]["step_ms"]
    res["eager"] = {"predicted_ms": round(pred["none"], 4), "measured_ms": meas_e, "error": _err(pred["none"], meas_e["p50"]),
                    "within_target": abs(_err(pred["none"], meas_e["p50"])) <= TARGETS["eager"],
                    "predicted_ms_traced_host": round(r.step_s * 1e3, 4),
                    "error_traced_host": _err(r.step_s * 1e3, meas_e["p50"]),
                    "measured_pipelined_ms": row["eager"]["pipelined"]["step_ms"]}
    res["full"] = {"predicted_ms": round(pred["full"], 4), "measured_ms": meas_f, "error": _err(pred["full"], meas_f["p50"]),
                   "within_target": abs(_err(pred["full"], meas_f["p50"])) <= TARGETS["full"],
                   "measured_device_ms": row["full"].get("device_ms"),
                   "predicted_ms_uncorrected_slots": round(simulate(workload_step(wl, costs).step, costs, "full")[0].step_s
                                                           * 1e3, 4)}
    res["counts"] = kernel_counts(wl, costs, PRESETS[MODEL].num_hidden_layers)
    return res


def markdown(v: dict) -> str:
    p = v["profile"]
    out = ["# Cross-implementation check: Hugging Face transformers Qwen3-0.6B", "",
           f"Profile `{p['name']}` ({p['source']}, {p['date']}). Host-time policy: {v['host_time']}. "
           f"Traces: {ROUND_A}/hf_qwen3-0.6b_eager_b*.trace.json.gz (max_cache_len 576); clean timings: {TIMING} "
           "key `hf` (max_cache_len 1024, a process that never profiled). Regenerate: "
           f"`{v['command']}`.", "",
           "| batch | eager predicted ms | eager measured p50 (p10–p90) | error | full-graph predicted ms | "
           "full measured p50 | error |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in v["rows"]:
        e, f = r["eager"], r["full"]
        out.append(f"| {r['batch']} | {e['predicted_ms']:.2f} | {e['measured_ms']['p50']:.2f} "
                   f"({e['measured_ms']['p10']:.2f}–{e['measured_ms']['p90']:.2f}) | {e['error'] * 100:+.1f}% "
                   f"{'ok' if e['within_target'] else 'MISS'} | {f['predicted_ms']:.3f} | {f['measured_ms']['p50']:.3f} | "
                   f"{f['error'] * 100:+.1f}% {'ok' if f['within_target'] else 'MISS'} |")
    out += ["", f"Targets: eager ±{TARGETS['eager'] * 100:.0f}%, full graph ±{TARGETS['full'] * 100:.0f}%.", ""]
    for r in v["rows"]:
        c, h, e = r["counts"], r["charged_host_ms"], r["eager"]
        eff = "; ".join(f"{k}: {x['kernels']} kernels {x['traced_us']:.0f} -> {x['corrected_us']:.0f} µs"
                        for k, x in r["slot_effect"].items())
        out += [f"## Batch {r['batch']}", "",
                f"- Trace: {r['kernels']} kernels per step; traced GPU {r['traced_gpu_ms']:.3f} ms, corrected to "
                f"{r['slots_measured']} slots {r['corrected_gpu_ms']:.3f} ms ({eff}). Full graph without the slot "
                f"correction: {r['full']['predicted_ms_uncorrected_slots']:.3f} ms.",
                f"- Host: traced under the profiler {r['traced_host_ms']:.2f} ms; charged {h['total']:.2f} ms "
                f"(launches {h.get('launches', 0):.2f}, host-only ops {h.get('host_only_ops', 0):.2f}, traced "
                f"interpreter gaps {h.get('interpreter', 0):.2f}). Eager with the traced host instead: "
                f"{e['predicted_ms_traced_host']:.2f} ms ({e['error_traced_host'] * 100:+.1f}%). Clean pipelined "
                f"p50 {e['measured_pipelined_ms']['p50']:.2f} ms (p10 {e['measured_pipelined_ms']['p10']:.2f}). "
                f"Interpreter time the clean step leaves after the charged launches and host-only ops: "
                f"{e['measured_ms']['p50'] - h.get('launches', 0) - h.get('host_only_ops', 0):.2f} ms "
                f"(traced: {h.get('interpreter', 0):.2f} ms).",
                f"- Kernels per step: trace {c['trace_kernels']} ({c['trace_per_layer']} per layer), launchsim "
                f"builder (fusion none) {c['launchsim_kernels']} ({c['launchsim_per_layer']} per layer).", ""]
    out += ["## Notes", ""] + [f"- {n}" for n in v["notes"]]
    return "\n".join(out) + "\n"


NOTES = [
    "Kernel count: launchsim's `none` layer has 56 kernels (4 RMSNorms x 8, 7 GEMMs, RoPE 2 x 5, 2 cache writes, "
    "1 attention, 2 residual adds, silu, mul); HF's layer adds its repeat_kv copies of K and V (2 `aten::reshape` "
    "copies: HF expands the KV heads before SDPA), cuDNN SDPA's helper kernels under a mask (2 fills, the mask "
    "conversion, a lean reduction at batch 1: 4 extra; 3 at batch 8), StaticCache's own position arithmetic "
    "(`arange`, `add`, `add_`: 3), and cuBLAS's split-K reduce on down_proj at batch 1 (counted by the builder only "
    "where the profile's GEMM table records split-K); plus ~28 kernels per step of rotary/mask set-up before layer 0.",
    "The clean HF eager timings are themselves noisy: batch 1 ran at 45.6 ms (pipelined p10 35.1, p50 43.5) and "
    "batch 8 at 29.6 ms for the same Python, and the same timing run shows the reference decoder alternating between "
    "~19 ms and ~36 ms steps; the eager error bands are wider than the model's.",
    "Traced interpreter gaps are read from the profiled trace (no profile figure can know HF's Python); the "
    "profiler's per-op callbacks that fall outside op windows still inflate them slightly.",
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default=None, help="profile name or path (default h200)")
    ap.add_argument("--host-time", default="calibrated", help="host-time policy for the import")
    add_out_args(ap)
    a = ap.parse_args(argv)
    a.out = out_dir(a)
    a.out.mkdir(parents=True, exist_ok=True)
    rows_m = {r["batch"]: r for r in json.loads(TIMING.read_text()).get("hf", []) if "eager" in r}
    prof = load_profile(a.profile)
    rows = []
    for b in (1, 8):
        tr = ROUND_A / f"hf_qwen3-0.6b_eager_b{b}.trace.json.gz"
        if not tr.exists() or b not in rows_m:
            print(f"validate_hf: missing {tr} or the hf batch-{b} row of {TIMING}", file=sys.stderr)
            return 2
        rows.append(one(tr, rows_m[b], prof, a.host_time))
    cmd = "python3 -m calibration.validate_hf" + (f" --profile {a.profile}" if a.profile else "") + (
        f" --host-time {a.host_time}" if a.host_time != "calibrated" else "")
    v = {"profile": {"name": prof.name, "source": prof.source, "date": prof.date},
         "host_time": describe(a.host_time, prof), "host_time_policy": a.host_time, "command": cmd,
         "targets": TARGETS, "rows": rows, "notes": NOTES}
    write_json(a.out / "hf_crosscheck.json", v)
    md = markdown(v)
    atomic_write_text(a.out / "hf_crosscheck.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
