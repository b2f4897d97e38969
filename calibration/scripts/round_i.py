"""Round i on one H200 (issue 20): what the compiled step's host cost follows, and what Inductor's kernels cost.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_i --out DIR [--quick] [--deadline S]   # whole round
    python3 -m calibration.scripts.round_i --out DIR --job JOB [--quick]                          # one process

Run from the repository root. Two questions left open by round h (calibration/validation/independent_compile.md):
(1) compiled eager steps did not slow with the per-row host canary where eager steps did: does a compiled step's host
time follow the tiny-op canary, a Triton-launch probe, or neither, when the same process sees the host in its fast
and its slow state? (2) launchsim prices Inductor's fused kernels with the eager byte curves, and a compiled + graph
step's GPU busy came out +14-16 % against CUPTI at batch 1: what does a Triton kernel cost against bytes moved?

Jobs, each its own child process, in this order:
- `warm:KEY` (not timed, run in parallel first): compile each decoder configuration the timing job uses, and the
  curve functions, to fill the Inductor / Triton caches (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR).
- `host` (timing process: forbid_profiler, canary at both ends): builds every row once (below), then runs passes
  until its deadline. A pass: three host probes (the tiny-op canary of calibration.hygiene; `triton_probe`: host
  us per call of a compiled fn launching 16 independent Triton kernels, 60 calls; `py_probe`: ns per iteration of
  a pure-Python loop), then every row in a seeded shuffled order, each row: canary, 3 warm-ups, 10 isolated steps
  (sync, step, sync), canary. Rows: reference decoder (calibration/reference_decoder.py, the calibration's own
  code) qwen3-0.6b 28 layers eager b1, compiled static b1 and b16, 4 layers compiled b1; independent decoder
  (calibration/independent_decoder.py) qwen3-0.6b eager b1, compiled static b1 and b16, llama-3.2-1b compiled b1.
- `triton` (timing process): per-kernel device time of Inductor kernels against bytes read + written, as
  calibration/tables.py's curves are taken (16 calls in one replayed CUDA graph, median of 5 replays, per call):
  pointwise (silu(a)*b, a+b, a norm epilogue (a.float()*r).to(bf16)*w), persistent reductions (RMSNorm over rows
  of 1024 and of 128, residual add + RMSNorm), a looped reduction (RMSNorm over rows of 8192), sizes 2^10..2^26
  elements; and microbench.compiled_costs (host us per Triton kernel, the profile's `compiled` figure) beside it.
- `counts` (profiled process, after all timing): kernels per call of every curve function (each must be one
  kernel), and for compiled steps (reference qwen3-0.6b b1 and b64, independent qwen3-0.6b b1 and b64) the ordered
  kernel list of one step (name, CUPTI us, grid) and kernel-time sums by kind.
Results: DIR/*.json and a summary printed last.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
import traceback

from calibration import independent_decoder as D
from calibration.scripts import round_h as H

CTX, ROOM = 512, 128
SEED = 20261203
CURVE_EXPS = tuple(range(10, 27, 2))
HOST_ROWS = ("ref_eager_b1", "ref_c28_b1", "ref_c28_b16", "ref_c4_b1", "ind_eager_b1", "ind_c_b1", "ind_c_b16",
             "indl_c_b1")
COUNT_ROWS = ("ref_c28_b1", "ref_c28_b64", "ind_c_b1", "ind_c_b64")

log, dump, err, sync = H.log, H.dump, H.err, H.sync


def setup_compile():
    import torch

    torch.set_grad_enabled(False)
    torch._dynamo.config.cache_size_limit = 64
    torch._dynamo.config.accumulated_cache_size_limit = 4096


# ------------------------------------------------------------------------------------------------ rows
def make_row(key: str, quick: bool):
    """(step fn, description) of one row key: `ref_eager_b1`, `ref_c28_b16`, `ind_c_b1`, `indl_c_b1`, ..."""
    import dataclasses

    import torch

    from calibration.reference_decoder import Runner, model_spec

    src, mode, b = key.split("_")
    b = int(b[1:])
    if src == "ref":
        m = model_spec("qwen3-0.6b", quick)
        layers = 2 if quick else (m.num_hidden_layers if mode in ("eager", "c28") else int(mode[1:]))
        m = dataclasses.replace(m, num_hidden_layers=layers)
        r = Runner(m, "none" if mode == "eager" else "compiled", b, CTX, dynamic=False)
        r.step()
        sync()
        return r.step, {"decoder": "reference", "model": "qwen3-0.6b", "layers": layers, "batch": b, "ctx": CTX,
                        "mode": "eager" if mode == "eager" else "compiled", "dynamic": False}
    name = "qwen3-0.6b" if src == "ind" else "llama-3.2-1b"
    c = D.config(name, 2 if quick else None)
    model, idx, pos = D.build(name, b, CTX + ROOM, CTX, c.n_layers, SEED)
    f = model if mode == "eager" else torch.compile(model, mode="default", dynamic=False)
    f(idx, pos)
    sync()
    return (lambda: f(idx, pos)), {"decoder": "independent", "model": name, "layers": c.n_layers, "batch": b,
                                   "ctx": CTX, "mode": "eager" if mode == "eager" else "compiled", "dynamic": False}


def triton_probe_fn():
    """A compiled fn launching 16 independent Triton pointwise kernels (microbench.compiled_costs' k = 16 shape)."""
    import torch

    xs = [torch.randn(256, device="cuda") + i for i in range(16)]

    def f(*xs):
        return [x * 2.0 + 1.0 for x in xs]

    cf = torch.compile(f, dynamic=False)
    for _ in range(3):
        cf(*xs)
    sync()
    return lambda: cf(*xs)


def time_calls_us(fn, n: int, sync_every: int = 20) -> dict:
    pc = time.perf_counter_ns
    xs = []
    sync()
    for i in range(n):
        t0 = pc()
        fn()
        xs.append((pc() - t0) / 1e3)
        if i % sync_every == sync_every - 1:
            sync()
    sync()
    return H.pct(xs)


def py_probe_ns(n: int = 200_000) -> float:
    """ns per iteration of a fixed pure-Python loop (attribute, dict and arithmetic work, no torch)."""
    class O:
        __slots__ = ("v",)

        def __init__(self):
            self.v = 0

    o, d = O(), {"a": 1}
    t0 = time.perf_counter_ns()
    for i in range(n):
        o.v = (o.v + d["a"] * i) & 0xFFFF
    return (time.perf_counter_ns() - t0) / n


# ------------------------------------------------------------------------------------------------ curves
def curve_fns(e: int):
    """[(family, name, fn, bytes read + written)] at 2^e elements (bf16 activations, fp32 where Inductor upcasts)."""
    import torch
    import torch.nn.functional as F

    bf = torch.bfloat16
    n = 1 << e
    rows = max(1, n // 1024)
    a = torch.randn(rows, 1024, device="cuda", dtype=bf)
    b = torch.randn(rows, 1024, device="cuda", dtype=bf)
    r = torch.rand(rows, 1, device="cuda") + 0.5
    w = torch.randn(1024, device="cuda", dtype=bf)
    h128 = torch.randn(max(1, n // 128), 128, device="cuda", dtype=bf)
    w128 = torch.randn(128, device="cuda", dtype=bf)
    rows8k = max(1, n // 8192)
    h8k = torch.randn(rows8k, 8192, device="cuda", dtype=bf)
    w8k = torch.randn(8192, device="cuda", dtype=bf)

    def rms(x, wt):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(bf) * wt

    def add_rms(x, res, wt):
        s = x + res
        return rms(s, wt), s

    C = lambda fn: torch.compile(fn, dynamic=False)  # noqa: E731
    silu_mul, add, epi = C(lambda x, y: F.silu(x) * y), C(lambda x, y: x + y), C(lambda x, s, wt: (x.float() * s).to(bf) * wt)
    rms_c, add_rms_c = C(rms), C(add_rms)
    n1, n128, n8k = rows * 1024, h128.numel(), h8k.numel()
    return [
        ("pointwise", "silu_mul", lambda: silu_mul(a, b), 6 * n1),
        ("pointwise", "add", lambda: add(a, b), 6 * n1),
        ("pointwise", "norm_epilogue", lambda: epi(a, r, w), 4 * n1 + 4 * rows + 2048),
        ("reduction", "rmsnorm_1024", lambda: rms_c(a, w), 4 * n1 + 2048),
        ("reduction", "rmsnorm_128", lambda: rms_c(h128, w128), 4 * n128 + 256),
        ("reduction", "add_rmsnorm_1024", lambda: add_rms_c(a, b, w), 8 * n1 + 2048),
        ("reduction_loop", "rmsnorm_8192", lambda: rms_c(h8k, w8k), 4 * n8k + 16384),
    ]


def job_triton(out_dir, quick, deadline):
    import torch

    from calibration.hygiene import canary, check_canary, exit_code, forbid_profiler
    from calibration.microbench import compiled_costs
    from calibration.tables import graph_op_us

    forbid_profiler()
    setup_compile()
    H.warm_host()
    t0 = time.time()
    path = os.path.join(out_dir, "triton.json")
    res = {"kind": "launchsim-round-i-triton", "quick": quick, "environment": H.env(), "canary_start": canary(),
           "points": [], "errors": []}
    for e in CURVE_EXPS[::3] if quick else CURVE_EXPS:
        if time.time() - t0 > deadline - 20:
            res["errors"].append({"what": f"2^{e} and larger", "error": "deadline"})
            break
        try:
            for fam, name, fn, nbytes in curve_fns(e):
                fn()
                sync()
                res["points"].append({"family": fam, "name": name, "exp": e, "bytes": nbytes,
                                      "graph_us": graph_op_us([fn] * 16)})
            log(f"[triton] 2^{e}: " + ", ".join(f"{p['name']} {p['graph_us']:.2f}" for p in res["points"]
                                                 if p["exp"] == e))
        except Exception as ex:  # noqa: BLE001
            traceback.print_exc()
            res["errors"].append({"what": f"2^{e}", "error": err(ex)})
        dump(res, path)
        torch.cuda.empty_cache()
    try:
        res["compiled_costs"] = compiled_costs(n=300 if quick else 600)
    except Exception as ex:  # noqa: BLE001
        res["errors"].append({"what": "compiled_costs", "error": err(ex)})
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    dump(res, path)
    return exit_code(res["canary"])


# ------------------------------------------------------------------------------------------------ host
def job_host(out_dir, quick, deadline):
    from calibration.hygiene import canary, check_canary, exit_code, forbid_profiler

    forbid_profiler()
    setup_compile()
    H.warm_host()
    t0 = time.time()
    path = os.path.join(out_dir, "host.json")
    res = {"kind": "launchsim-round-i-host", "quick": quick, "environment": H.env(), "canary_start": canary(),
           "rows": {}, "passes": [], "errors": []}
    fns = {}
    for key in HOST_ROWS:
        try:
            ts = time.time()
            fns[key], res["rows"][key] = make_row(key, quick)
            res["rows"][key]["build_s"] = time.time() - ts
            log(f"[host] built {key} in {time.time() - ts:.1f}s")
        except Exception as ex:  # noqa: BLE001
            traceback.print_exc()
            res["errors"].append({"what": f"build {key}", "error": err(ex)})
    probe = triton_probe_fn()
    dump(res, path)
    rng = random.Random(SEED)
    p = 0
    est = 3.0
    while time.time() - t0 < deadline - est - 10 and (not quick or p < 2):
        tp = time.time()
        c = canary()
        ps = {"pass": p, "t": time.time() - t0, "canary": H.can(c), "triton_probe_us": time_calls_us(probe, 60),
              "py_probe_ns": py_probe_ns(), "rows": []}
        order = list(fns)
        rng.shuffle(order)
        for key in order:
            try:
                c0 = canary(1500)
                t = H.iso_ms(fns[key], warm=3, reps=10)
                c1 = canary(1500)
                ps["rows"].append({"row": key, "step_ms": t, "canary_before_us": c0["host_tiny_op_us"]["p50"],
                                   "canary_after_us": c1["host_tiny_op_us"]["p50"]})
            except Exception as ex:  # noqa: BLE001
                res["errors"].append({"what": f"pass {p} {key}", "error": err(ex)})
        ps["triton_probe_after_us"] = time_calls_us(probe, 60)
        res["passes"].append(ps)
        est = max(est, time.time() - tp)
        log(f"[host] pass {p} ({time.time() - tp:.1f}s): canary {ps['canary']['host_us']:.2f} us, triton "
            f"{ps['triton_probe_us']['median']:.1f} us/call, py {ps['py_probe_ns']:.1f} ns; "
            + ", ".join(f"{r['row']} {r['step_ms']['median']:.2f}" for r in ps["rows"]))
        dump(res, path)
        p += 1
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    dump(res, path)
    return exit_code(res["canary"])


# ------------------------------------------------------------------------------------------------ counts
def ordered_kernels(fn) -> dict:
    """One profiled call of fn (after a profiler warm-up call): its kernels in order (name, us, grid)."""
    from torch.profiler import ProfilerActivity, profile

    for i in range(2):
        sync()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            sync()
        tmp = f"/tmp/round_i_trace_{os.getpid()}_{i}.json"
        prof.export_chrome_trace(tmp)
        with open(tmp) as f:
            d = json.load(f)
        os.unlink(tmp)
    evs = d.get("traceEvents", d) if isinstance(d, dict) else d
    ks = sorted((e for e in evs if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") == "kernel"),
                key=lambda e: e["ts"])
    by: dict = {}
    for e in ks:
        k = H.kind(e["name"])
        by[k] = by.get(k, 0.0) + e.get("dur", 0.0)
    return {"kernels": len(ks), "kernel_us": sum(e.get("dur", 0.0) for e in ks), "us_by_kind": by,
            "list": [[e["name"][:120], e.get("dur", 0.0), (e.get("args") or {}).get("grid")] for e in ks]}


def job_counts(out_dir, quick, deadline):
    import torch

    setup_compile()
    t0 = time.time()
    path = os.path.join(out_dir, "counts.json")
    res = {"kind": "launchsim-round-i-counts", "quick": quick, "environment": H.env(), "curves": [], "steps": {},
           "errors": []}
    for e in CURVE_EXPS[::3] if quick else CURVE_EXPS[::2]:
        try:
            for fam, name, fn, nbytes in curve_fns(e):
                fn()
                sync()
                k = ordered_kernels(fn)
                res["curves"].append({"family": fam, "name": name, "exp": e, "bytes": nbytes, "kernels": k["kernels"],
                                      "names": [x[0] for x in k["list"]], "kernel_us": k["kernel_us"]})
        except Exception as ex:  # noqa: BLE001
            traceback.print_exc()
            res["errors"].append({"what": f"curves 2^{e}", "error": err(ex)})
        dump(res, path)
        torch.cuda.empty_cache()
    for key in ("ref_c28_b1", "ind_c_b1") if quick else COUNT_ROWS:
        if time.time() - t0 > deadline - 20:
            res["errors"].append({"what": key, "error": "deadline"})
            continue
        try:
            fn, desc = make_row(key, quick)
            for _ in range(3):
                fn()
            sync()
            res["steps"][key] = {**desc, **ordered_kernels(fn)}
            log(f"[counts] {key}: {res['steps'][key]['kernels']} kernels, {res['steps'][key]['kernel_us']:.0f} us")
        except Exception as ex:  # noqa: BLE001
            traceback.print_exc()
            res["errors"].append({"what": key, "error": err(ex)})
        dump(res, path)
        torch.cuda.empty_cache()
    return 0


def job_warm(out_dir, key, quick):
    setup_compile()
    t0 = time.time()
    if key == "curves":
        for e in CURVE_EXPS[::3] if quick else CURVE_EXPS:
            for _fam, _name, fn, _b in curve_fns(e):
                fn()
        triton_probe_fn()
    else:
        make_row(key, quick)
    dump({"job": key, "compile_s": time.time() - t0}, os.path.join(out_dir, "warm", key + ".json"))
    log(f"[warm] {key}: {time.time() - t0:.1f}s")
    return 0


# ------------------------------------------------------------------------------------------------ driver
def summary(out_dir) -> list[str]:
    out = []
    try:
        with open(os.path.join(out_dir, "host.json")) as f:
            h = json.load(f)
        rows: dict = {}
        for ps in h["passes"]:
            for r in ps["rows"]:
                rows.setdefault(r["row"], []).append((0.5 * (r["canary_before_us"] + r["canary_after_us"]),
                                                      r["step_ms"]["median"], ps["triton_probe_us"]["median"]))
        out.append(f"host: {len(h['passes'])} passes; canary {h.get('canary', {})}")
        out.append("row | n | median ms | fast (canary<=7.6) median ms (n) | slow (>=8.5) median ms (n) | "
                   "corr(step, canary) | corr(step, triton probe)")
        for k, v in rows.items():
            ms = sorted(x[1] for x in v)
            fast = sorted(x[1] for x in v if x[0] <= 7.6)
            slow = sorted(x[1] for x in v if x[0] >= 8.5)

            def med(s):
                return f"{s[len(s) // 2]:.3f}" if s else "-"

            def corr(i):
                xs, ys = [x[i] for x in v], [x[1] for x in v]
                mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
                sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
                sy = math.sqrt(sum((y - my) ** 2 for y in ys))
                return f"{sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / (sx * sy):.2f}" if sx and sy else "-"
            out.append(f"{k} | {len(v)} | {med(ms)} | {med(fast)} ({len(fast)}) | {med(slow)} ({len(slow)}) | "
                       f"{corr(0)} | {corr(2)}")
    except Exception as ex:  # noqa: BLE001
        out.append(f"host: {err(ex)}")
    try:
        with open(os.path.join(out_dir, "triton.json")) as f:
            t = json.load(f)
        out.append(f"triton: {len(t['points'])} points; canary {t.get('canary', {})}; compiled_costs per kernel "
                   f"{t.get('compiled_costs', {}).get('per_kernel_us', float('nan')):.2f} us")
        for p in t["points"]:
            if p["exp"] in (10, 18, 26):
                out.append(f"  {p['name']} 2^{p['exp']}: {p['graph_us']:.2f} us ({p['bytes'] / 1e6:.3f} MB)")
    except Exception as ex:  # noqa: BLE001
        out.append(f"triton: {err(ex)}")
    try:
        with open(os.path.join(out_dir, "counts.json")) as f:
            c = json.load(f)
        bad = [(x["name"], x["exp"], x["kernels"]) for x in c["curves"] if x["kernels"] != 1]
        out.append(f"counts: {len(c['curves'])} curve checks, not one kernel: {bad}; steps: "
                   + ", ".join(f"{k} {v['kernels']} k {v['kernel_us']:.0f} us" for k, v in c["steps"].items()))
    except Exception as ex:  # noqa: BLE001
        out.append(f"counts: {err(ex)}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--job", default="all")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=540.0)
    a = ap.parse_args(argv)
    os.makedirs(os.path.join(a.out, "warm"), exist_ok=True)
    if a.job != "all":
        kind, _, rest = a.job.partition(":")
        fn = {"warm": lambda: job_warm(a.out, rest, a.quick), "host": lambda: job_host(a.out, a.quick, a.deadline),
              "triton": lambda: job_triton(a.out, a.quick, a.deadline),
              "counts": lambda: job_counts(a.out, a.quick, a.deadline)}.get(kind)
        if fn is None:
            raise SystemExit(f"unknown job {a.job}")
        return fn()
    t0 = time.time()
    envv = dict(os.environ, PYTHONUNBUFFERED="1")
    envv.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/round-i-inductor")
    envv.setdefault("TRITON_CACHE_DIR", "/tmp/round-i-triton")
    q = ["--quick"] if a.quick else []
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    status: dict = {}
    me = [sys.executable, "-m", "calibration.scripts.round_i", "--out", a.out]

    def left():
        return a.deadline - (time.time() - t0)

    def save_status():
        dump({"status": status, "total_s": time.time() - t0, "deadline_s": a.deadline},
             os.path.join(a.out, "round_status.json"))

    warm = ["curves"] + sorted(k for k in set(HOST_ROWS) | set(COUNT_ROWS) if "_eager_" not in k)
    warm_limit = 80 if a.quick else 170
    wenv = dict(envv, TORCHINDUCTOR_COMPILE_THREADS="1")
    running = {}
    for j in warm:
        lf = open(os.path.join(a.out, "logs", f"warm_{j}.log"), "w")
        running[j] = (subprocess.Popen(me + ["--job", f"warm:{j}", *q], stdout=lf, stderr=subprocess.STDOUT,
                                       env=wenv), lf, time.time())
    while running:
        for j, (p, lf, ts) in list(running.items()):
            rc = p.poll()
            if rc is None and time.time() - t0 > warm_limit:
                p.kill()
                rc = p.wait()
                status[f"warm:{j}"] = {"rc": rc, "wall_s": round(time.time() - ts, 1), "killed": "warm limit"}
            elif rc is not None:
                status[f"warm:{j}"] = {"rc": rc, "wall_s": round(time.time() - ts, 1)}
            if rc is not None:
                lf.close()
                del running[j]
                log(f"[round_i] warm:{j}: {status[f'warm:{j}']}")
                if rc != 0:
                    with open(os.path.join(a.out, "logs", f"warm_{j}.log")) as f:
                        log(f.read()[-1500:])
        time.sleep(0.5)
    save_status()
    plan = [("triton", 35 if a.quick else 75), ("host", 60 if a.quick else 230), ("counts", 45 if a.quick else 90)]
    for i, (job, limit) in enumerate(plan):
        later = sum(min(30, lim) for _, lim in plan[i + 1:])
        lim = int(min(limit, left() - later))
        if lim < 20:
            status[job] = f"skipped: {left():.0f}s left"
            continue
        ts = time.time()
        with open(os.path.join(a.out, "logs", f"{job}.log"), "w") as lf:
            rc = subprocess.call(["timeout", str(lim)] + me + ["--job", job, "--deadline", str(lim - 12), *q],
                                 stdout=lf, stderr=subprocess.STDOUT, env=envv)
        status[job] = {"rc": rc, "wall_s": round(time.time() - ts, 1), "limit_s": lim}
        log(f"[round_i] {job}: rc {rc} in {time.time() - ts:.1f}s (limit {lim})")
        with open(os.path.join(a.out, "logs", f"{job}.log")) as f:
            log(f.read()[-2500:])
        save_status()
    s = summary(a.out)
    dump({"table": s, "status": status, "total_s": time.time() - t0}, os.path.join(a.out, "summary.json"))
    log("\n".join(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
