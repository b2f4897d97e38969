"""The per-node gap inside a replayed CUDA graph of real decoder kernels, from profiled replays.

    python -m calibration.node_gap        # reads calibration/measured/node_gap_*.json.gz

For each replay in a torch.profiler trace of graph replays: gap per node = (span of the replay's
kernels - sum of their durations) / (kernels - 1). This is what a node adds between *different*
decoder kernels as CUPTI timestamps show them, the right figure beside kernel times read from a
trace (CUPTI durations). The microbenchmark's `graph_node_us` comes from small kernels and pairs with
the kernel tables, whose times were themselves measured inside replayed graphs.
Writes calibration/measured/h200-node-gap.json (median over replays, plus every replay).
"""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

MEASURED = Path(__file__).resolve().parent / "measured"


def replay_gaps(trace_path: Path, split_us: float = 50.0) -> list[dict]:
    opener = gzip.open if trace_path.suffix == ".gz" else open
    with opener(trace_path, "rt") as f:
        events = json.load(f)["traceEvents"]
    ks = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    replays: list[list[dict]] = [[ks[0]]]
    for a, b in zip(ks, ks[1:]):
        if b["ts"] - (a["ts"] + a["dur"]) > split_us:  # the host synchronised between replays
            replays.append([])
        replays[-1].append(b)
    out = []
    for r in replays:
        span = r[-1]["ts"] + r[-1]["dur"] - r[0]["ts"]
        busy = sum(e["dur"] for e in r)
        out.append({"kernels": len(r), "span_us": span, "kernel_us": busy, "gap_per_node_us": (span - busy) / (len(r) - 1)})
    return out


def main() -> None:
    rows = []
    for p in sorted(MEASURED.glob("node_gap_*.json.gz")):
        for r in replay_gaps(p):
            rows.append({"trace": p.name, **r})
    med = statistics.median(r["gap_per_node_us"] for r in rows)
    res = {"graph_node_trace_us": med, "replays": rows,
           "method": "median over profiled graph replays of (span - sum of kernel durations) / (kernels - 1)"}
    (MEASURED / "h200-node-gap.json").write_text(json.dumps(res, indent=1) + "\n")
    print(f"graph_node_trace_us = {med:.3f} (median of {len(rows)} replays)")


if __name__ == "__main__":
    main()
