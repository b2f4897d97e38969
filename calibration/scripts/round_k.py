"""Round k on one H200 (issue 20): cuBLAS bf16 GEMMs over a generic grid of (n, k), time and kernel count.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_k --out DIR [--quick] [--deadline S]

Run from the repository root. Why: a user's own model has GEMM shapes the profile's tables (taken at the two fit
models' shapes) do not hold; they are priced by simulator/model/gemm_model.py from the nearest tables, and cuBLAS's
split-K choice (a GEMM plus a reduce kernel) is taken from the nearest counted table -- wrong for qwen3-4b's
(1024, 2560)-like shapes (its kernels per step +3.0..+4.5 %, impl_hf.md). This round measures a grid chosen by a
rule, not from any model: every (n, k) with n, k in

    DIMS = 256, 512, ..., 4096 (step 256) + 4608, ..., 8192 (step 512) + 9216, ..., 16384 (step 1024)

(32 values, 1,024 shapes), at every M of calibration/tables.M_GRID (1-1024), with the profile's own method:

- `timing.json`: one timing process (forbid_profiler, canary at start and end): calibration/tables.py
  `gemm_tables` (per-op time of F.linear(x[m, k], w[n, k]) in a replayed CUDA graph, weights rotated over >= 192 MB
  up to 32 copies), in calibration/measured/h200-round-b's `timing.json["gemm"]` format.
- `counts.json.gz`: a separate process (profiler on; never timed): the kernels each call launches, by name, with a
  fill kernel as the separator (calibration/child_counts.py's method), one profiler session per n.

`--quick`: 4 shapes, M 1 and 64 (a pipeline check; not kept). The summary is printed last.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time

DIMS = tuple(range(256, 4097, 256)) + tuple(range(4608, 8193, 512)) + tuple(range(9216, 16385, 1024))
# `--set lora` (round ah, an H100): a LoRA adapter's GEMMs, x @ A (n = r, k = d) and (x A) @ B (n = d, k = r), at
# the ranks PEFT users pick (powers of two from the fallback's MIN_DIM, 16, to 128; 256 is in DIMS) against every d
RANKS = (16, 32, 64, 128)


def shapes(quick: bool, which: str = "grid") -> list[tuple[int, int]]:
    """`which`: "grid" (DIMS x DIMS) or "named" (the profile's GEMM tables' shapes)."""
    if which == "named":  # the two fit models' GEMMs at every fusion level (calibration/tables.gemm_shapes: needs
        from calibration.tables import gemm_shapes  # simulator's pydantic models, carried as wheels)

        return gemm_shapes()[:3] if quick else gemm_shapes()
    if which == "lora":
        if quick:
            return [(16, 1024), (1024, 16), (64, 4096), (4096, 64)]
        return [(r, d) for r in RANKS for d in DIMS] + [(d, r) for d in DIMS for r in RANKS]
    if quick:
        return [(1024, 1024), (1024, 2560), (2560, 9216), (4096, 4096)]
    return [(n, k) for n in DIMS for k in DIMS]


def m_grid(quick: bool):
    from calibration.tables import M_GRID

    return (1, 64) if quick else M_GRID


def _dump(obj, path):
    tmp = path + ".tmp"
    if path.endswith(".gz"):
        with gzip.open(tmp, "wt") as f:
            json.dump(obj, f)
    else:
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def job_timing(out: str, quick: bool, deadline: float, which: str = "grid") -> int:
    import torch

    from calibration.hygiene import canary, check_canary, exit_code, forbid_profiler
    from calibration.scripts import round_h as H
    from calibration.tables import gemm_tables

    forbid_profiler()
    torch.set_grad_enabled(False)
    H.warm_host()
    t0 = time.time()
    res = {"kind": "launchsim-round-k-gemm-timing", "quick": quick, "environment": H.env(), "canary_start": canary(),
           "dims": list(DIMS), "m": list(m_grid(quick)), "gemm": [], "errors": []}
    todo = shapes(quick, which)
    for i, (n, k) in enumerate(todo):
        if time.time() - t0 > deadline:
            res["errors"].append({"what": f"({n}, {k}) and {len(todo) - i - 1} later shapes", "error": "deadline"})
            break
        try:
            res["gemm"] += gemm_tables([(n, k)], m_grid(quick))
        except Exception as e:  # noqa: BLE001 (recorded; one shape must not lose the round)
            res["errors"].append({"what": f"({n}, {k})", "error": H.err(e)})
        torch.cuda.empty_cache()
        if i % 64 == 63:
            _dump(res, out)
            H.log(f"timing: {i + 1}/{len(todo)} shapes in {time.time() - t0:.0f} s")
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    _dump(res, out)
    H.log(f"[timing canary] {res['canary']}; {len(res['gemm'])} shapes in {res['wall_s']:.0f} s")
    return exit_code(res["canary"])


def _count(chunk, ms) -> dict:
    """Kernel names and µs of each F.linear call in one profiler session (calibration/child_counts.linear_kernels)."""
    import torch

    from calibration.child_counts import linear_kernels

    calls = []
    for n, k in chunk:
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        for m in ms:
            calls.append(((n, k, m), w, torch.randn(m, k, device="cuda", dtype=torch.bfloat16)))
    groups = linear_kernels(calls)
    if len(groups) != len(calls):
        raise RuntimeError(f"{len(groups)} groups for {len(calls)} calls")
    return {f"{n},{k},{m}": [[e["name"][:120], round(e["dur"], 3)] for e in g]
            for ((n, k, m), _, _), g in zip(calls, groups)}


def job_counts(out: str, quick: bool, deadline: float, which: str = "grid") -> int:
    import torch

    from calibration.scripts import round_h as H

    torch.set_grad_enabled(False)
    t0 = time.time()
    res = {"kind": "launchsim-round-k-gemm-counts", "quick": quick, "environment": H.env(), "m": list(m_grid(quick)),
           "calls": {}, "errors": []}
    todo = shapes(quick, which)
    by_n: dict[int, list] = {}
    for n, k in todo:
        by_n.setdefault(n, []).append((n, k))
    for n, chunk in by_n.items():
        if time.time() - t0 > deadline:
            res["errors"].append({"what": f"n = {n} and later", "error": "deadline"})
            break
        try:
            res["calls"].update(_count(chunk, m_grid(quick)))
        except Exception as e:  # noqa: BLE001
            res["errors"].append({"what": f"n = {n}", "error": H.err(e)})
        torch.cuda.empty_cache()
    res["wall_s"] = time.time() - t0
    _dump(res, out)
    H.log(f"counts: {len(res['calls'])} calls in {res['wall_s']:.0f} s, {len(res['errors'])} errors")
    return 0


def summary(out_dir: str) -> None:
    t = json.load(open(os.path.join(out_dir, "timing.json")))
    with gzip.open(os.path.join(out_dir, "counts.json.gz"), "rt") as f:
        c = json.load(f)
    split = sum(len(v) > 1 for v in c["calls"].values())
    print(f"[summary] timing: {len(t['gemm'])} shapes, {len(t['errors'])} errors, canary {t['canary']['host_start_us']:.2f}"
          f" -> {t['canary']['host_end_us']:.2f} us ok={t['canary']['ok']}, {t['wall_s']:.0f} s")
    print(f"[summary] counts: {len(c['calls'])} calls, {split} with more than one kernel, {len(c['errors'])} errors, "
          f"{c['wall_s']:.0f} s")
    for row in t["gemm"][:: max(1, len(t["gemm"]) // 12)]:
        ks = [len(c["calls"].get(f"{row['n']},{row['k']},{m}", [])) for m in row["m"]]
        print(f"  ({row['n']}, {row['k']}): us {[round(u, 1) for u in row['graph_us']]} kernels {ks}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="output folder (driver) or file (--job)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=420.0, help="seconds for the whole round")
    ap.add_argument("--job", choices=("timing", "counts"))
    ap.add_argument("--set", choices=("grid", "named", "lora"), default="grid",
                    help="grid: DIMS x DIMS (round k); named: the GEMM tables' shapes (round ac, an H100's own tables); "
                         "lora: RANKS x DIMS both ways (round ah, a LoRA adapter's GEMMs)")
    a = ap.parse_args(argv)
    if a.job == "timing":
        return job_timing(a.out, a.quick, a.deadline, a.set)
    if a.job == "counts":
        return job_counts(a.out, a.quick, a.deadline, a.set)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    rc = 0
    for job, name, share in (("timing", "timing.json", 0.6), ("counts", "counts.json.gz", 0.95)):
        left = a.deadline * share - (time.time() - t0)
        cmd = [sys.executable, "-m", "calibration.scripts.round_k", "--job", job, "--out",
               os.path.join(a.out, name), "--deadline", str(max(10.0, left)), "--set", a.set] + (["--quick"] if a.quick else [])
        r = subprocess.run(cmd)  # separate processes: the counts process profiles, the timing one never does
        rc = rc or r.returncode
    summary(a.out)
    return rc


if __name__ == "__main__":
    sys.exit(main())
