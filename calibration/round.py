"""One calibration round on the GPU machine, with measurement hygiene built into its structure.

    PYTHONUNBUFFERED=1 python3 -m calibration.round --out $OUT [--quick]

Stage 1 runs in parallel, in separate processes, everything that is *not* timed: the counts jobs
(torch.profiler: kernels per step, kernel names and CUPTI durations, cuBLAS kernels per GEMM,
Inductor's kernels per compiled step, Chrome traces of the reference decoder and of Hugging Face
transformers' eager decode) and the graph-memory jobs (calibration/child_memory.py). The compiled
jobs also fill the on-disk Inductor cache. Stage 2 then runs the timing process alone on an idle
machine (calibration/child_timing.py): it forbids the profiler and checks a canary at both ends.
Stage 3 runs the depth sweep (calibration/depth_sweep.py), also a clean timing process.
A summary is printed last. Exit status: 0, or 3 when the timing canary failed (figures kept but
marked), or 1 when a stage crashed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

COMPILED_JOBS = ("compiled:qwen3-0.6b:1:static", "compiled:qwen3-0.6b:16:static",
                 "compiled:qwen3-0.6b:16:dynamic", "compiled:qwen3-0.6b:1:dynamic")
MEMORY_JOBS = ("qwen3-0.6b:none", "qwen3-0.6b:compiled", "llama3-8b:none", "llama3-8b:compiled")


def _spawn(args, out, tag, env):
    log = open(os.path.join(out, "logs", tag.replace(":", "_") + ".log"), "w")
    return subprocess.Popen([sys.executable, "-m", *args], stdout=log, stderr=subprocess.STDOUT, env=env), log


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-stage1", action="store_true")
    ap.add_argument("--stage1-compiled-only", action="store_true",
                    help="stage 1 runs only the compiled jobs (warms the Inductor cache for the timing process)")
    ap.add_argument("--no-depth", action="store_true", help="skip stage 3 (the depth sweep)")
    ap.add_argument("--bundle", default=None,
                    help="also pack the whole output folder into this .tar.gz after each stage (the device tool "
                         "brings back at most 8 files)")
    a = ap.parse_args(argv)
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)

    def bundle():
        if a.bundle:
            subprocess.call(["tar", "czf", a.bundle + ".tmp", "-C", a.out, "."])
            os.replace(a.bundle + ".tmp", a.bundle)

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/launchsim-inductor-cache")
    q = ["--quick"] if a.quick else []
    t0 = time.time()
    status = {}
    if not a.skip_stage1:
        jobs = [(j, ["calibration.child_counts", "--out", a.out, "--job", j, *q])
                for j in (COMPILED_JOBS[:1] if a.quick else COMPILED_JOBS[:3] if a.stage1_compiled_only else COMPILED_JOBS)]
        if not a.stage1_compiled_only:
            jobs += [("counts:eager", ["calibration.child_counts", "--out", a.out, "--job", "eager", *q])]
            jobs += [("memory:" + j, ["calibration.child_memory", "--out", a.out, "--job", j, *q])
                     for j in (MEMORY_JOBS[:2] if a.quick else MEMORY_JOBS)]
        procs = [(tag, *_spawn(args, a.out, tag, env)) for tag, args in jobs]
        for tag, p, log in procs:
            status[tag] = p.wait()
            log.close()
            print(f"[round] {tag}: exit {status[tag]} at {time.time() - t0:.0f}s", flush=True)
    bundle()
    print(f"[round] stage 2 (timing, alone) from {time.time() - t0:.0f}s", flush=True)
    rc = subprocess.call([sys.executable, "-m", "calibration.child_timing", "--out", a.out, *q], env=env)
    status["timing"] = rc
    print(f"[round] timing: exit {rc} at {time.time() - t0:.0f}s", flush=True)
    if not a.no_depth:
        bundle()
        status["depth"] = subprocess.call([sys.executable, "-m", "calibration.depth_sweep", "--out", a.out], env=env)
        print(f"[round] depth sweep: exit {status['depth']} at {time.time() - t0:.0f}s", flush=True)
    with open(os.path.join(a.out, "round_status.json"), "w") as f:
        json.dump({"status": status, "wall_s": time.time() - t0, "quick": a.quick}, f, indent=1)
    bundle()
    print("==== summary ====")
    try:
        from .summary import summarize

        summarize(a.out)
    except Exception as e:  # noqa: BLE001
        print(f"summary failed: {type(e).__name__}: {e}")
    print(json.dumps(status))
    return 3 if 3 in (rc, status.get("depth")) else (0 if all(v == 0 for v in status.values()) else 1)


if __name__ == "__main__":
    sys.exit(main())
