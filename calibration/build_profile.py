"""Turn a calibration round's raw output (calibration/round.py: timing.json from the clean timing
process, counts_eager.json from the counts process) into a profile that validates against
simulator/model/profile.py, and derive other devices from it.

No torch here: this runs on any machine. `build` says how each profile figure is made; in short,
every figure is a microbenchmark of its own, timed with CUDA events or host clocks in a process that
never ran a profiler, and nothing is fitted on decode rows.
"""

from __future__ import annotations

import json
from .hostprobe import host_canary

DATASHEET = {"H200": {"tflops": 989.0, "hbm": 4.8, "mem": 141.0},
             "H100": {"tflops": 989.0, "hbm": 3.35, "mem": 80.0}}
EAGER_PATHS = ("eager_elementwise", "eager_reduction", "eager_gemm", "eager_attention", "eager_copy",
               "eager_embedding", "eager_view")


def write_json_atomic(obj, path) -> None:
    """Write JSON atomically (simulator.report.html's temp file + os.replace; stdlib only). A profile's GEMM grid
    (device.tables.gemm_grid: ~20k numbers) is written a row a line, the rest one value a line as before."""
    from simulator.common.jsonfile import atomic_write_text

    tables = obj.get("device", {}).get("tables", {}) if isinstance(obj, dict) else {}
    grid = tables.get("gemm_grid") if isinstance(tables, dict) else None
    if not grid:
        atomic_write_text(path, json.dumps(obj, indent=1) + "\n")
        return
    mark = "@gemm_grid@"
    tables["gemm_grid"] = mark
    try:
        text = json.dumps(obj, indent=1)
    finally:
        tables["gemm_grid"] = grid
    pad = "    "
    parts = []
    for key, v in grid.items():
        if isinstance(v, list) and v and isinstance(v[0], list):
            body = (",\n" + pad + " ").join(json.dumps(r) for r in v)
            parts.append(f'{pad}"{key}": [\n{pad} {body}\n{pad}]')
        else:
            parts.append(f"{pad}{json.dumps(key)}: {json.dumps(v)}")
    block = "{\n" + ",\n".join(parts) + "\n   }"
    assert text.count(json.dumps(mark)) == 1
    atomic_write_text(path, text.replace(json.dumps(mark), block) + "\n")


def _spread(d, scale=1.0):
    return {"p10": d["p10"] * scale, "p50": d["p50"] * scale, "p90": d["p90"] * scale, "n": int(d["n"])}


