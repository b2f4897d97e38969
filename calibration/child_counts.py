"""Counts process: everything that needs torch.profiler, and nothing that is timed.

    python3 -m calibration.child_counts --out DIR --job eager [--quick]
    python3 -m calibration.child_counts --out DIR --job compiled:MODEL:BATCH:DYNAMIC [--quick]

`eager`: kernels per decode step (count, names, CUPTI durations) of the reference decoder at fusion
none/packed, cuBLAS kernels per GEMM call, the compiled microbenchmark's kernels per call, a Chrome
trace of the reference decoder (qwen3-0.6b none b1 ctx 512, 3 steps), and Chrome traces of Hugging Face
transformers' own eager decode (batch 1 and 8) for the trace-import cross-check.
`compiled:...`: compiles the reference decoder with torch.compile (this also warms the on-disk Inductor
cache the timing process then reads) and records what Inductor left: kernels per step by kind
(Triton pointwise / reduction / persistent-reduction, extern GEMM, attention, other) with names and
CUPTI durations.
Kernel *durations* read here are GPU-side CUPTI timestamps; no host time from this process is used.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import time

from .jsonio import dump as _dump


def kernel_kind(name: str) -> str:
    n = name.lower()
    if n.startswith("triton_poi"):
        return "triton_pointwise"
    if n.startswith("triton_red"):
        return "triton_reduction"
    if n.startswith("triton_per"):
        return "triton_persistent_reduction"
    if n.startswith("triton"):
        return "triton_other"
    if "gemm" in n or "gemv" in n or "cutlass" in n or "sm90_xmma" in n or "splitk" in n or "nvjet" in n:
        return "gemm"
    if "flash" in n or "fmha" in n or "attention" in n or "sdpa" in n or "cudnn" in n:
        return "attention"
    return "other"


def step_counts(step, sync=True) -> dict:
    import torch

    from .profiling import kernel_events

    def run():
        step()
        if sync:
            torch.cuda.synchronize()

    ev = kernel_events(run, cats=("kernel", "gpu_memset", "gpu_memcpy"))
    ks = [e for e in ev if e["cat"] == "kernel"]
    kinds: dict[str, int] = {}
    for e in ks:
        kinds[kernel_kind(e["name"])] = kinds.get(kernel_kind(e["name"]), 0) + 1
    return {"kernels": len(ks), "memsets": sum(e["cat"] == "gpu_memset" for e in ev),
            "memcpys": sum(e["cat"] == "gpu_memcpy" for e in ev), "kinds": kinds,
            "kernel_us": sum(e["dur"] for e in ks),
            "sequence": [[e["name"][:100], round(e["dur"], 3)] for e in ks]}


def _save_trace(fn, out_dir, name, steps=3, shapes=True):
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=shapes) as p:
        for _ in range(steps):
            fn()
            torch.cuda.synchronize()
    tmp = os.path.join("/tmp", name + ".json")
    p.export_chrome_trace(tmp)
    with open(tmp, "rb") as f, gzip.open(os.path.join(out_dir, name + ".json.gz"), "wb") as g:
        shutil.copyfileobj(f, g)
    os.unlink(tmp)


def linear_kernels(calls) -> list[list[dict]]:
    """The GPU kernels (kernel_events dicts) each F.linear(x, w) of `calls` ((key, w, x) triples) launches, from one
    profiler session in which a fill kernel (a marker no GEMM launches) separates the calls. Counts process only."""
    import torch
    import torch.nn.functional as F

    from .profiling import kernel_events

    marker = torch.empty(7, device="cuda")

    def run():
        for _, w, x in calls:
            marker.fill_(1.0)
            F.linear(x, w)
        marker.fill_(1.0)

    run()
    torch.cuda.synchronize()
    groups, cur = [], None
    for e in kernel_events(run):
        if "FillFunctor" in e["name"]:
            if cur is not None:
                groups.append(cur)
            cur = []
        elif cur is not None:
            cur.append(e)
    return groups


def gemm_kernel_counts(shapes, m_grid):
    """Kernels one F.linear launches per (n, k, m) (cuBLAS split-K adds a reduce kernel) (`linear_kernels`)."""
    import torch

    calls = []
    for n, k in shapes:
        if k == 1:
            continue
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        for m in m_grid:
            calls.append(((n, k, m), w, torch.randn(m, k, device="cuda", dtype=torch.bfloat16)))
    out = {}
    for (key, _, _), ks in zip(calls, linear_kernels(calls)):
        out.setdefault((key[0], key[1]), {})[key[2]] = len(ks)
    return [{"n": n, "k": k, "m": list(m_grid), "kernels": [ms.get(m, 1) for m in m_grid]}
            for (n, k), ms in sorted(out.items())]


def job_eager(out_dir, quick, log):
    import torch

    from . import microbench as mb
    from . import tables as tb
    from .reference_decoder import model_spec
    from .profiling import count_kernels
    from .reference_decoder import Runner, make_cache, make_weights

    res = {"kind": "launchsim-counts", "environment": mb.environment(), "rows": []}
    path = os.path.join(out_dir, "counts_eager.json")
    models = ("qwen3-0.6b", "llama3-8b")
    for name in models:
        m = model_spec(name, quick)
        w = make_weights(m)
        for b in (1, 64) if quick else ((1, 8, 64, 512) if name == "qwen3-0.6b" else (1, 8, 64)):
            cache = make_cache(m, b, 512)
            for f in ("none", "packed"):
                r = Runner(m, f, b, 512, weights=w, cache=cache)
                for _ in range(2):
                    r.step()
                torch.cuda.synchronize()
                res["rows"].append({"model": name, "fusion": f, "batch": b, "ctx": 512, "graph": "none",
                                    **step_counts(r.step)})
                g = r.capture()
                for _ in range(2):
                    g.replay()
                res["rows"].append({"model": name, "fusion": f, "batch": b, "ctx": 512, "graph": "full",
                                    **step_counts(r.replay)})
                r.release()
                log(f"[counts] {name} {f} b{b}: {res['rows'][-2]['kernels']} kernels")
            del cache
            torch.cuda.empty_cache()
        if name == "qwen3-0.6b":
            r = Runner(m, "none", 1, 512, weights=w)
            for _ in range(3):
                r.step()
            _save_trace(r.step, out_dir, "ref_qwen3-0.6b_none_b1_ctx512.trace", shapes=False)
            del r
        del w
        torch.cuda.empty_cache()
        _dump(res, path)
    shapes = tb.gemm_shapes()
    res["gemm_kernels"] = gemm_kernel_counts(shapes[:3] if quick else shapes, (1, 64, 1024) if quick else tb.M_GRID)
    res["compiled_micro"] = mb.compiled_costs((1, 16) if quick else (1, 4, 16, 48), n=50, count=count_kernels)
    _dump(res, path)
    from .hf_decoder import HFRunner

    res["hf"] = []
    for b in (1, 8):
        try:
            r = HFRunner("qwen3-0.6b", b, 512, room=64)
            for _ in range(3):
                r.step()
            torch.cuda.synchronize()
            c = step_counts(r.step)
            c.pop("sequence")
            _save_trace(r.step, out_dir, f"hf_qwen3-0.6b_eager_b{b}.trace")
            res["hf"].append({"model": "qwen3-0.6b", "batch": b, "ctx": 512, "max_cache_len": r.max_len, **c})
            log(f"[counts] HF qwen3-0.6b b{b}: {c['kernels']} kernels")
            del r
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001  (recorded; the round goes on)
            import traceback

            traceback.print_exc()
            res["hf"].append({"batch": b, "error": f"{type(e).__name__}: {e}"[:400]})
    _dump(res, path)


def job_hf_traces(out_dir, quick, log):
    """Traces of transformers' own decode step, StaticCache (max_cache_len ctx + 64, as generate() sizes it for
    64 new tokens) and DynamicCache, batch 1 and 8, with kernel counts: the inputs for predicting generate()."""
    import torch

    from . import microbench as mb
    from .hf_decoder import HFRunner

    res = {"kind": "launchsim-hf-traces", "environment": mb.environment(), "hf": []}
    path = os.path.join(out_dir, "counts_hf.json")
    for cache in ("static", "dynamic"):
        for b in ((1,) if quick else (1, 8)):
            try:
                r = HFRunner("qwen3-0.6b", b, 512, room=64, cache=cache)
                for _ in range(3):
                    r.step()
                torch.cuda.synchronize()
                c = step_counts(r.step)
                c.pop("sequence")
                name = f"hf_qwen3-0.6b_{cache}_b{b}.trace"
                _save_trace(r.step, out_dir, name)
                res["hf"].append({"model": "qwen3-0.6b", "batch": b, "ctx": 512, "cache": cache,
                                  "max_cache_len": r.max_len if cache == "static" else None, "trace": name, **c})
                log(f"[counts] HF qwen3-0.6b {cache} b{b}: {c['kernels']} kernels")
                del r
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001  (recorded; the round goes on)
                import traceback

                traceback.print_exc()
                res["hf"].append({"batch": b, "cache": cache, "error": f"{type(e).__name__}: {e}"[:400]})
            _dump(res, path)


def job_compiled(out_dir, spec, quick, log):
    import torch

    from .reference_decoder import model_spec
    from .reference_decoder import Runner, make_weights

    _, name, batch, dyn = spec.split(":")
    batch, dyn = int(batch), dyn == "dynamic"
    m = model_spec(name, quick)
    t0 = time.time()
    r = Runner(m, "compiled", batch, 512, weights=make_weights(m), dynamic=dyn)
    r.step()
    torch.cuda.synchronize()
    compile_s = time.time() - t0
    for _ in range(2):
        r.step()
    row = {"model": name, "fusion": "compiled", "dynamic": dyn, "batch": batch, "ctx": 512, "graph": "none",
           "compile_s_cold": compile_s, **step_counts(r.step)}
    g = r.capture()
    g.replay()
    full = {**row, "graph": "full", **step_counts(r.replay)}
    tag = f"compiled_{name}_b{batch}_{'dyn' if dyn else 'static'}"
    _dump({"kind": "launchsim-counts-compiled", "rows": [row, full]}, os.path.join(out_dir, tag + ".json"))
    log(f"[counts] {tag}: compile {compile_s:.1f}s, {row['kernels']} kernels {row['kinds']}")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    log = lambda s: print(s, flush=True)  # noqa: E731
    if a.job == "eager":
        job_eager(a.out, a.quick, log)
    elif a.job == "hf_traces":
        job_hf_traces(a.out, a.quick, log)
    else:
        job_compiled(a.out, a.job, a.quick, log)


if __name__ == "__main__":
    main()
