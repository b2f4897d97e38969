"""Rebuild the shipped profiles from the committed raw measurements (CPU only, no torch):

    python -m calibration.make_profiles

reads calibration/measured/h200-microbench.json (microbenchmarks) and h200-decode.json (its
graph-memory table, and the designated fit rows for the two fitted host figures, see validate.py),
writes calibration/profiles/h200.json (measured) and h100-sxm.json (derived by datasheet ratios).
"""

from __future__ import annotations

import json
from pathlib import Path

from simulator.profile import parse_profile

from .build_profile import build, derive_h100, write_json_atomic
from .validate import fit_host

ROOT = Path(__file__).resolve().parent
MEASURED = ROOT / "measured"
PROFILES = ROOT / "profiles"


def main() -> None:
    mb = json.loads((MEASURED / "h200-microbench.json").read_text())
    ms = json.loads((MEASURED / "h200-decode.json").read_text())
    p = build(mb, ms, name="h200")
    p, note = fit_host(ms, p)
    p["notes"] += (f" Fitted on decode rows (and so not scored in calibration/validation): {note}. "
                   f"Unfitted microbenchmark figures: eager context factor {mb['host']['context']['factor']:.3f}, "
                   f"compiled {mb['compiled']['per_kernel_us']:.1f} us per Triton launch.")
    p["host"]["source"] += "; eager scale and compiled per-launch cost fitted as the notes say"
    gap_file = MEASURED / "h200-node-gap.json"
    if gap_file.exists():  # per-node gap between real decoder kernels (calibration/node_gap.py)
        p["device"]["graph_node_trace_us"] = json.loads(gap_file.read_text())["graph_node_trace_us"]
        p["device"]["source"] += ("; graph_node_trace_us from profiled llama3-8b graph replays "
                                  "(calibration/node_gap.py)")
    parse_profile(p, "h200")
    write_json_atomic(p, PROFILES / "h200.json")
    q = derive_h100(p)
    parse_profile(q, "h100-sxm")
    write_json_atomic(q, PROFILES / "h100-sxm.json")
    print(f"wrote {PROFILES / 'h200.json'} and {PROFILES / 'h100-sxm.json'}: {note}")


if __name__ == "__main__":
    main()
