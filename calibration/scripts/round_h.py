"""Round h on one H200 (issue 20): torch.compile on an independent decoder (calibration/independent_decoder.py,
gpt-fast style), qwen3-0.6b and llama-3.2-1b shapes, measured as a held-out check of launchsim's `compiled` level.

    PYTHONUNBUFFERED=1 python3 round_h.py --out DIR [--quick] [--deadline S] [--bundle TGZ]   # whole round
    python3 round_h.py --out DIR --job JOB [--quick]                                        # one process

The decoder is imported from this file's own folder (the device copy: .roundh/) or else from calibration/ (the
repository layout: calibration/scripts/round_h.py); calibration.hygiene from the repository root (the cwd).
Jobs, each its own child process, in this order:

- `warm:MODEL:DYN:B` (not timed; run in parallel with each other before any timing): torch.compile (Inductor,
  mode default, dynamic DYN) of the decoder's forward at batch B, called once, to fill the Inductor / Triton caches
  (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR) so the timing and profiled processes compile from cache.
- `time:MODEL` (timing process: forbid_profiler() first, canary at its start and end and before and after every
  row): per batch (1, 4, 16, 64; ctx 512, cache max_len ctx + 128, the past in slots 0..ctx-1, the new token at
  slot ctx), (a) eager step; (b) torch.compile(dynamic=False) eager step; (c) that compiled step captured in one
  torch.cuda.CUDAGraph after warm-up, replayed; (d) torch.compile(dynamic=True) eager step (and its graph) at batch
  1 and 16. Every step timing is isolated: WARM warm-up calls, then REPS times (sync, step, sync): median, p10, p90.
  torch._dynamo.reset() before every compiled row (each compiles from scratch, from the warm caches).
- `counts:MODEL` (profiled process, after all timing): kernels per step from torch.profiler (CUPTI), by kind
  (triton_per / triton_red / triton_poi, gemm, attention, other) and by name, for eager and compiled dynamic
  False / True at batch 1 and 64; the second of two profiled steps is kept (the first is a profiler warm-up).
Results: DIR/*.json (packed into --bundle after each job) and a summary table printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.getcwd()
if os.path.exists(os.path.join(HERE, "independent_decoder.py")):
    sys.path.insert(0, HERE)
    import independent_decoder as D  # noqa: E402
else:
    sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
    from calibration import independent_decoder as D  # noqa: E402
for _r in (ROOT, os.path.dirname(HERE), os.path.dirname(os.path.dirname(HERE))):  # where calibration.hygiene is
    if os.path.exists(os.path.join(_r, "calibration", "hygiene.py")):
        sys.path.insert(0, _r)
        break

MODELS = ("qwen3-0.6b", "llama-3.2-1b")
CTX, ROOM = 512, 128
BATCHES = (1, 4, 16, 64)
TIME_ORDER = (1, 64, 16, 4)  # timing visits the batches the counts and dynamic rows share first
DYN_BATCHES = (1, 16)
COUNT_BATCHES = (1, 64)
WARM, REPS, B2B = 5, 20, 50
SEED = 20261202


def log(*a):
    print(*a, flush=True)


def err(e) -> str:
    return f"{type(e).__name__}: {e}"[:600]


def dump(obj, path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def start_points(kind: str, quick: bool, **extra) -> tuple[dict, float]:
    """Begin a table round's timing process (rounds u, w, z): the profiler forbidden, autograd off, the host warmed,
    the start canary; returns (the record, with `points` and `errors` lists, and its start time)."""
    import torch

    from calibration.hygiene import canary, forbid_profiler

    forbid_profiler()
    torch.set_grad_enabled(False)
    warm_host()
    t0 = time.time()
    return {"kind": kind, "quick": quick, "environment": env(), "canary_start": canary(), **extra, "points": [],
            "errors": []}, t0


def add_point(res: dict, what: str, measure, line) -> None:
    """One point of a table round: `measure()`'s record appended and `line(record)` logged, or the failure recorded
    under `what`; the CUDA cache emptied after either."""
    import torch

    try:
        p = measure()
        res["points"].append(p)
        log(line(p))
    except Exception as e:  # noqa: BLE001
        res["errors"].append({"what": what, "error": err(e)})
    torch.cuda.empty_cache()


def finish_points(res: dict, out: str, t0: float) -> int:
    """End a table round's timing process (rounds u, w, z: `start_points`): the end canary and its check against the start one, the
    wall time, the record written atomically to `out`, a summary line; returns the process's exit code."""
    from calibration.hygiene import canary, check_canary, exit_code

    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    dump(res, out)
    log(f"[summary] canary {res['canary']}; {len(res['points'])} points, {len(res['errors'])} errors, "
        f"{res['wall_s']:.0f} s")
    return exit_code(res["canary"])


