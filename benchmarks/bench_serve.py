"""Serving-simulation speed: simulated seconds per wall second for one replica over one hour of traffic.

Each case builds a fresh replica (empty step-time memo, so step evaluations are included: "cold") and serves
an hour of Poisson arrivals (lognormal prompts mean 512, outputs mean 256); the table shows the median wall
time of `--runs` runs and the ratio simulated / wall (target: >= 1000x). A "warm" column reruns the same
hour on the filled memo (what a capacity bisection pays per rate after its first run). CPU seconds
(time.process_time) are shown next to wall seconds: on a shared machine other processes stretch the wall time,
not the CPU time; the load average at start and end is printed.

    python benchmarks/bench_serve.py [--duration 3600] [--runs 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from simulator.layouts.buckets import preset_sizes
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.serving.arrivals import ArrivalSpec, LengthSpec, make_workload
from simulator.serving.replica import ServeConfig, prepare, simulate_serving
from simulator.serving.steptime import clear_step_cache
from machine import cpu_name  # benchmarks/machine.py (scripts run from benchmarks/)

CASES = [  # model, fusion, graph, rate (req/s)
    ("qwen3-0.6b", "fused", "full_and_piecewise", 10.0),
    ("qwen3-0.6b", "fused", "full_and_piecewise", 20.0),
    ("qwen3-0.6b", "fused", "full_and_piecewise", 40.0),
    ("qwen3-0.6b", "fused", "none", 20.0),
    ("llama3-8b", "fused", "full_and_piecewise", 10.0),
    ("llama3-8b", "fused", "full_and_piecewise", 25.0),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=3600.0, help="seconds of arrivals per run")
    ap.add_argument("--runs", type=int, default=3, help="runs per case (median reported)")
    ap.add_argument("--quick", action="store_true", help="first two cases only, one run")
    a = ap.parse_args()
    cases = CASES[:2] if a.quick else CASES
    runs = 1 if a.quick else a.runs
    prof = load_profile("datasheet-h200")
    prompt = LengthSpec("lognormal", mean=512, cv=1.0, low=1, high=4096)
    output = LengthSpec("lognormal", mean=256, cv=1.0, low=1, high=2048)
    print(f"CPU: {cpu_name()} ({os.cpu_count()} cores), load average {os.getloadavg()[0]:.2f}; profile {prof.name}; "
          f"{a.duration:g} s of arrivals per run; median of {runs} run(s)")
    hdr = (f"{'model':<11} {'fusion':<6} {'graph':<19} {'req/s':>6} {'requests':>8} {'events':>8} {'evals':>6} "
           f"{'sim s':>7} {'cold s':>7} {'ratio':>7} {'cpu s':>7} {'ratio':>7} {'warm s':>7} {'ratio':>7}")
    print(hdr)
    print("-" * len(hdr))
    for model, fusion, graph, rate in cases:
        m = load_model(model)
        sizes = tuple(preset_sizes("vllm")) if graph != "none" else (1,)
        cfg = ServeConfig(m, prof, fusion, graph, sizes)
        wl = make_workload(ArrivalSpec("poisson"), prompt, output, rate, a.duration, 0)
        cold, cold_cpu, warm = [], [], []
        for _ in range(runs):
            clear_step_cache()
            t0, c0 = time.perf_counter(), time.process_time()
            prep = prepare(cfg)
            r = simulate_serving(cfg, wl, a.duration, prep)
            cold.append(time.perf_counter() - t0)
            cold_cpu.append(time.process_time() - c0)
            t0 = time.perf_counter()
            simulate_serving(cfg, wl, a.duration, prep)
            warm.append(time.perf_counter() - t0)
        c, cc, w = statistics.median(cold), statistics.median(cold_cpu), statistics.median(warm)
        sim = r.simulated_s
        print(f"{model:<11} {fusion:<6} {graph:<19} {rate:>6g} {len(wl):>8} {r.events:>8} {r.step_evals:>6} "
              f"{sim:>7.0f} {c:>7.2f} {sim / c:>6.0f}x {cc:>7.2f} {sim / cc:>6.0f}x {w:>7.2f} {sim / w:>6.0f}x")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
