"""Where the time of the three unmet speed targets goes (issue 24: predict, serve, fast), phase by phase, each part
measured in a fresh process, so that what a target would need can be set beside what its parts cost now.

  predict  the pydantic floor: `import numpy, pydantic, yaml` (the bare reference; `import pydantic` is lazy), then
           the first pydantic model class (what every command that validates with pydantic pays once: pydantic's
           real import, its plugin loader's `importlib.metadata`, the first schema), then a second model.
  serve    bench_targets' serve child (one hour at 80 req/s, qwen3-0.6b fused, full_and_piecewise, vllm sizes, cold
           step memo) split into: launchsim's imports, workload and replica set-up, step pricing (StepTimer's
           cells and decode steps, timed around the calls), the event kernel (plainloop.loop_plain less pricing
           and settling) and settling its log (plainloop._settle). Per-event figures use the run's event count.
  fast     bench_targets' fast child (1M single-kernel launches, GPU-bound) beside the numpy floors under it:
           first touch of the four output arrays (32 MB), one np.cumsum and one elementwise pass over 1M floats,
           and the same call again in the same process (warm: no first touches).

    python benchmarks/floors.py [--repeats 3]

Each row is the median over `--repeats` fresh processes; CPU seconds (time.process_time) beside wall.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _t() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t0: tuple[float, float]) -> tuple[float, float]:
    w, c = _t()
    return w - t0[0], c - t0[1]


# -- children: each prints one JSON line of {phase: [wall s, CPU s]} ---------------------------------------------
def child_predict() -> dict:
    t = _t()
    import numpy  # noqa: F401
    import pydantic  # noqa: F401
    import yaml  # noqa: F401

    out = {"import numpy, pydantic, yaml (bare)": _since(t)}
    t = _t()
    import importlib.metadata  # noqa: F401  (pydantic's plugin loader imports it with the first model)

    out["of which later: importlib.metadata"] = _since(t)
    t = _t()
    from pydantic import BaseModel, ConfigDict

    class M(BaseModel):
        model_config = ConfigDict(extra="forbid")
        x: int

    M.model_validate({"x": 1})
    out["first pydantic model defined + validated"] = _since(t)
    t = _t()

    class N(BaseModel):
        model_config = ConfigDict(extra="forbid")
        x: int
        y: str = "a"

    N.model_validate({"x": 1})
    out["a second model"] = _since(t)
    return out


def child_serve() -> dict:
    t = _t()
    from simulator.layouts.buckets import preset_sizes
    from simulator.model.models import load_model
    from simulator.model.profile import load_profile
    from simulator.serving import plainloop
    from simulator.serving.arrivals import ArrivalSpec, LengthSpec, make_workload
    from simulator.serving.replica import ServeConfig, prepare, simulate_serving
    from simulator.serving.steptime import StepTimer, clear_step_cache

    out = {"imports": _since(t)}
    t = _t()
    prof = load_profile("datasheet-h200")
    cfg = ServeConfig(load_model("qwen3-0.6b"), prof, "fused", "full_and_piecewise", tuple(preset_sizes("vllm")))
    wl = make_workload(ArrivalSpec("poisson"), LengthSpec("lognormal", mean=512, cv=1.0, low=1, high=4096),
                       LengthSpec("lognormal", mean=256, cv=1.0, low=1, high=2048), 80.0, 3600.0, 0)
    clear_step_cache()
    prep = prepare(cfg)
    out["profile, model, workload, replica set-up"] = _since(t)
    acc = {"pricing": [0.0, 0.0], "settle": [0.0, 0.0]}

    def timed(f, slot):
        def g(*a, **k):
            t0 = _t()
            try:
                return f(*a, **k)
            finally:
                w, c = _since(t0)
                acc[slot][0] += w
                acc[slot][1] += c
        return g

    StepTimer.cell = timed(StepTimer.cell, "pricing")  # type: ignore[method-assign]
    StepTimer.plain_decode = timed(StepTimer.plain_decode, "pricing")  # type: ignore[method-assign]
    plainloop._settle = timed(plainloop._settle, "settle")  # type: ignore[assignment]
    t = _t()
    r = simulate_serving(cfg, wl, 3600.0, prep)
    w, c = _since(t)
    out["step pricing (cells, decode steps)"] = tuple(acc["pricing"])
    out["event kernel (loop_plain)"] = (w - acc["pricing"][0] - acc["settle"][0], c - acc["pricing"][1]
                                        - acc["settle"][1])
    out["settling the log (numpy)"] = tuple(acc["settle"])
    out["a bare loop: table read, add, heap push+pop, append"] = _bare_loop(r.events)
    out["_events"] = r.events
    out["_simulated_s"] = r.simulated_s
    out["_kernel_ran"] = plainloop.taken
    return out


def _bare_loop(n: int) -> tuple[float, float]:
    """The least a Python event loop does per event, n times, in a function (locals): read a step time from a table,
    advance the clock, push and pop the heap of finishes, append to the log. A reference for the kernel's us an
    event, not a model of it (the kernel does several times this per event)."""
    import heapq

    push, pop = heapq.heappush, heapq.heappop
    tab = [1e-3 + i * 1e-9 for i in range(1024)]
    log: list = []
    heap: list = [1 << 62]
    now = 0.0
    t = _t()
    for i in range(n):
        now = now + tab[i & 1023]
        push(heap, i)
        pop(heap)
        log.append(i)
    return _since(t)


def child_fast() -> dict:
    t = _t()
    import numpy as np

    from simulator.engine.fastpath import simulate_fast
    from simulator.engine.plan import LaunchPlan

    out = {"imports": _since(t)}
    n = 1_000_000
    plan = LaunchPlan(np.full(n, 3e-6), np.ones(n, dtype=np.int64), np.full(n, 6e-6), np.full(n, 1e-6), 1024)
    t = _t()
    simulate_fast(plan)
    out["simulate_fast, first call (the target's figure)"] = _since(t)
    t = _t()
    simulate_fast(plan)
    out["simulate_fast, same call again (warm)"] = _since(t)
    out["first touch: 4 x 1M float64 written once"] = _first_touch(4 * n)
    x = np.full(n, 3e-6)
    y = np.empty(n)
    np.cumsum(x, out=y)
    t = _t()
    np.cumsum(x, out=y)
    out["np.cumsum over 1M (written before)"] = _since(t)
    t = _t()
    np.add(x, x, out=y)
    out["one elementwise pass over 1M (written before)"] = _since(t)
    return out


def _first_touch(n: int) -> tuple[float, float]:
    """Allocate and write n float64 in a process that never held that much: the page faults a fresh call pays
    (measured in its own child, since freed memory is reused)."""
    p = subprocess.run([sys.executable, "-c", "import numpy as np, time, json; t, c = time.perf_counter(), "
                        f"time.process_time(); a = np.empty({n}); a[:] = 1.0; "
                        "print(json.dumps([time.perf_counter() - t, time.process_time() - c]))"],
                       capture_output=True, text=True, check=True)
    w, c = json.loads(p.stdout)
    return w, c


CHILDREN = {"predict": child_predict, "serve": child_serve, "fast": child_fast}


def run_child(name: str) -> dict:
    p = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", name], cwd=ROOT,
                       capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"floors: child {name} failed: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(CHILDREN[a.child]()))
        return 0
    print(f"launchsim speed floors (issue 24's unmet targets), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"median of {a.repeats} fresh processes per section")
    for name in ("predict", "serve", "fast"):
        runs = [run_child(name) for _ in range(a.repeats)]
        print(f"\n{name}")
        print(f"  {'phase':<52} {'wall ms':>10} {'CPU ms':>10}")
        total = [0.0, 0.0]
        for k in runs[0]:
            if k.startswith("_"):
                continue
            w = statistics.median(r[k][0] for r in runs) * 1e3
            c = statistics.median(r[k][1] for r in runs) * 1e3
            if name == "serve" and not k.startswith("a bare loop"):
                total[0] += w
                total[1] += c
            print(f"  {k:<52} {w:>10.1f} {c:>10.1f}")
        if name == "serve":
            ev = runs[0]["_events"]
            sim = runs[0]["_simulated_s"]
            kern = statistics.median(r["event kernel (loop_plain)"][0] for r in runs)
            print(f"  {'sum of the phases':<52} {total[0]:>10.1f} {total[1]:>10.1f}")
            bare = statistics.median(r["a bare loop: table read, add, heap push+pop, append"][0] for r in runs)
            print(f"  the bare loop: {bare / ev * 1e6:.2f} us an event")
            print(f"  {ev:,} events, {sim:,.0f} simulated s: {sim / (total[0] / 1e3):,.0f}x real time over the "
                  f"phases; the kernel {kern / ev * 1e6:.2f} us an event (the kernel ran in every process: "
                  f"{all(r['_kernel_ran'] for r in runs)})")
            budget = sim / 2000.0
            rest = total[0] / 1e3 - kern
            print(f"  2,000x leaves {budget:.2f} s for the whole process; the phases other than the kernel take "
                  f"{rest:.2f} s, leaving {max(budget - rest, 0.0):.2f} s for the kernel: "
                  f"{max(budget - rest, 0.0) / ev * 1e6:.2f} us an event (process start-up not counted here)")
        if name == "fast":
            first = statistics.median(r["simulate_fast, first call (the target's figure)"][0] for r in runs)
            print(f"  {1e6 / first / 1e6:.1f}M kernels/s on the first call; 40M kernels/s is 25.0 ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
