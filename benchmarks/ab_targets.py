"""Before/after in one run: targets of bench_targets.py timed alternately in a base checkout and in this one.

For each repeat, each target runs once in the base checkout and once here, back to back (so both see the same
load), each a fresh process with its checkout as the working directory (its own `simulator` package); `serve`
and `fast` run the checkout's own `benchmarks/bench_targets.py --child` (the same child in both, as long as the
base has it). The table: median wall and median CPU (the process and its children) per checkout, and after /
before; for `fast` the call inside the process (kernels/s), as bench_targets reports it.

    git worktree add --detach /tmp/base <commit>
    python benchmarks/ab_targets.py --base /tmp/base [--only bare,predict,serve,fast] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_targets import PY, TARGETS, commands, run_process  # benchmarks/bench_targets.py
from machine import cpu_name  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parents[1]


def _in_tree(cmd: list[str], tree: Path) -> list[str]:
    """bench_targets' command line for `tree`: its own child script for serve and fast."""
    if len(cmd) >= 3 and cmd[1].endswith("bench_targets.py") and cmd[2] == "--child":
        return [PY, str(tree / "benchmarks" / "bench_targets.py"), *cmd[2:]]
    return cmd


def _measure(name: str, cmd: list[str], tree: Path) -> tuple[float, float]:
    """(wall, CPU) of one process; for serve simulated s / s, for fast kernels / s of the call."""
    wall, cpu, out = run_process(cmd, cwd=tree, where=f"{tree}: ")
    if name == "serve":
        sim = json.loads(out)["simulated_s"]
        return sim / wall, sim / cpu
    if name == "fast":
        d = json.loads(out)
        return d["kernels"] / d["call_wall_s"], d["kernels"] / d["call_cpu_s"]
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, type=Path, help="the checkout to compare against")
    ap.add_argument("--only", default="bare,predict,serve,fast", help="comma-separated targets of bench_targets")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    base, here = a.base.resolve(), ROOT
    names = [n for n in a.only.split(",") if n]
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        raise SystemExit(f"unknown target(s) {', '.join(unknown)}: use {', '.join(TARGETS)}")
    print(f"A/B of bench_targets in one run: before = {base}, after = {here}; {cpu_name()} ({platform.machine()}), "
          f"{os.cpu_count()} cores, python {platform.python_version()}; load average at start "
          f"{os.getloadavg()[0]:.2f}; medians of {a.repeats}, alternating")
    hdr = (f"{'target':<9} {'unit':>9} {'before wall':>12} {'before CPU':>11} {'after wall':>11} {'after CPU':>10} "
           f"{'wall a/b':>9} {'CPU a/b':>8}")
    print(hdr)
    print("-" * len(hdr))
    with tempfile.TemporaryDirectory(prefix="launchsim-ab-") as d:
        cmds = commands(Path(d))
        for name in names:
            runs: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
            for i in range(a.repeats):
                for label, tree in (("before", base), ("after", here)):
                    cmd = _in_tree(cmds[name](f"{label}{i}"), tree)
                    runs[label].append(_measure(name, cmd, tree))
            med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in runs.items()}
            (bw, bc), (aw, ac) = med["before"], med["after"]
            if name == "serve":
                unit, f = "x real", lambda x: f"{x:,.0f}x"
            elif name == "fast":
                unit, f = "kernels/s", lambda x: f"{x / 1e6:.1f}M"
            else:
                unit, f = "s", lambda x: f"{x:.3f}"
            print(f"{name:<9} {unit:>9} {f(bw):>12} {f(bc):>11} {f(aw):>11} {f(ac):>10} {aw / bw:>9.2f} "
                  f"{ac / bc:>8.2f}", flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}; a/b > 1 is faster for serve and fast (throughputs), "
          f"slower for times")


if __name__ == "__main__":
    main()
