"""Round g on one H200 (issues 20 and 21): eager rows with a canary per row, verify attention timed in place, and
the Gemma-3-1b HF decode kernel table. Built on round_f.py (its model builders, verify step and trace analysis are
imported from there, unchanged).

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_g --out DIR [--quick] [--only JOBS] [--bundle TGZ]
    python3 -m calibration.scripts.round_g --out DIR --job JOB [--quick] [--deadline S]   # one process

Jobs (each its own child process; timing processes first, profiled processes after):

- `eager` (timing process): every row below is measured in PASSES passes; each pass visits the rows in a seeded
  shuffled order (random.Random(SEED + pass)), builds the row's step fresh (a StaticCache prefilled with ctx 512
  tokens; the reference decoder's random cache), then takes `calibration.hygiene.canary()` immediately before and
  immediately after the row's timing (WARM warm-up calls, then REPS isolated steps: sync, step, sync). Every pass's
  median, p10/p90 and both canaries are recorded beside each other. All models stay resident (random bf16 weights),
  so the passes interleave across models. Rows: (a) HF transformers decoders from calibration/configs/hf/*.json
  (gemma-3-1b included), StaticCache max_cache_len ctx + 128, q_len 1, batch 1/8/32/64; (b) the reference
  decoder's verify step (round_f.verify_step: fusion none, lower-right causal SDPA over the ctx keys) at qwen3-0.6b
  and llama3-8b shapes, q_len 1, 2, 3, 4, 5, 8 (k = q_len - 1), batch 1/8/32/64; (c) HF Qwen3-0.6B verify
  (input_ids [B, q_len], StaticCache max_cache_len 1536), same q_len and batches. After the passes, (a)'s rows get
  one full-CUDA-graph replay timing each (isolated, as round f did) as a cross-check with round f.
- `inplace` (timing process): the verify attention as the step calls it. Per unit: the new K/V of q_len tokens are
  written by index_copy_ into a cache ([B, kv_heads, slots, head_dim], the decoders' layout) right before the
  attention; q is a transposed view of a [B, q_len, heads*head_dim] projection output. (i) `ref` layout: SDPA over
  ctx keys with causal_lower_right (q_len 1: no mask), enable_gqa (exactly round_f.verify_step); (ii) `hf`
  layout: transformers' own sdpa_attention_forward (the installed version's function, called with a module stub
  carrying num_key_value_groups) with a boolean mask over all max_cache_len = ctx + 128 slots (and 1536 at ctx
  512: round f's HF verify rows), built like the mask a probe of the real HF Qwen3 model passed (its shape,
  strides and dtype are recorded). Each point: graphs of ATT_UNITS units rotating over cache copies > 256 MB (the
  step reads a different layer's cache each time: L2 misses), CUDA events, 5 replays, median; timed twice, units
  with the attention (`unit_us`) and with the two index_copy_ alone (`copy_us`): `attn_us` = unit - copy is the
  attention's in-place cost, what the model's table holds. Also `alone_us`: the attention on the same in-place
  tensors without the copies (the round-f method, on this layout).
- `counts_gemma` (profiled): Gemma-3-1b HF decode at batch 1 and 8: kernels per step, per-layer per-aten-op kernel
  counts (round_f.analyse) and kernel durations by outermost aten op, gzip Chrome traces.
- `trace_verify` (profiled): a few verify steps (reference decoder, qwen3-0.6b and llama3-8b; HF Qwen3-0.6B)
  at batch 8 / 64, q_len 2 / 5 (k 1 / 4): attention kernels' in-step durations (kernels launched inside
  aten::scaled_dot_product_attention, per call) and all kernels' durations by outermost op.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import subprocess
import sys
import time
import traceback

from ..jsonio import dump as _dump
from ..microbench import _pct
from . import round_f as F

CTX = 512
ROOM = 128
VERIFY_SLOTS = 1536  # round f's HF verify StaticCache max_cache_len at ctx 512
BATCHES = (1, 8, 32, 64)
Q_LENS = (1, 2, 3, 4, 5, 8)
WARM, REPS = 3, 12
PASSES_MIN, PASSES_MAX = 3, 5
SEED = 20261202
HF_MODELS = F.HF_ORDER + ("gemma-3-1b",)
ATT_SHAPES = {"qwen3-0.6b": (16, 8, 128), "llama3-8b": (32, 8, 128)}
ATT_CTX = (512, 256, 2048, 8192)  # 512 first: the validation rows are at ctx 512
ATT_Q = (1, 2, 3, 4, 5, 6, 7, 8)
ATT_UNITS = 20
FAST_CANARY_US = 7.6


def log(*a):
    print(*a, flush=True)


class Proc:
    """A timing process's record: forbid the profiler, warm the host, canary at start; finish() adds the end one."""

    def __init__(self, out_dir, name, quick):
        from ..hygiene import canary, forbid_profiler

        forbid_profiler()
        F.warm_host()
        self.t0 = time.time()
        self.path = os.path.join(out_dir, name + ".json")
        self.res = {"kind": f"launchsim-round-g-{name}", "quick": quick, "environment": F.versions(),
                    "canary_start": canary(), "rows": [], "errors": []}
        self.save()

    def save(self):
        _dump(self.res, self.path)

    def error(self, what, e):
        traceback.print_exc()
        self.res["errors"].append({"what": what, "error": F.err(e)})
        self.save()

    def finish(self) -> int:
        from ..hygiene import canary, check_canary, exit_code

        self.res["canary_end"] = canary()
        self.res["canary"] = check_canary(self.res["canary_start"], self.res["canary_end"])
        self.res["wall_s"] = time.time() - self.t0
        self.save()
        log(f"[canary] {os.path.basename(self.path)}: {json.dumps(self.res['canary'])}")
        return exit_code(self.res["canary"])


