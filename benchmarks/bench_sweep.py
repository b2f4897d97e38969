"""Sweep throughput: a mixed grid of about 100,000 step evaluations on local worker processes.

The grid: qwen3-0.6b and llama3-8b x 4 fusion levels x 4 graph modes x 6 capture layouts x 2 batch-size
distributions (uniform 1..256 and a small-batch-heavy histogram), 10% mixed steps (1 x 256-token prefill),
one memory budget. A "step evaluation" is one step time a point's expectation sums over (one per batch
size and step kind, in the point's own graph mode); "simulated" counts the unique steps the memo actually
ran through the fast engine. Each row starts from cold worker processes and no on-disk cache. "CPU s" sums
this process and its workers: on a machine shared with other jobs, wall time varies with the load average
shown, CPU time much less.

    python benchmarks/bench_sweep.py [--workers 2] [--scales 0.25,0.5,1]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time

from rich.console import Console
from rich.table import Table

from simulator.config import parse_scenario
from simulator.studies.sweep import build_points
from simulator.sweep.grid import run_points

LAYOUTS = [{"name": "vllm", "sizes": "vllm"}, {"name": "sglang", "sizes": "sglang"},
           {"name": "trtllm", "sizes": "trtllm"}, {"name": "seed", "sizes": "seed"},
           {"name": "pow2", "sizes": "pow2", "max_size": 256},
           {"name": "dense-small", "sizes": [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 128, 256]}]


def scenario(scale: float, workers: int) -> dict:
    hi = max(2, int(256 * scale))  # the uniform distribution's support sets the grid size
    return {
        "kind": "sweep", "name": "bench", "models": ["qwen3-0.6b", "llama3-8b"], "profiles": ["datasheet-h200"],
        "fusion": ["none", "packed", "compiled", "fused"], "graph": ["none", "full", "piecewise", "full_and_piecewise"],
        "layouts": LAYOUTS,
        "distributions": [{"name": f"uniform-1-{hi}", "uniform": [1, hi]},
                          {"name": "small-heavy", "histogram": {1: 30, 2: 20, 3: 12, 4: 10, 6: 8, 8: 8, 12: 6, 16: 6,
                                                                24: 5, 33: 4, 48: 3, 65: 3, 100: 2, 130: 2, 200: 1,
                                                                257: 1}}],
        "mixed": {"share": 0.1, "prefill_seqs": 1, "prefill_len": 256},
        "budgets": ["1GiB"], "workers": workers,
    }


def _cpu() -> float:
    """CPU seconds of this process and its finished worker processes (load-independent cost)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--scales", default="0.25,0.5,1")
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=1, help="runs per scale; the fastest is shown")
    a = ap.parse_args()
    t = Table(title=f"sweep benchmark on {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                    f"{a.workers} workers (target: 100k step evaluations < 10 s)")
    for c in ("grid points", "step evals", "simulated", "wall s", "CPU s", "points/s", "step evals/s", "load avg"):
        t.add_column(c, justify="right")
    for scale in (float(x) for x in a.scales.split(",")):
        sc = parse_scenario(scenario(scale, a.workers))
        best = None
        for _ in range(a.repeats):
            cpu0 = _cpu()
            t0 = time.perf_counter()
            pts = build_points(sc)
            run = run_points(pts, None, "local", a.workers, a.chunk, progress=False)
            wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
            if best is None or wall < best[0]:
                best = (wall, cpu, pts, run)
        wall, cpu, pts, run = best
        t.add_row(f"{len(pts):,}", f"{run.step_evals:,}", f"{run.simulated_steps:,}", f"{wall:.2f}", f"{cpu:.2f}",
                  f"{len(pts) / wall:,.0f}", f"{run.step_evals / wall:,.0f}", f"{os.getloadavg()[0]:.1f}")
    Console(width=140).print(t)


if __name__ == "__main__":
    main()
