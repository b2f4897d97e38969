"""Turn raw GPU-machine output (microbench.json + the graph-memory part of a measured file) into a
profile that validates against simulator/profile.py, and derive other devices from it.

No torch here: this runs on any machine. How each profile figure is made from the raw figures:
- host.launch_us[path]: the microbenchmark's isolated per-call percentiles times a host context
  factor for the eager paths (`eager_scale`; by default the microbenchmark's own mixed-block factor;
  `fit_host` in validate.py can fit it on designated fit rows instead, and the profile notes say which).
- host.compiled: the per-Triton-kernel slope of the compiled microbenchmark (or a fitted per-op figure).
- graph replay host cost: fixed + per node through the 1-node and 1000-node medians.
- device.eager_gap_us / graph_node_us: median CUPTI gaps between different back-to-back small kernels,
  eager with the queue full and inside a replayed graph; min_kernel_us: a tiny kernel's duration.
- tables: per-op graph-replay times minus the gap between identical back-to-back graph nodes.
- ceilings: datasheet peaks with efficiency = measured / datasheet (copy 2 GiB, bf16 8192^3 GEMM).
"""

from __future__ import annotations

import json

DATASHEET = {"H200": {"tflops": 989.0, "hbm": 4.8, "mem": 141.0},
             "H100": {"tflops": 989.0, "hbm": 3.35, "mem": 80.0}}
EAGER_PATHS = ("eager_elementwise", "eager_reduction", "eager_gemm", "eager_attention", "eager_copy",
               "eager_embedding", "eager_view")


def write_json_atomic(obj, path) -> None:
    """Write JSON atomically (simulator.report's temp file + os.replace; stdlib only)."""
    from simulator.report import atomic_write_text

    atomic_write_text(path, json.dumps(obj, indent=1) + "\n")


def _spread(d, scale=1.0):
    return {"p10": d["p10"] * scale, "p50": d["p50"] * scale, "p90": d["p90"] * scale, "n": int(d["n"])}


def build(mb: dict, measured: dict | None = None, name: str = "h200", eager_scale: float | None = None,
          compiled_us: dict | None = None, notes: str = "", fit_note: str = "") -> dict:
    """A profile dict (schema_version 1) from raw microbenchmark output."""
    env = mb["environment"]
    host, gaps, graph, comp = mb["host"], mb["gaps"], mb["graph"], mb["compiled"]
    factor = host["context"]["factor"] if eager_scale is None else eager_scale
    launch = {}
    for path, d in host["paths"].items():
        launch[path] = _spread(d, factor if path in EAGER_PATHS else 1.0)
    if compiled_us is None:
        compiled_us = {"p10": comp["per_kernel_p10"], "p50": comp["per_kernel_us"], "p90": comp["per_kernel_p90"],
                       "n": sum(p["n"] for p in comp["points"])}
    launch["compiled"] = compiled_us
    pts = {p["nodes"]: p for p in graph["points"]}
    lo, hi = min(pts), max(pts)
    per_node = (pts[hi]["replay_host"]["p50"] - pts[lo]["replay_host"]["p50"]) / (hi - lo)
    fixed = max(pts[lo]["replay_host"]["p50"] - per_node * lo, 0.0)
    homo_gap = gaps["graph_gap"]["p50"]

    def minus_gap(xs):
        return [max(x - homo_gap, 0.05) for x in xs]

    tables = {"gemm": [], "attention": []}
    for t in mb.get("gemm", []):
        tables["gemm"].append({"n": t["n"], "k": t["k"], "m": t["m"], "us": minus_gap(t["graph_us"]),
                               **({"kernels": t["kernels"]} if t.get("kernels") else {})})
    for t in mb.get("attention", []):
        tables["attention"].append({"heads": t["heads"], "kv_heads": t["kv_heads"], "head_dim": t["head_dim"],
                                    "batch": t["batch"], "ctx": t["ctx"],
                                    "us": [minus_gap(r) for r in t["graph_us"]]})
    for cls, c in mb.get("curves", {}).items():
        xs, ys = zip(*sorted(zip(c["bytes"], c["graph_us"])))
        tables[cls] = {"bytes": list(xs), "us": minus_gap(ys)}
    ds = DATASHEET["H200"]
    ceil = mb["ceilings"]
    gm = {}
    for model, t in ((measured or {}).get("graph_memory") or {}).items():
        gm[model] = {"batch": t["batch"], "private_pool_bytes": [float(x) for x in t["private_pool_bytes"]],
                     "shared_pool_total_bytes": [float(x) for x in t["shared_pool_total_bytes"]],
                     "capture_s": t["capture_s"]}
    machine = f"{env.get('gpu')} (driver {env.get('driver')}, torch {env.get('torch')}, CUDA {env.get('cuda')})"
    return {
        "schema_version": 1, "name": name, "source": "measured", "derived_from": None, "date": mb["date"],
        "notes": (f"Measured on the workplace's nvidia-h200 machine: {machine}, host {env.get('cpu')} x "
                  f"{env.get('cores')} cores (Firecracker VM). Eager host costs = isolated per-op microbenchmark "
                  f"percentiles x context factor {factor:.3f}. {fit_note} {notes}").strip(),
        "environment": env,
        "host": {
            "cpu": f"{env.get('cpu')} ({env.get('cores')} cores)",
            "launch_us": launch,
            "graph_launch_fixed_us": fixed, "graph_launch_per_node_us": per_node,
            "compiled_entry_us": max(comp["entry_us"], 0.0),
            "capture_per_node_ms": max(graph["capture_per_node_ms"], 0.0),
            "source": "calibration/microbench.py (launchsim calibrate); raw figures in "
                      "calibration/measured/h200-microbench.json",
        },
        "device": {
            "gpu": env.get("gpu", "unknown"), "memory_gib": env.get("gpu_memory_gib", ds["mem"]),
            "peak_bf16_tflops": ds["tflops"], "hbm_tbps": ds["hbm"],
            "gemm_efficiency": min(ceil["gemm_bf16_tflops"] / ds["tflops"], 1.0),
            "bw_efficiency": min(ceil["copy_tbps"] / ds["hbm"], 1.0),
            "min_kernel_us": gaps["graph_kernel_dur"]["p50"],
            "eager_gap_us": gaps.get("hetero_eager_gap", gaps["eager_gap"])["p50"],
            "graph_node_us": gaps.get("hetero_graph_gap", gaps["graph_gap"])["p50"],
            "launch_queue_depth": 1024,
            "tables": tables, "graph_memory": gm,
            "source": (f"calibration/tables.py + microbench.py on {machine}: copy {ceil['copy_tbps']:.2f} TB/s, "
                       f"bf16 GEMM {ceil['gemm_bf16_tflops']:.0f} TFLOP/s measured"),
        },
    }