def _can(c) -> dict:
    return {"host_us": c["host_tiny_op_us"]["p50"], "host_p90_us": c["host_tiny_op_us"]["p90"],
            "device_us": c["device_queued_kernel_us"]["p50"], "time": c["time"]}


# ------------------------------------------------------------------------------------------------ eager
def job_eager(out_dir, quick, deadline, name="eager", first_pass=0, graphs=True, rows_file=None):
    """`eager2` (name, first_pass 3, graphs False): more passes of the same rows in a second process, later in the
    session, with the pass numbers (and so the shuffle seeds) going on from the first process's."""
    import torch

    from ..hygiene import canary
    from ..reference_decoder import make_cache, make_weights

    P = Proc(out_dir, name, quick)
    t0 = P.t0
    layers = 2 if quick else None
    models = ("qwen3-0.6b", "gemma-3-1b") if quick else HF_MODELS
    bs = (1,) if quick else BATCHES
    qls = (1, 2) if quick else Q_LENS
    hf, ref = {}, {}
    for short in models:
        try:
            hf[short] = F.build_hf(short, layers)
            log(f"[eager] built {short}: attn {F.attn_ran(hf[short][0])}, {torch.cuda.memory_allocated() / 2**30:.1f} GiB")
        except Exception as e:  # noqa: BLE001
            P.error(f"build {short}", e)
    for name in ("qwen3-0.6b", "llama3-8b"):
        try:
            m = F.ref_spec(name, layers)
            ref[name] = (m, make_weights(m), {b: make_cache(m, b, CTX) for b in bs})
        except Exception as e:  # noqa: BLE001
            P.error(f"ref {name}", e)
    P.res["memory_allocated_gib"] = torch.cuda.memory_allocated() / 2**30
    P.res["build_s"] = time.time() - t0
    P.res["attn_implementation"] = {k: F.attn_ran(v[0]) for k, v in hf.items()}
    P.res["protocol"] = {"warm": WARM, "reps": REPS, "seed": SEED, "ctx": CTX, "room": ROOM,
                         "verify_slots": VERIFY_SLOTS, "fast_canary_us": FAST_CANARY_US}
    rows = [("hf", s, b, 1) for s in models if s in hf for b in bs]
    rows += [("ref_verify", n, b, q) for n in ("qwen3-0.6b", "llama3-8b") if n in ref for b in bs for q in qls]
    if "qwen3-0.6b" in hf:
        rows += [("hf_verify", "qwen3-0.6b", b, q) for b in bs for q in qls]
    if rows_file:  # eager3: only the rows the first two processes left with fewer than 2 fast-host passes
        with open(rows_file) as f:
            keep = {tuple(x) for x in json.load(f)}
        rows = [r for r in rows if r in keep]
        P.res["rows_file"] = rows_file
    rec = {r: {"impl": r[0], "model": r[1], "batch": r[2], "q_len": r[3], "ctx": CTX, "passes": []} for r in rows}
    for r, d in rec.items():
        if r[0] == "hf":
            d["max_cache_len"] = CTX + ROOM
            d["layers"] = hf[r[1]][1].num_hidden_layers
        elif r[0] == "hf_verify":
            d["max_cache_len"] = VERIFY_SLOTS
            d["layers"] = hf[r[1]][1].num_hidden_layers
        else:
            d["layers"] = ref[r[1]][0].num_hidden_layers
            d["attention"] = "causal_lower_right" if r[3] > 1 else "none"
    P.res["rows"] = list(rec.values())

    def make(r):
        kind, name, b, q = r
        if kind == "ref_verify":
            m, w, caches = ref[name]
            o = F.RefVerify.__new__(F.RefVerify)
            o.m, o.w, o.attn, o.cache, o.graph = m, w, "lower_right", caches[b], None
            g = torch.Generator(device="cuda").manual_seed(b * 7919 + CTX + q)
            o.ids = torch.randint(0, m.vocab_size, (b, q), device="cuda", generator=g)
            o.cpos = torch.arange(CTX - q, CTX, device="cuda")
            o.pos = o.cpos.unsqueeze(0).expand(b, q).contiguous()
            return o
        model, cfg = hf[name]
        return F.HFStep(model, cfg, b, q_len=q, room=ROOM if kind == "hf" else VERIFY_SLOTS - CTX)

    pass_s = []
    reserve = 0 if quick or not graphs else 60  # the graph cross-check after the passes
    for p in range(first_pass, first_pass + (2 if quick else PASSES_MAX)):
        left = deadline - (time.time() - t0)
        if p - first_pass >= (2 if quick or not graphs else PASSES_MIN) and (not pass_s or left - reserve < 1.15 * max(pass_s)):
            break
        order = list(rows)
        random.Random(SEED + p).shuffle(order)
        ts = time.time()
        for r in order:
            if deadline - (time.time() - t0) < 20:
                P.res["errors"].append({"what": f"pass {p} cut at the deadline", "error": "deadline"})
                break
            try:
                o = make(r)
                torch.cuda.synchronize()
                c0 = canary()
                t = F.iso_ms(o.step, warm=WARM, reps=REPS)
                c1 = canary()
                rec[r]["passes"].append({"pass": p, "canary_before": _can(c0), "canary_after": _can(c1), **t})
                del o
            except Exception as e:  # noqa: BLE001
                P.error(f"pass {p} {r}", e)
            F.free()
        pass_s.append(time.time() - ts)
        P.res["pass_s"] = pass_s
        P.save()
        log(f"[eager] pass {p}: {pass_s[-1]:.1f}s, {time.time() - t0:.0f}s into the process")
    for r in (x for x in rows if x[0] == "hf" and graphs):  # the full-graph cross-check with round f
        if deadline - (time.time() - t0) < 25:
            P.res["errors"].append({"what": "graph cross-check cut at the deadline", "error": "deadline"})
            break
        try:
            o = make(r)
            o.capture()
            rec[r]["graph_ms"] = F.iso_ms(o.replay, warm=3, reps=REPS)
            del o
        except Exception as e:  # noqa: BLE001
            rec[r]["graph_error"] = F.err(e)
        F.free()
    for d in rec.values():
        fast = [x for x in d["passes"] if max(x["canary_before"]["host_us"], x["canary_after"]["host_us"]) <= FAST_CANARY_US]
        d["fast_passes"] = len(fast)
        d["median_fast_ms"] = _pct([x["median"] for x in fast])["p50"] if fast else None
        d["median_all_ms"] = _pct([x["median"] for x in d["passes"]])["p50"] if d["passes"] else None
    P.save()
    return P.finish()


