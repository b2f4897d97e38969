"""Before/after in one run: the `optimize` and `sweep` targets of bench_targets.py, timed alternately on a base
checkout (e.g. a temporary `git worktree add /tmp/base 7c1aa12`) and on this one, on the same machine and load.

Each target runs as its own process in each checkout (cwd = that checkout, so its `simulator` package is the one
imported); the table shows the median wall time and the median CPU time (the child process and its children:
the sweep's workers) per checkout, and after / before.

    python benchmarks/bench_ab.py --base /tmp/base [--repeats 3] [--sweep-repeats 1] [--only optimize,sweep]
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

SWEEP = """
import sys
sys.path.insert(0, "benchmarks")
from bench_targets import sweep_scenario  # the same 100,800-point grid in both checkouts
from simulator.config import parse_scenario
from simulator.studies.sweep import build_points
from simulator.sweep.grid import run_points
sc = parse_scenario(sweep_scenario())
pts = build_points(sc)
run = run_points(pts, None, "local", 2, sc.chunk, progress=False)
assert len(run.rows) == len(pts) == 100800
"""


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], cwd: Path) -> tuple[float, float]:
    c0, t0 = _children_cpu(), time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, _children_cpu() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, type=Path, help="the checkout to compare against")
    ap.add_argument("--repeats", type=int, default=3, help="runs of optimize per checkout")
    ap.add_argument("--sweep-repeats", type=int, default=1, help="runs of the sweep per checkout")
    ap.add_argument("--only", default="optimize,sweep")
    a = ap.parse_args()
    base = a.base.resolve()
    py = sys.executable
    with tempfile.TemporaryDirectory() as d:
        csv = Path(d) / "uniform1024.csv"
        csv.write_text("batch,count\n" + "".join(f"{b},1\n" for b in range(1, 1025)))
        cases = {
            "optimize": ([py, "-m", "simulator.cli", "optimize", "--distribution", str(csv), "--model", "qwen3-8b",
                          "--fusion", "fused", "--graph", "full", "--max-graphs", "64", "--max-size", "1024", "--json"],
                         a.repeats, 1.0),
            "sweep": ([py, "-c", SWEEP], a.sweep_repeats, 10.0),
        }
        if not (base / "benchmarks" / "bench_targets.py").is_file():
            sys.exit(f"{base}: not a launchsim checkout")
        print(f"machine: {cpu_name()} ({platform.processor() or platform.machine()}), {os.cpu_count()} cores, python "
              f"{platform.python_version()}; load average at start {os.getloadavg()[0]:.2f}; base {base}, after {ROOT}")
        hdr = (f"{'target':<9} {'goal':>6} {'runs':>4} {'before wall':>12} {'before CPU':>11} {'after wall':>11} "
               f"{'after CPU':>10} {'wall after/before':>17} {'CPU after/before':>16}")
        print(hdr)
        print("-" * len(hdr))
        for name in a.only.split(","):
            cmd, n, goal = cases[name]
            res = {"before": [], "after": []}
            for _ in range(n):  # alternate, so that both see the same load
                res["before"].append(timed(cmd, base))
                res["after"].append(timed(cmd, ROOT))
            (bw, bc), (aw, ac) = ((statistics.median(x[0] for x in res[k]), statistics.median(x[1] for x in res[k]))
                                  for k in ("before", "after"))
            print(f"{name:<9} {f'{goal:g} s':>6} {n:>4} {bw:>10.2f} s {bc:>9.2f} s {aw:>9.2f} s {ac:>8.2f} s "
                  f"{aw / bw:>17.2f} {ac / bc:>16.2f}", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
