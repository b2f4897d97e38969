"""GPU microbenchmarks: host cost per launch path, stream gaps, graph costs, ceilings, environment.

Pure torch + stdlib (runs on the GPU machine without launchsim's dependencies); writes a raw JSON
dict that calibration/build_profile.py turns into a validated profile on any machine. Kernel-time
tables live in calibration/tables.py. Method:
- host cost per path: each op timed alone with `perf_counter_ns` around the call, thousands of
  calls, the device synchronised every 100 calls so the launch queue never fills; the median cost
  of an empty call is subtracted. Percentiles p10/p50/p90 are kept.
- compiled: host time of a torch.compile'd function launching k independent Triton kernels for
  several k; slope = per-kernel cost (`compiled`), intercept = `compiled_entry_us`.
- gaps: torch.profiler (CUPTI) timestamps of back-to-back tiny kernels, eager with the stream
  held busy by a sleep kernel (so the queue is full) and inside a replayed CUDA graph.
- graph replay host cost: replay() timed for graphs of 1..1000 nodes, least squares fixed + slope;
  capture + instantiate time likewise.
Stream gaps and graph replay/capture costs live in calibration/streams.py.
torch is imported inside functions only.
"""

from __future__ import annotations

import os
import platform
import subprocess
import time


def _pct(xs):
    s = sorted(xs)
    n = len(s)

    def q(p):
        i = (n - 1) * p
        lo = int(i)
        hi = min(lo + 1, n - 1)
        return s[lo] + (s[hi] - s[lo]) * (i - lo)

    return {"p10": q(0.1), "p50": q(0.5), "p90": q(0.9), "n": n}