def _trace_node_gap(timing: dict, counts: dict | None) -> tuple[float | None, str]:
    """Per-node gap between real decoder kernels in a replayed graph, as seen beside CUPTI kernel
    durations: (clean graph-replay device time - the same step's eager CUPTI kernel durations) / kernels,
    median over the configurations both processes measured (ctx 512)."""
    if not counts:
        return None, ""
    dev = {(r["model"], r["fusion"], r["batch"]): r["full"]["device_ms"]["p50"] for r in timing.get("rows", [])
           if "full" in r and r.get("ctx") == 512 and r["fusion"] != "compiled"}
    xs = []
    for c in counts.get("rows", []):
        key = (c["model"], c["fusion"], c["batch"])
        if c.get("graph") == "none" and key in dev:
            xs.append((dev[key] * 1e3 - c["kernel_us"]) / c["kernels"])
    if not xs:
        return None, ""
    xs.sort()
    return xs[len(xs) // 2], f"median of {len(xs)} configurations (ctx 512, fusion none/packed)"


def build_tables(timing: dict, counts: dict | None = None) -> dict:
    """device.tables' gemm, attention and byte-curve sections from a timing process (child_timing.py): every point
    a graph-replayed per-op time; GEMM kernel counts from the counts process where given."""
    gk = {(g["n"], g["k"]): g for g in (counts or {}).get("gemm_kernels", [])}
    tables: dict = {"gemm": [], "attention": []}
    for t in timing.get("gemm", []) if isinstance(timing.get("gemm"), list) else []:
        row = {"n": t["n"], "k": t["k"], "m": t["m"], "us": list(t["graph_us"])}
        kc = gk.get((t["n"], t["k"]))
        if kc and kc["m"] == t["m"]:
            row["kernels"] = kc["kernels"]
        tables["gemm"].append(row)
    for t in timing.get("attention", []):
        tables["attention"].append({k: t[k] for k in ("heads", "kv_heads", "head_dim", "batch", "ctx")}
                                   | {"us": t["graph_us"]})
    for cls, c in timing.get("curves", {}).items():
        xs, ys = zip(*sorted(zip(c["bytes"], c["graph_us"])))
        tables[cls] = {"bytes": list(xs), "us": list(ys)}
    return tables


def build(timing: dict, counts: dict | None = None, name: str = "h200", notes: str = "") -> dict:
    """A profile dict (schema_version 1) from a clean timing process (child_timing.py) and, where given,
    the counts process (cuBLAS kernels per GEMM call, CUPTI kernel durations). Nothing is fitted on
    decode rows: every figure below is a microbenchmark of its own.
    - host.launch_us[path]: each op's isolated per-call cost (percentiles), eager paths times the
      mixed-block context factor (a 40-op straight-line block of decoder ops against the sum of the same
      ops timed alone);
    - compiled: Triton launch slope (`compiled`), extern-call slope (`compiled_extern`, Inductor's
      calls to aten GEMM/attention), entry cost from the Triton microbenchmark's intercept;
    - graph replay host cost: least-squares fixed + per node over 1..1000-node graphs;
    - device gaps from CUDA events (calibration/child_timing.py: event_gaps): tables are per-node
      times of identical back-to-back nodes in a replayed graph; `graph_node_us` is what a node of a
      decode-like cycle of different kernels costs beyond that (clamped at 0 when negative),
      `eager_gap_us` what an eager kernel in a full launch queue costs beyond it;
      `graph_launch_latency_us`: device time of a 1-node graph minus one tiny node;
    - `host.step_factor`: the spread (p10/p90 over p50) of a 40-op mixed block timed 400 times, i.e.
      the host's own step-to-step speed variation, measured on a microbenchmark."""
    env = timing["environment"]
    host, gaps, graph, comp = timing["host"], timing["gaps"], timing["graph"], timing["compiled"]
    ext = timing.get("compiled_extern") or {}
    ctx = host["context"]
    # eager ops issued among other ops (a decoder's straight-line code) cost more than in a tight loop:
    # the mixed-block microbenchmark's factor, applied to the eager paths (measured, not fitted)
    launch = {path: _spread(d, ctx["factor"] if path in EAGER_PATHS else 1.0) for path, d in host["paths"].items()}
    launch["compiled"] = {"p10": comp["per_kernel_p10"], "p50": comp["per_kernel_us"], "p90": comp["per_kernel_p90"],
                          "n": sum(p["n"] for p in comp["points"])}
    if "per_call_us" in ext:
        launch["compiled_extern"] = {"p50": ext["per_call_us"], "n": sum(p["n"] for p in ext["points"])}
    step_factor = {"p10": ctx["factor_p10"] / ctx["factor"], "p50": 1.0, "p90": ctx["factor_p90"] / ctx["factor"],
                   "n": ctx["block_us"]["n"]}
    tables = build_tables(timing, counts)
    ds = DATASHEET["H200"]
    ceil = timing["ceilings"]
    one = [p for p in timing["graph_device"]["points"] if p["nodes"] == 1][0]
    trace_gap, trace_note = _trace_node_gap(timing, counts)
    machine = f"{env.get('gpu')} (driver {env.get('driver')}, torch {env.get('torch')}, CUDA {env.get('cuda')})"
    c = timing.get("canary", {})
    device = {
        "gpu": env.get("gpu", "unknown"), "memory_gib": env.get("gpu_memory_gib", ds["mem"]),
        "peak_bf16_tflops": ds["tflops"], "hbm_tbps": ds["hbm"],
        "gemm_efficiency": min(ceil["gemm_bf16_tflops"] / ds["tflops"], 1.0),
        "bw_efficiency": min(ceil["copy_tbps"] / ds["hbm"], 1.0),
        "min_kernel_us": gaps["tiny_graph_node_us"],
        "eager_gap_us": max(gaps["eager_gap_us"], 0.0),
        "graph_node_us": max(gaps["graph_node_us"], 0.0),
        "graph_launch_latency_us": max(one["event_us"]["p50"] - gaps["tiny_graph_node_us"], 0.0),
        "launch_queue_depth": 1024,
        "tables": tables, "graph_memory": {},
        "source": (f"calibration/child_timing.py on {machine} (CUDA events, no profiler in the process): copy "
                   f"{ceil['copy_tbps']:.2f} TB/s, bf16 GEMM {ceil['gemm_bf16_tflops']:.0f} TFLOP/s; tables are "
                   "per-node times of identical nodes in a replayed graph; cuBLAS kernels per GEMM call from the "
                   "counts process (calibration/child_counts.py)"),
    }
    if trace_gap is not None:
        device["graph_node_trace_us"] = max(trace_gap, 0.0)
        device["source"] += f"; graph_node_trace_us: clean graph device time minus CUPTI kernel durations, {trace_note}"
    return {
        "schema_version": 1, "name": name, "source": "measured", "derived_from": None, "date": timing["date"],
        "notes": (f"Measured on the workplace's nvidia-h200 machine: {machine}, host {env.get('cpu')} x "
                  f"{env.get('cores')} cores (Firecracker VM), by calibration/round.py: timing in a process that "
                  f"never ran a profiler, canary {c.get('host_start_us', float('nan')):.2f} -> "
                  f"{c.get('host_end_us', float('nan')):.2f} us ({'OK' if c.get('ok') else 'NOT OK'}). "
                  f"Eager host costs = isolated per-op microbenchmarks x the mixed-block context factor "
                  f"{ctx['factor']:.3f} (measured). {notes}").strip(),
        "environment": env,
        "host": {
            "cpu": f"{env.get('cpu')} ({env.get('cores')} cores)",
            "launch_us": launch,
            "graph_launch_fixed_us": max(graph["replay_fixed_us"], 0.0),
            "graph_launch_per_node_us": max(graph["replay_per_node_us"], 0.0),
            "compiled_entry_us": max(comp["entry_us"], 0.0),
            "capture_per_node_ms": max(graph["capture_per_node_ms"], 0.0),
            "step_factor": step_factor,
            **({"canary": hc} if (hc := host_canary(timing, "timing.json canary_start/canary_end")) else {}),
            "source": "calibration/child_timing.py microbenchmarks (launchsim calibrate); raw figures in "
                      "calibration/measured/h200-round-b/timing.json",
        },
        "device": device,
    }


def graph_node_gaps(p: dict, depth: dict) -> dict[tuple[str, str], float]:
    """Per (model, fusion) configuration of the depth sweep (fusion compiled left out): the slope over depth of the
    graph replay's device time minus the slope of the table prediction, per node, in us."""
    import dataclasses

    from simulator.engine.plan import build_plan
    from simulator.model.costs import CostModel
    from simulator.model.models import PRESETS
    from simulator.model.profile import parse_profile
    from simulator.model.workload import build_step, decode

    cm = CostModel(parse_profile(p))
    by: dict = {}
    for r in depth["rows"]:
        if "full" not in r or r["fusion"] == "compiled":
            continue
        m = dataclasses.replace(PRESETS[r["model"]], num_hidden_layers=r["layers"])
        pl = build_plan(build_step(m, decode(r["batch"], r["ctx"] - 1), r["fusion"]), cm, "full")
        pred = (pl.gpu_s.sum() + pl.gap_s.sum()) * 1e3
        by.setdefault((r["model"], r["fusion"]), {})[r["layers"]] = (r["full"]["device_ms"]["p50"], pred, pl.gpu_kernels)
    gaps = {}
    for key, v in by.items():
        lo, hi = min(v), max(v)
        (m0, p0, k0), (m1, p1, k1) = v[lo], v[hi]
        gaps[key] = ((m1 - m0) - (p1 - p0)) / (k1 - k0) * 1e3
    return gaps


def graph_node_us_of(gaps) -> float:
    """device.graph_node_us from the configurations' gaps: their median (the upper one of an even count), >= 0."""
    gaps = sorted(gaps)
    return max(gaps[len(gaps) // 2], 0.0)


def with_decoder_figures(p: dict, depth: dict, fit_row: dict | None) -> tuple[dict, str]:
    """Two figures that single-op microbenchmarks cannot give, added to a built profile:
    - device.graph_node_us from the depth sweep (calibration/depth_sweep.py: 1/2/4-layer decoders, never
      the full-depth rows validation scores): per node, the slope over depth of the graph replay's event
      time minus the slope of the table prediction; median over the eager-fusion configurations;
    - host.compiled_wrapper_us, FITTED on one named row (`fit_row`: qwen3-0.6b compiled, dynamic=False,
      batch 1, ctx 512, isolated host issue time): (measured - predicted without it) / kernels. The depth
      sweep could not give it: the VM's host speed moved 2x between its shallow-model steps.
    Returns the profile and a note."""
    import copy

    from simulator.model.costs import CostModel
    from simulator.model.models import PRESETS
    from simulator.engine.plan import build_plan
    from simulator.model.profile import parse_profile
    from simulator.model.workload import build_step, decode

    q = copy.deepcopy(p)
    gaps = sorted(graph_node_gaps(q, depth).values())
    node = graph_node_us_of(gaps)
    q["device"]["graph_node_us"] = node
    q["device"]["source"] += (f"; graph_node_us {node:.3f} us from the depth sweep (1-4 layer decoders, "
                              f"{len(gaps)} configurations: {', '.join(f'{g:.3f}' for g in gaps)})")
    note = f"graph_node_us {node:.3f} us per node measured on 1-4 layer decoder graphs (depth sweep)"
    if fit_row is not None:
        q["host"]["compiled_wrapper_us"] = 0.0
        cm = CostModel(parse_profile(q))
        st = build_step(PRESETS[fit_row["model"]], decode(fit_row["batch"], fit_row["ctx"] - 1), "compiled")
        pl = build_plan(st, cm, "none")
        pred_ms = (pl.host_s.sum() + pl.host_tail_s) * 1e3
        meas = fit_row["eager"]["isolated"]["host_ms"]["p50"]
        w = max((meas - pred_ms) * 1e3 / pl.launches, 0.0)
        q["host"]["compiled_wrapper_us"] = w
        note += (f"; host.compiled_wrapper_us {w:.2f} us per kernel FITTED on 1 row (qwen3-0.6b compiled "
                 f"dynamic=False b{fit_row['batch']} ctx {fit_row['ctx']}: host issue {meas:.3f} ms measured vs "
                 f"{pred_ms:.3f} ms from the compiled microbenchmarks, over {pl.launches} kernels); that row is "
                 "not scored")
    q["notes"] += " " + note + "."
    return q, note


def h100_gemm_measured(round_dir) -> tuple[dict, dict | None, str] | None:
    """Round ac's H100 GEMMs (calibration/measured/h100-round-ac): {(n, k): {"m", "us", "kernels"}} of the named
    shapes (the GEMM tables' own), the grid section (build_gemm_grid.grid_section of its grid/ folder) and a source
    line; None where the folder is absent."""
    import gzip
    from pathlib import Path

    from .build_gemm_grid import grid_section

    d = Path(round_dir)
    if not (d / "named" / "timing.json").exists():
        return None
    t = json.loads((d / "named" / "timing.json").read_text())
    with gzip.open(d / "named" / "counts.json.gz", "rt") as f:
        calls = json.load(f)["calls"]
    named = {}
    for r in t["gemm"]:
        ks = [len(calls[f"{r['n']},{r['k']},{m}"]) if f"{r['n']},{r['k']},{m}" in calls else None for m in r["m"]]
        named[(r["n"], r["k"])] = {"m": list(r["m"]), "us": [round(u, 4) for u in r["graph_us"]],
                                   "kernels": ks if None not in ks else None}
    src = (f"{d.name} (an H100 80GB HBM3, calibration/scripts/round_k.py --set named / grid; canary "
           f"{t['canary']['host_start_us']:.2f} -> {t['canary']['host_end_us']:.2f} us)")
    return named, grid_section(d / "grid", src), src


def derive_h100(p: dict, name: str = "h100-sxm", copy_tbps: float | None = None, copy_source: str = "",
                gemm_round=None, h100_timing: dict | None = None) -> dict:
    """H100 SXM from an H200 profile: same compute and host; HBM 3.35 vs 4.8 TB/s.
    GEMM points (tables and grid) under the H100 ridge point move their bytes (A, B and C once, bf16) at the H100's
    bandwidth: each adds bytes x (1/bw_H100 - 1/bw_H200), with bw the measured device-to-device copy bandwidth of
    each (`copy_tbps`: the H100's, measured in calibration/measured/h100-calib; the H200's is the profile's own
    hbm_tbps x bw_efficiency) or, without `copy_tbps`, the datasheet ratio. The earlier rule scaled only the time
    above each table's fastest point, which for a weight-streaming GEMM (its fastest point reads the whole weight)
    left the H200's time in place: llama3-8b at batch 1 came out at the H200's speed, 20 % under the H100's
    measured step (calibration/validation/impl_fused.md, round ab). Every other table: each point whose arithmetic
    intensity is under the ridge is bandwidth-bound and its time above the table's small-kernel floor scales by
    4.8/3.35; compute-bound points and the floor (launch latency, not bandwidth) stay.
    `h100_timing` (calibration/measured/h100-calib/timing.json, an H100 calibration round's timing process): its eager
    byte curves (elementwise, reduction, memcopy, embedding) and its attention tables (the H200 tables' own shapes and
    grid) replace the derived ones, read as `build` reads the H200's.
    `gemm_round` (calibration/measured/h100-round-ac): GEMMs measured on an H100 replace the derived ones, the named
    shapes' times and kernel counts and the whole grid; a shape it lacks keeps the bandwidth rule above. The H200's
    cuBLAS picks a slower kernel for some small shapes at M <= 4 (qwen3-0.6b's o_proj (1024, 2048): 12.8 us on the
    H200, 6.1 on the H100), which no bandwidth rule carries over."""
    import copy

    q = copy.deepcopy(p)
    r = DATASHEET["H200"]["hbm"] / DATASHEET["H100"]["hbm"]
    d = q["device"]
    bw200 = d["hbm_tbps"] * d["bw_efficiency"] * 1e12
    d["gpu"] = "NVIDIA H100 SXM (derived from H200 measurements)"
    d["memory_gib"] = DATASHEET["H100"]["mem"]
    d["hbm_tbps"] = DATASHEET["H100"]["hbm"]
    if copy_tbps:
        d["bw_efficiency"] = min(copy_tbps / DATASHEET["H100"]["hbm"], 1.0)
    bw100 = d["hbm_tbps"] * d["bw_efficiency"] * 1e12 if copy_tbps else bw200 / r
    extra_us_per_byte = (1.0 / bw100 - 1.0 / bw200) * 1e6
    ridge = d["peak_bf16_tflops"] * d["gemm_efficiency"] * 1e12 / (d["hbm_tbps"] * d["bw_efficiency"] * 1e12)

    def scale(us, floor, bw_bound=True):
        return floor + (us - floor) * r if bw_bound and us > floor else us

    def gemm_us(m, n, k, us):
        moved = 2.0 * (m * k + n * k + m * n)
        return us + moved * extra_us_per_byte if 2.0 * m * n * k / moved < ridge else us

    t = d["tables"]
    measured = h100_gemm_measured(gemm_round) if gemm_round is not None else None
    named, grid, gemm_src = measured if measured else ({}, None, "")
    n_named = 0
    for g in t.get("gemm", []):
        h = named.get((g["n"], g["k"]))
        if h is not None and h["m"] == g["m"]:  # measured on an H100: its time and cuBLAS's kernels there
            g["us"] = list(h["us"])
            if h["kernels"] is not None:
                g["kernels"] = list(h["kernels"])
            n_named += 1
        else:
            g["us"] = [gemm_us(m, g["n"], g["k"], u) for m, u in zip(g["m"], g["us"])]
    if grid is not None:
        t["gemm_grid"] = grid
    elif t.get("gemm_grid"):
        gg = t["gemm_grid"]
        for i, (n, k) in enumerate(gg["shapes"]):
            gg["us"][i] = [gemm_us(m, n, k, u) for m, u in zip(gg["m"], gg["us"][i])]
    measured_tables = build_tables(h100_timing) if h100_timing else {}
    grid_of = lambda a: (a["heads"], a["kv_heads"], a["head_dim"], tuple(a["batch"]), tuple(a["ctx"]))  # noqa: E731
    h_att = {grid_of(a): a for a in measured_tables.get("attention", [])}
    n_att = 0
    for a in t.get("attention", []):
        h = h_att.get(grid_of(a))
        if h is not None:
            a["us"] = [list(row) for row in h["us"]]
            n_att += 1
            continue
        floor = min(min(row) for row in a["us"])
        a["us"] = [[scale(u, floor) for u in row] for row in a["us"]]
    curves_measured = [c for c in ("elementwise", "reduction", "memcopy", "embedding") if c in measured_tables]
    for cls in curves_measured:
        t[cls] = measured_tables[cls]
    # the roll curve (round w) is left as measured: 0.92 TB/s, a fifth of the H200's copy bandwidth, is not HBM-bound
    for cls in ("elementwise", "reduction", "memcopy", "embedding", "triton_pointwise", "triton_reduction",
                "triton_reduction_loop"):  # the Triton curves (round i) are byte curves like the eager ones
        if t.get(cls) and cls not in curves_measured:
            floor = min(t[cls]["us"])
            t[cls]["us"] = [scale(u, floor) for u in t[cls]["us"]]
    if t.get("row_mean"):  # not bandwidth-bound below the H100's bandwidth (a warp a row, L / 32 values each):
        # each point no faster than its bytes (4 * rows * cols read) at the H100's effective bandwidth
        rm, bw = t["row_mean"], d["hbm_tbps"] * d["bw_efficiency"] * 1e12
        rm["us"] = [[max(u, 4.0 * r * c / bw * 1e6) for c, u in zip(rm["cols"], line)]
                    for r, line in zip(rm["rows"], rm["us"])]
    bw_note = (f"copy bandwidth {bw200 / 1e12:.3f} -> {bw100 / 1e12:.3f} TB/s (measured: {copy_source})" if copy_tbps
               else f"datasheet ratio {r:.3f}")
    gemm_note = (f"GEMM tables measured on an H100 for {n_named} of {len(t.get('gemm', []))} shapes and the whole grid "
                 f"({gemm_src}); the others' " if measured else "")
    if measured_tables:
        gemm_note = (f"eager curves ({', '.join(curves_measured)}) and {n_att} of {len(t.get('attention', []))} "
                     f"attention tables measured on an H100 (an H100 calibration round's timing process); " + gemm_note)
    d["source"] = (f"derived from '{p['name']}': {gemm_note}bandwidth-bound GEMM points + their bytes x (1/bw_H100 - "
                   f"1/bw_H200), {bw_note}; other bandwidth-bound table times above the floor x {r:.3f} (4.8/3.35 TB/s)")
    q.update(name=name, source="derived", derived_from=p["name"],
             notes=f"Derived from the measured '{p['name']}' profile (GEMM points: their bytes at the H100's "
                   "measured copy bandwidth; other tables: datasheet HBM ratio 3.35 vs 4.8 TB/s; same compute, same "
                   "host section; the row-mean table's points no faster than their bytes at the H100's bandwidth). "
                   + ("Its GEMM tables and grid (round ac)" if measured else "")
                   + (", eager byte curves and attention tables (an H100 calibration round)" if measured_tables else "")
                   + (" were measured on an H100; the other tables were not. " if measured or measured_tables
                      else "Its tables were not measured on an H100; ")
                   + "Checked against H100 steps in calibration/validation/impl_fused.md.")
    q["environment"] = {"derived_from_environment": p.get("environment", {})}
    return q
