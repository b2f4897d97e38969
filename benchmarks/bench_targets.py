"""Speed as a user sees it: one row per speed target of issue 24 (Targets), each a whole fresh process.

Every target is a new Python process (imports, scenario loading, the work, the report and JSON written), run
`--repeats` times; the table shows the median wall time and the median CPU time of the process and its
children (the sweep's worker processes), from `resource.getrusage(RUSAGE_CHILDREN)` around each process.
Nothing is warmed up or shared between runs: no step-time memo, no sweep cache (a fresh --out each time).
This machine's environment sets PYTHONDONTWRITEBYTECODE=1, so launchsim's own modules are compiled from source
in every process (the dependencies' bytecode is installed); the processes run as the user's would.

Install step, once before the targets: `python -m compileall -q simulator`, which the README's install command runs
(the bytecode pip writes for any non-editable install; an editable install writes none, and this machine sets
PYTHONDONTWRITEBYTECODE=1, so without it every process would compile launchsim's ~200 modules from source). The
`predict-src` row shows predict without it, in the same run.

Targets (issue 24):
  bare       `python -c "import numpy, pydantic, yaml"`: the reference for predict (no goal of its own)
  pydantic   bare + one pydantic model (one int field, extra="forbid") defined and validated: the floor of any
             process that validates its input with pydantic, as every launchsim command does (no goal)
  predict-src  predict run on a copy of simulator/ without bytecode (every launchsim module compiled in the
             process, as before the install step; no goal)
  run        `launchsim run scenarios/qwen3_0p6b_decode.yaml --out TMP`                        <= 1.5 s
  predict    `launchsim predict --model qwen3-0.6b --json`              <= 0.25 s and <= 1.5 x bare
  optimize   `launchsim optimize` over 1,024 candidate sizes x 64 graphs (uniform batch 1..1024,
             qwen3-8b fused, full graphs, --json)                                               <= 1 s
  sweep694   `launchsim run` of the shipped scenarios/sweep_layouts_qwen3_0p6b.yaml with its budgets
             replaced by 694 memory budgets (64 MiB, 68 MiB, ..., 2,836 MiB): 99,936 grid points  <= 10 s
  sweep100k  `launchsim run` of the benchmark's mix: 2 models x 4 fusion x 4 graph x 6 layouts x 21
             batch distributions x 25 budgets = 100,800 points, 2 local workers               <= 10 s
  serve      a fresh process serving one hour of Poisson arrivals at 80 req/s on one replica of
             qwen3-0.6b (fused, full_and_piecewise, vllm sizes; lognormal prompts 512 / outputs 256)
             with a cold step memo; simulated seconds / process seconds                       >= 2,000x
  fast       the fast path on 1M kernels, GPU-bound (3 us host / 6 us kernel), timed inside a fresh
             process (the call only: a kernel throughput)                            >= 40M kernels/s

    python benchmarks/bench_targets.py [--repeats 3] [--only run,predict] [--write-shipped]

The table goes to stdout and to out/benchmarks/targets_<UTC date>_<HHMM>.txt (untracked); with --write-shipped to
benchmarks/results/targets_<UTC date>_<HHMM>.txt instead (the committed record).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_name  # benchmarks/machine.py

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
CLI = [PY, "-m", "simulator.cli"]

LAYOUTS = [{"name": "vllm", "sizes": "vllm"}, {"name": "sglang", "sizes": "sglang"},
           {"name": "trtllm", "sizes": "trtllm"}, {"name": "seed", "sizes": "seed"},
           {"name": "pow2", "sizes": "pow2", "max_size": 256},
           {"name": "dense-small", "sizes": [1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 128, 256]}]
BUDGETS_694 = [f"{64 + 4 * i}MiB" for i in range(694)]


def sweep100k() -> dict:
    dists = [{"name": f"uniform-1-{hi}", "uniform": [1, hi]} for hi in range(16, 257, 12)]  # 21 distributions
    return {"kind": "sweep", "name": "bench100k", "models": ["qwen3-0.6b", "llama3-8b"], "profiles": ["datasheet-h200"],
            "fusion": ["none", "packed", "compiled", "fused"], "graph": ["none", "full", "piecewise", "full_and_piecewise"],
            "layouts": LAYOUTS, "distributions": dists,
            "budgets": [f"{256 * (i + 1)}MiB" for i in range(25)], "workers": 2}


def sweep694() -> dict:
    import yaml

    sc = yaml.safe_load((ROOT / "scenarios" / "sweep_layouts_qwen3_0p6b.yaml").read_text())
    sc["budgets"] = BUDGETS_694
    return sc


# -- child processes (serve, fast): the work in a fresh interpreter, figures printed as one JSON line ------------
def child_serve() -> dict:
    from simulator.layouts.buckets import preset_sizes
    from simulator.model.models import load_model
    from simulator.model.profile import load_profile
    from simulator.serving.arrivals import ArrivalSpec, LengthSpec, make_workload
    from simulator.serving.replica import ServeConfig, prepare, simulate_serving
    from simulator.serving.steptime import clear_step_cache

    prof = load_profile("datasheet-h200")
    cfg = ServeConfig(load_model("qwen3-0.6b"), prof, "fused", "full_and_piecewise", tuple(preset_sizes("vllm")))
    wl = make_workload(ArrivalSpec("poisson"), LengthSpec("lognormal", mean=512, cv=1.0, low=1, high=4096),
                       LengthSpec("lognormal", mean=256, cv=1.0, low=1, high=2048), 80.0, 3600.0, 0)
    clear_step_cache()
    r = simulate_serving(cfg, wl, 3600.0, prepare(cfg))
    return {"simulated_s": r.simulated_s}


def child_fast() -> dict:
    import numpy as np

    from simulator.engine.fastpath import simulate_fast
    from simulator.engine.plan import LaunchPlan

    n = 1_000_000
    plan = LaunchPlan(np.full(n, 3e-6), np.ones(n, dtype=np.int64), np.full(n, 6e-6), np.full(n, 1e-6), 1024)
    c0, t0 = time.process_time(), time.perf_counter()
    simulate_fast(plan)
    return {"kernels": n, "call_wall_s": time.perf_counter() - t0, "call_cpu_s": time.process_time() - c0}


def _child_cmd(name: str) -> list[str]:
    return [PY, str(Path(__file__).resolve()), "--child", name]


# -- the parent ----------------------------------------------------------------------------------------------------
def run_process(cmd: list[str], cwd: Path = ROOT, where: str = "") -> tuple[float, float, str]:
    """(wall s, CPU s of the process and its waited-for children, stdout) of one fresh process run in `cwd`
    (`where`: a prefix for its failure line)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{where}{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
    return wall, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), p.stdout