def _linfit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def environment():
    import torch

    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "python": platform.python_version(), "cores": os.cpu_count(), "platform": platform.platform()}
    props = torch.cuda.get_device_properties(0)
    env["gpu_memory_gib"] = round(props.total_memory / 2**30, 2)
    env["sm_count"] = props.multi_processor_count
    try:
        import triton

        env["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.mem",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout
        env["driver"], env["sm_clock"], env["mem_clock"] = [x.strip() for x in out.strip().split(",")][:3]
    except Exception:  # noqa: BLE001
        pass
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                env["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        env["cpu"] = platform.processor()
    return env


def _time_calls(fns, n, sync_every=100):
    """Per-call host time in µs of each fn in `fns` (cycled), sync every `sync_every` calls."""
    import torch

    pc = time.perf_counter_ns
    out = []
    for _ in range(min(200, n)):
        for f in fns:
            f()
    torch.cuda.synchronize()
    i = 0
    while len(out) < n:
        for f in fns:
            t0 = pc()
            f()
            out.append((pc() - t0) / 1e3)
            i += 1
        if i >= sync_every:
            torch.cuda.synchronize()
            i = 0
    torch.cuda.synchronize()
    return out


def host_costs(n=4000):
    """Host µs per launch path (percentiles), with each path's ops named."""
    import torch
    import torch.nn.functional as F

    d, bf = "cuda", torch.bfloat16
    a = torch.randn(4, 256, device=d, dtype=bf)
    b = torch.randn(4, 256, device=d, dtype=bf)
    f32 = torch.randn(4, 256, device=d)
    x3 = torch.randn(1, 1, 256, device=d, dtype=bf)
    w = torch.randn(256, 256, device=d, dtype=bf)
    q = torch.randn(1, 16, 1, 128, device=d, dtype=bf)
    kv = torch.randn(1, 8, 128, 128, device=d, dtype=bf)
    kc = torch.randn(1, 8, 128, 128, device=d, dtype=bf)
    knew = torch.randn(1, 8, 1, 128, device=d, dtype=bf)
    cpos = torch.tensor([5], device=d)
    ids = torch.randint(0, 1000, (1, 1), device=d)
    emb = torch.randn(1000, 256, device=d, dtype=bf)
    t4 = torch.randn(1, 1, 16, 128, device=d, dtype=bf)
    flat = torch.randn(1, 1, 2048, device=d, dtype=bf)
    mul = torch.ops.aten.mul.Tensor
    paths = {
        "eager_elementwise": ("a*b, a+b, f32.pow(2), f32+eps, rsqrt, neg, silu (pooled)",
                              [lambda: a * b, lambda: a + b, lambda: f32.pow(2), lambda: f32 + 1e-6,
                               lambda: torch.rsqrt(f32), lambda: -a, lambda: F.silu(a)]),
        "eager_reduction": ("f32.mean(-1, keepdim=True)", [lambda: f32.mean(-1, keepdim=True)]),
        "eager_gemm": ("F.linear(x[1,1,256], w[256,256])", [lambda: F.linear(x3, w)]),
        "eager_attention": ("F.scaled_dot_product_attention(q, k, v, enable_gqa=True), 16/8 heads, ctx 128",
                            [lambda: F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)]),
        "eager_copy": ("to(fp32) x3, to(bf16), cat, index_copy_, transpose.contiguous (pooled, decode mix)",
                       [lambda: a.to(torch.float32), lambda: a.to(torch.float32), lambda: f32.to(bf),
                        lambda: torch.cat((a, b), dim=-1), lambda: kc.index_copy_(2, cpos, knew),
                        lambda: t4.transpose(1, 2).contiguous()]),
        "eager_embedding": ("F.embedding(ids[1,1], W[1000,256])", [lambda: F.embedding(ids, emb)]),
        "eager_view": ("view, transpose, slice, unsqueeze, reshape (pooled)",
                       [lambda: t4.view(1, 16, 128), lambda: t4.transpose(1, 2), lambda: t4[..., :64],
                        lambda: a.unsqueeze(1), lambda: flat.reshape(1, 16, 128)]),
        "custom_op": ("torch.ops.aten.mul.Tensor (an op called through torch.ops, as a registered custom op is)",
                      [lambda: mul(a, b)]),
        "raw": ("torch.cuda._sleep(1): one kernel launch through a bare binding, no dispatcher",
                [lambda: torch.cuda._sleep(1)]),
    }
    empty = _pct(_time_calls([lambda: None], n))["p50"]
    res = {}
    for path, (desc, fns) in paths.items():
        xs = [max(v - empty, 0.0) for v in _time_calls(fns, n)]
        res[path] = {**_pct(xs), "op": desc}
    ctx = mixed_block(paths, res, n // 10)
    extra = {}
    for name, fn in {"F.rms_norm": lambda: F.rms_norm(a, (256,)),
                     "torch.add(out=)": lambda: torch.add(a, b, out=a)}.items():
        try:
            extra[name] = _pct([max(v - empty, 0.0) for v in _time_calls([fn], n // 2)])
        except Exception as e:  # noqa: BLE001
            extra[name] = str(e)
    return {"paths": res, "timer_overhead_us": empty, "extra": extra, "context": ctx}


BLOCK_MIX = {"eager_elementwise": 16, "eager_reduction": 2, "eager_copy": 6, "eager_gemm": 4,
             "eager_attention": 1, "eager_view": 10, "eager_embedding": 1}


def mixed_block(paths, res, n_blocks=300):
    """Host time of a straight-line block of 40 mixed ops in a decoder-like proportion, against
    the sum of the same ops' isolated costs: the 'context factor' of ops issued among other ops
    (instruction-cache and branch-predictor misses, allocator state) rather than in a tight loop."""
    import torch

    items, expect = [], 0.0
    for path, c in BLOCK_MIX.items():
        fns = paths[path][1]
        items += [((i * 997 + len(items) * 31) % 101, fns[i % len(fns)]) for i in range(c)]
        expect += c * res[path]["p50"]
    seq = [f for _, f in sorted(items, key=lambda t: t[0])]  # a fixed interleaving
    pc = time.perf_counter_ns
    for _ in range(20):
        for f in seq:
            f()
    ts = []
    for _ in range(n_blocks):
        torch.cuda.synchronize()
        t0 = pc()
        for f in seq:
            f()
        ts.append((pc() - t0) / 1e3)
    torch.cuda.synchronize()
    q = _pct(ts)
    return {"ops": len(seq), "block_us": q, "isolated_sum_us": expect, "factor": q["p50"] / expect,
            "factor_p10": q["p10"] / expect, "factor_p90": q["p90"] / expect}


def compiled_costs(ks=(1, 4, 16, 48), n=600, count=None):
    """Host µs of a compiled fn launching k independent Triton kernels; slope and intercept.
    `count(fn)` (a profiler, counts process only) checks the kernels per call; in a timing process
    it is None and each of the k independent pointwise ops is one Triton kernel (the counts
    process records the check)."""
    import torch

    pts = []
    for k in ks:
        xs = [torch.randn(256, device="cuda") + i for i in range(k)]

        def f(*xs):
            return [x * 2.0 + 1.0 for x in xs]

        cf = torch.compile(f, dynamic=False)
        for _ in range(3):
            cf(*xs)
        torch.cuda.synchronize()
        kernels = k if count is None else count(lambda: cf(*xs))["kernels"]
        ts = _time_calls([lambda: cf(*xs)], n, sync_every=20)
        pts.append({"k": k, "kernels": kernels, **_pct(ts)})
    a, b = _linfit([p["kernels"] for p in pts], [p["p50"] for p in pts])
    _, b10 = _linfit([p["kernels"] for p in pts], [p["p10"] for p in pts])
    _, b90 = _linfit([p["kernels"] for p in pts], [p["p90"] for p in pts])
    return {"points": pts, "entry_us": a, "per_kernel_us": b, "per_kernel_p10": b10, "per_kernel_p90": b90}


def compiled_extern_costs(ks=(1, 4, 16), n=600):
    """Host µs of a compiled fn making k extern GEMM calls (Inductor calls aten mm, as it does for a
    decode step's projections): slope = host cost of one extern call from compiled code."""
    import torch

    pts = []
    x = torch.randn(16, 256, device="cuda", dtype=torch.bfloat16)
    for k in ks:
        ws = [torch.randn(256, 256, device="cuda", dtype=torch.bfloat16) for _ in range(k)]

        def f(x, *ws):
            return [x @ w for w in ws]

        cf = torch.compile(f, dynamic=False)
        for _ in range(3):
            cf(x, *ws)
        torch.cuda.synchronize()
        ts = _time_calls([lambda: cf(x, *ws)], n, sync_every=20)
        pts.append({"k": k, **_pct(ts)})
    a, b = _linfit([p["k"] for p in pts], [p["p50"] for p in pts])
    return {"points": pts, "entry_us": a, "per_call_us": b}


def ceilings():
    """Device-to-device copy bandwidth (bytes read + written) and bf16 GEMM TFLOP/s (8192^3)."""
    import torch

    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n = 1 << 30  # 2 GiB of bf16
    a = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    ts = []
    for _ in range(10):
        st.record()
        b.copy_(a)
        en.record()
        en.synchronize()
        ts.append(st.elapsed_time(en) / 1e3)
    bw = 2 * 2 * n / sorted(ts)[len(ts) // 2] / 1e12
    del a, b
    N = 8192
    x = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        x @ y
    ts = []
    for _ in range(10):
        st.record()
        x @ y
        en.record()
        en.synchronize()
        ts.append(st.elapsed_time(en) / 1e3)
    tf = 2 * N ** 3 / sorted(ts)[len(ts) // 2] / 1e12
    return {"copy_tbps": bw, "gemm_bf16_tflops": tf}

