"""Before/after in one run: targets of bench_targets.py (default optimize, sweep694, sweep100k), each a fresh whole
process, timed alternately on a base checkout (e.g. a temporary `git worktree add /tmp/base c3cb4ce`) and on this
one, on the same machine and load.

Each command is bench_targets.py's own command line (`commands`: the same scenario files and CSV for both trees,
a fresh --out folder per run), run with cwd = that checkout, so its `simulator` package is the one imported; the
table shows the median wall time and the median CPU time (the process and its children: the sweep's workers) per
checkout, and after / before.

    python benchmarks/bench_ab.py --base /tmp/base [--repeats 3] [--only optimize,sweep694,sweep100k]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_targets import TARGETS, commands  # noqa: E402  (benchmarks/bench_targets.py)
from machine import cpu_name  # noqa: E402  (benchmarks/machine.py)

ROOT = Path(__file__).resolve().parents[1]


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
    ap.add_argument("--repeats", type=int, default=3, help="runs per target and checkout (median)")
    ap.add_argument("--only", default="optimize,sweep694,sweep100k")
    a = ap.parse_args()
    base = a.base.resolve()
    if not (base / "simulator" / "cli").is_dir():
        sys.exit(f"{base}: not a launchsim checkout")
    names = [n for n in a.only.split(",") if n]
    unknown = [n for n in names if n not in TARGETS or TARGETS[n][1] != "s" or n == "bare"]
    if unknown:
        sys.exit(f"unknown or untimed target(s) {', '.join(unknown)}: use run, predict, optimize, sweep694, sweep100k")
    with tempfile.TemporaryDirectory(prefix="launchsim-ab-") as d:
        cmds = commands(Path(d))
        print(f"machine: {cpu_name()} ({platform.processor() or platform.machine()}), {os.cpu_count()} cores, python "
              f"{platform.python_version()}; load average at start {os.getloadavg()[0]:.2f}; base {base}, after {ROOT}")
        hdr = (f"{'target':<9} {'goal':>6} {'runs':>4} {'before wall':>12} {'before CPU':>11} {'after wall':>11} "
               f"{'after CPU':>10} {'wall after/before':>17} {'CPU after/before':>16}")
        print(hdr)
        print("-" * len(hdr))
        for name in names:
            goal = TARGETS[name][0]
            res = {"before": [], "after": []}
            for i in range(a.repeats):  # alternate, so that both see the same load
                res["before"].append(timed(cmds[name](2 * i), base))
                res["after"].append(timed(cmds[name](2 * i + 1), ROOT))
            (bw, bc), (aw, ac) = ((statistics.median(x[0] for x in res[k]), statistics.median(x[1] for x in res[k]))
                                  for k in ("before", "after"))
            print(f"{name:<9} {f'{goal:g} s':>6} {a.repeats:>4} {bw:>10.2f} s {bc:>9.2f} s {aw:>9.2f} s {ac:>8.2f} s "
                  f"{aw / bw:>17.2f} {ac / bc:>16.2f}", flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