# ---------------------------------------------------------------------------------------------- in place
def _hf_probe(P):
    """Run the real HF Qwen3 (2 layers) verify step once with transformers' sdpa function wrapped: record what it is
    called with (argument names, q/k/v/mask shapes, strides, dtypes), and the installed function's source."""
    import torch
    import transformers
    from transformers.integrations import sdpa_attention as tsa

    orig = tsa.sdpa_attention_forward
    info = {"transformers": transformers.__version__, "source": inspect.getsource(orig)[:6000]}
    try:
        info["use_gqa_in_sdpa_source"] = inspect.getsource(tsa.use_gqa_in_sdpa)[:3000]
    except Exception as e:  # noqa: BLE001
        info["use_gqa_in_sdpa_source"] = F.err(e)
    seen = []

    def wrap(module, *a, **k):
        if len(seen) < 2:
            b = inspect.signature(orig).bind(module, *a, **k).arguments
            d = {}
            for n, v in b.items():
                if isinstance(v, torch.Tensor):
                    d[n] = {"shape": list(v.shape), "stride": list(v.stride()), "dtype": str(v.dtype),
                            "contiguous": v.is_contiguous()}
                elif n == "module":
                    d[n] = {"class": type(v).__name__, "num_key_value_groups": getattr(v, "num_key_value_groups", None),
                            "is_causal": getattr(v, "is_causal", None), "scaling": getattr(v, "scaling", None)}
                elif n == "kwargs":
                    d[n] = {kk: (repr(vv)[:80]) for kk, vv in v.items()}
                else:
                    d[n] = repr(v)[:120]
            seen.append(d)
        return orig(module, *a, **k)

    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    old = ALL_ATTENTION_FUNCTIONS["sdpa"]
    ALL_ATTENTION_FUNCTIONS["sdpa"] = wrap
    try:
        model, cfg = F.build_hf("qwen3-0.6b", 2)
        for q in (1, 3):
            s = F.HFStep(model, cfg, 2, q_len=q, room=VERIFY_SLOTS - CTX)
            seen.clear()  # the prefill in HFStep's constructor was the first call: record the step's own
            s.step()
            torch.cuda.synchronize()
            info[f"q{q}_call"] = seen[0] if seen else None
            del s
        mod = model.model.layers[0].self_attn
        stub = {k: v for k, v in vars(mod).items() if isinstance(v, (int, float, bool, str, type(None)))}
        del model
    finally:
        ALL_ATTENTION_FUNCTIONS["sdpa"] = old
    F.free()
    info["module_attrs"] = stub
    P.res["hf_probe"] = info
    P.save()
    return orig, stub, info


