"""A/B of the serve target between two source trees, in one run: the same hour of Poisson arrivals at 80 req/s
on one qwen3-0.6b replica (fused, full_and_piecewise, vllm sizes, datasheet-h200; bench_targets.py's serve row),
cold step memo, each run in a fresh process, the trees alternating. Prints per tree the median wall and CPU
time of the simulation (prepare + simulate_serving, imports excluded), simulated s / CPU s, and a warm rerun.

    python benchmarks/ab_serve.py BEFORE_TREE [AFTER_TREE (default: this checkout)] [--runs 3] [--rate 80]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from machine import cpu_name  # benchmarks/machine.py (scripts run from benchmarks/)

CHILD = r"""
import json, sys, time
from simulator.layouts.buckets import preset_sizes
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.serving.arrivals import ArrivalSpec, LengthSpec, make_workload
from simulator.serving.replica import ServeConfig, prepare, simulate_serving
from simulator.serving.steptime import clear_step_cache
rate, dur = float(sys.argv[1]), float(sys.argv[2])
prof = load_profile("datasheet-h200")
cfg = ServeConfig(load_model("qwen3-0.6b"), prof, "fused", "full_and_piecewise", tuple(preset_sizes("vllm")))
wl = make_workload(ArrivalSpec("poisson"), LengthSpec("lognormal", mean=512, cv=1.0, low=1, high=4096),
                   LengthSpec("lognormal", mean=256, cv=1.0, low=1, high=2048), rate, dur, 0)
clear_step_cache()
t0, c0 = time.perf_counter(), time.process_time()
prep = prepare(cfg)
r = simulate_serving(cfg, wl, dur, prep)
w, c = time.perf_counter() - t0, time.process_time() - c0
c1 = time.process_time()
simulate_serving(cfg, wl, dur, prep)
print(json.dumps({"wall": w, "cpu": c, "warm_cpu": time.process_time() - c1, "sim": r.simulated_s,
                  "events": r.events, "evals": r.step_evals}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=float, default=80.0)
    ap.add_argument("--duration", type=float, default=3600.0)
    a = ap.parse_args()
    trees = {"before": a.before, "after": a.after}
    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores), load average at start {os.getloadavg()[0]:.2f}; "
          f"{a.duration:g} s of arrivals at {a.rate:g} req/s; median of {a.runs} run(s) per tree, alternating")
    res: dict[str, list[dict]] = {k: [] for k in trees}
    for _ in range(a.runs):
        for name, root in trees.items():
            out = subprocess.run([sys.executable, "-c", CHILD, str(a.rate), str(a.duration)], cwd=root,
                                 env={**os.environ, "PYTHONPATH": root}, capture_output=True, text=True, check=True)
            res[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    hdr = (f"{'tree':<7} {'events':>8} {'evals':>6} {'sim s':>7} {'wall s':>8} {'ratio':>7} {'cpu s':>8} {'ratio':>7} "
           f"{'warm cpu':>8} {'ratio':>7}")
    print(hdr)
    print("-" * len(hdr))
    med = {}
    for name, rs in res.items():
        m = {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu", "warm_cpu", "sim")}
        med[name] = m
        print(f"{name:<7} {rs[0]['events']:>8} {rs[0]['evals']:>6} {m['sim']:>7.0f} {m['wall']:>8.2f} "
              f"{m['sim'] / m['wall']:>6.0f}x {m['cpu']:>8.2f} {m['sim'] / m['cpu']:>6.0f}x {m['warm_cpu']:>8.2f} "
              f"{m['sim'] / m['warm_cpu']:>6.0f}x")
    b, f = med["before"], med["after"]
    print(f"after / before: wall {b['wall'] / f['wall']:.2f}x faster, CPU {b['cpu'] / f['cpu']:.2f}x, "
          f"warm CPU {b['warm_cpu'] / f['warm_cpu']:.2f}x; load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
