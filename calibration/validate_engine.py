"""The engine loop and HF `generate()` against their H200 measurements (issue 11's per-token targets).

    python3 -m calibration.validate_engine [--profile h200] [--out DIR | --write-shipped]

Inputs, three engine-loop rounds on H200 machines (calibration/scripts/engine_loop.py: a vLLM-style decode loop around
the reference decoder, qwen3-0.6b fusion none ctx 512, batch 1/8/64, eager or one full graph, greedy or top-p,
sync or async): `h200-engine` (canary OK; the profile's engine-work figures come from its graph-sync rows),
`h200-round-c` and `h200-round-e` (canary FAILED in both: the host drifted during the run). HF generate()
(eager, dynamic and static caches) was timed in `h200-engine` and `h200-round-c`; round c also recorded, in a
separate profiled process on the same machine, traces of transformers' decode step with a StaticCache of 576
slots (= generate()'s static cache for a 512-token prompt and 64 new tokens) and with the DynamicCache.

What is compared, per loop run: launchsim's `predict --steps 50 --scheduling S --sampling M` steady-state
step (`step_ms`) against the measured steady delivery interval (p50 of rounds), and the predicted total/50
against the measured wall time per step. Honesty about inputs: the loop's per-part host figures came from
the graph-sync runs of h200-engine (calibration/build_engine.py); the forward comes from the clean round b
timing (another H200 machine); so only h200-engine's graph-sync rows share inputs with the model.
HF generate: the imported HF forward (eager, calibrated host: launches from the profile, interpreter gaps
from the trace) plus the loop's greedy sync engine work, against generate()'s per-token time
((t(64 new) - t(1 new)) / 63, median of the repeats); the measured per-token range over the repeats is shown
because this host's speed changes between repeats by more than the target.
Target: per-token time of the measured loops within 5%.
Writes engine_loop_validation.{json,md} into OUT and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from simulator.model.profile import load_profile
from simulator.common.jsonfile import atomic_write_text, write_json
from calibration.jsonio import add_out_args, out_dir

MEASURED = Path("calibration/measured")
ENGINE = MEASURED / "h200-engine" / "engine_loop.json"
ROUNDS = ("h200-engine", "h200-round-c", "h200-round-e")
STEPS = 50
TARGET = 5.0


def _err(pred: float, meas: float) -> float:
    return (pred - meas) / meas * 100.0


def loop_rows(data: dict, profile, inputs_round: bool = True) -> list[dict]:
    from simulator.engine.steploop import predict_loop

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
                "engine_inputs_from_this_row": inputs_round and graph == "full" and run["scheduling"] == "sync",
            })
    return rows


def _trace_for(round_dir: Path, cache: str, batch: int) -> Path | None:
    """The same machine's trace of HF's decode step for this cache, else round a's static-cache trace."""
    own = round_dir / f"hf_qwen3-0.6b_{cache}_b{batch}.trace.json.gz"
    if own.exists():
        return own
    from .validate_hf import ROUND_A

    old = ROUND_A / f"hf_qwen3-0.6b_eager_b{batch}.trace.json.gz"
    return old if cache == "static" and old.exists() else None


