"""Speed as a user sees it: one row per target of issue 12 item 5, measured end to end.

Each target is timed `--repeats` times; the table shows the median wall time, the median CPU time
(time.process_time of this process plus the CPU of child processes: the CLI runs and the sweep's workers),
the ratio measured / target (below 1 is met; for throughput targets the ratio is target / achieved) and
whether the target is met on wall time and on CPU time. On a machine shared with other jobs the wall time
stretches with the load average; CPU time much less.

Targets:
  run       `launchsim run scenarios/qwen3_0p6b_decode.yaml` as a whole process (import, 80-point grid with a
            20-replicate host-noise band each, report written to a temporary folder)        < 1.5 s
  predict   `launchsim predict --model qwen3-0.6b --batch 8` as a whole process            < 0.25 s
  optimize  `launchsim optimize` over 1,024 candidate sizes x 64 graphs (uniform batch 1..1024 histogram,
            qwen3-8b fused, full graphs) as a whole process, every precompute included        < 1 s
  sweep     a sweep of ~100k grid points (2 models x 4 fusion x 4 graph x 6 layouts x 21 batch
            distributions x 25 memory budgets) on 2 local workers, cold processes, no cache   < 10 s
  serve     one replica of qwen3-0.6b (fused, full_and_piecewise, vllm sizes) serving one hour of Poisson
            arrivals at 80 req/s, cold step memo                                    >= 2,000x real time
  fast      the fast path on 1M kernels, GPU-bound (3 us host / 6 us kernel)        >= 40M kernels/s CPU

    python benchmarks/bench_targets.py [--repeats 3] [--long-repeats 1] [--only run,predict]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from machine import cpu_name  # benchmarks/machine.py (scripts run from benchmarks/)

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn) -> tuple[float, float]:
    c0, t0 = _cpu(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, _cpu() - c0


def cli(*args: str):
    def go():
        subprocess.run([PY, "-m", "simulator.cli", *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return go


def case_run(tmp: Path):
    return cli("run", "scenarios/qwen3_0p6b_decode.yaml", "--out", str(tmp / "run"))


def case_predict(tmp: Path):
    return cli("predict", "--model", "qwen3-0.6b", "--batch", "8")


def case_optimize(tmp: Path):
    csv = tmp / "uniform1024.csv"
    csv.write_text("batch,count\n" + "".join(f"{b},1\n" for b in range(1, 1025)))
    return cli("optimize", "--distribution", str(csv), "--model", "qwen3-8b", "--fusion", "fused", "--graph", "full",
               "--max-graphs", "64", "--max-size", "1024", "--json")


LAYOUTS = [{"name": "vllm", "sizes": "vllm"}, {"name": "sglang", "sizes": "sglang"},
           {"name": "trtllm", "sizes": "trtllm"}, {"name": "seed", "sizes": "seed"},
           {"name": "pow2", "sizes": "pow2", "max_size": 256},
           {"name": "dense-small", "sizes": [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 128, 256]}]


def sweep_scenario() -> dict:
    dists = [{"name": f"uniform-1-{hi}", "uniform": [1, hi]} for hi in range(16, 257, 12)]  # 21 distributions
    return {"kind": "sweep", "name": "bench100k", "models": ["qwen3-0.6b", "llama3-8b"], "profiles": ["datasheet-h200"],
            "fusion": ["none", "packed", "compiled", "fused"], "graph": ["none", "full", "piecewise", "full_and_piecewise"],
            "layouts": LAYOUTS, "distributions": dists,
            "budgets": [f"{256 * (i + 1)}MiB" for i in range(25)], "workers": 2}


def case_sweep(tmp: Path, info: dict):
    def go():
        from simulator.config import parse_scenario
        from simulator.studies.sweep import build_points
        from simulator.sweep.grid import run_points

        sc = parse_scenario(sweep_scenario())
        pts = build_points(sc)
        run = run_points(pts, None, "local", 2, sc.chunk, progress=False)
        info["points"] = len(pts)
        assert len(run.rows) == len(pts)
    return go


def case_serve(tmp: Path, info: dict):
    def go():
        from simulator.layouts.buckets import preset_sizes
        from simulator.model.models import load_model
        from simulator.model.profile import load_profile
        from simulator.serving.arrivals import ArrivalSpec, LengthSpec, make_workload
        from simulator.serving.replica import ServeConfig, prepare, simulate_serving
        from simulator.serving.steptime import clear_step_cache

        prof = load_profile("datasheet-h200")
        cfg = ServeConfig(load_model("qwen3-0.6b"), prof, "fused", "full_and_piecewise", tuple(preset_sizes("vllm")))
        wl = make_workload(ArrivalSpec("poisson"), LengthSpec("lognormal", mean=512, cv=1.0, low=1, high=4096),
                           LengthSpec("lognormal", mean=256, cv=1.0, low=1, high=2048), 80.0, 3600.0, 0)
        clear_step_cache()
        r = simulate_serving(cfg, wl, 3600.0, prepare(cfg))
        info["simulated_s"] = r.simulated_s
    return go


def case_fast(tmp: Path, info: dict):
    import numpy as np

    from simulator.engine.plan import LaunchPlan

    n = 1_000_000
    plan = LaunchPlan(np.full(n, 3e-6), np.ones(n, dtype=np.int64), np.full(n, 6e-6), np.full(n, 1e-6), 1024)
    info["kernels"] = n

    def go():
        from simulator.engine.fastpath import simulate_fast
        simulate_fast(plan)
    return go


# name, target value, kind ("s": seconds, lower is better; "x": throughput, higher is better), unit
TARGETS = {"run": (1.5, "s"), "predict": (0.25, "s"), "optimize": (1.0, "s"), "sweep": (10.0, "s"),
           "serve": (2000.0, "x"), "fast": (40e6, "x")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="runs of the short targets (run, predict, optimize, fast)")
    ap.add_argument("--long-repeats", type=int, default=1, help="runs of the long targets (sweep, serve)")
    ap.add_argument("--only", default=",".join(TARGETS))
    a = ap.parse_args()
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    print(f"machine: {cpu_name()} ({platform.processor() or platform.machine()}), {os.cpu_count()} cores (nproc), "
          f"python {platform.python_version()}; load average at start {os.getloadavg()[0]:.2f}; "
          f"median of {a.repeats} runs ({a.long_repeats} for sweep and serve)")
    hdr = f"{'target':<9} {'goal':>14} {'wall (median)':>15} {'CPU (median)':>15} {'ratio wall':>10} {'ratio CPU':>10} " \
          f"{'met wall':>8} {'met CPU':>8}"
    print(hdr)
    print("-" * len(hdr))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name in a.only.split(","):
            info: dict = {}
            make = {"run": case_run, "predict": case_predict, "optimize": case_optimize}.get(name)
            fn = make(tmp) if make else {"sweep": case_sweep, "serve": case_serve, "fast": case_fast}[name](tmp, info)
            n = a.long_repeats if name in ("sweep", "serve") else a.repeats
            ws, cs = zip(*(timed(fn) for _ in range(n)))
            w, c = statistics.median(ws), statistics.median(cs)
            goal, kind = TARGETS[name]
            if kind == "s":
                label = f"< {goal:g} s"
                if name == "sweep":
                    label = f"{info['points'] / 1e3:.0f}k pts < {goal:g} s"
                rw, rc, fw, fc = w / goal, c / goal, f"{w:.3f} s", f"{c:.3f} s"
            elif name == "serve":
                sim = info["simulated_s"]
                label = f">= {goal:,.0f}x"
                rw, rc, fw, fc = goal / (sim / w), goal / (sim / c), f"{sim / w:,.0f}x", f"{sim / c:,.0f}x"
            else:
                k = info["kernels"]
                label = f">= {goal / 1e6:g}M k/s"
                rw, rc, fw, fc = goal / (k / w), goal / (k / c), f"{k / w / 1e6:.1f}M k/s", f"{k / c / 1e6:.1f}M k/s"
            print(f"{name:<9} {label:>14} {fw:>15} {fc:>15} {rw:>10.2f} {rc:>10.2f} {'yes' if rw <= 1 else 'no':>8} "
                  f"{'yes' if rc <= 1 else 'no':>8}", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}; ratio = measured / target (time) or target / measured "
          f"(throughput): <= 1 is met")


if __name__ == "__main__":
    main()
