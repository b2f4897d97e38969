"""One entry point for the GPU machine: calibrate + measure + trace, everything into one folder.

    PYTHONUNBUFFERED=1 python3 -m calibration.run_all --out $OUT [--quick] [--phase all|calibrate|measure]

Writes microbench.json (raw microbenchmark figures; build_profile.py turns it into a profile),
measured.json (decoder rows, rewritten after every row so a run cut short keeps what it did),
trace.json.gz (a torch.profiler Chrome trace) and prints a short summary last. Needs only torch and
the stdlib-only simulator.models/workload modules, so it runs where pydantic etc. are missing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def _dump(obj, path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def calibrate(out_dir, quick=False, log=print):
    from . import microbench as mb
    from . import streams as st
    from . import tables as tb

    t0 = time.time()
    res = {"kind": "launchsim-microbench", "quick": quick, "date": time.strftime("%Y-%m-%d"),
           "environment": mb.environment()}
    path = os.path.join(out_dir, "microbench.json")
    steps = [
        ("ceilings", mb.ceilings),
        ("host", lambda: mb.host_costs(1000 if quick else 4000)),
        ("gaps", st.gaps),
        ("graph", lambda: st.graph_costs((1, 10, 100, 1000) if quick else (1, 10, 100, 300, 1000))),
        ("compiled", lambda: mb.compiled_costs((1, 16) if quick else (1, 4, 16, 48))),
        ("curves", lambda: tb.curves(quick)),
        ("gemm", lambda: tb.gemm_tables(tb.gemm_shapes()[:3] if quick else tb.gemm_shapes(),
                                        (1, 64, 1024) if quick else tb.M_GRID)),
        ("attention", lambda: tb.attention_tables([(16, 8, 128), (32, 8, 128)],
                                                  (1, 64) if quick else tb.ATT_BATCH,
                                                  (128, 8192) if quick else tb.ATT_CTX)),
    ]
    for name, fn in steps:
        t1 = time.time()
        try:
            res[name] = fn()
        except Exception as e:  # noqa: BLE001
            import traceback

            res[name] = {"error": f"{type(e).__name__}: {e}"}
            traceback.print_exc()
        log(f"[calibrate] {name}: {time.time() - t1:.1f}s")
        _dump(res, path)
    res["wall_s"] = time.time() - t0
    _dump(res, path)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--phase", default="all", choices=("all", "calibrate", "measure"))
    a = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("run_all: no CUDA GPU visible to torch", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    log = lambda s: print(s, flush=True)  # noqa: E731
    summary = []
    if a.phase in ("all", "calibrate"):
        r = calibrate(a.out, a.quick, log)
        h = r.get("host", {}).get("paths", {})
        summary.append("host p50 us: " + ", ".join(f"{k}={v['p50']:.2f}" for k, v in h.items()))
        for key in ("gaps", "graph", "compiled", "ceilings"):
            v = r.get(key, {})
            if key == "gaps" and "eager_gap" in v:
                summary.append(f"eager gap {v['eager_gap']['p50']:.2f} us, graph gap {v['graph_gap']['p50']:.2f} us, "
                               f"tiny kernel {v['graph_kernel_dur']['p50']:.2f} us, graph total/node "
                               f"{v['graph_per_node_total']['p50']:.2f} us")
            elif key == "graph" and "replay_fixed_us" in v:
                summary.append(f"replay host {v['replay_fixed_us']:.2f} + {v['replay_per_node_us']:.4f}/node us; "
                               f"capture {v['capture_per_node_ms']:.4f} ms/node")
            elif key == "compiled" and "entry_us" in v:
                summary.append(f"compiled entry {v['entry_us']:.2f} us + {v['per_kernel_us']:.2f} us/kernel")
            elif key == "ceilings" and "copy_tbps" in v:
                summary.append(f"copy {v['copy_tbps']:.2f} TB/s, bf16 gemm {v['gemm_bf16_tflops']:.0f} TFLOP/s")
    if a.phase in ("all", "measure"):
        from . import measure

        path = os.path.join(a.out, "measured.json")
        res = measure.run(a.out, a.quick, log, save=lambda d: _dump(d, path))
        _dump(res, path)
        ok = [r for r in res["rows"] if "eager" in r]
        summary.append(f"measured rows: {len(ok)} ok, {len(res['rows']) - len(ok)} failed")
    print("==== summary ====")
    for s in summary:
        print(s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
