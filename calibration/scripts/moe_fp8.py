"""Kernel tables for issue 15 on one H200: FP8 GEMMs, MoE grouped GEMMs and routing kernels, and a real MoE
decode step (transformers' Qwen3-MoE with random weights from the published Qwen3-30B-A3B config).

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.moe_fp8 --out DIR [--quick] [--job timing|counts]

`--job timing` (the default; no profiler in this process, canary at both ends, exit 3 on drift) writes
DIR/moe_fp8.json:
- `fp8_gemm`: per (n, k) of every GEMM the workload builder emits (calibration/tables.gemm_shapes) plus the
  MoE expert and router shapes, time per op of `torch._scaled_mm` (e4m3 activations and weights, per-tensor
  and row-wise fp32 scales, bf16 out) and of the bf16 `F.linear` on the same shapes, on the table grid
  M_GRID and on a held-out grid between its points (HELD_OUT_M: for validating interpolation, never fitted);
- `fp8_quant`: the dynamic per-tensor activation quant as vLLM's eager path does it (abs-max reduce, scale,
  divide-and-cast), time per op at each M for each K;
- `grouped_gemm`: `torch._grouped_mm` (bf16, experts' weights E x K x N) for the two expert GEMMs of
  Qwen3-30B-A3B (gate_up 2048 -> 1536, down 768 -> 2048) on a controlled grid (the first e experts get t
  tokens each) and on decode batches routed uniformly at random (top-8 of 128, seeded);
- `routing`: router softmax, top-k, the sort that groups tokens by expert, the gather and the weighted
  scatter-add that undoes it, per decode batch;
- `hf_moe`: transformers' Qwen3MoeForCausalLM cut to 4 layers, StaticCache, ctx 512, decode step time
  eager (isolated: synchronised per step) and as a full CUDA-graph replay where it captures, for each
  experts implementation transformers offers.
`--job counts` (a separate process: it runs the profiler) writes DIR/moe_counts.json: kernels per step of
the same HF MoE decode steps. Tables are timed as CUDA-graph replays (calibration/tables.graph_op_us).
torch is imported inside functions only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..hygiene import canary, check_canary, exit_code, forbid_profiler
from ..jsonio import dump as _dump

HELD_OUT_M = (3, 12, 48, 96, 192, 384, 768)
MOE = dict(hidden=2048, inter=768, experts=128, top_k=8, heads=32, kv_heads=4, head_dim=128, vocab=151936)
DECODE_B = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def _shapes(quick):
    from . import tables as tb

    s = [x for x in tb.gemm_shapes() if x[1] > 1]
    s += [(MOE["experts"], MOE["hidden"]), (2 * MOE["inter"], MOE["hidden"]), (MOE["hidden"], MOE["inter"])]
    s = sorted(set(s))
    return s[:3] if quick else s


def fp8_tables(quick):
    import torch
    import torch.nn.functional as F

    from ..tables import _reps, graph_op_us

    e4 = torch.float8_e4m3fn
    out = []
    grid = (1, 64) if quick else tuple(sorted(set((1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024) + HELD_OUT_M)))
    for n, k in _shapes(quick):
        R = _reps(n * k)
        ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(R)]
        wq = [(w / w.abs().max().float().clamp(min=1e-6) * 448).to(e4) for w in ws]
        sb_t = torch.tensor(1.0, device="cuda")
        sb_r = torch.ones(1, n, device="cuda")
        row = {"n": n, "k": k, "m": list(grid), "bf16_us": [], "fp8_tensor_us": [], "fp8_row_us": []}
        for m in grid:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            xq = x.to(e4)
            row["bf16_us"].append(graph_op_us([lambda w=w, x=x: F.linear(x, w) for w in ws]))
            for key, sa, sb in (("fp8_tensor_us", torch.tensor(1.0, device="cuda"), sb_t),
                                ("fp8_row_us", torch.ones(m, 1, device="cuda"), sb_r)):
                try:
                    row[key].append(graph_op_us([lambda w=w, xq=xq, sa=sa, sb=sb: torch._scaled_mm(
                        xq, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16) for w in wq]))
                except Exception as e:  # noqa: BLE001  (recorded: a shape cuBLASLt refuses)
                    row[key].append(None)
                    row.setdefault("errors", []).append(f"{key} m{m}: {type(e).__name__}: {e}"[:200])
        out.append(row)
        del ws, wq
        torch.cuda.empty_cache()
    return {"held_out_m": list(HELD_OUT_M), "rows": out}


def quant_tables(quick):
    import torch

    from ..tables import graph_op_us

    e4 = torch.float8_e4m3fn
    out = []
    for k in sorted({k for _, k in _shapes(quick)}):
        row = {"k": k, "m": [], "absmax_us": [], "scale_cast_us": []}
        for m in ((1, 64) if quick else (1, 8, 64, 512, 4096)):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            s = torch.ones((), device="cuda")
            row["m"].append(m)
            row["absmax_us"].append(graph_op_us([lambda: x.abs().amax()] * 8))
            row["scale_cast_us"].append(graph_op_us([lambda: (x / s).clamp(-448, 448).to(e4)] * 8))
        out.append(row)
    return out


def _offs(counts):
    import torch

    return torch.tensor(counts, device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)


def _routed_counts(b, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed + b)
    picks = np.stack([rng.choice(MOE["experts"], MOE["top_k"], replace=False) for _ in range(b)])
    return np.bincount(picks.ravel(), minlength=MOE["experts"]).tolist()


def grouped_tables(quick):
    import torch

    from ..tables import graph_op_us

    E, out = MOE["experts"], {"experts": MOE["experts"], "top_k": MOE["top_k"], "gemms": []}
    for name, k, n in (("gate_up", MOE["hidden"], 2 * MOE["inter"]), ("down", MOE["inter"], MOE["hidden"])):
        w = torch.randn(E, n, k, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)  # E x K x N, col-major
        row = {"name": name, "k": k, "n": n, "controlled": [], "routed": []}

        def run(counts):
            T = max(sum(counts), 1)
            x = torch.randn(T, k, device="cuda", dtype=torch.bfloat16)
            offs = _offs(counts)
            return graph_op_us([lambda: torch._grouped_mm(x, w, offs=offs, out_dtype=torch.bfloat16)] * 4)

        try:
            for e in ((1, 8) if quick else (1, 2, 4, 8, 16, 32, 64, 128)):
                for t in ((1, 4) if quick else (1, 2, 4, 8, 16, 32, 64)):
                    counts = [t] * e + [0] * (E - e)
                    row["controlled"].append({"experts": e, "tokens_per_expert": t, "us": run(counts)})
            for b in ((1, 8) if quick else DECODE_B):
                counts = _routed_counts(b)
                row["routed"].append({"batch": b, "active_experts": sum(c > 0 for c in counts),
                                      "max_tokens": max(counts), "counts": counts, "us": run(counts)})
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        out["gemms"].append(row)
        del w
        torch.cuda.empty_cache()
    return out


def routing_tables(quick):
    import torch

    from ..tables import graph_op_us

    H, E, K = MOE["hidden"], MOE["experts"], MOE["top_k"]
    rows = []
    for b in ((1, 8) if quick else DECODE_B):
        logits = torch.randn(b, E, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(b, H, device="cuda", dtype=torch.bfloat16)
        probs = logits.float().softmax(-1)
        wts, ids = probs.topk(K, dim=-1)
        flat = ids.flatten()
        order = flat.argsort()
        y = torch.randn(b * K, H, device="cuda", dtype=torch.bfloat16)
        acc = torch.zeros(b, H, device="cuda", dtype=torch.bfloat16)
        tok = (order // K)
        rows.append({"batch": b,
                     "softmax_us": graph_op_us([lambda: logits.float().softmax(-1)] * 8),
                     "topk_us": graph_op_us([lambda: probs.topk(K, dim=-1)] * 8),
                     "argsort_us": graph_op_us([lambda: flat.argsort()] * 8),
                     "gather_us": graph_op_us([lambda: x.index_select(0, tok)] * 8),
                     "scatter_add_us": graph_op_us([lambda: acc.index_add_(0, tok, y)] * 8),
                     "renorm_us": graph_op_us([lambda: wts / wts.sum(-1, keepdim=True)] * 8)})
    return rows


def _hf_moe(batch, impl, layers):
    import torch
    import transformers

    from ..hf_decoder import HFRunner

    cfg = transformers.Qwen3MoeConfig(
        vocab_size=MOE["vocab"], hidden_size=MOE["hidden"], intermediate_size=6144,
        moe_intermediate_size=MOE["inter"], num_hidden_layers=layers, num_attention_heads=MOE["heads"],
        num_key_value_heads=MOE["kv_heads"], head_dim=MOE["head_dim"], num_experts=MOE["experts"],
        num_experts_per_tok=MOE["top_k"], norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
        max_position_embeddings=40960, tie_word_embeddings=False, rms_norm_eps=1e-6)
    cfg._attn_implementation = "sdpa"
    if impl != "default":
        cfg._experts_implementation = impl
    r = HFRunner.__new__(HFRunner)
    torch.manual_seed(0)
    with torch.device("cuda"):
        r.model = transformers.Qwen3MoeForCausalLM(cfg).to(torch.bfloat16).eval()
    r.name, r.batch, r.ctx, r.max_len, r.cache_kind = "qwen3-30b-a3b", batch, 512, 512 + 576, "static"
    r.cache = HFRunner._cache(cfg, batch, r.max_len)
    g = torch.Generator(device="cuda").manual_seed(batch)
    with torch.no_grad():
        r.model(input_ids=torch.randint(0, MOE["vocab"], (batch, 512), device="cuda", generator=g),
                past_key_values=r.cache, use_cache=True, cache_position=torch.arange(512, device="cuda"))
    r.ids = torch.randint(0, MOE["vocab"], (batch, 1), device="cuda", generator=g)
    r.pos = torch.full((batch, 1), 512, device="cuda", dtype=torch.long)
    r.cpos = torch.tensor([512], device="cuda", dtype=torch.long)
    r.graph = r.out = None
    return r


HF_IMPLS = ("default", "grouped_mm", "batched_mm", "eager")


def hf_moe_timing(quick, log):
    import torch

    out = []
    for impl in (("default",) if quick else HF_IMPLS):
        for b in ((1,) if quick else (1, 8, 64)):
            row = {"model": "qwen3-30b-a3b", "layers": 4, "batch": b, "ctx": 512, "experts_impl": impl}
            try:
                r = _hf_moe(b, impl, 4)
                row["experts_impl_seen"] = getattr(r.model.config, "_experts_implementation", None)
                for _ in range(3):
                    r.step()
                torch.cuda.synchronize()
                ts = []
                for _ in range(20):
                    t0 = time.perf_counter()
                    r.step()
                    torch.cuda.synchronize()
                    ts.append(time.perf_counter() - t0)
                row["eager_ms"] = sorted(ts)[len(ts) // 2] * 1e3
                row["eager_ms_all"] = [t * 1e3 for t in ts]
                try:
                    r.capture()
                    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    gs = []
                    for _ in range(20):
                        st.record()
                        r.replay()
                        en.record()
                        en.synchronize()
                        gs.append(st.elapsed_time(en))
                    row["graph_ms"] = sorted(gs)[len(gs) // 2]
                except Exception as e:  # noqa: BLE001
                    row["graph_error"] = f"{type(e).__name__}: {e}"[:300]
                log(f"[hf_moe] {impl} b{b}: eager {row['eager_ms']:.2f} ms graph {row.get('graph_ms', float('nan')):.3f} ms")
                del r
            except Exception as e:  # noqa: BLE001
                row["error"] = f"{type(e).__name__}: {e}"[:300]
                log(f"[hf_moe] {impl} b{b}: {row['error'][:150]}")
            out.append(row)
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    return out


def hf_moe_counts(out_dir, quick, log):
    import torch

    from ..child_counts import step_counts

    res = {"kind": "launchsim-moe-counts", "rows": []}
    for impl in (("default",) if quick else HF_IMPLS):
        for b in ((1,) if quick else (1, 8, 64)):
            try:
                r = _hf_moe(b, impl, 4)
                for _ in range(3):
                    r.step()
                torch.cuda.synchronize()
                c = step_counts(r.step)
                res["rows"].append({"experts_impl": impl, "batch": b, "layers": 4, **c})
                log(f"[moe counts] {impl} b{b}: {c['kernels']} kernels")
                del r
            except Exception as e:  # noqa: BLE001
                res["rows"].append({"experts_impl": impl, "batch": b, "error": f"{type(e).__name__}: {e}"[:300]})
            torch.cuda.empty_cache()
            _dump(res, os.path.join(out_dir, "moe_counts.json"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--job", choices=("timing", "counts"), default="timing")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    log = lambda s: print(s, flush=True)  # noqa: E731
    if a.job == "counts":
        hf_moe_counts(a.out, a.quick, log)
        return 0
    forbid_profiler()
    import torch

    from .. import microbench as mb

    path = os.path.join(a.out, "moe_fp8.json")
    res = {"kind": "launchsim-moe-fp8", "quick": a.quick, "date": time.strftime("%Y-%m-%d"),
           "environment": mb.environment(), "moe_config": MOE}
    torch.zeros(1, device="cuda")
    res["canary_start"] = canary()
    for name, fn in (("fp8_gemm", lambda: fp8_tables(a.quick)), ("fp8_quant", lambda: quant_tables(a.quick)),
                     ("grouped_gemm", lambda: grouped_tables(a.quick)), ("routing", lambda: routing_tables(a.quick)),
                     ("hf_moe", lambda: hf_moe_timing(a.quick, log))):
        t0 = time.time()
        try:
            res[name] = fn()
        except Exception as e:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            res[name] = {"error": f"{type(e).__name__}: {e}"[:400]}
        res.setdefault("section_s", {})[name] = time.time() - t0
        log(f"[moe_fp8] {name}: {time.time() - t0:.1f}s")
        _dump(res, path)
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    _dump(res, path)
    c = res["canary"]
    log(f"[moe_fp8] canary {c['host_start_us']:.2f} -> {c['host_end_us']:.2f} us: {'OK' if c['ok'] else 'FAILED'}")
    return exit_code(c)


if __name__ == "__main__":
    sys.exit(main())
