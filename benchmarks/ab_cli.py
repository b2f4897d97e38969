"""A/B of whole `launchsim` processes: this checkout against another (e.g. a worktree of the base commit), run
alternately in one session so both see the same machine load; prints median wall and CPU time per command.

    git worktree add /tmp/base 7c1aa12
    python benchmarks/ab_cli.py --base /tmp/base [--runs 12]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "predict": ["predict", "--model", "qwen3-0.6b", "--batch", "8", "--json"],
    "predict --steps": ["predict", "--model", "qwen3-0.6b", "--batch", "8", "--graph", "full", "--steps", "4",
                        "--scheduling", "async", "--json"],
    "bad choice": ["predict", "--model", "qwen3-0.6b", "--graph", "sometimes"],
    # bench_targets.py's optimize row: 1,024 candidates x 64 graphs (the CSV is written at start)
    "optimize": ["optimize", "--distribution", "{csv}", "--model", "qwen3-8b", "--fusion", "fused", "--graph", "full",
                 "--max-graphs", "64", "--max-size", "1024", "--json"],
}


def one(root: Path, args: list[str]) -> tuple[float, float]:
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-m", "simulator.cli", *args], cwd=root, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - t0, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, required=True, help="the other checkout (its simulator/ is imported)")
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--only", default="", help="comma-separated command names (default: all)")
    a = ap.parse_args()
    import tempfile

    csv = Path(tempfile.mkdtemp()) / "uniform1024.csv"
    csv.write_text("batch,count\n" + "".join(f"{b},1\n" for b in range(1, 1025)))
    roots = {"base": a.base.resolve(), "this": ROOT}
    print(f"load average {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'command':18s} {'base wall':>10s} {'this wall':>10s} {'base cpu':>10s} {'this cpu':>10s} {'cpu ratio':>10s}")
    for name, args in COMMANDS.items():
        if a.only and name not in a.only.split(","):
            continue
        args = [x.format(csv=csv) for x in args]
        res = {k: [] for k in roots}
        for _ in range(a.runs):
            for k, root in roots.items():
                res[k].append(one(root, args))
        med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for k, v in res.items()}
        print(f"{name:18s} {med['base'][0]:9.3f}s {med['this'][0]:9.3f}s {med['base'][1]:9.3f}s {med['this'][1]:9.3f}s "
              f"{med['this'][1] / med['base'][1]:10.3f}")


if __name__ == "__main__":
    main()
