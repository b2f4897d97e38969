"""The profile's `device.graph_launch_latency_us` from rounds l and n (calibration/scripts/round_l.py, round_n.py).

The engine puts `graph_launch_latency_us` of device time before the first node of every graph replay, after the
later of the replay's submission (the host has paid `graph_launch_fixed_us`) and the previous kernel's end; inside
a graph a node costs `graph_node_us` instead. Where a graph replay is not the whole step (piecewise: attention runs
eager between the pieces) it follows an eager kernel. Round b took the figure as a 1-node graph's event time on an
idle GPU minus one node (8.34 us): that window opens when the event before the replay runs, before the host's
replay call, so it held the host's call too (round l reads 8.1 us by that method in a process where the device
side is 1.1 us).

Round n measured it directly, queued behind a sleep kernel so no host time is in the window: k distinct graphs of
decoder-like content (an RMSNorm's ops, GEMM, SiLU, GEMM; separate buffers), each followed by an eager tiny kernel,
against one graph holding all k contents: the extra device time per graph beyond the eager kernel's own is what a
graph boundary with an eager kernel between costs over an in-graph node gap. It is flat from k = 4 (2.6-3.1 us;
0.4-0.8 us at k = 1-2). A piecewise step has layers + 1 distinct pieces, so the figure is the median over k >= 4,
plus the in-graph node gap it replaces: latency = median + graph_node_us.

Not modelled, recorded in the note: graphs replayed back to back with no eager kernel between cost far more per
boundary as the number of distinct graphs grows (round n: 0.3 us at k = 1 to 16 us at 32 and 42 us at 64;
round m: the reference decoder cut into 29 graphs without eager ops is 0.4-0.65 ms slower a step than one graph).
No step plan of the engine puts distinct graphs back to back (piecewise keeps attention eager between pieces; a
full step is one graph), so no figure of the engine reads it.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

MIN_DISTINCT = 4  # a piecewise step's pieces: layers + 1 >= 4 for any real model


def latency(round_n: dict, graph_node_us: float) -> tuple[float, str]:
    """(graph_launch_latency_us, source note) from round n's timing.json."""
    layer = [c for c in round_n["cycles"] if c["nodes_kind"] == "layer"]
    after = [c["per_graph_boundary_after_eager_us"] for c in layer if c["graphs"] >= MIN_DISTINCT]
    if not after:
        raise ValueError(f"round n: no layer cycle of >= {MIN_DISTINCT} distinct graphs; no latency figure")
    med = statistics.median(after)
    chain = {c["graphs"]: c["per_graph_boundary_us"] for c in layer}
    cs, ce = round_n["canary"]["host_start_us"], round_n["canary"]["host_end_us"]
    ok = "ok" if round_n["canary"]["ok"] else "FAILED: host drift; the figures are device time with the host ahead"
    note = (f"graph_launch_latency_us {med + graph_node_us:.2f} us: round n (calibration/scripts/round_n.py, "
            f"calibration/build_graph_latency.py), a graph boundary with an eager kernel between, decoder-like "
            f"graphs queued behind a sleep kernel, median over {len(after)} cycles of {MIN_DISTINCT}-"
            f"{max(c['graphs'] for c in layer)} distinct graphs ({med:.2f} us) + graph_node_us ({graph_node_us:.3f} "
            f"us); back-to-back distinct graphs with no eager kernel between (not modelled: no step plan puts "
            f"distinct graphs back to back) cost {chain.get(1, float('nan')):.2f} us a boundary at 1 graph, "
            f"{chain.get(32, float('nan')):.1f} us at 32; canary {cs:.2f} -> {ce:.2f} us ({ok})")
    return med + graph_node_us, note


def add_graph_latency(profile: dict, round_dir: Path) -> None:
    """Replace device.graph_launch_latency_us with round n's figure and say so in device.source."""
    d = profile["device"]
    lat, note = latency(json.loads((round_dir / "timing.json").read_text()), d["graph_node_us"])
    d["graph_launch_latency_us"] = lat
    d["source"] = d["source"].rstrip() + "; " + note
