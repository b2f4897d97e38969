"""Engine throughput: kernel events per second of the SimPy DES and of the numpy fast path.

Workloads: one million single-kernel launches (an eager step stretched out), in a CPU-bound regime
(6 us host, 3 us kernels: the GPU idles between kernels) and a GPU-bound regime (3 us host, 6 us
kernels: the launch queue fills and the host stalls), plus a Qwen3-0.6B eager decode step repeated.
Prints medians over --repeats runs, wall and CPU time (the CPU column is the one to compare on a shared
machine), against the targets (DES >= 300k, fast >= 20M kernels/s).

    python benchmarks/bench_engine.py [--kernels 1000000] [--repeats 3] [--no-des]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

from simulator.model.costs import CostModel
from simulator.engine.des import simulate_des
from simulator.engine.fastpath import simulate_fast
from simulator.model.models import PRESETS
from simulator.engine.plan import LaunchPlan, build_plan
from simulator.model.profile import load_profile
from simulator.model.workload import build_step, decode


def uniform_plan(n: int, host_us: float, gpu_us: float) -> LaunchPlan:
    return LaunchPlan(np.full(n, host_us * 1e-6), np.ones(n, dtype=np.int64), np.full(n, gpu_us * 1e-6),
                      np.full(n, 1e-6), 1024)


def decode_plan(n: int) -> LaunchPlan:
    step = build_step(PRESETS["qwen3-0.6b"], decode(1, 1024), "none")
    p = build_plan(step, CostModel(load_profile("datasheet-h200")), "none")
    reps = max(1, n // p.kernels)
    return LaunchPlan(np.tile(p.host_s, reps), np.tile(p.kernels_per_launch, reps), np.tile(p.gpu_s, reps),
                      np.tile(p.gap_s, reps), p.queue_depth)


def timed(fn, plan, repeats):
    """Median wall and median CPU seconds (this process) of `repeats` runs."""
    ws, cs = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        fn(plan)
        ws.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    return statistics.median(ws), statistics.median(cs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-des", action="store_true", help="time the fast path only")
    a = ap.parse_args()
    cases = [
        ("cpu-bound 6us host / 3us kernel", uniform_plan(a.kernels, 6, 3)),
        ("gpu-bound 3us host / 6us kernel", uniform_plan(a.kernels, 3, 6)),
        ("qwen3-0.6b eager decode, repeated", decode_plan(a.kernels)),
    ]
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"median of {a.repeats}; load average at start {os.getloadavg()[0]:.2f}; kernels/s as wall / CPU")
    print(f"{'workload':36} {'kernels':>9} {'DES k/s (wall / CPU)':>22} {'fast k/s (wall / CPU)':>22} "
          f"{'fast/DES CPU':>12}")
    for name, plan in cases:
        n = plan.kernels
        dw, dc = timed(simulate_des, plan, a.repeats) if not a.no_des else (float("nan"), float("nan"))
        fw, fc = timed(simulate_fast, plan, a.repeats)
        des = f"{n / dw:.3g} / {n / dc:.3g}" if not a.no_des else "-"
        print(f"{name:36} {n:9d} {des:>22} {f'{n / fw:.3g} / {n / fc:.3g}':>22} {dc / fc:12.0f}")
    print(f"targets: DES >= 3e+05 kernels/s, fast path >= 2e+07 kernels/s; load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
