"""`launchsim predict --workload W`: an imported step (a workload file from `launchsim import-trace`) under graph /
fusion / batch what-ifs. The predict flags that have a field in the `workload` scenario kind (config/trace_workload.py)
fill it at one point; the others are refused naming why they need --model. The study is
studies/trace.run_predict_workload; this module fills the scenario and prints (cli/tables.py only for the text)."""

from __future__ import annotations

from simulator.common import vocab as V
from simulator.common.errors import UserError
from simulator.common.jsonfile import dumps

# predict flags an imported workload has no field for: why each needs --model (--prefill-seqs 0 is the default)
NEEDS_MODEL = {"dtype": "--dtype/--kv-dtype need --model (imported workloads keep their traced kernels)",
               "kv_dtype": "--dtype/--kv-dtype need --model (imported workloads keep their traced kernels)",
               "tensor_parallel_size": "--tp needs --model (imported workloads are single-GPU traces)",
               "report": "--report draws the engine loop: it needs --steps N and --model",
               "steps": "--steps needs --model (the engine loop is not simulated for imported workloads yet)",
               "layout": "--layout needs --model (imported workloads are not padded)",
               "attention_backend": "--attention-backend and --prefill-layout need --model and a single forward",
               "prefill_layout": "--attention-backend and --prefill-layout need --model and a single forward",
               "scheduling": "--scheduling applies to the engine loop: it needs --model and --steps N",
               "sampling": "--sampling applies to the engine loop: it needs --model and --steps N",
               "prefill_len": "--prefill-len needs --model (an imported workload's mixed step is --prefill-seqs)",
               "prefill_seqs": "--prefill-seqs applies to model presets, not to an imported workload"}
WORKLOAD_FLAGS = {"workload": "--workload", "profile": "--profile", "fusion": "--fusion", "graph": "--graph",
                  "batch": "--batch", "ctx": "--ctx", "engine": "--engine", "replicates": "--replicates",
                  "seed": "--seed"}


def predict_workload_cmd(given: dict, workload, as_json: bool) -> None:
    """`launchsim predict --workload W`: the `workload` kind at one point (config/trace_workload.py) from the
    predict flags it has a field for; the others are refused. An imported workload keeps its traced kernels
    (fusion none); the graph mode is the one set of defaults'."""
    from simulator.config.trace_workload import WorkloadScenario
    from simulator.studies.trace import run_predict_workload
    from .checks import workload_fusion
    from .flags import run_with_flags

    for f, v in given.items():
        if v is not None and f not in WORKLOAD_FLAGS and f != "model" and (f, v) != ("prefill_seqs", 0):
            raise UserError(NEEDS_MODEL.get(f, f"--{f.replace('_', '-')} needs --model"))
    if workload is None or given["model"] is not None:
        raise UserError("give --model (a preset or config.json) or --workload (an imported trace)" if workload is None
                        else "give either --model or --workload, not both")
    workload_fusion(given["fusion"] or "none")
    g = {**{f: given.get(f) for f in WORKLOAD_FLAGS}, "workload": str(workload), "fusion": [given["fusion"] or "none"],
         "graph": [given["graph"] or V.DEFAULT_GRAPH.value], "batch": None if given["batch"] is None else [given["batch"]]}
    r = run_with_flags(WorkloadScenario, "workload", g, WORKLOAD_FLAGS, run_predict_workload, check=False,
                       base={"name": "predict"}, free={"batch": "--batch", "ctx": "--ctx"})
    if as_json:
        print(dumps(r["record"]))
    else:
        _print_workload(r)


def _print_workload(r: dict) -> None:
    from rich.table import Table

    from .tables import console, print_rows, say

    d = r["record"]
    cols = ["workload", "batch", "ctx", "fusion", "graph", "step_ms", "cpu_ms", "gpu_ms", "gpu_idle_frac", "kernels",
            "launches", "bound", "host_time_policy", "traced_host_ms", "traced_gpu_ms"]
    t = Table(title="prediction (imported workload)", show_header=False)
    for c in cols:
        v = d.get(c)
        t.add_row(c, f"{v:.4g}" if isinstance(v, float) else str(v))
    console.print(t)
    if r["fusion_kernels"] is not None:
        before, after = r["fusion_kernels"]
        say(f"fusion rule: {d['fusion_rule']}")
        console.print(f"kernels {before} -> {after} ({d['fusion_saved_kernels']} saved)")
        rows = [{**g, "pattern": _short(g["pattern"])} for g in d["fusion_groups"]]
        print_rows(rows, "merged runs (by pattern)", ["count", "members", "saved", "gpu_us_before", "gpu_us_after",
                                                      "pattern"], limit=15)
    if "retarget" in d:
        rt = d["retarget"]
        roles = ", ".join(f"{k} {v}" for k, v in rt["kernels_by_role"].items())
        say(f"re-priced from the traced batch {rt['traced_batch']}, ctx {rt['traced_ctx'] or '?'}: "
            f"{d['scaled_kernels']} kernels through the profile's cost model as traced x model(new)/model(traced) "
            f"(by role: {roles})")
        for n in d.get("notes", [])[1:]:
            say(n)
    if d.get("step_ms_host_band") is not None:
        (lo, hi), (fast, slow) = d["step_ms_host_band"], r["canary_us"]
        say(f"eager step across the calibration VM's host states: {lo:.3f} ms (fast, canary {fast:.2f} µs) to "
            f"{hi:.3f} ms (slow, canary {slow:.2f} µs)")
    if d.get("host_canary_us") is not None:
        say(f"host state assumed: tiny-op canary {d['host_canary_us']:.2f} µs (profile {r['profile']})")


def _short(pattern: str, width: int = 48) -> str:
    p = pattern.replace("aten::", "")
    return p if len(p) <= width else p[: width - 1] + "…"
