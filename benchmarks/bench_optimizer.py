"""Speed of the exact layout optimizer: N candidate sizes (1..N), up to K graphs, several constraint kinds.

Step costs come from the simulator (qwen3-8b, fused, full graphs, ctx 1024; computed once and reported
separately), memory from GraphMemoryModel. Each case times `optimizer.solve` alone; the table shows the
median of --repeats runs, the method used (dp: plain partition DP; labels: exact label search) and the
labels it kept.

    python benchmarks/bench_optimizer.py            # N=1024, K=64
    python benchmarks/bench_optimizer.py --n 512 --k 32
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np

from simulator.optimizer import exact as opt
from simulator.layouts.buckets import preset_sizes
from simulator.layouts.distribution import from_histogram
from simulator.studies.optimize import Inputs, build_problem, setup


def dists(n: int) -> dict:
    b = np.arange(1, n + 1)
    return {
        "uniform": {int(x): 1.0 for x in b},
        "skewed": {int(x): float(np.exp(-x / (n / 16)) + 1e-4) for x in b},
        "bimodal": {int(x): float(np.exp(-((x - n / 24) / (n / 64)) ** 2) + np.exp(-((x - 0.65 * n) / (n / 12)) ** 2)
                                  + 1e-5) for x in b},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--k", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    print(f"host: {platform.processor() or platform.machine()}, python {platform.python_version()}")
    rows = []
    for name, h in dists(a.n).items():
        for shared in (True, False):
            t0 = time.perf_counter()
            st = setup(Inputs(from_histogram(h, name), "qwen3-8b", fusion="fused", graph="full", max_graphs=a.k,
                              shared_pool=shared))
            base = build_problem(st, None)
            pre = time.perf_counter() - t0
            free = opt.solve(base)
            vllm_mem = st.memory(preset_sizes("vllm", a.n))[0]
            cases = [("graphs only", None, None), ("memory = vllm preset", vllm_mem, None),
                     ("memory = 0.5 x unconstrained", 0.5 * free.memory, None),
                     ("capture <= 0.5 x unconstrained", None, 0.5 * free.capture)]
            for label, mb, cb in cases:
                base.memory_budget, base.capture_budget = mb, cb
                times, sol = [], None
                for _ in range(a.repeats):
                    t = time.perf_counter()
                    sol = opt.solve(base)
                    times.append(time.perf_counter() - t)
                rows.append((name, "shared" if shared else "private", label, statistics.median(times), sol.method,
                             sol.labels, len(sol.sizes), pre))
    print(f"N={a.n} candidates, K={a.k}, median of {a.repeats} runs (precompute = step costs + memory arrays, once)")
    print(f"{'distribution':<9} {'pool':<8} {'constraint':<31} {'solve_s':>8} {'method':>7} {'labels':>8} "
          f"{'graphs':>6} {'precompute_s':>12}")
    for r in rows:
        print(f"{r[0]:<9} {r[1]:<8} {r[2]:<31} {r[3]:8.3f} {r[4]:>7} {r[5]:8d} {r[6]:6d} {r[7]:12.2f}")
    print(f"max solve_s: {max(r[3] for r in rows):.3f}  median solve_s: {statistics.median(r[3] for r in rows):.3f}")


if __name__ == "__main__":
    main()
