"""The engine loop and HF `generate()` against their H200 measurements (issue 11's per-token targets).

    python3 -m calibration.validate_engine [--profile h200] [--out calibration/validation]

Inputs: `calibration/measured/h200-engine/engine_loop.json` (calibration/engine_loop.py: a vLLM-style decode
loop around the reference decoder, qwen3-0.6b fusion none ctx 512, batch 1/8/64, eager or one full graph,
greedy or top-p, sync or async; HF generate() eager with dynamic and static caches), and for HF the imported
traces of transformers' own decoder (calibration/validate_hf.py's workloads).

What is compared, per loop run: launchsim's `predict --steps 50 --scheduling S --sampling M` steady-state
step (`step_ms`) against the measured steady delivery interval (p50 of rounds), and the predicted total/50
against the measured wall time per step. Honesty about inputs: the loop's per-part host figures (schedule,
prep, copies, sampling, tolist, detokenise) came from the *graph, sync* runs' parts pass of this same file
(calibration/build_engine.py); the forward comes from the clean round b timing (another H200 machine); so
graph-sync rows share inputs with the model (their engine part), eager and async rows do not.
HF generate: the imported HF forward (traced with a StaticCache of 576 slots = the 512-token prompt + 64
new tokens, exactly generate()'s static cache here, so no slot correction; eager, calibrated host) plus the loop's
greedy sync engine work, against generate()'s per-token time; the dynamic cache is not modelled (its
per-step cache growth is not in the traced static-cache workload) and is shown for reference only.
Target: per-token time of the measured loops within 5%.
Writes engine_loop_validation.{json,md} into OUT and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from simulator.model.profile import load_profile
from simulator.report.html import atomic_write_text, write_json

ENGINE = Path("calibration/measured/h200-engine/engine_loop.json")
STEPS = 50
TARGET = 5.0


def _err(pred: float, meas: float) -> float:
    return (pred - meas) / meas * 100.0


def loop_rows(data: dict, profile) -> list[dict]:
    from simulator.engine.predict import predict_loop

    rows = []
    for row in data.get("loop", []):
        for run in row.get("runs", []):
            graph = run["graph"]
            res, fwd = predict_loop(row["model"], row["batch"], row["ctx"] - 1, row.get("fusion", "none"), graph,
                                    profile, "fast", STEPS, run["scheduling"], run["sampling"])
            meas_steady = run["wall"].get("steady_ms", run["wall"]["step_ms"])["p50"]
            meas_wall = run["wall"]["step_ms"]["p50"]
            pred = res.step_s * 1e3
            rows.append({
                "batch": row["batch"], "graph": graph, "sampling": run["sampling"], "scheduling": run["scheduling"],
                "predicted_ms": pred, "measured_ms": meas_steady, "error_pct": _err(pred, meas_steady),
                "predicted_wall_ms": res.total_s * 1e3 / STEPS, "measured_wall_ms": meas_wall,
                "wall_error_pct": _err(res.total_s * 1e3 / STEPS, meas_wall), "bound": res.bound,
                "forward_ms": fwd.step_s * 1e3,
                "engine_inputs_from_this_row": graph == "full" and run["scheduling"] == "sync",
            })
    return rows


def hf_rows(data: dict, profile) -> list[dict]:
    """HF generate(): the imported HF forward + the loop's greedy sync engine work, per token."""
    from simulator.engine.steploop import engine_costs

    from simulator.model.costs import CostModel
    from simulator.engine.predict import simulate
    from simulator.traces.whatif import workload_step
    from simulator.traces.workload import workload_from_trace

    from .validate_hf import ROUND_A

    out = []
    for r in data.get("hf_generate", []):
        if "per_token_ms" not in r:
            continue
        row = {"batch": r["batch"], "cache": r["cache"], "measured_ms": r["per_token_ms"]}
        if r["cache"] == "static":
            trace = ROUND_A / f"hf_qwen3-0.6b_eager_b{r['batch']}.trace.json.gz"
            if not trace.exists():
                continue
            wl, _ = workload_from_trace(trace, host_time="calibrated", profile=profile)
            costs = CostModel(profile)
            fwd_ms = simulate(workload_step(wl, costs).step, costs, "none")[0].step_s * 1e3
            ec = engine_costs(profile, r["batch"], "greedy")
            eng_ms = ec.host_s * 1e3
            row.update({"forward_ms": fwd_ms, "engine_ms": eng_ms, "predicted_ms": fwd_ms + eng_ms,
                        "error_pct": _err(fwd_ms + eng_ms, r["per_token_ms"])})
        else:
            row["note"] = "dynamic cache not modelled (reference only)"
        out.append(row)
    return out