class _Stub:  # transformers' sdpa_attention_forward reads a few attributes of the attention module
    def __init__(self, attrs):
        self.__dict__.update(attrs)
        self.training = False


def job_inplace(out_dir, quick, deadline):
    import torch
    from torch.nn.attention.bias import causal_lower_right
    import torch.nn.functional as Fn

    P = Proc(out_dir, "inplace", quick)
    t0 = P.t0
    try:
        orig, stub_attrs, info = _hf_probe(P)
    except Exception as e:  # noqa: BLE001
        P.error("hf probe", e)
        orig, stub_attrs, info = None, {}, {}
    call3 = (info.get("q3_call") or {}) if info else {}
    probed = bool(call3)
    mask_info = call3.get("attention_mask") if probed else {"stride": [0], "dtype": "torch.bool"}
    mask_none = probed and not isinstance(mask_info, dict)  # the real step passed no mask at q_len 3
    mask_info = mask_info if isinstance(mask_info, dict) else {}
    mask_expanded = mask_info.get("stride", [1])[0] == 0
    mask_dtype = mask_info.get("dtype", "torch.bool")
    P.res["hf_mask_built"] = {"probed": probed, "expanded_over_batch": mask_expanded, "dtype": mask_dtype,
                              "none": mask_none}
    names = list(inspect.signature(orig).parameters) if orig is not None else []

    def hf_call(stub, q, k, v, mask):
        kws = dict(kw)
        for n, x in (("query", q), ("key", k), ("value", v), ("attention_mask", mask)):
            if n in names:
                kws[n] = x
        return orig(stub, **kws)
    kw = {}
    for n in ("dropout", "scaling"):
        v = call3.get(n, (call3.get("kwargs") or {}).get(n))
        if v is not None:
            try:
                kw[n] = float(v)
            except (TypeError, ValueError):
                pass
    P.res["hf_call_kwargs"] = kw
    qs = (1, 2, 5) if quick else ATT_Q
    bs = (1, 8) if quick else BATCHES
    cs = (512,) if quick else ATT_CTX
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731

    def timed(fn, units):
        fn(0)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for u in range(units):
                fn(u)
        g.replay()
        torch.cuda.synchronize()
        xs = []
        for _ in range(5):
            a, b = ev(), ev()
            a.record()
            g.replay()
            b.record()
            b.synchronize()
            xs.append(a.elapsed_time(b) * 1e3 / units)
        del g
        return _pct(xs)["p50"], min(xs)

    plan = []
    for S in cs:
        for shape in ATT_SHAPES:
            for layout in ("ref", "hf"):
                slots = [S] if layout == "ref" else ([S + ROOM, VERIFY_SLOTS] if S == 512 else [S + ROOM])
                for M in slots:
                    for B in bs:
                        plan.append((S, shape, layout, M, B))
    for S, shape, layout, M, B in plan:
        if deadline - (time.time() - t0) < 20:
            P.res["errors"].append({"what": f"cut at the deadline before {S} {shape} {layout} {M} b{B}",
                                    "error": "deadline"})
            break
        nq, nkv, hd = ATT_SHAPES[shape]
        if layout == "hf" and orig is None:
            continue
        kv_bytes = 2 * B * nkv * M * hd * 2
        sets = max(2, min(16, -(-256 * 2**20 // kv_bytes)))
        try:
            K = [torch.randn(B, nkv, M, hd, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
            V = [torch.randn(B, nkv, M, hd, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
        except Exception as e:  # noqa: BLE001
            P.error(f"alloc {S} {shape} {layout} {M} b{B}", e)
            F.free()
            continue
        stub = _Stub({**stub_attrs, "num_key_value_groups": nq // nkv, "is_causal": True})
        for L in qs:
            row = {"table": "attention_inplace", "layout": layout, "shape": shape, "q_heads": nq, "kv_heads": nkv,
                   "head_dim": hd, "batch": B, "q_len": L, "kv_sets": sets, "units_per_graph": ATT_UNITS}
            if layout == "ref":
                row.update(ctx=S, slots=S, mask="causal_lower_right" if L > 1 else "none")
                cpos = torch.arange(S - L, S, device="cuda")
            else:
                row.update(ctx=S, slots=M, mask=f"bool over all {M} slots (keys <= ctx + i valid)")
                cpos = torch.arange(S, S + L, device="cuda")
            try:
                Qp = [torch.randn(B, L, nq * hd, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
                Kn = [torch.randn(B, L, nkv * hd, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
                Vn = [torch.randn(B, L, nkv * hd, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
                qv = [x.view(B, L, nq, hd).transpose(1, 2) for x in Qp]
                kv_ = [x.view(B, L, nkv, hd).transpose(1, 2) for x in Kn]
                vv_ = [x.view(B, L, nkv, hd).transpose(1, 2) for x in Vn]
                if layout == "hf":
                    j = torch.arange(M, device="cuda")[None, :]
                    i = cpos[:, None]
                    m2 = (j <= i)
                    if mask_dtype != "torch.bool":
                        dt = getattr(torch, mask_dtype.split(".")[-1])
                        m2 = torch.zeros(L, M, device="cuda", dtype=dt).masked_fill(~m2, torch.finfo(dt).min)
                    mask = m2[None, None].expand(B, 1, L, M) if mask_expanded else m2[None, None].expand(B, 1, L, M).contiguous()
                    if mask_none:
                        mask = None
                    row["mask_stride"] = list(mask.stride()) if mask is not None else None
                    attn = lambda u: hf_call(stub, qv[u % sets], K[u % sets], V[u % sets], mask)  # noqa: E731
                else:
                    bias = causal_lower_right(L, S) if L > 1 else None

                    def attn(u):
                        if bias is None:
                            return Fn.scaled_dot_product_attention(qv[u % sets], K[u % sets], V[u % sets], enable_gqa=True)
                        return Fn.scaled_dot_product_attention(qv[u % sets], K[u % sets], V[u % sets], attn_mask=bias,
                                                               enable_gqa=True)

                def copies(u):
                    K[u % sets].index_copy_(2, cpos, kv_[u % sets])
                    V[u % sets].index_copy_(2, cpos, vv_[u % sets])

                def unit(u):
                    copies(u)
                    return attn(u)

                row["unit_us"], row["unit_us_min"] = timed(unit, ATT_UNITS)
                row["copy_us"], row["copy_us_min"] = timed(copies, ATT_UNITS)
                row["alone_us"], row["alone_us_min"] = timed(attn, ATT_UNITS)
                row["attn_us"] = row["unit_us"] - row["copy_us"]
                del Qp, Kn, Vn, qv, kv_, vv_
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                row["error"] = F.err(e)
            P.res["rows"].append(row)
        P.save()
        del K, V
        F.free()
        log(f"[inplace] {S} {shape} {layout} M{M} b{B}: " + " ".join(
            f"q{r['q_len']}:{r.get('attn_us', float('nan')):.1f}" for r in P.res["rows"][-len(qs):]))
    try:  # correctness of the hf-layout call against float64 math, fresh inputs
        if orig is not None:
            nq, nkv, hd = 16, 8, 128
            B, L, M, S = 2, 3, 300, 200
            q = torch.randn(B, L, nq, hd, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
            k = torch.randn(B, nkv, M, hd, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(B, nkv, M, hd, device="cuda", dtype=torch.bfloat16)
            i = torch.arange(S, S + L, device="cuda")[:, None]
            m2 = torch.arange(M, device="cuda")[None, :] <= i
            o = hf_call(_Stub({**stub_attrs, "num_key_value_groups": 2, "is_causal": True}), q, k, v,
                        m2[None, None].expand(B, 1, L, M))[0]
            kk, vv = k.double().repeat_interleave(2, 1), v.double().repeat_interleave(2, 1)
            sc = (q.double() @ kk.transpose(-1, -2)) * kw.get("scaling", hd ** -0.5)
            ref = sc.masked_fill(~m2, float("-inf")).softmax(-1) @ vv
            o = o.double()
            if o.shape != ref.shape:
                o = o.transpose(1, 2)
            P.res["hf_layout_check_rel_err"] = float((o - ref).norm() / ref.norm())
    except Exception as e:  # noqa: BLE001
        P.error("hf layout check", e)
    P.save()
    return P.finish()


# --------------------------------------------------------------------------------------------- profiled
def op_durations(evs) -> dict:
    """Per round_f_step annotation: kernel µs and counts by the outermost aten op around each launch, the kernels
    launched inside aten::scaled_dot_product_attention (per call), and kernel names with µs."""
    import bisect

    X = [e for e in evs if isinstance(e, dict) and e.get("ph") == "X"]
    launches = {}
    for e in X:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            c = (e.get("args") or {}).get("correlation")
            if c is not None:
                launches[c] = e
    by_tid: dict = {}
    for e in X:
        if e.get("cat") in ("cpu_op", "user_annotation"):
            by_tid.setdefault(e.get("tid"), []).append(e)
    idx = {}

    def spans(tid, pred):
        xs = sorted((e for e in by_tid.get(tid, []) if pred(e)), key=lambda e: (e["ts"], -e.get("dur", 0)))
        top, end = [], -1.0
        for e in xs:
            if e["ts"] >= end:
                top.append(e)
                end = e["ts"] + e.get("dur", 0)
        return [x["ts"] for x in top], top

    def find(tid, kind, t):
        if (tid, kind) not in idx:
            if kind == "op":
                idx[(tid, kind)] = spans(tid, lambda e: e.get("cat") == "cpu_op")
            elif kind == "sdpa":
                idx[(tid, kind)] = spans(tid, lambda e: e.get("cat") == "cpu_op" and "scaled_dot_product" in e["name"])
            else:
                idx[(tid, kind)] = spans(tid, lambda e: e.get("cat") == "user_annotation" and
                                         e["name"].startswith("round_f_step"))
        st, sp = idx[(tid, kind)]
        i = bisect.bisect_right(st, t) - 1
        if i >= 0 and sp[i]["ts"] <= t <= sp[i]["ts"] + sp[i].get("dur", 0):
            return sp[i]
        return None

    out: dict = {}
    for k in X:
        if k.get("cat") != "kernel":
            continue
        la = launches.get((k.get("args") or {}).get("correlation"))
        if la is None:
            continue
        tid = la.get("tid")
        step = find(tid, "step", la["ts"])
        if step is None:
            continue
        s = out.setdefault(step["name"], {"by_op": {}, "names": {}, "sdpa": {"calls": set(), "us": 0.0, "kernels": 0,
                                                                           "names": {}}})
        op = find(tid, "op", la["ts"])
        on = op["name"] if op else la.get("name", "?")
        d = float(k.get("dur", 0))
        e = s["by_op"].setdefault(on, {"n": 0, "us": 0.0})
        e["n"] += 1
        e["us"] += d
        nm = k.get("name", "")[:110]
        e2 = s["names"].setdefault(nm, {"n": 0, "us": 0.0})
        e2["n"] += 1
        e2["us"] += d
        sd = find(tid, "sdpa", la["ts"])
        if sd is not None:
            a = s["sdpa"]
            a["calls"].add(sd["ts"])
            a["us"] += d
            a["kernels"] += 1
            e3 = a["names"].setdefault(nm, {"n": 0, "us": 0.0})
            e3["n"] += 1
            e3["us"] += d
    for s in out.values():
        a = s["sdpa"]
        a["calls"] = len(a["calls"])
        a["us_per_call"] = a["us"] / a["calls"] if a["calls"] else None
    return out


def job_counts_gemma(out_dir, quick):
    import torch  # noqa: F401

    res = {"kind": "launchsim-round-g-counts-gemma", "quick": quick, "environment": F.versions(), "rows": [],
           "errors": []}
    path = os.path.join(out_dir, "counts_gemma.json")
    tdir = os.path.join(out_dir, "traces")
    os.makedirs(tdir, exist_ok=True)
    try:
        model, cfg = F.build_hf("gemma-3-1b", 2 if quick else None)
        res["config"] = {k: v for k, v in cfg.to_dict().items() if isinstance(v, (int, float, str, bool, list, type(None)))}
        res["attn_implementation"] = F.attn_ran(model)
        for b in (1, 8):
            try:
                s = F.HFStep(model, cfg, b)
                for _ in range(3):
                    s.step()
                F.sync()
                p, evs = F._trace_of(s.step, 2, F.layers_of(model), shapes=True)
                a = F.analyse(evs, 2)
                d = op_durations(evs)
                name = f"hf_gemma-3-1b_static_b{b}.trace"
                F.save_gz(p, tdir, name)
                os.unlink(p)
                res["rows"].append({"model": "gemma-3-1b", "batch": b, "ctx": CTX, "cache": "static",
                                    "max_cache_len": CTX + ROOM, "layers": cfg.num_hidden_layers, **a,
                                    "durations": d, "trace": f"traces/{name}.json.gz"})
                log(f"[counts] gemma-3-1b b{b}: {a['last_step']}")
                del s
                F.free()
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                res["errors"].append({"what": f"gemma b{b}", "error": F.err(e)})
            _dump(res, path)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        res["errors"].append({"what": "gemma build", "error": F.err(e)})
    _dump(res, path)
    return 0


def job_trace_verify(out_dir, quick):
    from ..reference_decoder import make_weights

    res = {"kind": "launchsim-round-g-trace-verify", "quick": quick, "environment": F.versions(), "rows": [],
           "errors": []}
    path = os.path.join(out_dir, "trace_verify.json")
    bs = (8,) if quick else (8, 64)
    qls = (2, 5)
    for name in ("qwen3-0.6b", "llama3-8b"):
        try:
            m = F.ref_spec(name, 2 if quick else None)
            w = make_weights(m)
            for B in bs:
                for L in qls:
                    try:
                        r = F.RefVerify(m, w, B, L, attn="lower_right")
                        for _ in range(2):
                            r.step()
                        p, evs = F._trace_of(r.step, 3, None, shapes=False)
                        os.unlink(p)
                        d = op_durations(evs)
                        res["rows"].append({"impl": "reference", "model": name, "layers": m.num_hidden_layers,
                                            "batch": B, "q_len": L, "ctx": CTX, "slots": CTX, "steps": d})
                        log(f"[trace] ref {name} b{B} q{L}: " + " ".join(
                            f"{v['sdpa']['us_per_call']}" for v in d.values()))
                        del r
                        F.free()
                    except Exception as e:  # noqa: BLE001
                        traceback.print_exc()
                        res["errors"].append({"what": f"ref {name} b{B} q{L}", "error": F.err(e)})
                    _dump(res, path)
            del w
            F.free()
        except Exception as e:  # noqa: BLE001
            res["errors"].append({"what": f"ref {name}", "error": F.err(e)})
    try:
        model, cfg = F.build_hf("qwen3-0.6b", 2 if quick else None)
        for B in bs:
            for L in qls:
                try:
                    s = F.HFStep(model, cfg, B, q_len=L, room=VERIFY_SLOTS - CTX)
                    for _ in range(2):
                        s.step()
                    p, evs = F._trace_of(s.step, 3, F.layers_of(model), shapes=False)
                    os.unlink(p)
                    d = op_durations(evs)
                    res["rows"].append({"impl": "hf", "model": "qwen3-0.6b", "layers": cfg.num_hidden_layers,
                                        "batch": B, "q_len": L, "ctx": CTX, "slots": VERIFY_SLOTS, "steps": d})
                    log(f"[trace] hf qwen3-0.6b b{B} q{L}: " + " ".join(
                        f"{v['sdpa']['us_per_call']}" for v in d.values()))
                    del s
                    F.free()
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    res["errors"].append({"what": f"hf b{B} q{L}", "error": F.err(e)})
                _dump(res, path)
    except Exception as e:  # noqa: BLE001
        res["errors"].append({"what": "hf build", "error": F.err(e)})
    _dump(res, path)
    return 0


# ------------------------------------------------------------------------------------------------ driver
def summary(out_dir) -> dict:
    def load(n):
        try:
            with open(os.path.join(out_dir, n)) as f:
                return json.load(f)
        except Exception:  # noqa: BLE001
            return None

    s = {"canaries": {}, "eager": [], "inplace": [], "trace": [], "gemma": []}
    for n in ("eager.json", "inplace.json"):
        d = load(n) or {}
        if isinstance(d.get("canary"), dict):
            s["canaries"][n] = {k: round(d["canary"][k], 3) if isinstance(d["canary"][k], float) else d["canary"][k]
                                for k in ("ok", "host_start_us", "host_end_us", "ratio")}
    e = load("eager.json") or {}
    for r in e.get("rows", []):
        s["eager"].append([r["impl"], r["model"], r["batch"], r["q_len"], r.get("fast_passes"), len(r["passes"]),
                           r.get("median_fast_ms") and round(r["median_fast_ms"], 2),
                           [round(x["median"], 1) for x in r["passes"]],
                           [round(max(x["canary_before"]["host_us"], x["canary_after"]["host_us"]), 2) for x in r["passes"]],
                           round(r.get("graph_ms", {}).get("median", -1), 3)])
    ip = load("inplace.json") or {}
    s["hf_probe_q3"] = (ip.get("hf_probe") or {}).get("q3_call")
    s["hf_layout_check"] = ip.get("hf_layout_check_rel_err")
    for r in ip.get("rows", []):
        if r["ctx"] == 512 and r["q_len"] in (1, 2, 5, 8):
            s["inplace"].append([r["layout"], r["shape"], r["slots"], r["batch"], r["q_len"],
                                 round(r.get("attn_us", -1), 1), round(r.get("alone_us", -1), 1),
                                 round(r.get("copy_us", -1), 1)] if "error" not in r else [r["layout"], r["error"][:80]])
    tv = load("trace_verify.json") or {}
    for r in tv.get("rows", []):
        s["trace"].append([r["impl"], r["model"], r["batch"], r["q_len"],
                           [v["sdpa"]["us_per_call"] and round(v["sdpa"]["us_per_call"], 1) for v in r["steps"].values()]])
    cg = load("counts_gemma.json") or {}
    for r in cg.get("rows", []):
        s["gemma"].append([r["batch"], r.get("last_step")])
    s["errors"] = {n: len((load(n) or {}).get("errors", [])) for n in ("eager.json", "inplace.json", "trace_verify.json",
                                                                      "counts_gemma.json")}
    return s


# ------------------------------------------------------------------------------------------------ combine
LOWER_MODE_US = 8.5  # the host canary is bimodal here (about 7-8 us and 9.5-12 us): the lower mode's upper edge


def combine(src_dir, out_path) -> dict:
    """eager_rows.json from eager.json + eager2.json + eager3.json (CPU only, stdlib): every row's passes from all
    processes side by side with their canaries, the median over fast-host passes (both canaries <= FAST_CANARY_US)
    and, as a marked fallback, over lower-mode passes (both canaries <= LOWER_MODE_US)."""
    rows: dict = {}
    procs = []
    for n in ("eager", "eager2", "eager3"):
        path = os.path.join(src_dir, n + ".json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            d = json.load(f)
        procs.append({"process": n, "canary": d.get("canary"), "pass_s": d.get("pass_s"),
                      "rows_file": d.get("rows_file")})
        for r in d["rows"]:
            key = (r["impl"], r["model"], r["batch"], r["q_len"])
            o = rows.setdefault(key, {k: r[k] for k in ("impl", "model", "batch", "q_len", "ctx", "layers")
                                      if k in r})
            o["k"] = r["q_len"] - 1
            for k in ("max_cache_len", "attention", "graph_ms", "graph_error"):
                if k in r:
                    o[k] = r[k]
            for x in r["passes"]:
                cb, ca = x["canary_before"]["host_us"], x["canary_after"]["host_us"]
                o.setdefault("passes", []).append({
                    "process": n, "pass": x["pass"], "median_ms": x["median"], "p10_ms": x["p10"], "p90_ms": x["p90"],
                    "min_ms": x["min"], "n": x["n"], "canary_before_us": cb, "canary_after_us": ca,
                    "fast": max(cb, ca) <= FAST_CANARY_US, "lower_mode": max(cb, ca) <= LOWER_MODE_US})
    for o in rows.values():
        ps = o.get("passes", [])
        fast = [x["median_ms"] for x in ps if x["fast"]]
        low = [x["median_ms"] for x in ps if x["lower_mode"]]
        o["fast_passes"], o["lower_mode_passes"] = len(fast), len(low)
        o["median_fast_ms"] = _pct(fast)["p50"] if fast else None
        o["median_lower_mode_ms"] = _pct(low)["p50"] if low else None
        o["median_all_ms"] = _pct([x["median_ms"] for x in ps])["p50"] if ps else None
        o["eager_ms"] = o["median_fast_ms"] if fast else o["median_lower_mode_ms"]
        o["eager_ms_from"] = "fast" if fast else ("lower_mode" if low else None)
    out = {"kind": "launchsim-round-g-eager-rows", "fast_canary_us": FAST_CANARY_US, "lower_mode_us": LOWER_MODE_US,
           "processes": procs, "rows": sorted(rows.values(), key=lambda o: (o["impl"], o["model"], o["batch"],
                                                                            o["q_len"]))}
    _dump(out, out_path)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--job", default="all")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=560.0)
    ap.add_argument("--bundle", default=None)
    ap.add_argument("--only", default="", help="comma-separated jobs (default: all)")
    ap.add_argument("--limits", default="", help="job=seconds,... overriding the plan's limits")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if a.job != "all":
        j = a.job
        if j == "eager":
            return job_eager(a.out, a.quick, a.deadline)
        if j == "combine":  # CPU only: --out is the folder holding eager*.json
            combine(a.out, os.path.join(a.out, "eager_rows.json"))
            return 0
        if j == "eager2":
            return job_eager(a.out, a.quick, a.deadline, name="eager2", first_pass=3, graphs=False)
        if j == "eager3":
            return job_eager(a.out, a.quick, a.deadline, name="eager3", first_pass=6, graphs=False,
                             rows_file="calibration/measured/h200-round-g/eager3_rows.json")
        if j == "inplace":
            return job_inplace(a.out, a.quick, a.deadline)
        if j == "counts_gemma":
            return job_counts_gemma(a.out, a.quick)
        if j == "trace_verify":
            return job_trace_verify(a.out, a.quick)
        raise SystemExit(f"unknown job {j}")
    t0 = time.time()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    q = ["--quick"] if a.quick else []
    plan = [("eager", 470), ("inplace", 250), ("eager2", 230), ("eager3", 240), ("counts_gemma", 60), ("trace_verify", 70)]  # profiled ones last
    if a.quick:
        plan = [("eager", 55), ("inplace", 40), ("counts_gemma", 25), ("trace_verify", 25)]
    for kv in (x for x in a.limits.split(",") if x):
        k, v = kv.split("=")
        plan = [(j, int(v) if j == k else lim) for j, lim in plan]
    only = [x for x in a.only.split(",") if x]
    if only:
        order = {j: i for i, j in enumerate(only)}
        plan = sorted((p for p in plan if p[0] in order), key=lambda p: order[p[0]])
    status = {}
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)

    def bundle():
        if a.bundle:
            subprocess.call(["tar", "czf", a.bundle + ".tmp", "-C", os.path.dirname(os.path.abspath(a.out)),
                             os.path.basename(os.path.abspath(a.out))])
            os.replace(a.bundle + ".tmp", a.bundle)

    for job, limit in plan:
        left = a.deadline - (time.time() - t0)
        if left < 15:
            status[job] = f"skipped: {left:.0f}s left"
            continue
        lim = int(min(limit, left))
        ts = time.time()
        lf = open(os.path.join(a.out, "logs", job + ".log"), "w")
        try:
            p = subprocess.run(["timeout", str(lim + 10), sys.executable, "-m", "calibration.scripts.round_g", "--out",
                                a.out, "--job", job, "--deadline", str(lim), *q], stdout=lf,
                               stderr=subprocess.STDOUT, env=env)
            rc = p.returncode
        finally:
            lf.close()
        status[job] = {"rc": rc, "wall_s": round(time.time() - ts, 1), "limit_s": lim}
        log(f"[round_g] {job}: rc {rc} in {time.time() - ts:.1f}s (limit {lim})")
        if rc != 0:
            with open(os.path.join(a.out, "logs", job + ".log")) as f:
                log(f.read()[-1500:])
        _dump({"status": status, "total_s": time.time() - t0}, os.path.join(a.out, "round_status.json"))
        bundle()
    s = summary(a.out)
    s["status"] = status
    _dump(s, os.path.join(a.out, "summary.json"))
    bundle()
    log(json.dumps(s, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
