"""Real decode steps of the reference decoder on the GPU: the rows validate.py compares with.

For each model, (batch, ctx) and fusion level: step time with graph none (eager) and full (one
CUDA-graph replay), median and p10/p90 over repeated single steps, each timed from a synchronised
start to a synchronised end (host clock; the host issue time is read when the call returns);
kernels per step from torch.profiler (at ctx 512); graph pool bytes (reserved-memory growth over
one capture into a private pool) and capture wall time. Also the graph-memory table (private pool
per batch, and one pool shared by all sizes captured largest-first) and one Chrome trace.
Pure torch + stdlib; torch is imported inside functions only.
"""

from __future__ import annotations

import gzip
import os
import shutil
import time

from .microbench import _pct
from .profiling import count_kernels, kernel_events
from .reference_decoder import Runner, make_cache, make_weights

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
CTXS = (128, 512, 2048, 8192)
MAX_TOKENS = 262144  # batch * ctx cap (KV cache of 30-34 GB for the presets)
MEMORY_FIT_BATCHES = (1, 4, 16, 64, 256)


COMPILED_RUNS = (("llama3-8b", 1, 512), ("llama3-8b", 1, 2048), ("qwen3-0.6b", 1, 512), ("qwen3-0.6b", 1, 2048),
                 ("qwen3-0.6b", 16, 512), ("qwen3-0.6b", 16, 2048))  # compiles are slow: last, few


def grid(quick=False):
    """[(model, batch, ctx, [fusions])] in run order: eager fusion levels first, compiled last."""
    if quick:
        return [(m, b, 512, ["none", "packed", "compiled"]) for m in ("qwen3-0.6b", "llama3-8b") for b in (1, 64)]
    out = []
    for m in ("qwen3-0.6b", "llama3-8b"):
        for b in BATCHES:
            for c in CTXS:
                if b * c <= MAX_TOKENS:
                    out.append((m, b, c, ["none", "packed"]))
    return out + [(m, b, c, ["compiled"]) for m, b, c in COMPILED_RUNS]


def _time_steps(fn, n):
    import torch

    pc = time.perf_counter
    host, step = [], []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = pc()
        fn()
        t1 = pc()
        torch.cuda.synchronize()
        t2 = pc()
        host.append((t1 - t0) * 1e3)
        step.append((t2 - t0) * 1e3)
    return _pct(step), _pct(host)


def measure_config(r: Runner, n_eager=15, n_graph=30, profile_kernels=True):
    import torch

    row = {"model": r.m.name, "fusion": r.fusion, "batch": r.batch, "ctx": r.ctx}
    for _ in range(3):
        r.step()
    torch.cuda.synchronize()
    if profile_kernels:
        k = count_kernels(r.step)
        row["kernels"] = k["kernels"]
        row["memsets"], row["memcpys"], row["kernel_us"] = k["memsets"], k["memcpys"], k["kernel_us"]
        row["kernel_names"] = k["names"]
    step, host = _time_steps(r.step, n_eager)
    row["eager"] = {"step_ms": step, "host_ms": host}
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    r0 = torch.cuda.memory_reserved()
    t0 = time.perf_counter()
    g = r.capture(warmup=0)
    torch.cuda.synchronize()
    cap = time.perf_counter() - t0
    pool = torch.cuda.memory_reserved() - r0
    for _ in range(3):
        g.replay()
    step, host = _time_steps(g.replay, n_graph)
    row["graph"] = {"step_ms": step, "host_ms": host, "pool_bytes": pool, "capture_s": cap}
    r.graph, r.out = None, None
    del g
    return row