def commands(tmp: Path) -> dict[str, callable]:
    """name -> function(run index) -> command line (a fresh --out folder per run)."""
    import yaml

    csv = tmp / "uniform1024.csv"
    csv.write_text("batch,count\n" + "".join(f"{b},1\n" for b in range(1, 1025)))
    (tmp / "sweep694.yaml").write_text(yaml.safe_dump(sweep694(), sort_keys=False))
    (tmp / "sweep100k.yaml").write_text(yaml.safe_dump(sweep100k(), sort_keys=False))
    return {
        "bare": lambda i: [PY, "-c", "import numpy, pydantic, yaml"],
        "pydantic": lambda i: [PY, "-c", PYDANTIC_FLOOR],
        "predict-src": lambda i: CLI + ["predict", "--model", "qwen3-0.6b", "--json"],
        "run": lambda i: CLI + ["run", "scenarios/qwen3_0p6b_decode.yaml", "--out", str(tmp / f"run{i}")],
        "predict": lambda i: CLI + ["predict", "--model", "qwen3-0.6b", "--json"],
        "optimize": lambda i: CLI + ["optimize", "--distribution", str(csv), "--model", "qwen3-8b", "--fusion", "fused",
                                     "--graph", "full", "--max-graphs", "64", "--max-size", "1024", "--json"],
        "sweep694": lambda i: CLI + ["run", str(tmp / "sweep694.yaml"), "--out", str(tmp / f"sweep694_{i}")],
        "sweep100k": lambda i: CLI + ["run", str(tmp / "sweep100k.yaml"), "--out", str(tmp / f"sweep100k_{i}")],
        "serve": lambda i: _child_cmd("serve"),
        "fast": lambda i: _child_cmd("fast"),
    }


# name -> (goal, "s" (seconds, at most) or "x" (throughput, at least), label)
PYDANTIC_FLOOR = ("import numpy, pydantic, yaml\nfrom pydantic import BaseModel, ConfigDict\n"
                  "class A(BaseModel):\n    model_config = ConfigDict(extra='forbid')\n    x: int = 1\nA(x=2)")


