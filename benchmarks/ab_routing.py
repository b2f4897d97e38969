"""A/B of the routing hot paths between two source trees, in one run: `routing.route` (decode and mixed steps,
default backend), `Point.key` of sweep points at the default backend, and memoised `stepcost.step_time`
lookups. Each tree runs in a fresh process, the trees alternate; prints the median wall and CPU time per call.

    git worktree add /tmp/base d76c252
    python benchmarks/ab_routing.py /tmp/base [AFTER_TREE (default: this checkout)] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, time
from simulator.engine.routing import route
from simulator.engine.stepcost import step_time
from simulator.layouts.buckets import preset_sizes
from simulator.model.models import load_model
from simulator.model.workload import StepShape, decode
from simulator.sweep.grid import point_for

def clock(f, n):
    w, c = time.perf_counter(), time.process_time()
    f(n)
    return (time.perf_counter() - w) / n * 1e9, (time.process_time() - c) / n * 1e9

sizes = preset_sizes("vllm", 512)
def routes(n):
    for i in range(n):
        route("full_and_piecewise", sizes, 1 + i % 600, i % 3 != 0)
m = load_model("qwen3-0.6b")
pts = [point_for(m, "datasheet-h200", fusion="fused", graph="full", layout="L", sizes=tuple(sizes),
                 distribution="d", dist_sizes=(1, 2), dist_weights=(0.5, 0.5), budget_bytes=b, ctx=1024)
       for b in range(1, 2001)]
def keys(n):
    for i in range(n):
        pts[i % len(pts)].key()
shapes = [decode(b, 1024) for b in (1, 8, 64)] + [StepShape(4, 1024, 1, 64)]
for s in shapes:
    step_time(m, "datasheet-h200", "fused", "full" if s.is_pure_decode else "piecewise", s)
def lookups(n):
    for i in range(n):
        s = shapes[i % 4]
        step_time(m, "datasheet-h200", "fused", "full" if s.is_pure_decode else "piecewise", s)
print(json.dumps({"route": clock(routes, 200_000), "Point.key": clock(keys, 20_000),
                  "step_time (memo hit)": clock(lookups, 100_000)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after", nargs="?", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    trees = {"before": a.before, "after": a.after}
    res = {k: [] for k in trees}
    for _ in range(a.runs):
        for name, tree in trees.items():
            out = subprocess.run([sys.executable, "-c", CHILD], cwd=tree, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": tree}, check=True).stdout
            res[name].append(json.loads(out))
    load = os.getloadavg()[0]
    print(f"{a.runs} runs per tree, alternating; load average {load:.2f} on {os.cpu_count()} CPUs")
    print(f"{'path':24} {'before wall ns':>15} {'after wall ns':>14} {'before CPU ns':>14} {'after CPU ns':>13} "
          f"{'CPU after/before':>17}")
    for path in res["before"][0]:
        bw, aw = (statistics.median(r[path][0] for r in res[k]) for k in trees)
        bc, ac = (statistics.median(r[path][1] for r in res[k]) for k in trees)
        print(f"{path:24} {bw:15.0f} {aw:14.0f} {bc:14.0f} {ac:13.0f} {ac / bc:17.3f}")


if __name__ == "__main__":
    main()
