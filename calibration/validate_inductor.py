"""torch.compile as a fusion model against Inductor's real output on the H200 (CPU only, committed measurements):

    python -m calibration.validate_inductor [--out DIR | --write-shipped]

Every committed compiled measurement, predicted by `fusion compiled` (Inductor's pass over the implementation's
eager list, simulator/model/inductor.py) with profile `h200`, each row with the `dynamic` it was compiled with
(calibration/validate.py `predict_compiled`: dynamic rows add inductor.DYNAMIC_WRAPPER_EXTRA_US per launch):
- round b (calibration/measured/h200-round-b/timing.json + compiled_qwen3-0.6b_*.json): the reference decoder,
  qwen3-0.6b, 28 layers, ctx 512; its b1 and b16 static eager rows are fit rows of host.compiled_wrapper_us (with
  round i's passes of the same rows, calibration/build_compiled.py; marked);
- round f (h200-round-f/compile_{ref,hf}_{qwen3-0.6b,llama3-8b}.json + compile_counts_*): the reference decoder and
  transformers 5.17 (StaticCache of ctx + 128 slots), 2 layers, ctx 512, dynamic False / True, batch 1 / 64;
- the depth sweep (h200-depth/depth.json): the reference qwen3-0.6b at 1, 2 and 4 layers, compiled static b1 and
  dynamic b16 (no profiled counterpart).
Compiled eager is predicted twice: on the profile's host, and on the row's own host (the profile's host lane rescaled
to the measuring process's canary, the mean of its start and end p50s: simulator/model/profile.py `host_scaled`, as
validate_spec and validate_impl do; nothing is fitted on these rows). Kernel time is set beside CUPTI's kernel sum
where the profiled process recorded one.
Kernels per step = the pass's launches + cuBLAS split-K reduces from the GEMM tables (CostModel.step_kernels).
Writes calibration/validation/inductor.json (rows and summary) and prints the markdown tables inductor.md holds.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from calibration.jsonio import add_out_args, out_dir

ROOT = Path(__file__).resolve().parent
RB = ROOT / "measured" / "h200-round-b"
RF = ROOT / "measured" / "h200-round-f"
RD = ROOT / "measured" / "h200-depth"
HF_CONFIGS = ROOT / "configs" / "hf"
TARGETS = {"compiled + graph": 10.0, "compiled eager": 15.0, "kernels": 3.0}  # issue 20 (independent decoder)


def _canary(d: dict) -> str:
    c = d.get("canary") or {}
    if "host_start_us" in c:
        return f"{c['host_start_us']:.2f} -> {c['host_end_us']:.2f} us{'' if c.get('ok') else ' (FAILED)'}"
    s, e = d.get("canary_start"), d.get("canary_end")
    if s and e:
        return f"{s['host_tiny_op_us']['p50']:.2f} -> {e['host_tiny_op_us']['p50']:.2f} us"
    return "none"


def _canary_us(d: dict) -> tuple[float | None, bool]:
    """The measuring process's host canary (µs): the mean of its start and end p50s (as the profile's calibration_us
    is its timing process's), and whether the process's canary check passed (start / end within its tolerance)."""
    c = d.get("canary") or {}
    if "host_start_us" in c and c.get("host_end_us") is not None:
        return (c["host_start_us"] + c["host_end_us"]) / 2, bool(c.get("ok"))
    s, e = d.get("canary_start"), d.get("canary_end")
    if s and e:
        return (s["host_tiny_op_us"]["p50"] + e["host_tiny_op_us"]["p50"]) / 2, True
    return None, False


def _on_host(profile, canary_us: float, dyn: bool):
    """`profile` with its host lane moved to the row's own host (simulator/model/profile.py `host_scaled`, what
    --host-canary-us does; device figures unchanged). predict_compiled adds inductor.DYNAMIC_WRAPPER_EXTRA_US
    (measured on the calibration host) to dynamic rows: it is scaled by the same factor here."""
    from simulator.model.inductor import DYNAMIC_WRAPPER_EXTRA_US
    from simulator.model.profile import host_factor, host_scaled

    p = host_scaled(profile, canary_us)
    if dyn:
        f = host_factor(profile, canary_us)
        h = p.host.model_copy(update={"compiled_wrapper_us": p.host.compiled_wrapper_us
                                      + DYNAMIC_WRAPPER_EXTRA_US * (f - 1.0)})
        p = p.model_copy(update={"host": h})
    return p


def _model(impl: str, name: str, layers: int | None):
    from simulator.model.models import PRESETS, load_model

    m = PRESETS[name] if impl == "ref" else load_model(str(HF_CONFIGS / f"{name}.json"))
    return replace(m, num_hidden_layers=layers) if layers else m


def _predict(impl, m, batch, ctx, graph, profile, dyn):
    from calibration.validate import predict_compiled

    if impl == "ref":  # the reference decoder's ctx counts the new token (calibration/validate.py)
        return predict_compiled(m, batch, ctx - 1, graph, profile, dyn, "reference")
    return predict_compiled(m, batch, ctx, graph, profile, dyn, "hf", cache="static", max_cache_len=ctx + 128)


def _err(p, m):
    return None if p is None or m is None else 100.0 * (p - m) / m


def rows(profile) -> list[dict]:
    from simulator.model.costs import CostModel

    out = []
    # round b: 28-layer reference qwen3-0.6b
    tb = json.loads((RB / "timing.json").read_text())
    counts, kus = {}, {}
    for f in sorted(RB.glob("compiled_qwen3-0.6b_*.json")):
        for r in json.loads(f.read_text())["rows"]:
            counts[(bool(r.get("dynamic")), r["batch"])] = r["kernels"]
            if r.get("graph") == "full":  # CUPTI kernel sum of the profiled full-graph step
                kus[(bool(r.get("dynamic")), r["batch"])] = r.get("kernel_us")
    for r in tb["rows"]:
        if r.get("fusion") != "compiled":
            continue
        dyn, b = bool(r.get("dynamic")), r["batch"]
        m = _model("ref", r["model"], None)
        pe, pg = (_predict("ref", m, b, r["ctx"], g, profile, dyn) for g in ("none", "full"))
        can, ok = _canary_us(tb)
        ph = _predict("ref", m, b, r["ctx"], "none", _on_host(profile, can, dyn), dyn)
        cm = CostModel(profile)
        out.append({"round": "b", "impl": "ref", "model": r["model"], "layers": m.num_hidden_layers, "dynamic": dyn,
                    "batch": b, "ctx": r["ctx"], "canary": _canary(tb),
                    "fit": (not dyn and b in (1, 16)),  # calibration/build_compiled.py fits the wrapper on both
                    "kernels_measured": counts.get((dyn, b)), "kernels_predicted": cm.step_kernels(pe.step.ops),
                    "eager_measured_ms": r["eager"]["isolated"]["step_ms"]["p50"],
                    "eager_predicted_ms": pe.result.step_s * 1e3,
                    "host_canary_us": can, "canary_ok": ok, "eager_on_host_predicted_ms": ph.result.step_s * 1e3,
                    "gpu_kernel_predicted_us": _gpu_us(cm, pg.step.ops), "gpu_kernel_measured_us": kus.get((dyn, b)),
                    "graph_measured_ms": r["full"]["isolated"]["step_ms"]["p50"] if "full" in r else None,
                    "graph_predicted_ms": pg.result.step_s * 1e3})
    # round f: 2-layer reference and transformers
    for impl in ("ref", "hf"):
        for name in ("qwen3-0.6b", "llama3-8b"):
            tf = json.loads((RF / f"compile_{impl}_{name}.json").read_text())
            cf = json.loads((RF / f"compile_counts_{impl}_{name}.json").read_text())
            kc = {(bool(r["dynamic"]), r["batch"]): r["kernels"] for r in cf["rows"]}
            ku = {(bool(r["dynamic"]), r["batch"]): r.get("kernel_us") for r in cf["rows"]}
            can, ok = _canary_us(tf)
            for r in tf["rows"]:
                dyn, b = bool(r["dynamic"]), r["batch"]
                m = _model(impl, name, r["layers"])
                pe, pg = (_predict(impl, m, b, r["ctx"], g, profile, dyn) for g in ("none", "full"))
                ph = _predict(impl, m, b, r["ctx"], "none", _on_host(profile, can, dyn), dyn)
                cm = CostModel(profile)
                out.append({"round": "f", "impl": impl, "model": name, "layers": r["layers"], "dynamic": dyn,
                            "batch": b, "ctx": r["ctx"], "canary": _canary(tf), "fit": False,
                            "kernels_measured": kc.get((dyn, b)), "kernels_predicted": cm.step_kernels(pe.step.ops),
                            "eager_measured_ms": r["compiled_eager_ms"]["median"],
                            "eager_predicted_ms": pe.result.step_s * 1e3,
                            "host_canary_us": can, "canary_ok": ok,
                            "eager_on_host_predicted_ms": ph.result.step_s * 1e3,
                            "gpu_kernel_predicted_us": _gpu_us(cm, pg.step.ops),
                            "gpu_kernel_measured_us": ku.get((dyn, b)),
                            "graph_measured_ms": r["compiled_graph_ms"]["median"],
                            "graph_predicted_ms": pg.result.step_s * 1e3})
    # the depth sweep: the reference qwen3-0.6b cut to 1, 2 and 4 layers, compiled static b1 and dynamic b16 (one
    # timing process, no profiled counterpart: kernels and CUPTI sums not measured)
    td = json.loads((RD / "depth.json").read_text())
    can, ok = _canary_us(td)
    for r in td["rows"]:
        if r.get("fusion") != "compiled":
            continue
        dyn, b = bool(r.get("dynamic")), r["batch"]
        m = _model("ref", r["model"], r["layers"])
        pe, pg = (_predict("ref", m, b, r["ctx"], g, profile, dyn) for g in ("none", "full"))
        ph = _predict("ref", m, b, r["ctx"], "none", _on_host(profile, can, dyn), dyn)
        cm = CostModel(profile)
        out.append({"round": "depth", "impl": "ref", "model": r["model"], "layers": r["layers"], "dynamic": dyn,
                    "batch": b, "ctx": r["ctx"], "canary": _canary(td), "fit": False,
                    "kernels_measured": None, "kernels_predicted": cm.step_kernels(pe.step.ops),
                    "eager_measured_ms": r["eager"]["isolated"]["step_ms"]["p50"],
                    "eager_predicted_ms": pe.result.step_s * 1e3,
                    "host_canary_us": can, "canary_ok": ok, "eager_on_host_predicted_ms": ph.result.step_s * 1e3,
                    "gpu_kernel_predicted_us": _gpu_us(cm, pg.step.ops), "gpu_kernel_measured_us": None,
                    "graph_measured_ms": r["full"]["isolated"]["step_ms"]["p50"],
                    "graph_predicted_ms": pg.result.step_s * 1e3})
    for r in out:
        r["kernels_err_pct"] = _err(r["kernels_predicted"], r["kernels_measured"])
        r["eager_err_pct"] = _err(r["eager_predicted_ms"], r["eager_measured_ms"])
        r["eager_on_host_err_pct"] = _err(r["eager_on_host_predicted_ms"], r["eager_measured_ms"])
        r["gpu_kernel_err_pct"] = _err(r["gpu_kernel_predicted_us"], r["gpu_kernel_measured_us"])
        r["graph_err_pct"] = _err(r["graph_predicted_ms"], r["graph_measured_ms"])
    return out


def _gpu_us(cm, ops) -> float:
    """The step's kernel time as the cost model prices it (µs), to set beside CUPTI's kernel sum of the profiled
    process (compile_counts_*.json kernel_us: kernels only, no graph node gaps)."""
    return sum(cm.gpu_s(o) for o in ops if o.launches_kernel) * 1e6


def _mape(xs) -> float | None:
    xs = [abs(x) for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def summary(rs: list[dict]) -> dict:
    out = {}
    groups = {"round b (28 layers, reference)": [r for r in rs if r["round"] == "b"],
              "round f reference (2 layers)": [r for r in rs if r["round"] == "f" and r["impl"] == "ref"],
              "round f transformers (2 layers)": [r for r in rs if r["round"] == "f" and r["impl"] == "hf"],
              "depth sweep (reference, 1-4 layers)": [r for r in rs if r["round"] == "depth"]}
    for g, xs in groups.items():
        out[g] = {"rows": len(xs), "kernels_mape_pct": _mape(r["kernels_err_pct"] for r in xs),
                  "eager_mape_pct": _mape(r["eager_err_pct"] for r in xs if not r["fit"]),
                  "eager_on_host_mape_pct": _mape(r["eager_on_host_err_pct"] for r in xs if not r["fit"]),
                  "eager_on_host_ok_canary_mape_pct": _mape(r["eager_on_host_err_pct"] for r in xs
                                                            if not r["fit"] and r["canary_ok"]),
                  "gpu_kernel_mape_pct": _mape(r["gpu_kernel_err_pct"] for r in xs),
                  "graph_mape_pct": _mape(r["graph_err_pct"] for r in xs)}
    return out


def _f(x, spec="{:.3f}"):
    return "—" if x is None else spec.format(x)


def markdown(rs: list[dict], s: dict) -> str:
    lines = ["| round | impl | model | layers | dyn | batch | canary | kernels pred / meas | kernel us pred / CUPTI (err) "
             "| compiled eager pred / meas ms (err) | on its host: canary, pred ms (err) "
             "| compiled + graph pred / meas ms (err) |", "|---|---|---|---:|:---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in rs:
        lines.append(
            f"| {r['round']} | {r['impl']} | {r['model']} | {r['layers']} | {'T' if r['dynamic'] else 'F'} | {r['batch']} "
            f"| {r['canary']} | {_f(r['kernels_predicted'], '{}')} / {_f(r['kernels_measured'], '{}')} | "
            f"{_f(r['gpu_kernel_predicted_us'], '{:.0f}')} / {_f(r['gpu_kernel_measured_us'], '{:.0f}')} "
            f"({_f(r['gpu_kernel_err_pct'], '{:+.1f}')} %) | "
            f"{_f(r['eager_predicted_ms'])} / {_f(r['eager_measured_ms'])} ({_f(r['eager_err_pct'], '{:+.1f}')} %)"
            f"{' (fit row)' if r['fit'] else ''} | {_f(r['host_canary_us'], '{:.2f}')} us{'' if r['canary_ok'] else '*'}, "
            f"{_f(r['eager_on_host_predicted_ms'])} ({_f(r['eager_on_host_err_pct'], '{:+.1f}')} %) | "
            f"{_f(r['graph_predicted_ms'])} / {_f(r['graph_measured_ms'])} ({_f(r['graph_err_pct'], '{:+.1f}')} %) |")
    lines += ["", "| group | rows | kernels MAPE % | kernel us MAPE % | compiled eager MAPE % | on its host MAPE % "
              "(canary ok) | compiled + graph MAPE % |", "|---|---:|---:|---:|---:|---:|---:|"]
    for g, v in s.items():
        lines.append(f"| {g} | {v['rows']} | {_f(v['kernels_mape_pct'], '{:.1f}')} | {_f(v['gpu_kernel_mape_pct'], '{:.1f}')} "
                     f"| {_f(v['eager_mape_pct'], '{:.1f}')} | {_f(v['eager_on_host_mape_pct'], '{:.1f}')} "
                     f"({_f(v['eager_on_host_ok_canary_mape_pct'], '{:.1f}')}) | {_f(v['graph_mape_pct'], '{:.1f}')} |")
    lines += ["", "`*`: the process's canary check failed (start and end more than its tolerance apart); its mean is used.",
              f"Targets (issue 20, on an independent decoder): compiled + graph <= {TARGETS['compiled + graph']} %, "
              f"compiled eager <= {TARGETS['compiled eager']} %, kernels +-{TARGETS['kernels']} %."]
    return "\n".join(lines)


def main(argv=None) -> None:
    from simulator.model.profile import load_profile

    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="h200")
    add_out_args(ap)
    a = ap.parse_args(argv)
    d = Path(out_dir(a, ROOT.parent))
    d.mkdir(parents=True, exist_ok=True)
    rs = rows(load_profile(a.profile))
    s = summary(rs)
    (d / "inductor.json").write_text(json.dumps({"profile": a.profile, "rows": rs, "summary": s}, indent=1) + "\n")
    md = markdown(rs, s)
    (d / "inductor.md").write_text(splice(_read(d / "inductor.md"), md))
    print(md)
    print(f"wrote {d / 'inductor.json'} and the table of {d / 'inductor.md'}")


TABLE_START = "| round | impl | model | layers |"
TABLE_END = "Targets (issue 20, on an independent decoder)"


def _read(p: Path) -> str:
    return p.read_text() if p.is_file() else ""


def splice(doc: str, table: str) -> str:
    """`doc` (inductor.md: hand-written notes around the generated table) with its table block, from the table's
    header line to the targets line, replaced by `table`; just `table` where `doc` holds no such block."""
    lines = doc.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith(TABLE_START)]
    ends = [i for i, ln in enumerate(lines) if ln.startswith(TABLE_END)]
    if not starts or not ends or ends[-1] < starts[0]:
        return table.rstrip("\n") + "\n"
    return "\n".join(lines[:starts[0]] + table.rstrip("\n").splitlines() + lines[ends[-1] + 1:]) + "\n"


if __name__ == "__main__":
    main()
