"""Kernel-time tables on shape grids covering decode, timed as CUDA-graph replays.

Each figure is the time per op of R back-to-back copies of the op inside one replayed graph
(CUDA events around the replay, median of several replays, divided by R), i.e. kernel time plus
one graph-node gap; build_profile.py subtracts the measured node gap. Weights (GEMM) and KV slices
(attention) rotate over R distinct buffers of together well over the 60 MB L2, as a decode step's
layers do; activations stay hot, as they are in a decode step. GEMM (n, k) pairs come from
simulator/model/workload.py's own step lists (stdlib-only import), so the tables cover exactly the
shapes the model asks for. torch is imported inside functions only.
"""

from __future__ import annotations

import math

M_GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
ATT_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
ATT_CTX = (128, 256, 512, 1024, 2048, 4096, 8192)
ROT_BYTES = 192 << 20  # rotate over at least this much distinct memory where possible


def gemm_shapes(models=("qwen3-0.6b", "llama3-8b")):
    """(n, k) of every GEMM the workload builder emits for these models, all fusion levels."""
    from simulator.model.models import PRESETS
    from simulator.model.workload import FUSION_LEVELS, build_step, decode

    out = set()
    for name in models:
        for fusion in FUSION_LEVELS:
            for op in build_step(PRESETS[name], decode(1, 128), fusion).ops:
                if op.op_class.value == "gemm":
                    out.add((op.dim("n"), op.dim("k")))
    return sorted(out)


def graph_op_us(fns, reps=5):
    """µs per op of running every fn in `fns` once, back to back, inside one replayed graph."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for f in fns:
            f()
    g.replay()
    g.replay()
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(reps):
        st.record()
        g.replay()
        en.record()
        en.synchronize()
        ts.append(st.elapsed_time(en) * 1e3 / len(fns))
    del g
    return sorted(ts)[len(ts) // 2]


def _reps(nbytes, cap=32):
    return int(max(1, min(cap, math.ceil(ROT_BYTES / max(nbytes, 1)))))


def gemm_tables(shapes, m_grid=M_GRID):
    """Per-op graph times of every (n, k) x m. No profiler here (timing process): how many kernels
    cuBLAS launches per call is counted in the counts process (child_counts.gemm_kernel_counts)."""
    import torch
    import torch.nn.functional as F

    out = []
    for n, k in shapes:
        row = {"n": n, "k": k, "m": list(m_grid), "graph_us": []}
        if k == 1:  # the rotary preamble's fp32 bmm: inv_freq[B,n,1] @ pos[B,1,1]
            inv = torch.rand(n, device="cuda")
            for m in m_grid:
                a = inv[None, :, None].expand(m, -1, 1)
                p = torch.rand(m, 1, 1, device="cuda")
                row["graph_us"].append(graph_op_us([lambda a=a, p=p: a @ p] * 8))
            out.append(row)
            continue
        R = _reps(n * k * 2)
        ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(R)]
        for m in m_grid:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            row["graph_us"].append(graph_op_us([lambda w=w, x=x: F.linear(x, w) for w in ws]))
        out.append(row)
        del ws
    return out


def attention_tables(head_cfgs, batches=ATT_BATCH, ctxs=ATT_CTX, max_tokens=None):
    """Decode SDPA (q_len 1, GQA) time per (batch, ctx) for each (heads, kv_heads, head_dim)."""
    import torch
    import torch.nn.functional as F

    out = []
    Bmax, Cmax = max(batches), max(ctxs)
    for heads, kvh, hd in head_cfgs:
        K = torch.randn(Bmax, kvh, Cmax, hd, device="cuda", dtype=torch.bfloat16)
        V = torch.randn(Bmax, kvh, Cmax, hd, device="cuda", dtype=torch.bfloat16)
        us = []
        for b in batches:
            row = []
            q = torch.randn(b, heads, 1, hd, device="cuda", dtype=torch.bfloat16)
            for c in ctxs:
                R = min(Bmax // b, _reps(2 * b * kvh * c * hd * 2, cap=128))
                fns = [lambda i=i, c=c: F.scaled_dot_product_attention(
                    q, K[i * b:(i + 1) * b, :, :c], V[i * b:(i + 1) * b, :, :c], enable_gqa=True) for i in range(R)]
                row.append(graph_op_us(fns, reps=3))
            us.append(row)
        out.append({"heads": heads, "kv_heads": kvh, "head_dim": hd, "batch": list(batches), "ctx": list(ctxs),
                    "graph_us": us})
        del K, V
    return out


def curves(quick=False):
    """Elementwise, reduction and copy time vs bytes moved (read + written), each point the mean
    over a mix of the kernels decode issues for that class (vectorised and broadcast /
    non-contiguous variants); embedding as a qwen3-sized table lookup."""
    import torch
    import torch.nn.functional as F

    bf = torch.bfloat16
    exps = range(10, 27, 4 if quick else 2)
    res = {"elementwise": [], "reduction": [], "memcopy": [], "embedding": []}
    for e in exps:
        n = 1 << e
        rows = n // 1024
        a = torch.randn(rows, 1024, device="cuda", dtype=bf)
        b = torch.randn(rows, 1024, device="cuda", dtype=bf)
        f = torch.randn(rows, 1024, device="cuda")
        r = torch.randn(rows, 1, device="cuda")
        x4 = torch.randn(rows, 1, 8, 128, device="cuda", dtype=bf)
        c4 = torch.randn(rows, 1, 1, 128, device="cuda", dtype=bf)
        f128 = torch.randn(n // 128, 128, device="cuda")
        mixes = {
            "elementwise": [(lambda: a * b, 6 * n), (lambda: f * r, 8 * n), (lambda: x4.transpose(1, 2) * c4, 4 * n),
                            (lambda: f.pow(2), 8 * n), (lambda: F.silu(a), 4 * n)],
            "reduction": [(lambda: f.mean(-1, keepdim=True), 4 * n + 4 * rows),
                          (lambda: f128.mean(-1, keepdim=True), 4 * n + 4 * n / 128)],
            "memcopy": [(lambda: a.to(torch.float32), 6 * n), (lambda: f.to(bf), 6 * n),
                        (lambda: torch.cat((a, b), -1), 8 * n)],
        }
        for cls, mix in mixes.items():
            fns = [fn for fn, _ in mix] * (16 // len(mix) + 1)
            res[cls].append((sum(bt for _, bt in mix) / len(mix), graph_op_us(fns)))
        del a, b, f, r, x4, c4, f128
    W = torch.randn(151936, 1024, device="cuda", dtype=bf)
    for B in (1, 4, 16, 64, 256, 1024) if not quick else (1, 64, 1024):
        ids = torch.randint(0, 151936, (B, 1), device="cuda")
        res["embedding"].append((B * (1024 * 2 + 8.0), graph_op_us([lambda: F.embedding(ids, W)] * 16)))
    return {k: {"bytes": [p[0] for p in v], "graph_us": [p[1] for p in v]} for k, v in res.items()}
