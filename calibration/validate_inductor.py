"""torch.compile as a fusion model against Inductor's real output on the H200 (CPU only, committed measurements):

    python -m calibration.validate_inductor [--out DIR | --write-shipped]

Every committed compiled measurement, predicted by `fusion compiled` (Inductor's pass over the implementation's
eager list, simulator/model/inductor.py) with profile `h200`, each row with the `dynamic` it was compiled with
(calibration/validate.py `predict_compiled`: dynamic rows add inductor.DYNAMIC_WRAPPER_EXTRA_US per launch):
- round b (calibration/measured/h200-round-b/timing.json + compiled_qwen3-0.6b_*.json): the reference decoder,
  qwen3-0.6b, 28 layers, ctx 512; its b1 static eager row is the fit row of host.compiled_wrapper_us (marked);
- round f (h200-round-f/compile_{ref,hf}_{qwen3-0.6b,llama3-8b}.json + compile_counts_*): the reference decoder and
  transformers 5.17 (StaticCache of ctx + 128 slots), 2 layers, ctx 512, dynamic False / True, batch 1 / 64.
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
    counts = {}
    for f in sorted(RB.glob("compiled_qwen3-0.6b_*.json")):
        for r in json.loads(f.read_text())["rows"]:
            counts[(bool(r.get("dynamic")), r["batch"])] = r["kernels"]
    for r in tb["rows"]:
        if r.get("fusion") != "compiled":
            continue
        dyn, b = bool(r.get("dynamic")), r["batch"]
        m = _model("ref", r["model"], None)
        pe, pg = (_predict("ref", m, b, r["ctx"], g, profile, dyn) for g in ("none", "full"))
        cm = CostModel(profile)
        out.append({"round": "b", "impl": "ref", "model": r["model"], "layers": m.num_hidden_layers, "dynamic": dyn,
                    "batch": b, "ctx": r["ctx"], "canary": _canary(tb),
                    "fit": (not dyn and b == 1),
                    "kernels_measured": counts.get((dyn, b)), "kernels_predicted": cm.step_kernels(pe.step.ops),
                    "eager_measured_ms": r["eager"]["isolated"]["step_ms"]["p50"],
                    "eager_predicted_ms": pe.result.step_s * 1e3,
                    "graph_measured_ms": r["full"]["isolated"]["step_ms"]["p50"] if "full" in r else None,
                    "graph_predicted_ms": pg.result.step_s * 1e3})
    # round f: 2-layer reference and transformers
    for impl in ("ref", "hf"):
        for name in ("qwen3-0.6b", "llama3-8b"):
            tf = json.loads((RF / f"compile_{impl}_{name}.json").read_text())
            cf = json.loads((RF / f"compile_counts_{impl}_{name}.json").read_text())
            kc = {(bool(r["dynamic"]), r["batch"]): r["kernels"] for r in cf["rows"]}
            for r in tf["rows"]:
                dyn, b = bool(r["dynamic"]), r["batch"]
                m = _model(impl, name, r["layers"])
                pe, pg = (_predict(impl, m, b, r["ctx"], g, profile, dyn) for g in ("none", "full"))
                cm = CostModel(profile)
                out.append({"round": "f", "impl": impl, "model": name, "layers": r["layers"], "dynamic": dyn,
                            "batch": b, "ctx": r["ctx"], "canary": _canary(tf), "fit": False,
                            "kernels_measured": kc.get((dyn, b)), "kernels_predicted": cm.step_kernels(pe.step.ops),
                            "eager_measured_ms": r["compiled_eager_ms"]["median"],
                            "eager_predicted_ms": pe.result.step_s * 1e3,
                            "graph_measured_ms": r["compiled_graph_ms"]["median"],
                            "graph_predicted_ms": pg.result.step_s * 1e3})
    for r in out:
        r["kernels_err_pct"] = _err(r["kernels_predicted"], r["kernels_measured"])
        r["eager_err_pct"] = _err(r["eager_predicted_ms"], r["eager_measured_ms"])
        r["graph_err_pct"] = _err(r["graph_predicted_ms"], r["graph_measured_ms"])
    return out


def _mape(xs) -> float | None:
    xs = [abs(x) for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def summary(rs: list[dict]) -> dict:
    out = {}
    groups = {"round b (28 layers, reference)": [r for r in rs if r["round"] == "b"],
              "round f reference (2 layers)": [r for r in rs if r["round"] == "f" and r["impl"] == "ref"],
              "round f transformers (2 layers)": [r for r in rs if r["round"] == "f" and r["impl"] == "hf"]}
    for g, xs in groups.items():
        out[g] = {"rows": len(xs), "kernels_mape_pct": _mape(r["kernels_err_pct"] for r in xs),
                  "eager_mape_pct": _mape(r["eager_err_pct"] for r in xs if not r["fit"]),
                  "graph_mape_pct": _mape(r["graph_err_pct"] for r in xs)}
    return out


def _f(x, spec="{:.3f}"):
    return "—" if x is None else spec.format(x)


def markdown(rs: list[dict], s: dict) -> str:
    lines = ["| round | impl | model | layers | dyn | batch | canary | kernels pred / meas | compiled eager pred / meas ms "
             "(err) | compiled + graph pred / meas ms (err) |", "|---|---|---|---:|:---:|---:|---|---:|---:|---:|"]
    for r in rs:
        lines.append(
            f"| {r['round']} | {r['impl']} | {r['model']} | {r['layers']} | {'T' if r['dynamic'] else 'F'} | {r['batch']} "
            f"| {r['canary']} | {_f(r['kernels_predicted'], '{}')} / {_f(r['kernels_measured'], '{}')} | "
            f"{_f(r['eager_predicted_ms'])} / {_f(r['eager_measured_ms'])} ({_f(r['eager_err_pct'], '{:+.1f}')} %)"
            f"{' (fit row)' if r['fit'] else ''} | {_f(r['graph_predicted_ms'])} / {_f(r['graph_measured_ms'])} "
            f"({_f(r['graph_err_pct'], '{:+.1f}')} %) |")
    lines += ["", "| group | rows | kernels MAPE % | compiled eager MAPE % | compiled + graph MAPE % |",
              "|---|---:|---:|---:|---:|"]
    for g, v in s.items():
        lines.append(f"| {g} | {v['rows']} | {_f(v['kernels_mape_pct'], '{:.1f}')} | {_f(v['eager_mape_pct'], '{:.1f}')} "
                     f"| {_f(v['graph_mape_pct'], '{:.1f}')} |")
    lines += ["", f"Targets (issue 20, on an independent decoder): compiled + graph <= {TARGETS['compiled + graph']} %, "
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
    print(markdown(rs, s))
    print(f"wrote {d / 'inductor.json'}")


if __name__ == "__main__":
    main()