def pct(xs):
    s = sorted(xs)
    q = lambda p: s[min(len(s) - 1, int(round(p * (len(s) - 1))))]  # noqa: E731
    return {"median": q(0.5), "p10": q(0.1), "p90": q(0.9), "min": s[0], "n": len(s)}


def sync():
    import torch

    torch.cuda.synchronize()


def iso_ms(fn, warm=WARM, reps=REPS):
    for _ in range(warm):
        fn()
    sync()
    xs = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        xs.append((time.perf_counter() - t0) * 1e3)
    return pct(xs)


def b2b_ms(fn, reps=B2B):
    import torch

    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    sync()
    a.record()
    for _ in range(reps):
        fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) / reps


def capture(fn):
    """One CUDA graph of fn after 3 warm-up calls on a side stream."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    sync()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    sync()
    return g


def env() -> dict:
    import platform

    import torch

    out = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
           "gpu": torch.cuda.get_device_name(0), "cores": os.cpu_count()}
    try:
        import triton

        out["triton"] = triton.__version__
    except Exception as e:  # noqa: BLE001
        out["triton"] = f"missing ({err(e)})"
    try:
        out["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.mem",
                                            "--format=csv,noheader"], capture_output=True, text=True,
                                           timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        out["nvidia_smi"] = err(e)
    return out


def can(c) -> dict:
    return {"host_us": c["host_tiny_op_us"]["p50"], "host_p90_us": c["host_tiny_op_us"]["p90"],
            "device_us": c["device_queued_kernel_us"]["p50"], "time": c["time"]}


def warm_host(seconds=2.0):
    import torch

    a = torch.randn(256, device="cuda")
    t0, i = time.time(), 0
    while time.time() - t0 < seconds:
        a.mul_(1.0)
        i += 1
        if i % 100 == 0:
            sync()
    sync()


def layers_of(quick):
    return 2 if quick else None


def batches(quick):
    return (1,) if quick else TIME_ORDER


def compiled(model, dyn):
    import torch

    torch._dynamo.reset()
    return torch.compile(model, mode="default", dynamic=dyn)


def counters() -> dict:
    from torch._dynamo.utils import counters as c

    return {k: dict(v) for k, v in c.items() if k in ("inductor", "aot_autograd") and v}


# ------------------------------------------------------------------------------------------------ jobs
def job_warm(out_dir, spec, quick):
    import torch

    _, name, dyn, b = spec.split(":")
    dyn, b = dyn == "T", int(b)
    torch.set_grad_enabled(False)
    t0 = time.time()
    m, idx, pos = D.build(name, b, CTX + ROOM, CTX, layers_of(quick), SEED)
    cf = compiled(m, dyn)
    cf(idx, pos)
    sync()
    res = {"job": spec, "compile_s": time.time() - t0, "counters": counters()}
    dump(res, os.path.join(out_dir, "warm", spec.replace(":", "_") + ".json"))
    log(f"[warm] {spec}: {res['compile_s']:.1f}s")
    return 0


def job_time(out_dir, name, quick, deadline):
    import torch

    from calibration.hygiene import canary, check_canary, exit_code, forbid_profiler

    forbid_profiler()
    torch.set_grad_enabled(False)
    warm_host()
    t0 = time.time()
    path = os.path.join(out_dir, f"time_{name}.json")
    cfg = D.config(name, layers_of(quick))
    res = {"kind": "launchsim-round-h-time", "model": name, "quick": quick, "environment": env(),
           "config": cfg.__dict__, "protocol": {"warm": WARM, "reps": REPS, "b2b": B2B, "ctx": CTX,
                                                 "max_len": CTX + ROOM, "seed": SEED},
           "canary_start": canary(), "rows": [], "errors": []}
    dump(res, path)
    m = None
    est = {False: 20.0, True: 30.0}  # s a compiled row takes (compile from the warm cache + timing), updated as seen
    seen: set = set()

    def row(r):
        res["rows"].append(r)
        dump(res, path)

    def timed(fn):
        sync()
        c0 = canary()
        t = iso_ms(fn)
        c1 = canary()
        return t, {"before": can(c0), "after": can(c1)}

    for b in batches(quick):
        if time.time() - t0 > deadline - 25:
            res["errors"].append({"what": f"batch {b} and later", "error": "deadline"})
            break
        try:
            if m is None:
                m, idx, pos = D.build(name, b, CTX + ROOM, CTX, cfg.n_layers, SEED)
            else:
                idx, pos = D.share(m, b, CTX + ROOM, CTX, SEED)
            t, c = timed(lambda: m(idx, pos))
            row({"mode": "eager", "dynamic": None, "batch": b, "ctx": CTX, "layers": cfg.n_layers,
                 "step_ms": t, "canary": c})
            log(f"[time] {name} eager b{b}: {t['median']:.3f} ms (canary {c['before']['host_us']:.2f} -> "
                f"{c['after']['host_us']:.2f} us)")
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            res["errors"].append({"what": f"eager b{b}", "error": err(e)})
            dump(res, path)
            continue
        for dyn in (False, True):
            if dyn and b not in DYN_BATCHES:
                continue
            if deadline - (time.time() - t0) < est[dyn] + 8:
                res["errors"].append({"what": f"compiled dyn={dyn} b{b}", "error": "deadline"})
                continue
            try:
                ts = time.time()
                cf = compiled(m, dyn)
                cf(idx, pos)
                sync()
                first = time.time() - ts

                def step(cf=cf):
                    return cf(idx, pos)
                t, c = timed(step)
                r = {"mode": "compiled", "dynamic": dyn, "batch": b, "ctx": CTX, "layers": cfg.n_layers,
                     "first_call_s": first, "counters": counters(), "step_ms": t, "canary": c}
                try:
                    g = capture(step)
                    r["graph_ms"] = iso_ms(g.replay, warm=3)
                    r["graph_b2b_ms"] = b2b_ms(g.replay)
                    del g
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    r["graph_error"] = err(e)
                row(r)
                log(f"[time] {name} compiled dyn={dyn} b{b}: first {first:.1f}s, eager {t['median']:.3f} ms, graph "
                    f"{r.get('graph_ms', {}).get('median', float('nan')):.3f} ms")
                est[dyn] = max(est[dyn] if dyn in seen else 0.0, time.time() - ts + 3)
                seen.add(dyn)
                del cf, step
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                res["errors"].append({"what": f"compiled dyn={dyn} b{b}", "error": err(e)})
                dump(res, path)
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["wall_s"] = time.time() - t0
    dump(res, path)
    log(f"[canary] {name}: {json.dumps(res['canary'])}")
    return exit_code(res["canary"])


def kind(n: str) -> str:
    s = n.lower()
    for p in ("triton_per", "triton_red", "triton_poi"):
        if s.startswith(p):
            return p
    if s.startswith("triton"):
        return "triton_other"
    if any(x in s for x in ("gemm", "gemv", "cutlass", "xmma", "splitk", "nvjet", "cublas")):
        return "gemm"
    if any(x in s for x in ("flash", "fmha", "attention", "sdpa", "cudnn")):
        return "attention"
    return "other"


def profiled_step(fn) -> dict:
    from torch.profiler import ProfilerActivity, profile

    out = None
    for i in range(2):  # the first profiled step warms the profiler up; the second is kept
        sync()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            fn()
            sync()
        path = f"/tmp/round_h_trace_{os.getpid()}_{i}.json"
        p.export_chrome_trace(path)
        with open(path) as f:
            d = json.load(f)
        os.unlink(path)
        evs = d.get("traceEvents", d) if isinstance(d, dict) else d
        ks = [e for e in evs if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") == "kernel"]
        names: dict = {}
        for e in ks:
            names[e["name"]] = names.get(e["name"], 0) + 1
        kinds: dict = {}
        for n, c in names.items():
            kinds[kind(n)] = kinds.get(kind(n), 0) + c
        out = {"kernels": len(ks), "kernel_us": sum(e.get("dur", 0.0) for e in ks), "kinds": kinds, "names": names,
               "memsets": sum(1 for e in evs if isinstance(e, dict) and e.get("cat") == "gpu_memset"),
               "memcpys": sum(1 for e in evs if isinstance(e, dict) and e.get("cat") == "gpu_memcpy")}
        if i == 0:
            first = len(ks)
    out["first_profile_kernels"] = first
    return out


def job_counts(out_dir, name, quick, deadline):
    import torch

    torch.set_grad_enabled(False)
    t0 = time.time()
    path = os.path.join(out_dir, f"counts_{name}.json")
    cfg = D.config(name, layers_of(quick))
    res = {"kind": "launchsim-round-h-counts", "model": name, "quick": quick, "environment": env(),
           "config": cfg.__dict__, "rows": [], "errors": []}
    m = None
    for b in (1,) if quick else COUNT_BATCHES:
        if m is None:
            m, idx, pos = D.build(name, b, CTX + ROOM, CTX, cfg.n_layers, SEED)
        else:
            idx, pos = D.share(m, b, CTX + ROOM, CTX, SEED)
        for mode, dyn in (("eager", None), ("compiled", False), ("compiled", True)):
            if time.time() - t0 > deadline - 15:
                res["errors"].append({"what": f"{mode} dyn={dyn} b{b}", "error": "deadline"})
                continue
            try:
                f = m if mode == "eager" else compiled(m, dyn)
                for _ in range(3):
                    f(idx, pos)
                sync()
                r = {"mode": mode, "dynamic": dyn, "batch": b, "ctx": CTX, "layers": cfg.n_layers,
                     **profiled_step(lambda f=f: f(idx, pos)), "counters": counters()}
                res["rows"].append(r)
                log(f"[counts] {name} {mode} dyn={dyn} b{b}: {r['kernels']} kernels {r['kinds']}")
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                res["errors"].append({"what": f"{mode} dyn={dyn} b{b}", "error": err(e)})
            dump(res, path)
    dump(res, path)
    return 0


# ------------------------------------------------------------------------------------------------ driver
def summary(out_dir) -> list[str]:
    lines = ["model | batch | eager ms | compiled ms | compiled+graph ms | dyn eager ms | kernels eager / "
             "static / dyn | canary host us (start -> end)"]
    for name in MODELS:
        try:
            with open(os.path.join(out_dir, f"time_{name}.json")) as f:
                t = json.load(f)
        except Exception:  # noqa: BLE001
            lines.append(f"{name}: no timing file")
            continue
        try:
            with open(os.path.join(out_dir, f"counts_{name}.json")) as f:
                cn = json.load(f)
        except Exception:  # noqa: BLE001
            cn = {"rows": []}
        k = {(r["mode"], r["dynamic"], r["batch"]): r["kernels"] for r in cn["rows"]}
        c = t.get("canary") or {}
        for b in BATCHES:
            rs = {(r["mode"], r["dynamic"]): r for r in t["rows"] if r["batch"] == b}
            if not rs:
                continue

            def ms(key, fld="step_ms"):
                r = rs.get(key)
                return f"{r[fld]['median']:.3f}" if r and fld in r else "-"
            lines.append(f"{name} | {b} | {ms(('eager', None))} | {ms(('compiled', False))} | "
                         f"{ms(('compiled', False), 'graph_ms')} | {ms(('compiled', True))} | "
                         f"{k.get(('eager', None, b), '-')} / {k.get(('compiled', False, b), '-')} / "
                         f"{k.get(('compiled', True, b), '-')} | {c.get('host_start_us', float('nan')):.2f} -> "
                         f"{c.get('host_end_us', float('nan')):.2f}{'' if c.get('ok') else ' FAILED'}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--job", default="all")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=540.0)
    ap.add_argument("--bundle", default=None)
    ap.add_argument("--warm-parallel", type=int, default=14)
    a = ap.parse_args(argv)
    os.makedirs(os.path.join(a.out, "warm"), exist_ok=True)
    if a.job != "all":
        kind_, _, rest = a.job.partition(":")
        if kind_ == "warm":
            return job_warm(a.out, a.job, a.quick)
        if kind_ == "time":
            return job_time(a.out, rest, a.quick, a.deadline)
        if kind_ == "counts":
            return job_counts(a.out, rest, a.quick, a.deadline)
        raise SystemExit(f"unknown job {a.job}")
    t0 = time.time()
    envv = dict(os.environ, PYTHONUNBUFFERED="1")
    envv.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/round-h-inductor")
    envv.setdefault("TRITON_CACHE_DIR", "/tmp/round-h-triton")
    q = ["--quick"] if a.quick else []
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)
    status: dict = {}

    def left():
        return a.deadline - (time.time() - t0)

    def bundle():
        if a.bundle:
            subprocess.call(["tar", "czf", a.bundle + ".tmp", "-C", os.path.dirname(os.path.abspath(a.out)),
                             os.path.basename(os.path.abspath(a.out))])
            os.replace(a.bundle + ".tmp", a.bundle)

    def save_status():
        dump({"status": status, "total_s": time.time() - t0, "deadline_s": a.deadline}, os.path.join(a.out,
                                                                                                  "round_status.json"))

    # 1. warm the compile caches in parallel (no timing runs meanwhile)
    warm = [f"warm:{n}:{'T' if d else 'F'}:{b}" for n in MODELS for d in (False, True)
            for b in ((1,) if a.quick else (BATCHES if not d else DYN_BATCHES + (64,)))]
    warm_limit = 60 if a.quick else 200
    wenv = dict(envv, TORCHINDUCTOR_COMPILE_THREADS="1")
    pending, running = list(warm), {}
    while pending or running:
        while pending and len(running) < a.warm_parallel and time.time() - t0 < warm_limit - 20:
            j = pending.pop(0)
            lf = open(os.path.join(a.out, "logs", j.replace(":", "_") + ".log"), "w")
            p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--out", a.out, "--job", j, *q],
                                 stdout=lf, stderr=subprocess.STDOUT, env=wenv)
            running[j] = (p, lf, time.time())
        for j, (p, lf, ts) in list(running.items()):
            rc = p.poll()
            if rc is None and time.time() - t0 > warm_limit:
                p.kill()  # this child only (its pid)
                rc = p.wait()
                status[j] = {"rc": rc, "wall_s": round(time.time() - ts, 1), "killed": "warm limit"}
            elif rc is not None:
                status[j] = {"rc": rc, "wall_s": round(time.time() - ts, 1)}
            if rc is not None:
                lf.close()
                del running[j]
                log(f"[round_h] {j}: {status[j]}")
                if status[j]["rc"] != 0:
                    with open(os.path.join(a.out, "logs", j.replace(":", "_") + ".log")) as f:
                        log(f.read()[-2000:])
        if pending and time.time() - t0 >= warm_limit - 20 and not running:
            for j in pending:
                status[j] = "skipped: warm limit"
            pending = []
        time.sleep(0.5)
    save_status()
    bundle()
    # 2. timing processes, one at a time; 3. profiled processes
    plan = [(f"time:{n}", 40 if a.quick else 150) for n in MODELS] + \
           [(f"counts:{n}", 40 if a.quick else 70) for n in MODELS]
    for i, (job, limit) in enumerate(plan):
        later = sum(min(25, lim) for _, lim in plan[i + 1:])
        lim = int(min(limit, left() - later))
        if lim < 20:
            status[job] = f"skipped: {left():.0f}s left"
            continue
        ts = time.time()
        with open(os.path.join(a.out, "logs", job.replace(":", "_") + ".log"), "w") as lf:
            rc = subprocess.call(["timeout", str(lim), sys.executable, os.path.abspath(__file__), "--out", a.out,
                                  "--job", job, "--deadline", str(lim - 15), *q], stdout=lf,
                                 stderr=subprocess.STDOUT, env=envv)
        status[job] = {"rc": rc, "wall_s": round(time.time() - ts, 1), "limit_s": lim}
        log(f"[round_h] {job}: rc {rc} in {time.time() - ts:.1f}s (limit {lim})")
        with open(os.path.join(a.out, "logs", job.replace(":", "_") + ".log")) as f:
            log(f.read()[-2500:])
        save_status()
        bundle()
    s = summary(a.out)
    dump({"table": s, "status": status, "total_s": time.time() - t0}, os.path.join(a.out, "summary.json"))
    bundle()
    log("\n".join(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