def hf_rows(data: dict, profile, round_dir: Path = ENGINE.parent) -> list[dict]:
    """HF generate(): the imported HF forward + the loop's greedy sync engine work, per token."""
    from simulator.engine.steploop import engine_costs
    from simulator.model.costs import CostModel
    from simulator.engine.predict import simulate
    from simulator.traces.whatif import workload_step
    from simulator.traces.workload import workload_from_trace

    out = []
    for r in data.get("hf_generate", []):
        if "per_token_ms" not in r:
            continue
        got = max(r.get("generated", r.get("new_tokens", 64)) - 1, 1)
        t1 = sorted(r["t_1_s"])[len(r["t_1_s"]) // 2]
        per = sorted((t - t1) * 1e3 / got for t in r["t_new_s"])
        row = {"batch": r["batch"], "cache": r["cache"], "measured_ms": r["per_token_ms"],
               "measured_min_ms": per[0], "measured_max_ms": per[-1], "repeats": len(per)}
        trace = _trace_for(round_dir, r["cache"], r["batch"])
        if trace is None:
            row["note"] = "no trace of this cache's decode step on record (reference only)"
            out.append(row)
            continue
        wl, _ = workload_from_trace(trace, host_time="calibrated", profile=profile)
        costs = CostModel(profile)
        fwd_ms = simulate(workload_step(wl, costs).step, costs, "none")[0].step_s * 1e3
        eng_ms = engine_costs(profile, r["batch"], "greedy").host_s * 1e3
        pred = fwd_ms + eng_ms
        row.update({"trace": str(trace), "forward_ms": fwd_ms, "engine_ms": eng_ms, "predicted_ms": pred,
                    "error_pct": _err(pred, r["per_token_ms"]),
                    "within_measured_range": per[0] <= pred <= per[-1]})
        out.append(row)
    return out


def _loop_table(loop: list[dict]) -> list[str]:
    lines = ["| batch | graph | sampling | scheduling | predicted ms | measured ms (steady p50) | error | wall pred | "
             "wall meas | error | bound | inputs from row |",
             "| ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in loop:
        flag = "ok" if abs(r["error_pct"]) <= TARGET else "MISS"
        lines.append(f"| {r['batch']} | {r['graph']} | {r['sampling']} | {r['scheduling']} | {r['predicted_ms']:.3f} | "
                     f"{r['measured_ms']:.3f} | {r['error_pct']:+.1f}% {flag} | {r['predicted_wall_ms']:.3f} | "
                     f"{r['measured_wall_ms']:.3f} | {r['wall_error_pct']:+.1f}% | {r['bound']} | "
                     f"{'yes' if r['engine_inputs_from_this_row'] else 'no'} |")
    return lines


def _hf_table(hf: list[dict]) -> list[str]:
    lines = ["| batch | cache | predicted ms/token | forward | engine | measured ms/token (median) | range over "
             "repeats | error vs median | in range |", "| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | --- |"]
    for r in hf:
        rng = f"{r['measured_min_ms']:.1f}–{r['measured_max_ms']:.1f} ({r['repeats']})"
        if "predicted_ms" in r:
            flag = "ok" if abs(r["error_pct"]) <= TARGET else "MISS"
            lines.append(f"| {r['batch']} | {r['cache']} | {r['predicted_ms']:.2f} | {r['forward_ms']:.2f} | "
                         f"{r['engine_ms']:.3f} | {r['measured_ms']:.2f} | {rng} | {r['error_pct']:+.1f}% {flag} | "
                         f"{'yes' if r['within_measured_range'] else 'no'} |")
        else:
            lines.append(f"| {r['batch']} | {r['cache']} | — | — | — | {r['measured_ms']:.2f} | {rng} | {r['note']} | |")
    return lines


def _canary(c: dict) -> str:
    return (f"canary {c.get('host_start_us', 0):.2f} -> {c.get('host_end_us', 0):.2f} µs "
            f"({'OK' if c.get('ok') else 'FAILED: the host drifted during the run'})")


def summary_rows(rounds: list[dict]) -> list[str]:
    lines = ["| round | canary | graph runs within ±5% | eager runs within ±5% | eager errors | HF generate within ±5% |",
             "| --- | --- | ---: | ---: | --- | ---: |"]
    for rd in rounds:
        g = [r for r in rd["loop"] if r["graph"] != "none"]
        e = [r for r in rd["loop"] if r["graph"] == "none"]
        hf = [r for r in rd["hf_generate"] if "predicted_ms" in r]
        ok = lambda rs: sum(abs(r["error_pct"]) <= TARGET for r in rs)  # noqa: E731
        errs = ", ".join(f"{r['error_pct']:+.1f}" for r in e)
        lines.append(f"| {rd['name']} | {'OK' if rd['canary'].get('ok') else 'FAILED'} | {ok(g)}/{len(g)} | "
                     f"{ok(e)}/{len(e)} | {errs} | {ok(hf)}/{len(hf)} |")
    return lines


def markdown(rounds: list[dict]) -> str:
    env = rounds[0]["environment"]
    lines = [
        "# Engine loop: predicted vs measured per-token time",
        "",
        f"Measured on NVIDIA H200 machines ({env.get('gpu')}, driver {env.get('driver')}, torch {env.get('torch')}, "
        f"{env.get('cores')}-core {env.get('cpu')}), three rounds under `calibration/measured/`. Predicted by "
        f"`launchsim predict --steps {STEPS}` (fast path, profile h200). Regenerate: "
        "`python3 -m calibration.validate_engine`.", "", *summary_rows(rounds), ""]
    for rd in rounds:
        lines += [f"## {rd['name']} ({_canary(rd['canary'])})", "", *_loop_table(rd["loop"]), ""]
        if rd["hf_generate"]:
            lines += [f"HF generate() in {rd['name']} (transformers' own loop, greedy, no torch.compile; forward "
                      f"from {'this machine' if rd['name'] != 'h200-engine' else 'round a'}'s traces):", "",
                      *_hf_table(rd["hf_generate"]), ""]
    lines += ["Notes:",
              "- Every loop's forward is the reference decoder measured in round b on another H200 machine. The "
              "graph rows (GPU-bound) hold on all three machines; the eager rows (host-bound) follow the host's "
              "speed, which on these VMs switches between a fast and a slow state (the same eager step runs at "
              "~20 ms or ~30-36 ms; round c's batch 1 and 8 eager loops ran in the slow state, its canary "
              "drifted 28%).",
              "- HF's forward is predicted from a trace of transformers' decoder (launches from the profile, "
              "interpreter gaps from the profiled trace); generate()'s per-token time on this host varies between "
              "repeats of the same call by 30-130% (the range column), far more than the 5% target.",
              ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="h200")
    ap.add_argument("--engine-loop", default=None, help="one engine_loop.json (default: every round on record)")
    add_out_args(ap)
    a = ap.parse_args(argv)
    a.out = out_dir(a)
    prof = load_profile(a.profile)
    paths = [Path(a.engine_loop)] if a.engine_loop else [MEASURED / n / "engine_loop.json" for n in ROUNDS]
    rounds = []
    for path in paths:
        data = json.loads(path.read_text())
        rounds.append({"name": path.parent.name, "file": str(path), "environment": data.get("environment", {}),
                       "canary": data.get("canary", {}),
                       "loop": loop_rows(data, prof, inputs_round=path.resolve() == ENGINE.resolve()),
                       "hf_generate": hf_rows(data, prof, path.parent)})
    md = markdown(rounds)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "engine_loop_validation.json", {"rounds": rounds, "target_pct": TARGET})
    atomic_write_text(out / "engine_loop_validation.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