def install_step() -> float:
    """The README install command's byte-compilation of launchsim (wall seconds)."""
    t0 = time.perf_counter()
    subprocess.run([PY, "-m", "compileall", "-q", "simulator"], cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - t0


def source_copy(tmp: Path) -> Path:
    """A copy of the tree's simulator/ package without bytecode (for predict-src)."""
    import shutil

    d = tmp / "src"
    shutil.copytree(ROOT / "simulator", d / "simulator", ignore=shutil.ignore_patterns("__pycache__"))
    return d


TARGETS = {"bare": (None, "s", "reference"), "pydantic": (None, "s", "reference"), "run": (1.5, "s", "<= 1.5 s"),
           "predict": (0.25, "s", "<= 0.25 s"), "predict-src": (None, "s", "reference"),
           "optimize": (1.0, "s", "<= 1 s"), "sweep694": (10.0, "s", "<= 10 s"), "sweep100k": (10.0, "s", "<= 10 s"),
           "serve": (2000.0, "x", ">= 2,000x"), "fast": (40e6, "x", ">= 40M k/s")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per target (median)")
    ap.add_argument("--only", default=",".join(TARGETS), help="comma-separated targets (bare is always run when "
                                                              "predict is)")
    ap.add_argument("--write-shipped", action="store_true", help="write benchmarks/results/targets_<date>.txt "
                                                                 "(tracked) instead of out/benchmarks/")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        sys.path.insert(0, str(ROOT))
        print(json.dumps({"serve": child_serve, "fast": child_fast}[a.child]()))
        return
    names = [n for n in a.only.split(",") if n]
    if "predict" in names:
        for ref in ("bare", "pydantic", "predict-src"):
            if ref not in names:
                names.insert(names.index("predict") + (ref == "predict-src"), ref)
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        raise SystemExit(f"unknown target(s) {', '.join(unknown)}: use {', '.join(TARGETS)}")
    now = dt.datetime.now(dt.timezone.utc)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True, check=False).stdout.strip()
    lines = [f"launchsim speed targets (issue 24), {now:%Y-%m-%d %H:%M} UTC, commit {commit}{' (modified)' if dirty else ''}",
             (f"machine: {cpu_name()} ({platform.machine()}), {os.cpu_count()} cores (nproc), python "
              f"{platform.python_version()}; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')}; "
              f"load average at start {os.getloadavg()[0]:.2f}; median of {a.repeats} fresh processes per target")]
    lines.append(f"install step: python -m compileall -q simulator (the README's install command) in {install_step():.2f} s, "
                 "once, before the targets")
    hdr = f"{'target':<11} {'goal':>11} {'wall (median)':>14} {'CPU (median)':>13} {'met wall':>8} {'met CPU':>8}  note"
    lines += [hdr, "-" * (len(hdr) + 30)]
    for ln in lines:
        print(ln, flush=True)
    bare_cpu = bare_wall = None
    with tempfile.TemporaryDirectory(prefix="launchsim-bench-") as d:
        cmds = commands(Path(d))
        src = source_copy(Path(d)) if "predict-src" in names else None
        pyd_wall = None
        for name in names:
            goal, kind, label = TARGETS[name]
            runs = [run_process(cmds[name](i), cwd=src if name == "predict-src" else ROOT) for i in range(a.repeats)]
            w, c = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            note = ""
            if kind == "s":
                fw, fc = f"{w:.3f} s", f"{c:.3f} s"
                mw = "" if goal is None else ("yes" if w <= goal else "no")
                mc = "" if goal is None else ("yes" if c <= goal else "no")
                if name == "bare":
                    bare_wall, bare_cpu = w, c
                    note = "numpy + pydantic + yaml imported, nothing else"
                elif name == "pydantic":
                    pyd_wall = w
                    note = (f"bare + one pydantic model validated: {w / bare_wall:.2f}x bare wall"
                            if bare_wall else "bare + one pydantic model validated")
                elif name in ("predict", "predict-src") and bare_cpu:
                    note = (f"{w / bare_wall:.2f}x bare wall, {c / bare_cpu:.2f}x bare CPU (goal <= 1.5x): "
                            f"{'met' if w <= 1.5 * bare_wall else 'not met'} on wall, "
                            f"{'met' if c <= 1.5 * bare_cpu else 'not met'} on CPU"
                            + (f"; {w / pyd_wall:.2f}x the pydantic floor" if pyd_wall else "")
                            + ("; no bytecode" if name == "predict-src" else ""))
                else:
                    note = f"{w / goal:.2f}x the goal (wall), {c / goal:.2f}x (CPU)"
            elif name == "serve":
                sim = statistics.median(json.loads(r[2])["simulated_s"] for r in runs)
                fw, fc = f"{sim / w:,.0f}x", f"{sim / c:,.0f}x"
                mw, mc = ("yes" if sim / w >= goal else "no"), ("yes" if sim / c >= goal else "no")
                note = f"{sim:,.0f} simulated s in {w:.1f} s wall / {c:.1f} s CPU (whole process)"
            else:
                info = [json.loads(r[2]) for r in runs]
                k = info[0]["kernels"]
                cw = statistics.median(x["call_wall_s"] for x in info)
                cc = statistics.median(x["call_cpu_s"] for x in info)
                fw, fc = f"{k / cw / 1e6:.1f}M k/s", f"{k / cc / 1e6:.1f}M k/s"
                mw, mc = ("yes" if k / cw >= goal else "no"), ("yes" if k / cc >= goal else "no")
                note = f"1M kernels: {cw * 1e3:.0f} ms wall / {cc * 1e3:.0f} ms CPU in the call; process {w:.2f} s"
            ln = f"{name:<11} {label:>11} {fw:>14} {fc:>13} {mw:>8} {mc:>8}  {note}"
            lines.append(ln)
            print(ln, flush=True)
    tail = f"load average at end: {os.getloadavg()[0]:.2f}"
    lines.append(tail)
    print(tail)
    folder = ROOT / ("benchmarks/results" if a.write_shipped else "out/benchmarks")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"targets_{now:%Y-%m-%d_%H%M}.txt"  # several runs a day keep their own record
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
