"""Depth sweep: the reference decoder cut to 1, 2 and 4 layers, timed in a clean process.

    PYTHONUNBUFFERED=1 python3 -m calibration.depth_sweep --out DIR

Two per-step costs are not visible in single-op microbenchmarks and are measured here, on real decoder
code but never on the full-depth rows the validation scores:
- the device cost per node of a replayed graph of *real decoder kernels* (each node depends on the one
  before; a graph of identical tiny nodes does not show it): the slope of the graph replay's device
  time (CUDA events) over depth, minus the slope of the kernel-table prediction, per node;
- the host cost per layer of Inductor's generated wrapper (per-kernel launcher calls, buffer
  allocations, reinterpret views, guards over each layer's weights): the slope of the compiled call's
  host issue time over depth (torch.compile with dynamic=False at batch 1, and dynamic=True at 16).
Eager host time per layer is recorded the same way (a check on the mixed-block context factor).
Timing hygiene as in child_timing.py: profiler forbidden, canary at both ends (exit 3 on drift).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

from .child_timing import _device_ms, _isolated, _pipelined
from .hygiene import canary, check_canary, forbid_profiler
from .jsonio import dump as _dump

DEPTHS = (1, 2, 4)
CONFIGS = (("qwen3-0.6b", "none", 1, False), ("qwen3-0.6b", "packed", 1, False), ("llama3-8b", "none", 1, False),
           ("qwen3-0.6b", "compiled", 1, False), ("qwen3-0.6b", "compiled", 16, True))


def run_config(name, fusion, batch, dyn, depth):
    import torch

    from simulator.model.models import PRESETS

    from .reference_decoder import Runner, make_weights

    m = dataclasses.replace(PRESETS[name], num_hidden_layers=depth)
    t0 = time.time()
    r = Runner(m, fusion, batch, 512, weights=make_weights(m), dynamic=dyn)
    for _ in range(3):
        r.step()
    torch.cuda.synchronize()
    row = {"model": name, "fusion": fusion, "batch": batch, "ctx": 512, "dynamic": dyn, "layers": depth,
           "setup_s": time.time() - t0, "eager": {"isolated": _isolated(r.step, 40), "pipelined": _pipelined(r.step, 20)}}
    r.capture(warmup=2)
    for _ in range(3):
        r.replay()
    row["full"] = {"isolated": _isolated(r.replay, 40), "device_ms": _device_ms(r.replay, 30)}
    r.release()
    return row


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    import torch

    from .microbench import environment

    forbid_profiler()
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "depth.json")
    torch.zeros(1, device="cuda")
    res = {"kind": "launchsim-depth-sweep", "date": time.strftime("%Y-%m-%d"), "environment": environment(),
           "canary_start": canary(), "rows": []}
    # this machine's own microbenchmarks, so that depth slopes are compared with figures from one host
    from . import microbench as mb

    res["host"] = mb.host_costs(2000)
    res["compiled"] = mb.compiled_costs((1, 4, 16, 48), n=400)
    res["compiled_extern"] = mb.compiled_extern_costs((1, 4, 16), n=400)
    _dump(res, path)
    for name, fusion, batch, dyn in CONFIGS:
        for d in DEPTHS:
            try:
                row = run_config(name, fusion, batch, dyn, d)
                print(f"{name} {fusion} b{batch} L{d}: host {row['eager']['isolated']['host_ms']['p50']:.3f} ms, "
                      f"eager {row['eager']['isolated']['step_ms']['p50']:.3f} ms, graph device "
                      f"{row['full']['device_ms']['p50']:.4f} ms (setup {row['setup_s']:.1f}s)", flush=True)
            except Exception as e:  # noqa: BLE001
                row = {"model": name, "fusion": fusion, "batch": batch, "layers": d, "error": f"{type(e).__name__}: {e}"[:300]}
                print("ERROR", row, flush=True)
            res["rows"].append(row)
            _dump(res, path)
            torch.cuda.empty_cache()
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    _dump(res, path)
    c = res["canary"]
    print(f"canary {c['host_start_us']:.2f} -> {c['host_end_us']:.2f} us: {'OK' if c['ok'] else 'FAILED'}", flush=True)
    return 0 if c["ok"] else 3


if __name__ == "__main__":
    sys.exit(main())
