"""Round q on one H200 (issue 20): does a memory-bound kernel pay for the bytes the kernel before it wrote?

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_q --out FILE.json [--quick]

Run from the repository root. Why: round o found cuDNN's attention inside transformers' compiled step 98.6 us
right after two repeat_kv copies that wrote 336 MB, and round p the same call alone over rotating K/V 85.6 us. A
write leaves dirty lines in L2 that must reach HBM while the next kernel reads: if that is the cost, a read-only
kernel after a write of X bytes should take longer by about min(X, L2) / HBM bandwidth.

One timing process (forbid_profiler, canary at start and end), CUDA events around replays of graphs (5 replays,
p50) of UNITS pairs, each over buffers rotating past L2:

- `W(X); R`: a copy writing X MB (X = 0, 4, 16, 32, 64, 128, 256; X = 0: no write), then R, a read-only
  reduction (`torch.sum` of a 256 MB bf16 buffer into one value);
- `W(X)` alone and `R` alone (R after R).

extra(X) = t(W(X); R) - t(W(X)) - t(R): what R pays for the write before it. `--quick`: X in (0, 64) only.
"""

from __future__ import annotations

import argparse
import sys
import time

from calibration.scripts import round_h as H

XS_MB = (0, 4, 16, 32, 64, 128, 256)
R_MB = 256
UNITS = 8


def graph_us(fns, units, reps=5):
    import torch

    from calibration.microbench import _pct

    for f in fns:
        f(0)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for u in range(units):
            for f in fns:
                f(u)
    g.replay()
    torch.cuda.synchronize()
    xs = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        xs.append(a.elapsed_time(b) * 1e3 / units)
    del g
    return _pct(xs)["p50"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    import torch

    from calibration.hygiene import canary, check_canary, exit_code, forbid_profiler

    forbid_profiler()
    torch.set_grad_enabled(False)
    H.warm_host()
    t0 = time.time()
    res = {"kind": "launchsim-round-q-write-then-read", "quick": a.quick, "environment": H.env(),
           "canary_start": canary(), "units": UNITS, "read_mb": R_MB, "rows": [], "errors": []}
    bf = torch.bfloat16
    n_r = R_MB * 2**20 // 2
    reads = [torch.randn(n_r, device="cuda", dtype=bf) for _ in range(3)]
    def R(u):
        return reads[u % 3].sum(dtype=torch.float32)

    t_r = graph_us([R], UNITS)
    res["read_alone_us"] = t_r
    for x in ((0, 64) if a.quick else XS_MB):
        try:
            if x == 0:
                res["rows"].append({"write_mb": 0, "write_us": 0.0, "pair_us": graph_us([R, R], UNITS) - t_r,
                                    "read_us": t_r})
                continue
            n = x * 2**20 // 2
            sets = max(2, -(-512 // (2 * x)))
            src = [torch.randn(n, device="cuda", dtype=bf) for _ in range(sets)]
            dst = [torch.empty(n, device="cuda", dtype=bf) for _ in range(sets)]

            def W(u, src=src, dst=dst, sets=sets):
                dst[u % sets].copy_(src[u % sets])
            t_w = graph_us([W], UNITS)
            t_wr = graph_us([W, R], UNITS)
            res["rows"].append({"write_mb": x, "write_us": t_w, "pair_us": t_wr, "read_us": t_r,
                                "extra_us": t_wr - t_w - t_r})
            del src, dst
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001
            res["errors"].append({"what": f"X={x}", "error": H.err(e)})
    r0 = res["rows"][0]
    r0["extra_us"] = r0["pair_us"] - r0["read_us"]  # R after R: 0 by construction up to noise
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    H.dump(res, a.out)
    H.log(f"R alone {t_r:.1f} us; " + "; ".join(f"W {r['write_mb']} MB: {r['write_us']:.1f} us, W;R extra "
                                                  f"{r['extra_us']:+.1f} us" for r in res["rows"]))
    H.log(f"[summary] canary {res['canary']}; {len(res['rows'])} rows, {len(res['errors'])} errors")
    return exit_code(res["canary"])


if __name__ == "__main__":
    sys.exit(main())