def markdown(loop: list[dict], hf: list[dict], env: dict, canary: dict) -> str:
    ok = [r for r in loop if abs(r["error_pct"]) <= TARGET]
    held = [r for r in loop if not r["engine_inputs_from_this_row"]]
    held_ok = [r for r in held if abs(r["error_pct"]) <= TARGET]
    lines = [
        "# Engine loop: predicted vs measured per-token time",
        "",
        f"Measured on {env.get('gpu')} (driver {env.get('driver')}, torch {env.get('torch')}, {env.get('cores')}-core "
        f"{env.get('cpu')}), canary {canary.get('host_start_us', 0):.2f} -> {canary.get('host_end_us', 0):.2f} µs "
        f"({'OK' if canary.get('ok') else 'FAILED'}); `calibration/measured/h200-engine/engine_loop.json`. "
        f"Predicted by `launchsim predict --steps {STEPS}` (fast path, profile h200). Regenerate: "
        "`python3 -m calibration.validate_engine`.",
        "",
        f"Within ±{TARGET:.0f}%: {len(ok)}/{len(loop)} runs; on runs that gave the model none of its engine inputs "
        f"(eager or async): {len(held_ok)}/{len(held)}.",
        "",
        "| batch | graph | sampling | scheduling | predicted ms | measured ms (steady p50) | error | wall pred | "
        "wall meas | error | bound | inputs from row |",
        "| ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in loop:
        flag = "ok" if abs(r["error_pct"]) <= TARGET else "MISS"
        lines.append(f"| {r['batch']} | {r['graph']} | {r['sampling']} | {r['scheduling']} | {r['predicted_ms']:.3f} | "
                     f"{r['measured_ms']:.3f} | {r['error_pct']:+.1f}% {flag} | {r['predicted_wall_ms']:.3f} | "
                     f"{r['measured_wall_ms']:.3f} | {r['wall_error_pct']:+.1f}% | {r['bound']} | "
                     f"{'yes' if r['engine_inputs_from_this_row'] else 'no'} |")
    lines += ["", "## Hugging Face generate() (transformers' own loop, greedy, no torch.compile)", "",
              "| batch | cache | predicted ms/token | forward | engine | measured ms/token | error |",
              "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in hf:
        if "predicted_ms" in r:
            flag = "ok" if abs(r["error_pct"]) <= TARGET else "MISS"
            lines.append(f"| {r['batch']} | {r['cache']} | {r['predicted_ms']:.2f} | {r['forward_ms']:.2f} | "
                         f"{r['engine_ms']:.3f} | {r['measured_ms']:.2f} | {r['error_pct']:+.1f}% {flag} |")
        else:
            lines.append(f"| {r['batch']} | {r['cache']} | — | — | — | {r['measured_ms']:.2f} | {r['note']} |")
    lines += ["", "Notes:",
              "- The loop's forward is the reference decoder measured in round b on another H200 machine; this run's "
              "machine had a slower host (canary 9.9 µs vs 6.2 µs in round b).",
              "- HF's forward is predicted from traces of transformers' decoder with a StaticCache (validate_hf.py); "
              "its eager host time depends on the machine and on the interpreter gaps read from a profiled trace, "
              "which is why batch 1 and 8 err in opposite directions (see hf_crosscheck.md).",
              ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="h200")
    ap.add_argument("--engine-loop", default=str(ENGINE))
    ap.add_argument("--out", default="calibration/validation")
    a = ap.parse_args(argv)
    data = json.loads(Path(a.engine_loop).read_text())
    prof = load_profile(a.profile)
    loop, hf = loop_rows(data, prof), hf_rows(data, prof)
    md = markdown(loop, hf, data.get("environment", {}), data.get("canary", {}))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "engine_loop_validation.json", {"loop": loop, "hf_generate": hf, "target_pct": TARGET})
    atomic_write_text(out / "engine_loop_validation.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
