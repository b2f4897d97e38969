"""The device figures that used to sit in simulator code, written into the shipped profiles with their source
(calibration/make_profiles.py calls this; CPU only, no torch). A profile without one of these sections does not
fall back to H200 numbers: the command that needs it refuses with one line naming the field.

- `device.collective` (simulator/model/parallel.py's formulas): the NVLink 4 / NVSwitch figures below, PUBLISHED
  (H100 SXM, the same fabric as the H200), not measured by launchsim; each figure's source is in its `source`.
- `device.graph_memory_constants` (simulator/engine/graph_memory.py's shared-pool formula for a model without
  its own measured table): W, alpha, sigma as calibration/build_memory.py `fit_constants` fits them on the H200
  round-a memory files (the same constants each measured table carries).
- `host.startup` (simulator/engine/startup.py): calibration/fit_startup.py `derive` on the H200 start-up rows
  (make_profiles writes it into h200.json).

`add_to_measured(p)` sets the first two on the measured h200 profile; `carry(q, p)` copies all three from the
measured profile `p` into a profile `q` of another device (the derived h100-sxm, the datasheet profiles), each
source prefixed "H200 measured, applied to <q> by assumption" (the collective figures are H100 SXM published
ones and say so already); `datasheets(p)` does that to the shipped datasheet-*.json files.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

MiB = 1 << 20

# Published NVLink 4 collective figures (parallel.py's docstring gives the derivation of each).
NVLINK4_COLLECTIVE: dict = {
    "measured": False,
    "interconnect": "NVLink 4 through NVSwitch (HGX H100/H200): 450 GB/s per direction, 900 GB/s bidirectional per GPU",
    "custom_max_bytes": 8 * MiB,
    "custom_world_sizes": [2, 4, 6, 8],
    "custom_latency_us": {2: 3.7, 4: 4.8, 6: 5.35, 8: 5.9},
    "custom_algbw_gbps": {2: 57.4, 4: 40.1, 6: 38.85, 8: 37.6},
    "nccl_latency_us": {2: 10.0, 4: 12.0, 6: 12.0, 8: 15.0},
    "nccl_busbw_gbps": {2: 370.0, 4: 366.0, 6: 370.0, 8: 370.0},
    "launch_path": "custom_op",
    "source": ("UNMEASURED, published figures (H100 SXM, same NVLink 4/NVSwitch as H200): custom_latency_us = "
               "sgl-project/sglang PR #2904 custom allreduce 512 B rows (H100, no CUDA graph); custom_algbw_gbps = "
               "slope of vLLM custom allreduce rows 256 KiB -> 1 MiB in the same PR (n=6 interpolated); "
               "custom_max_bytes = vLLM CustomAllreduce(max_size=8192 * 1024); nccl_busbw_gbps = NVIDIA/nccl-tests "
               "issue #212 (ring ~370 GB/s effective on NVLink 4) and 366 GB/s all-reduce busbw on 4x H100 "
               "(waynehacking8 nccl-collectives-bench, 2026-05-31); nccl_latency_us = ASSUMED, no published "
               "H100/H200 small-message row found; launch_path = custom_op (measured H200 host figure of a C++ "
               "custom op, reused)"),
}


def collective_section() -> dict:
    """`device.collective` with JSON-shaped keys (GPU counts as strings, as json.dumps writes them)."""
    c = copy.deepcopy(NVLINK4_COLLECTIVE)
    for k in ("custom_latency_us", "custom_algbw_gbps", "nccl_latency_us", "nccl_busbw_gbps"):
        c[k] = {str(n): v for n, v in c[k].items()}
    return c


def graph_memory_constants(graph_memory: dict, where: str) -> dict:
    """The shared-pool constants of the measured tables (build_memory puts the same fit in every table)."""
    consts = [t["constants"] for t in graph_memory.values() if t.get("constants")]
    if not consts or any(c != consts[0] for c in consts):
        raise ValueError("graph_memory tables carry no constants, or differing ones: nothing to copy")
    c = dict(consts[0])
    c["source"] = f"H200 measured ({where}): {c.get('source', '')}"
    return c


def add_to_measured(p: dict, memory_dir: str) -> dict:
    """Set `device.collective` and `device.graph_memory_constants` on the measured profile `p` (in place)."""
    d = p["device"]
    d["collective"] = collective_section()
    d["graph_memory_constants"] = graph_memory_constants(d.get("graph_memory", {}), memory_dir)
    return p


def _assumed(src: str, name: str) -> str:
    return f"H200 measured, applied to {name} by assumption: {src}"


def carry(q: dict, p: dict) -> dict:
    """Copy the measured profile p's start-up, graph-memory constants and collective sections into q (in place),
    naming where they came from."""
    name = q["name"]
    st = copy.deepcopy(p["host"]["startup"])
    st["source"] = _assumed(st.get("source", ""), name)
    q["host"]["startup"] = st
    gm = copy.deepcopy(p["device"]["graph_memory_constants"])
    gm["source"] = _assumed(gm.get("source", "").removeprefix("H200 measured "), name)
    q["device"]["graph_memory_constants"] = gm
    q["device"]["collective"] = copy.deepcopy(p["device"]["collective"])
    return q


def datasheets(p: dict, profiles: Path) -> list[Path]:
    """Write the sections into every shipped datasheet-*.json (the rest of each file is kept as it is)."""
    from simulator.model.profile import parse_profile

    from .build_profile import write_json_atomic

    out = []
    for f in sorted(profiles.glob("datasheet-*.json")):
        q = carry(json.loads(f.read_text()), p)
        parse_profile(q, str(f))
        write_json_atomic(q, f)
        out.append(f)
    return out


__all__ = [
    "NVLINK4_COLLECTIVE",
    "add_to_measured",
    "carry",
    "collective_section",
    "datasheets",
    "graph_memory_constants",
]