def derive_h100(p: dict, name: str = "h100-sxm") -> dict:
    """H100 SXM from an H200 profile by datasheet ratios: same compute and host; HBM 3.35 vs 4.8 TB/s.
    Each table point whose arithmetic intensity is under the H100 ridge point is bandwidth-bound: its
    time above the table's small-kernel floor scales by 4.8/3.35; compute-bound points and the floor
    (launch latency, not bandwidth) stay."""
    import copy

    q = copy.deepcopy(p)
    r = DATASHEET["H200"]["hbm"] / DATASHEET["H100"]["hbm"]
    d = q["device"]
    d["gpu"] = "NVIDIA H100 SXM (derived from H200 measurements)"
    d["memory_gib"] = DATASHEET["H100"]["mem"]
    d["hbm_tbps"] = DATASHEET["H100"]["hbm"]
    ridge = d["peak_bf16_tflops"] * d["gemm_efficiency"] * 1e12 / (d["hbm_tbps"] * d["bw_efficiency"] * 1e12)

    def scale(us, floor, bw_bound=True):
        return floor + (us - floor) * r if bw_bound and us > floor else us

    t = d["tables"]
    for g in t.get("gemm", []):
        floor = min(g["us"])
        g["us"] = [scale(u, floor, (2.0 * m * g["n"] * g["k"]) / (2.0 * (m * g["k"] + g["n"] * g["k"] + m * g["n"]))
                         < ridge) for m, u in zip(g["m"], g["us"])]
    for a in t.get("attention", []):
        floor = min(min(row) for row in a["us"])
        a["us"] = [[scale(u, floor) for u in row] for row in a["us"]]
    for cls in ("elementwise", "reduction", "memcopy", "embedding"):
        if t.get(cls):
            floor = min(t[cls]["us"])
            t[cls]["us"] = [scale(u, floor) for u in t[cls]["us"]]
    d["source"] = f"derived from '{p['name']}': bandwidth-bound table times above the floor x {r:.3f} (4.8/3.35 TB/s)"
    q.update(name=name, source="derived", derived_from=p["name"],
             notes=f"Derived from the measured '{p['name']}' profile by datasheet ratios (HBM 3.35 vs 4.8 TB/s, "
                   "same compute, same host section). Not measured on an H100.")
    q["environment"] = {"derived_from_environment": p.get("environment", {})}
    return q
