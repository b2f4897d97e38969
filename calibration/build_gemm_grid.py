"""The profile's `device.tables.gemm_grid` from round k's measurements (calibration/scripts/round_k.py).

Round k timed F.linear over a rule-chosen grid of (n, k) in the GEMM tables' own method (timing.json: per-op µs in
a replayed graph, one timing process) and counted each call's kernels in a separate profiling process
(counts.json.gz), written to 1e-4 µs. A shape the counts process did not reach gets no counts row: the grid then carries counts only if
every row has them (else none, and the split-K count comes from the counted tables, as before round k).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path


def grid_section(round_dir: Path, source: str) -> dict | None:
    """The gemm_grid section (profile.GemmGrid's fields) of a round-k folder; None where it holds no rows."""
    timing = json.loads((round_dir / "timing.json").read_text())
    counts_path = round_dir / "counts.json.gz"
    calls = {}
    if counts_path.exists():
        with gzip.open(counts_path, "rt") as f:
            calls = json.load(f)["calls"]
    rows = [r for r in timing["gemm"] if len(r["graph_us"]) == len(timing["m"])]
    if not rows:
        return None
    m = list(timing["m"])
    kernels = [[len(calls[f"{r['n']},{r['k']},{mm}"]) for mm in m] if all(
        f"{r['n']},{r['k']},{mm}" in calls for mm in m) else None for r in rows]
    return {"m": m, "shapes": [[r["n"], r["k"]] for r in rows], "us": [[round(u, 4) for u in r["graph_us"]] for r in rows],
            "kernels": kernels if all(k is not None for k in kernels) else None,
            "source": f"{source} (calibration/scripts/round_k.py: {len(rows)} shapes; canary "
                      f"{timing['canary']['host_start_us']:.2f} -> {timing['canary']['host_end_us']:.2f} us)"}


def add_gemm_grid(p: dict, round_dir: Path, source: str) -> None:
    """Put round k's grid into profile dict `p` (device.tables.gemm_grid), when it holds rows."""
    g = grid_section(round_dir, source)
    if g is not None:
        p["device"]["tables"]["gemm_grid"] = g


def extend_gemm_grid(p: dict, round_dir: Path, source: str) -> int:
    """Append a round-k-format folder's rows (round ah's `--set lora`: an adapter's skinny GEMMs) to profile dict `p`'s
    device.tables.gemm_grid, on the same M grid; shapes the grid holds already keep their rows. Returns how many rows
    were added. Kernel counts: both the grid and the folder have them, or the grid keeps none (a grid with counts
    for some rows only is not valid)."""
    g = grid_section(round_dir, source)
    grid = p["device"]["tables"].get("gemm_grid")
    if g is None or grid is None:
        return 0
    if g["m"] != grid["m"]:
        raise ValueError(f"{round_dir}: M grid {g['m']} differs from the profile's gemm_grid {grid['m']}")
    have = {tuple(s) for s in grid["shapes"]}
    new = [i for i, s in enumerate(g["shapes"]) if tuple(s) not in have]
    grid["shapes"] += [g["shapes"][i] for i in new]
    grid["us"] += [g["us"][i] for i in new]
    if grid.get("kernels") is not None and g["kernels"] is not None:
        grid["kernels"] += [g["kernels"][i] for i in new]
    else:
        grid["kernels"] = None
    grid["source"] += f"; {len(new)} shapes from {g['source']}"
    return len(new)
