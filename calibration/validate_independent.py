"""torch.compile on an independent decoder, held out (issue 20): launchsim's predictions against round h (CPU only):

    python -m calibration.validate_independent [--out DIR | --write-shipped]

Round h (calibration/measured/h200-round-h, calibration/scripts/round_h.py) measured a decoder written apart from
launchsim's own two (calibration/independent_decoder.py, gpt-fast style) at qwen3-0.6b shapes (28 layers) and
llama-3.2-1b's (16 layers), ctx 512, batch 1 / 4 / 16 / 64: eager, torch.compile(dynamic=False) eager and that
compiled step in a full CUDA graph, and dynamic=True at batch 1 / 16, with CUPTI kernel counts at batch 1 / 64.
Nothing is fitted on it. Every row is predicted exactly as a user would ask (the `predict` kind that
`launchsim predict` runs, simulator/studies/predict.py run_predict):

    launchsim predict --model qwen3-0.6b --fusion compiled --graph none|full --batch B --ctx 512 \\
        [--compile-dynamic --compile-inputs module | --no-compile-dynamic] [--host-canary-us C]
    launchsim predict --model calibration/configs/hf/llama-3.2-1b.json ...        # the llama-3.2-1b rows

(`--compile-inputs module`: the decoder holds its weights and KV caches as nn.Module parameters and buffers, which
Dynamo specialises, so dynamic=True's symbolic sizes do not reach them; a property of its code, set before any
prediction was compared: launchsim's own reference decoder passes them as arguments, the default for `reference`.)

i.e. implementation `reference` (the default for fusion none / compiled), profile h200; eager rows with
`--fusion none --graph none`. ctx 512 is the past the step attends with its own token, as the decoder does (513
keys). Eager and compiled-eager rows are predicted twice: on the profile's host (no --host-canary-us) and on the
row's own host (--host-canary-us = the mean of the canary p50s taken right before and right after the row's timing:
the profile's host lane rescaled, simulator/model/profile.py host_scaled, as validate_inductor / validate_spec do).
A row whose before / after canaries differ by more than the hygiene tolerance (20 %) is marked: the host moved
during it. Kernels per step are set against the profiled process's CUPTI count; the predicted GPU busy time of
the full-graph step against CUPTI's kernel-time sum.

Writes DIR/independent_compile.json (rows, summary, targets) and DIR/independent_compile.md (default DIR
out/calibration; --write-shipped: calibration/validation) and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from calibration.jsonio import add_out_args, out_dir

ROOT = Path(__file__).resolve().parent
RH = ROOT / "measured" / "h200-round-h"
MODELS = {"qwen3-0.6b": "qwen3-0.6b", "llama-3.2-1b": str(ROOT / "configs" / "hf" / "llama-3.2-1b.json")}
PROFILE = "h200"
ROW_CANARY_TOL = 0.20  # calibration/hygiene.CANARY_TOLERANCE: before/after canaries of a row further apart: marked
REGIMES = ("eager none", "compiled eager", "compiled + full graph")


def targets() -> dict:
    from calibration.validate_inductor import TARGETS

    return dict(TARGETS)


def predict(model: str, fusion: str, graph: str, batch: int, ctx: int, dynamic: bool | None,
            canary_us: float | None) -> dict:
    """One `launchsim predict` record (the scenario the command line fills, run by the same function)."""
    from simulator.config.predict import PredictScenario
    from simulator.studies.predict import run_predict

    kw = {"model": MODELS[model], "profile": PROFILE, "fusion": fusion, "graph": graph, "batch": batch, "ctx": ctx}
    if dynamic is not None:
        kw["compile_dynamic"] = dynamic
    if dynamic:  # the decoder holds its weights and KV caches as nn.Module parameters and buffers (gpt-fast style,
        kw["compile_inputs"] = "module"  # calibration/independent_decoder.py): what the flag says, as a user would
    if canary_us is not None:
        kw["host_canary_us"] = round(canary_us, 4)
    return run_predict(PredictScenario(**kw))


def _err(p, m):
    return None if p is None or m is None else 100.0 * (p - m) / m


def _row_canary(r: dict) -> tuple[float, bool]:
    a, b = r["canary"]["before"]["host_us"], r["canary"]["after"]["host_us"]
    return (a + b) / 2, abs(b / a - 1.0) <= ROW_CANARY_TOL


def load(d: Path = RH) -> tuple[dict, dict]:
    """(timing files, counts files) by model."""
    t = {m: json.loads((d / f"time_{m}.json").read_text()) for m in MODELS}
    c = {m: json.loads((d / f"counts_{m}.json").read_text()) for m in MODELS}
    return t, c


def rows(d: Path = RH) -> list[dict]:
    timing, counts = load(d)
    out = []
    for model in MODELS:
        tf, cf = timing[model], counts[model]
        kc = {(r["mode"], r["dynamic"], r["batch"]): r for r in cf["rows"]}
        for r in sorted(tf["rows"], key=lambda r: (r["mode"] != "eager", r["dynamic"] is True, r["batch"])):
            b, ctx, dyn = r["batch"], r["ctx"], r["dynamic"]
            fusion = "none" if r["mode"] == "eager" else "compiled"
            can, ok = _row_canary(r)
            pe = predict(model, fusion, "none", b, ctx, dyn, None)
            ph = predict(model, fusion, "none", b, ctx, dyn, can)
            k = kc.get((r["mode"], dyn, b))
            row = {"model": model, "layers": r["layers"], "mode": r["mode"], "dynamic": dyn, "batch": b, "ctx": ctx,
                   "impl": pe["impl"], "row_canary_us": can, "row_canary_ok": ok,
                   "kernels_measured": k["kernels"] if k else None, "kernels_predicted": pe["kernels"],
                   "eager_measured_ms": r["step_ms"]["median"], "eager_p10_ms": r["step_ms"]["p10"],
                   "eager_p90_ms": r["step_ms"]["p90"], "eager_predicted_ms": pe["step_ms"],
                   "eager_on_host_predicted_ms": ph["step_ms"], "graph_measured_ms": None, "graph_predicted_ms": None,
                   "gpu_kernel_measured_us": k.get("kernel_us") if k else None, "gpu_busy_predicted_us": None}
            if k:
                row["attention_kernels_measured"] = k["kinds"].get("attention", 0)
                row["cudnn_kernels_measured"] = sum(c for n, c in k["names"].items()
                                                    if "cudnn" in n.lower() and not n.startswith("triton"))
            if fusion == "compiled" and "graph_ms" in r:
                pg = predict(model, fusion, "full", b, ctx, dyn, None)
                row.update(graph_measured_ms=r["graph_ms"]["median"], graph_b2b_measured_ms=r.get("graph_b2b_ms"),
                           graph_predicted_ms=pg["step_ms"], gpu_busy_predicted_us=pg["gpu_ms"] * 1e3)
            row["kernels_err_pct"] = _err(row["kernels_predicted"], row["kernels_measured"])
            row["eager_err_pct"] = _err(row["eager_predicted_ms"], row["eager_measured_ms"])
            row["eager_on_host_err_pct"] = _err(row["eager_on_host_predicted_ms"], row["eager_measured_ms"])
            row["graph_err_pct"] = _err(row["graph_predicted_ms"], row["graph_measured_ms"])
            row["gpu_kernel_err_pct"] = _err(row["gpu_busy_predicted_us"], row["gpu_kernel_measured_us"])
            out.append(row)
    return out


def _mape(xs) -> float | None:
    xs = [abs(x) for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def _regime(r: dict) -> str:
    return "eager none" if r["mode"] == "eager" else "compiled eager"


def summary(rs: list[dict]) -> dict:
    """MAPE per regime (all rows; static / dynamic apart; rows whose canaries held), and kernels."""
    out: dict = {}
    groups = {"eager none": [r for r in rs if r["mode"] == "eager"],
              "compiled eager": [r for r in rs if r["mode"] == "compiled"],
              "compiled eager, dynamic=False": [r for r in rs if r["mode"] == "compiled" and r["dynamic"] is False],
              "compiled eager, dynamic=True": [r for r in rs if r["mode"] == "compiled" and r["dynamic"] is True],
              "compiled + full graph": [r for r in rs if r["graph_measured_ms"] is not None],
              "compiled + full graph, dynamic=False": [r for r in rs if r["graph_measured_ms"] is not None
                                                       and r["dynamic"] is False]}
    for g, xs in groups.items():
        err = "graph_err_pct" if g.startswith("compiled + full graph") else "eager_err_pct"
        v = {"rows": len(xs), "mape_pct": _mape(r[err] for r in xs),
             "kernels_rows": sum(r["kernels_measured"] is not None for r in xs),
             "kernels_mape_pct": _mape(r["kernels_err_pct"] for r in xs)}
        if not g.startswith("compiled + full graph"):
            v["on_host_mape_pct"] = _mape(r["eager_on_host_err_pct"] for r in xs)
            v["canary_ok_rows"] = sum(r["row_canary_ok"] for r in xs)
            v["on_host_canary_ok_mape_pct"] = _mape(r["eager_on_host_err_pct"] for r in xs if r["row_canary_ok"])
        else:
            v["gpu_kernel_mape_pct"] = _mape(r["gpu_kernel_err_pct"] for r in xs)
        for m in MODELS:
            v[f"mape_pct {m}"] = _mape(r[err] for r in xs if r["model"] == m)
        out[g] = v
    return out


def verdicts(s: dict, rows_: list[dict]) -> list[dict]:
    """Each issue-20 target against the figure it names: compiled + graph and compiled eager MAPE (eager: on the
    profile's host and on each row's own host), kernels per step of the compiled rows (every profiled one)."""
    t = targets()
    ce, cg = s["compiled eager"], s["compiled + full graph"]
    comp = [r for r in rows_ if r["mode"] == "compiled" and r["kernels_err_pct"] is not None]
    within = sum(abs(r["kernels_err_pct"]) <= t["kernels"] for r in comp)
    out = [{"target": "compiled + graph", "limit_pct": t["compiled + graph"], "figure": "MAPE, all graph rows",
            "value_pct": cg["mape_pct"]},
           {"target": "compiled eager", "limit_pct": t["compiled eager"], "figure": "MAPE on the profile's host",
            "value_pct": ce["mape_pct"]},
           {"target": "compiled eager", "limit_pct": t["compiled eager"], "figure": "MAPE on each row's own host",
            "value_pct": ce["on_host_mape_pct"]},
           {"target": "kernels", "limit_pct": t["kernels"], "figure": "MAPE of the profiled compiled rows' kernels "
            "per step", "value_pct": ce["kernels_mape_pct"]},
           {"target": "kernels", "limit_pct": t["kernels"], "figure": f"largest |error| of a profiled compiled row "
            f"({within} of {len(comp)} rows within +-{t['kernels']:g} %)",
            "value_pct": max((abs(r["kernels_err_pct"]) for r in comp), default=None)}]
    for v in out:
        v["met"] = None if v["value_pct"] is None else v["value_pct"] <= v["limit_pct"]
    return out


def notes(rs: list[dict]) -> list[str]:
    """What the measured files show beside the errors (figures read from them): attention kernels per step of the
    profiled compiled rows (and how many carry cuDNN in their names), and dynamic=True over dynamic=False compiled
    eager, measured and predicted, where both were timed."""
    out = []
    for m in MODELS:
        ks = [r for r in rs if r["model"] == m and r["mode"] == "compiled" and r.get("attention_kernels_measured")]
        if ks:
            out.append(f"- {m}: attention kernels per step (profiled compiled rows): " + ", ".join(
                f"dyn {'T' if r['dynamic'] else 'F'} b{r['batch']} {r['attention_kernels_measured']} "
                f"({r['cudnn_kernels_measured']} of them cuDNN's)" for r in ks) + f", over {ks[0]['layers']} layers.")
        by = {(r["dynamic"], r["batch"]): r for r in rs if r["model"] == m and r["mode"] == "compiled"}
        pairs = [(b, by[(True, b)], by[(False, b)]) for (d, b) in sorted(by) if d and (False, b) in by]
        if pairs:
            out.append(f"- {m}: compiled eager dynamic=True / dynamic=False: " + "; ".join(
                f"b{b} measured {t['eager_measured_ms'] / f['eager_measured_ms']:.3f}, predicted "
                f"{t['eager_predicted_ms'] / f['eager_predicted_ms']:.3f}; kernels measured "
                f"{_f(t['kernels_measured'], '{}')} / {_f(f['kernels_measured'], '{}')}, predicted "
                f"{t['kernels_predicted']} / {f['kernels_predicted']}" for b, t, f in pairs) + ".")
    return out


def _f(x, spec="{:.3f}"):
    return "—" if x is None else spec.format(x)


def markdown(rs: list[dict], s: dict, vs: list[dict]) -> str:
    lines = ["# torch.compile on an independent decoder (issue 20, held out)", "",
             "Written by `python -m calibration.validate_independent --write-shipped` (its docstring says how each row "
             "is predicted) from calibration/measured/h200-round-h (README there: the run, versions, canaries). "
             f"Profile {PROFILE}, implementation reference, ctx 512; nothing fitted on these rows.", "",
             "| model | layers | mode | dyn | batch | row canary us | kernels pred / meas (err) | eager pred / meas ms "
             "(err) | on its host pred ms (err) | graph pred / meas ms (err) | GPU busy pred / CUPTI kernel us (err) |",
             "|---|---:|---|:---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rs:
        d = "—" if r["dynamic"] is None else ("T" if r["dynamic"] else "F")
        lines.append(
            f"| {r['model']} | {r['layers']} | {r['mode']} | {d} | {r['batch']} | {r['row_canary_us']:.2f}"
            f"{'' if r['row_canary_ok'] else '*'} | {_f(r['kernels_predicted'], '{}')} / "
            f"{_f(r['kernels_measured'], '{}')} ({_f(r['kernels_err_pct'], '{:+.1f}')} %) | "
            f"{_f(r['eager_predicted_ms'])} / {_f(r['eager_measured_ms'])} ({_f(r['eager_err_pct'], '{:+.1f}')} %) | "
            f"{_f(r['eager_on_host_predicted_ms'])} ({_f(r['eager_on_host_err_pct'], '{:+.1f}')} %) | "
            f"{_f(r['graph_predicted_ms'])} / {_f(r['graph_measured_ms'])} ({_f(r['graph_err_pct'], '{:+.1f}')} %) | "
            f"{_f(r['gpu_busy_predicted_us'], '{:.0f}')} / {_f(r['gpu_kernel_measured_us'], '{:.0f}')} "
            f"({_f(r['gpu_kernel_err_pct'], '{:+.1f}')} %) |")
    lines += ["", "`*`: the row's canaries right before and right after its timing differ by more than 20 % (the host "
              "moved during the row); the mean of the two is its --host-canary-us.", "",
              "| regime | rows | MAPE % | qwen3-0.6b | llama-3.2-1b | on its host MAPE % (canary-ok rows: n, MAPE %) "
              "| kernels: rows, MAPE % | GPU busy vs CUPTI MAPE % |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for g, v in s.items():
        host = "—" if "on_host_mape_pct" not in v else \
            f"{_f(v['on_host_mape_pct'], '{:.1f}')} ({v['canary_ok_rows']}: {_f(v['on_host_canary_ok_mape_pct'], '{:.1f}')})"
        lines.append(f"| {g} | {v['rows']} | {_f(v['mape_pct'], '{:.1f}')} | {_f(v['mape_pct qwen3-0.6b'], '{:.1f}')} "
                     f"| {_f(v['mape_pct llama-3.2-1b'], '{:.1f}')} | {host} | {v['kernels_rows']}, "
                     f"{_f(v['kernels_mape_pct'], '{:.1f}')} | {_f(v.get('gpu_kernel_mape_pct'), '{:.1f}')} |")
    lines += ["", "What the measured files show beside the errors:", "", *notes(rs), "", "Targets (issue 20):", ""]
    for v in vs:
        word = "not measured" if v["met"] is None else ("met" if v["met"] else "NOT met")
        lines.append(f"- {v['target']} <= {v['limit_pct']:g} % ({v['figure']}): {_f(v['value_pct'], '{:.1f}')} % — "
                     f"{word}.")
    return "\n".join(lines) + "\n"


def report(d: Path = RH) -> dict:
    rs = rows(d)
    s = summary(rs)
    return {"profile": PROFILE, "measured": str(d.relative_to(ROOT.parent)) if d.is_relative_to(ROOT.parent)
            else str(d), "rows": rs, "summary": s, "targets": verdicts(s, rs)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="launchsim against round h's independent decoder (CPU only)")
    add_out_args(ap)
    a = ap.parse_args(argv)
    d = Path(out_dir(a, ROOT.parent))
    d.mkdir(parents=True, exist_ok=True)
    rep = report()
    md = markdown(rep["rows"], rep["summary"], rep["targets"])
    (d / "independent_compile.json").write_text(json.dumps(rep, indent=1) + "\n")
    (d / "independent_compile.md").write_text(md)
    print(md)
    print(f"wrote {d / 'independent_compile.json'} and {d / 'independent_compile.md'}")


if __name__ == "__main__":
    main()