def graph_memory(model, weights, batches=MEMORY_FIT_BATCHES, ctx=512):
    """Private pool bytes per batch, and cumulative bytes of one shared pool (largest first)."""
    import torch

    cache = make_cache(weights_model(model), max(batches), ctx)
    priv, cap = {}, {}
    for b in batches:
        r = Runner(model, "none", b, ctx, weights=weights, cache=[(k[:b], v[:b]) for k, v in cache])
        r.step()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        r0 = torch.cuda.memory_reserved()
        t0 = time.perf_counter()
        r.capture(warmup=0)
        torch.cuda.synchronize()
        cap[b] = time.perf_counter() - t0
        priv[b] = torch.cuda.memory_reserved() - r0
        r.graph = r.out = None
    torch.cuda.empty_cache()
    r0 = torch.cuda.memory_reserved()
    pool = torch.cuda.graph_pool_handle()
    keep, shared = [], {}
    for b in sorted(batches, reverse=True):
        r = Runner(model, "none", b, ctx, weights=weights, cache=[(k[:b], v[:b]) for k, v in cache])
        r.capture(pool=pool, warmup=1)
        torch.cuda.synchronize()
        keep.append(r)
        shared[b] = torch.cuda.memory_reserved() - r0
    del keep, cache
    torch.cuda.empty_cache()
    bs = sorted(batches)
    return {"batch": bs, "private_pool_bytes": [priv[b] for b in bs],
            "shared_pool_total_bytes": [shared[b] for b in bs], "capture_s": [cap[b] for b in bs], "ctx": ctx}


def weights_model(name):
    from simulator.models import PRESETS

    return PRESETS[name]


def save_trace(out_dir, weights, model="qwen3-0.6b", batch=1, ctx=512, steps=3):
    """Chrome trace (gzip) of `steps` eager decode steps plus the graph-replay step time."""
    import torch

    r = Runner(model, "none", batch, ctx, weights=weights)
    for _ in range(3):
        r.step()
    tmp = os.path.join(out_dir, "trace.json")

    def run():
        for _ in range(steps):
            r.step()
            torch.cuda.synchronize()

    ev = kernel_events(run, path=tmp)
    with open(tmp, "rb") as f, gzip.open(os.path.join(out_dir, "trace.json.gz"), "wb") as g:
        shutil.copyfileobj(f, g)
    os.unlink(tmp)
    row = measure_config(r, n_eager=20, n_graph=100, profile_kernels=False)
    return {"model": model, "fusion": "none", "batch": batch, "ctx": ctx, "steps": steps,
            "kernels_in_trace": len(ev), "eager_step_ms": row["eager"]["step_ms"],
            "graph_replay_step_ms": row["graph"]["step_ms"], "graph_replay_host_ms": row["graph"]["host_ms"]}


def run(out_dir, quick=False, log=print, save=None):
    """All rows of the grid; returns the measured dict (also written to out_dir/measured.json)."""
    import torch

    rows, mem = [], {}
    t_start = time.time()
    cur, w, cache = None, None, None
    trace = None
    for model, b, c, fusions in grid(quick):
        if model != cur:
            w = cache = None
            torch.cuda.empty_cache()
            cur, w = model, make_weights(weights_model(model))
            if model == "qwen3-0.6b" and trace is None:
                trace = save_trace(out_dir, w)
                log(f"trace saved: eager {trace['eager_step_ms']['p50']:.3f} ms, "
                    f"graph {trace['graph_replay_step_ms']['p50']:.3f} ms")
            if model not in mem:
                mem[model] = graph_memory(model, w, (1, 64) if quick else MEMORY_FIT_BATCHES)
                log(f"{model} graph memory: {mem[model]['private_pool_bytes']}")
        cache = None
        torch.cuda.empty_cache()
        cache = make_cache(weights_model(model), b, c)
        for f in fusions:
            t0 = time.time()
            try:
                r = Runner(model, f, b, c, weights=w, cache=cache)
                row = measure_config(r, n_eager=8 if quick else 20, n_graph=15 if quick else 30,
                                     profile_kernels=(c == 512))
            except Exception as e:  # noqa: BLE001  (record and go on: one bad config must not lose the run)
                row = {"model": model, "fusion": f, "batch": b, "ctx": c, "error": f"{type(e).__name__}: {e}"[:300]}
                log(f"ERROR {model} {f} b{b} c{c}: {row['error']}")
            rows.append(row)
            if save is not None:
                save({"rows": rows, "graph_memory": mem, "trace": trace, "partial": True})
            if "eager" in row:
                log(f"{model:11s} {f:8s} b{b:<4d} c{c:<5d} eager {row['eager']['step_ms']['p50']:8.3f} ms "
                    f"graph {row['graph']['step_ms']['p50']:8.3f} ms k={row.get('kernels', '-')} "
                    f"pool={row['graph']['pool_bytes'] / 2**20:.0f}MiB ({time.time() - t0:.1f}s, "
                    f"total {time.time() - t_start:.0f}s)")
    return {"rows": rows, "graph_memory": mem, "trace": trace}
