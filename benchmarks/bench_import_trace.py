"""import-trace throughput: a synthetic torch.profiler trace of N launches (each a top-level aten op, its
cudaLaunchKernel and its kernel: 3 events a launch, plus a ProfilerStep marker every STEP launches), imported
by `workload_from_trace` in this process; prints events, seconds and events per second per size, linear
scaling being the check (simulator/traces/host.py and importer.py walk sorted lists by index, no slice per
kernel). Writes benchmarks/results/import_trace.json.

    python benchmarks/bench_import_trace.py [--events 1000000] [--sizes 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
STEP = 500  # launches per ProfilerStep


def trace(launches: int) -> dict:
    ev, t = [], 0.0
    for i in range(launches):
        if i % STEP == 0:
            ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i // STEP}", "pid": 1, "tid": 1,
                       "ts": t, "dur": STEP * 20.0 - 1})
        c = i + 1
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": t + 0.5, "dur": 10,
                   "args": {"Input Dims": [[1, 1024], [1024]], "Input type": ["c10::BFloat16"] * 2}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 2,
                   "dur": 4, "args": {"correlation": c}})
        ev.append({"ph": "X", "cat": "kernel", "name": "void vectorized_elementwise_kernel<mul>", "pid": 0, "tid": 7,
                   "ts": t + 8, "dur": 5.0, "args": {"correlation": c, "stream": 7}})
        t += 20
    return {"schemaVersion": 1, "traceEvents": ev}


def main() -> None:
    from simulator.traces.workload import workload_from_trace

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=1_000_000, help="events in the largest trace")
    ap.add_argument("--sizes", type=int, default=3, help="sizes: events, events/4, events/16, ...")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for j in reversed(range(a.sizes)):
            launches = max(a.events // 3 // 4 ** j, STEP)
            p = Path(d) / f"t{launches}.json"
            doc = trace(launches)
            p.write_text(json.dumps(doc))
            n = len(doc["traceEvents"])
            t0 = time.perf_counter()
            wl, imp = workload_from_trace(p)
            s = time.perf_counter() - t0
            rows.append({"events": n, "launches": launches, "steps": len(imp.steps), "seconds": round(s, 3),
                         "events_per_s": round(n / s)})
            print(f"{n:>9,} events ({launches:,} launches, {len(imp.steps)} steps): {s:6.2f} s, "
                  f"{n / s:>10,.0f} events/s", flush=True)
    out = ROOT / "benchmarks" / "results" / "import_trace.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"kind": "bench-import-trace", "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
