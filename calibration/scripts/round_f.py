"""Round f on one H200 (issues 20 and 21): Hugging Face transformers' own decoders across published configs,
speculative-decoding verify steps (q_len = 1 + k), an SDPA attention table, a 1-layer draft loop, torch.compile's
real output, and a host-only canary probe.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_f --out DIR [--quick] [--deadline S]   # whole round
    python3 -m calibration.scripts.round_f --out DIR --job JOB [--quick]                          # one process

The whole round (`--job all`, the default) runs each job below as its own child process, in this order, packing
DIR into DIR/../round_f.tgz after each (the device tool brings back at most 8 files) and printing a summary last:

- `host`: the canary alone (`calibration.hygiene.canary`), nothing else: the host-only probe.
- `hf_timing` (timing process): transformers' AutoModelForCausalLM.from_config for every calibration/configs/hf/*.json
  (random bf16 weights on cuda, attn_implementation="sdpa" asked; what ran is read back from the config), a
  StaticCache of max_cache_len = ctx + ROOM filled by a prefill of ctx = 512 tokens, then single-token decode
  steps: eager step (sync, step, sync; REPS after WARM warm-ups: median/p10/p90) and the replay of one full CUDA
  graph of the step (isolated sync-replay-sync, and back-to-back by CUDA events); also transformers' DynamicCache
  (eager only: it grows each call, so no graph) for DYNAMIC_MODELS. Batches 1, 8, 32, 64.
- `verify_timing` (timing process): (B) verify steps with q_len = 1 + k query tokens per sequence: the reference
  decoder's op sequence (calibration/reference_decoder.py, fusion none) generalised to q_len tokens in
  `verify_step` below (KV written at the q_len positions ctx-q..ctx-1 with index_copy_, SDPA over the ctx keys
  with a lower-right causal mask within the new tokens (torch.nn.attention.bias.causal_lower_right; q_len 1: no
  mask, exactly the reference), logits of all q_len tokens) for qwen3-0.6b and llama3-8b, and HF Qwen3-0.6B
  (input_ids [B, q_len], cache_position ctx..ctx+q_len-1), eager and full graph; (B) the attention table: SDPA
  device time (flash backend forced; GQA enable_gqa) per call, from CUDA events around the replay of a graph of
  ATT_CALLS calls that rotate over enough K/V copies to exceed L2; (C) the draft loop: the reference decoder cut to
  1 layer (+ final norm and lm_head) at qwen3-0.6b shape, one full graph of step + greedy argmax fed back into
  the input ids, replayed k = 1..4 times in sequence (sync, k replays, sync).
- `counts_hf`, `counts_verify` (profiled processes, after all timing): kernels per step from torch.profiler, a
  per-aten-op kernel table (each kernel attributed through its launch's correlation id to the outermost aten op
  around the launch, and to the decoder layer around it: forward hooks open a record_function per layer), and
  gzip Chrome traces of HF decode at batch 1 and 8 for every model.
- `compile:IMPL:MODEL` (timing process, then a `compile_counts:IMPL:MODEL` profiled process sharing the
  Inductor cache): torch.compile (Inductor, default mode) of the reference decoder's step (IMPL ref) or of the
  HF model's forward (IMPL hf), 2 layers, dynamic=False and True, batch 1 and 64: compile wall time, compiled
  eager step and compiled + full-graph replay; kernels per step with the kernel name list.
Hygiene: every timing process calls forbid_profiler() first and takes a canary at start and end (check_canary);
each timing figure's record carries its process's canary pair. torch/transformers are imported inside functions.
"""

from __future__ import annotations

import argparse
import gc
import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import traceback

from ..jsonio import dump as _dump
from ..microbench import _pct

CTX = 512
ROOM = 128
VERIFY_ROOM = 1024
BATCHES = (1, 8, 32, 64)
WARM, REPS, GRAPH_REPS = 5, 20, 50
DYNAMIC_MODELS = ("qwen3-0.6b", "llama-3.2-1b")
Q_LENS = (1, 2, 3, 4, 5, 8)
ATT_CTX = (256, 512, 2048, 8192)
ATT_SHAPES = {"qwen3-0.6b": (16, 8, 128), "llama3-8b": (32, 8, 128)}
ATT_CALLS = 20
DRAFT_K = (1, 2, 3, 4)
DRAFT_BATCHES = (1, 8, 32)
TRACE_BATCHES = (1, 8)
HF_DIR = os.path.join(os.path.dirname(__file__), "..", "configs", "hf")
HF_ORDER = ("qwen3-0.6b", "llama-3.2-1b", "qwen2-1.5b", "qwen3-4b", "phi-3-mini-4k", "gemma-2-2b",
            "mistral-7b-v0.3", "llama3-8b")
COMPILE_VARIANTS = ("ref:qwen3-0.6b", "hf:qwen3-0.6b", "ref:llama3-8b", "hf:llama3-8b")


def log(*a):
    print(*a, flush=True)


def err(e) -> str:
    return f"{type(e).__name__}: {e}"[:500]


def sync():
    import torch

    torch.cuda.synchronize()


def iso_ms(fn, warm=WARM, reps=REPS) -> dict:
    """Isolated wall time of fn: sync, fn, sync; median/p10/p90 in ms after `warm` calls."""
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
    p = _pct(xs)
    return {"median": p["p50"], "p10": p["p10"], "p90": p["p90"], "n": reps, "min": min(xs)}


def b2b_ms(fn, reps=GRAPH_REPS) -> float:
    """Device ms per call of fn issued back to back (CUDA events around `reps` calls)."""
    import torch

    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    sync()
    st.record()
    for _ in range(reps):
        fn()
    en.record()
    en.synchronize()
    return st.elapsed_time(en) / reps


def free():
    import torch

    gc.collect()
    torch.cuda.empty_cache()


def versions() -> dict:
    out = {}
    try:
        from .. import microbench as mb

        out.update(mb.environment())
    except Exception as e:  # noqa: BLE001
        out["environment_error"] = err(e)
    for name in ("torch", "transformers", "triton"):
        try:
            out[name] = __import__(name).__version__
        except Exception as e:  # noqa: BLE001
            out[name] = f"missing ({err(e)})"
    return out


def warm_host(seconds: float = 2.0) -> None:
    """Tiny eager ops for `seconds` before the start canary: the first canary of a fresh process read 25%
    slower than its end canary in the quick run (cold host path), which is the process, not the machine."""
    import torch

    a = torch.randn(256, device="cuda")
    t0 = time.time()
    i = 0
    while time.time() - t0 < seconds:
        a.mul_(1.0)
        i += 1
        if i % 100 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()


class Timing:
    """A timing process: forbid the profiler, canary at start; `finish()` takes the end canary."""

    def __init__(self, out_dir, name, quick):
        from ..hygiene import canary, forbid_profiler

        forbid_profiler()
        warm_host()
        self.path = os.path.join(out_dir, name + ".json")
        self.res = {"kind": f"launchsim-round-f-{name}", "quick": quick, "environment": versions(),
                    "canary_start": canary(), "rows": [], "errors": []}
        self.save()

    def save(self):
        _dump(self.res, self.path)

    def row(self, r):
        self.res["rows"].append(r)
        self.save()

    def error(self, what, e):
        traceback.print_exc()
        self.res["errors"].append({"what": what, "error": err(e)})
        self.save()

    def finish(self) -> int:
        from ..hygiene import canary, check_canary, exit_code

        self.res["canary_end"] = canary()
        self.res["canary"] = check_canary(self.res["canary_start"], self.res["canary_end"])
        self.save()
        log(f"[canary] {os.path.basename(self.path)}: {json.dumps(self.res['canary'])}")
        return exit_code(self.res["canary"])


# ------------------------------------------------------------------------------------------- HF models
def hf_config_dict(short: str, layers: int | None = None) -> dict:
    with open(os.path.join(HF_DIR, short + ".json")) as f:
        d = json.load(f)
    if layers:
        d["num_hidden_layers"] = layers
        for k in ("max_window_layers",):
            if k in d:
                d[k] = min(d[k], layers)
    return d


def build_hf(short: str, layers: int | None = None, attn: str = "sdpa"):
    import torch
    import transformers

    d = hf_config_dict(short, layers)
    mt = d.pop("model_type")
    d.pop("architectures", None)
    d.pop("transformers_version", None)
    d.pop("torch_dtype", None)
    cfg = transformers.AutoConfig.for_model(mt, **d)
    torch.manual_seed(0)
    with torch.device("cuda"):
        try:
            model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=torch.bfloat16)
        except TypeError:
            model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn,
                                                                  torch_dtype=torch.bfloat16)
    model = model.to(torch.bfloat16).eval()
    return model, model.config


def attn_ran(model) -> str:
    return str(getattr(model.config, "_attn_implementation", None))


class HFStep:
    """Decode (q_len 1) or verify (q_len > 1) steps of an HF model on a StaticCache (or DynamicCache) after a
    prefill of ctx tokens. Inputs are fixed tensors, so one step can be captured as a CUDA graph."""

    def __init__(self, model, cfg, batch, ctx=CTX, q_len=1, cache="static", room=ROOM):
        import torch

        self.model, self.batch, self.ctx, self.q = model, batch, ctx, q_len
        self.cache_kind = cache
        if cache == "dynamic":
            from transformers import DynamicCache

            self.cache = DynamicCache()
        else:
            from transformers import StaticCache

            try:
                self.cache = StaticCache(config=cfg, max_batch_size=batch, max_cache_len=ctx + room, device="cuda",
                                         dtype=torch.bfloat16)
            except TypeError:
                self.cache = StaticCache(config=cfg, max_cache_len=ctx + room)
        g = torch.Generator(device="cuda").manual_seed(batch * 31 + ctx + q_len)
        V = cfg.vocab_size
        prompt = torch.randint(0, V, (batch, ctx), device="cuda", generator=g)
        with torch.no_grad():
            model(input_ids=prompt, past_key_values=self.cache, use_cache=True,
                  cache_position=torch.arange(ctx, device="cuda"))
        self.ids = torch.randint(0, V, (batch, q_len), device="cuda", generator=g)
        self.pos = (ctx + torch.arange(q_len, device="cuda")).unsqueeze(0).expand(batch, q_len).contiguous()
        self.cpos = ctx + torch.arange(q_len, device="cuda")
        self.graph = None

    def step(self):
        import torch

        with torch.no_grad():
            if self.cache_kind == "dynamic":  # the cache grows: positions follow it
                return self.model(input_ids=self.ids, past_key_values=self.cache, use_cache=True).logits
            return self.model(input_ids=self.ids, position_ids=self.pos, past_key_values=self.cache,
                              use_cache=True, cache_position=self.cpos).logits

    def capture(self):
        from ..reference_decoder import warm_then_capture

        self.graph, self.out = warm_then_capture(self.step, 2)

    def replay(self):
        self.graph.replay()


def time_eager_graph(step_obj, graph=True) -> dict:
    r = {"eager_ms": iso_ms(step_obj.step)}
    if graph:
        try:
            step_obj.capture()
            r["graph_ms"] = iso_ms(step_obj.replay, warm=3, reps=REPS)
            r["graph_b2b_ms"] = b2b_ms(step_obj.replay)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            r["graph_error"] = err(e)
    return r


def job_hf_timing(out_dir, quick):
    T = Timing(out_dir, "hf_timing", quick)
    models = ("qwen3-0.6b",) if quick else HF_ORDER
    batches = (1,) if quick else BATCHES
    for short in models:
        try:
            model, cfg = build_hf(short, 2 if quick else None)
        except Exception as e:  # noqa: BLE001
            T.error(f"build {short}", e)
            continue
        ran = attn_ran(model)
        log(f"[hf] {short}: attn {ran}, layers {cfg.num_hidden_layers}")
        caches = ("static", "dynamic", "dynamic_nocudnn") if short in DYNAMIC_MODELS else ("static",)
        for cache in caches:
            for b in batches:
                try:
                    import torch

                    # DynamicCache: every step has a new key length; SDPA's default (cuDNN) backend builds a
                    # plan per new shape (seen in the quick run's trace: ~65 ms inside layer 0). The
                    # `dynamic_nocudnn` rows turn the cuDNN SDPA backend off to show the step without that.
                    torch.backends.cuda.enable_cudnn_sdp(cache != "dynamic_nocudnn")
                    s = HFStep(model, cfg, b, cache="dynamic" if cache.startswith("dynamic") else cache)
                    r = time_eager_graph(s, graph=cache == "static")
                    torch.backends.cuda.enable_cudnn_sdp(True)
                    row = {"model": short, "batch": b, "ctx": CTX, "cache": cache, "layers": cfg.num_hidden_layers,
                           "attn_implementation": ran, "max_cache_len": CTX + ROOM if cache == "static" else None, **r}
                    T.row(row)
                    log(f"[hf] {short} {cache} b{b}: eager {r['eager_ms']['median']:.3f} ms, graph "
                        f"{r.get('graph_ms', {}).get('median', float('nan')):.3f} ms")
                    del s
                    free()
                except Exception as e:  # noqa: BLE001
                    T.error(f"{short} {cache} b{b}", e)
                    free()
        del model
        free()
    return T.finish()


# --------------------------------------------------------------------------------- verify (reference)
def _verify_attention(q, kk, vv):
    """SDPA over all ctx keys; q_len > 1: causal within the new tokens (lower-right aligned)."""
    import torch.nn.functional as F

    L, S = q.shape[-2], kk.shape[-2]
    if L == 1:
        return F.scaled_dot_product_attention(q, kk, vv, enable_gqa=True)
    from torch.nn.attention.bias import causal_lower_right

    return F.scaled_dot_product_attention(q, kk, vv, attn_mask=causal_lower_right(L, S), enable_gqa=True)


def _verify_attention_mask(q, kk, vv):
    """The same with an explicit boolean mask (the fallback if causal_lower_right is refused)."""
    import torch
    import torch.nn.functional as F

    L, S = q.shape[-2], kk.shape[-2]
    if L == 1:
        return F.scaled_dot_product_attention(q, kk, vv, enable_gqa=True)
    i = torch.arange(L, device=q.device)[:, None]
    j = torch.arange(S, device=q.device)[None, :]
    return F.scaled_dot_product_attention(q, kk, vv, attn_mask=j <= (S - L + i), enable_gqa=True)


ATTN_FNS = {"lower_right": _verify_attention, "bool_mask": _verify_attention_mask}


def verify_step(m, w, cache, ids, pos, cpos, attn="lower_right"):
    """reference_decoder.decode_step (fusion none) generalised to q_len = ids.shape[1] tokens per sequence:
    the same ops in the same order; the head runs on all q_len tokens (a verify step scores every one)."""
    import torch.nn.functional as F

    from ..reference_decoder import _rmsnorm, _rope, _rotary

    B, Q = ids.shape
    nq, nkv, hd = m.num_attention_heads, m.num_key_value_heads, m.head_dim
    x = F.embedding(ids, w.embed)
    cos, sin = _rotary(m, w, pos, x.dtype)
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    afn = ATTN_FNS[attn]
    for li, L in enumerate(w.layers):
        kc, vc = cache[li]
        h = _rmsnorm(x, L["ln1"])
        q = F.linear(h, L["q"]).view(B, Q, nq, hd)
        k = F.linear(h, L["k"]).view(B, Q, nkv, hd)
        v = F.linear(h, L["v"]).view(B, Q, nkv, hd)
        if m.qk_norm:
            q = _rmsnorm(q, L["qn"])
            k = _rmsnorm(k, L["kn"])
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        q = _rope(q, c, s)
        k = _rope(k, c, s)
        kc.index_copy_(2, cpos, k)
        vc.index_copy_(2, cpos, v)
        a = afn(q, kc, vc)
        a = a.transpose(1, 2).contiguous().reshape(B, Q, m.q_dim)
        x = x + F.linear(a, L["o"])
        h = _rmsnorm(x, L["ln2"])
        g = F.linear(h, L["gate"])
        u = F.linear(h, L["up"])
        x = x + F.linear(F.silu(g) * u, L["down"])
    x = _rmsnorm(x, w.final_norm)
    return F.linear(x, w.lm_head)


class RefVerify:
    def __init__(self, m, w, batch, q_len, ctx=CTX, attn="lower_right"):
        import torch

        from ..reference_decoder import make_cache

        self.m, self.w, self.attn = m, w, attn
        self.cache = make_cache(m, batch, ctx)
        g = torch.Generator(device="cuda").manual_seed(batch * 7919 + ctx + q_len)
        self.ids = torch.randint(0, m.vocab_size, (batch, q_len), device="cuda", generator=g)
        self.cpos = torch.arange(ctx - q_len, ctx, device="cuda")
        self.pos = self.cpos.unsqueeze(0).expand(batch, q_len).contiguous()
        self.graph = None

    def step(self):
        return verify_step(self.m, self.w, self.cache, self.ids, self.pos, self.cpos, self.attn)

    def capture(self):
        from ..reference_decoder import warm_then_capture

        self.graph, self.out = warm_then_capture(self.step, 2)

    def replay(self):
        self.graph.replay()


def check_verify_attention() -> dict:
    """causal_lower_right vs an explicit mask vs float64 math, fresh random inputs: relative errors."""
    import torch

    out = {}
    for L in (2, 5):
        q = torch.randn(2, 16, L, 128, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(2, 8, 300, 128, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(2, 8, 300, 128, device="cuda", dtype=torch.bfloat16)
        kk, vv = k.double().repeat_interleave(2, 1), v.double().repeat_interleave(2, 1)
        sc = (q.double() @ kk.transpose(-1, -2)) / 128 ** 0.5
        i = torch.arange(L, device="cuda")[:, None]
        j = torch.arange(300, device="cuda")[None, :]
        sc = sc.masked_fill(~(j <= 300 - L + i), float("-inf"))
        ref = sc.softmax(-1) @ vv
        for name, fn in ATTN_FNS.items():
            try:
                o = fn(q, k, v).double()
                out[f"{name}_q{L}"] = float((o - ref).norm() / ref.norm())
            except Exception as e:  # noqa: BLE001
                out[f"{name}_q{L}"] = err(e)
    return out


def ref_spec(name, layers=None):
    import dataclasses

    from simulator.model.models import PRESETS

    m = PRESETS[name]
    return dataclasses.replace(m, num_hidden_layers=layers) if layers else m


def attention_table(T, quick, shapes=None, ctxs=None):
    """SDPA device µs per call (flash forced), graph of ATT_CALLS calls rotating over K/V copies."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qls = (1, 2) if quick else Q_LENS
    bs = (1,) if quick else BATCHES
    cs = (256,) if quick else (ctxs or ATT_CTX)
    for shape, (nq, nkv, hd) in ATT_SHAPES.items():
        if shapes and shape not in shapes:
            continue
        for S in cs:
            for B in bs:
                kv_bytes = 2 * B * nkv * S * hd * 2
                sets = max(1, min(16, -(-256 * 2**20 // kv_bytes)))
                K = [torch.randn(B, nkv, S, hd, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
                Vv = [torch.randn(B, nkv, S, hd, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
                for L in qls:
                    Q = [torch.randn(B, nq, L, hd, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
                    for backend in ("flash", "default"):
                        row = {"table": "attention", "shape": shape, "q_heads": nq, "kv_heads": nkv, "head_dim": hd,
                               "batch": B, "ctx": S, "q_len": L, "kv_sets": sets, "calls_per_graph": ATT_CALLS,
                               "backend": backend, "mask": "none" if L == 1 else "causal_lower_right"}
                        try:
                            def run():
                                for c in range(ATT_CALLS):
                                    _verify_attention(Q[c % sets], K[c % sets], Vv[c % sets])

                            ctxm = sdpa_kernel(SDPBackend.FLASH_ATTENTION) if backend == "flash" else None
                            if ctxm is not None:
                                ctxm.__enter__()
                            try:
                                run()
                                sync()
                                g = torch.cuda.CUDAGraph()
                                with torch.cuda.graph(g):
                                    run()
                            finally:
                                if ctxm is not None:
                                    ctxm.__exit__(None, None, None)
                            g.replay()
                            sync()
                            st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                            xs = []
                            for _ in range(5):
                                st.record()
                                g.replay()
                                en.record()
                                en.synchronize()
                                xs.append(st.elapsed_time(en) * 1e3 / ATT_CALLS)
                            row["device_us"] = _pct(xs)["p50"]
                            row["device_us_min"] = min(xs)
                            del g
                        except Exception as e:  # noqa: BLE001
                            row["error"] = err(e)
                        T.row(row)
                    del Q
                del K, Vv
                free()


def draft_loop(T, quick):
    """1-layer reference decoder (qwen3-0.6b shape) + lm_head; one graph = step + argmax fed back into ids."""

    from ..reference_decoder import Runner, make_weights

    m = ref_spec("qwen3-0.6b", 1)
    w = make_weights(m)
    for B in ((1,) if quick else DRAFT_BATCHES):
        try:
            r = Runner(m, "none", B, CTX, weights=w)

            def body():
                logits = r.step()
                r.ids.copy_(logits.argmax(-1).view(B, 1))
                return logits

            from ..reference_decoder import warm_then_capture

            g, _ = warm_then_capture(body, 2)
            per = {"table": "draft_loop", "model": "qwen3-0.6b", "layers": 1, "batch": B, "ctx": CTX,
                   "graph_contents": "step (embedding..lm_head) + argmax + copy into input ids",
                   "replay_b2b_ms": b2b_ms(g.replay)}
            for k in ((1, 2) if quick else DRAFT_K):
                def loop():
                    for _ in range(k):
                        g.replay()
                t = iso_ms(loop)
                per[f"k{k}_loop_ms"] = t
                per[f"k{k}_per_replay_ms"] = t["median"] / k
            per["eager_step_ms"] = iso_ms(body)
            T.row(per)
            del g, r
            free()
        except Exception as e:  # noqa: BLE001
            T.error(f"draft b{B}", e)


def job_verify_timing(out_dir, quick):
    from ..reference_decoder import make_weights

    T = Timing(out_dir, "verify_timing", quick)
    try:
        T.res["attention_check_rel_err"] = check_verify_attention()
        T.save()
        log(f"[verify] attention check: {T.res['attention_check_rel_err']}")
    except Exception as e:  # noqa: BLE001
        T.error("attention check", e)
    chk = T.res.get("attention_check_rel_err", {})
    attn = "lower_right" if isinstance(chk.get("lower_right_q5"), float) and chk["lower_right_q5"] < 2e-2 else "bool_mask"
    T.res["verify_attention"] = attn
    qls = (1, 2) if quick else Q_LENS
    bs = (1,) if quick else BATCHES
    for name in ("qwen3-0.6b", "llama3-8b"):
        try:
            m = ref_spec(name, 2 if quick else None)
            w = make_weights(m)
        except Exception as e:  # noqa: BLE001
            T.error(f"ref weights {name}", e)
            continue
        for B in bs:
            for L in qls:
                try:
                    r = RefVerify(m, w, B, L, attn=attn)
                    res = time_eager_graph(r)
                    T.row({"table": "verify", "impl": "reference", "model": name, "layers": m.num_hidden_layers,
                           "batch": B, "ctx": CTX, "q_len": L, "attention": attn if L > 1 else "none", **res})
                    log(f"[verify] ref {name} b{B} q{L}: eager {res['eager_ms']['median']:.3f} graph "
                        f"{res.get('graph_ms', {}).get('median', float('nan')):.3f}")
                    del r
                    free()
                except Exception as e:  # noqa: BLE001
                    T.error(f"ref verify {name} b{B} q{L}", e)
                    free()
        del w
        free()
    try:
        draft_loop(T, quick)
    except Exception as e:  # noqa: BLE001
        T.error("draft loop", e)
    if os.environ.get("ROUND_F_NO_ATTENTION") == "1":  # a rerun of the verify rows alone (the table is measured)
        T.res["attention_table"] = "skipped (ROUND_F_NO_ATTENTION=1)"
        return T.finish()
    try:
        attention_table(T, quick)
    except Exception as e:  # noqa: BLE001
        T.error("attention table", e)
    return T.finish()


def job_verify_hf(out_dir, quick):
    """HF Qwen3-0.6B verify steps. transformers 5.17's StaticCache advances its own write position on every
    call, graph replays included (the quick run hit a device-side assert once q_len x calls passed the room),
    so every q_len here uses one max_cache_len = ctx + VERIFY_ROOM, enough for ~110 calls at q_len 8."""
    T = Timing(out_dir, "verify_hf_timing", quick)
    qls = (1, 2) if quick else Q_LENS
    bs = (1,) if quick else BATCHES
    try:
        model, cfg = build_hf("qwen3-0.6b", 2 if quick else None)
        ran = attn_ran(model)
        for B in bs:
            for L in qls:
                try:
                    s = HFStep(model, cfg, B, q_len=L, room=VERIFY_ROOM)
                    res = time_eager_graph(s)
                    T.row({"table": "verify", "impl": "hf", "model": "qwen3-0.6b", "layers": cfg.num_hidden_layers,
                           "batch": B, "ctx": CTX, "q_len": L, "attn_implementation": ran,
                           "max_cache_len": CTX + VERIFY_ROOM, **res})
                    log(f"[verify] hf qwen3-0.6b b{B} q{L}: eager {res['eager_ms']['median']:.3f} graph "
                        f"{res.get('graph_ms', {}).get('median', float('nan')):.3f}")
                    del s
                    free()
                except Exception as e:  # noqa: BLE001
                    T.error(f"hf verify b{B} q{L}", e)
                    free()
        del model
        free()
    except Exception as e:  # noqa: BLE001
        T.error("hf verify build", e)
    return T.finish()


# ------------------------------------------------------------------------------------------ counts
def _trace_of(fn, steps, layer_modules=None, shapes=True):
    """Profile `steps` calls of fn, each in a record_function('round_f_step{i}'), decoder layers annotated
    'round_f_layer{j}' by forward hooks. Returns (path of the exported Chrome trace, events)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    hooks, stack = [], []
    for j, mod in enumerate(layer_modules or []):
        def pre(_m, _a, j=j):
            rf = record_function(f"round_f_layer{j}")
            rf.__enter__()
            stack.append(rf)

        def post(_m, _a, _o):
            stack.pop().__exit__(None, None, None)

        hooks += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    sync()
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=shapes) as p:
            for i in range(steps):
                with record_function(f"round_f_step{i}"):
                    fn()
                sync()
    finally:
        for h in hooks:
            h.remove()
    path = f"/tmp/round_f_trace_{os.getpid()}.json"
    p.export_chrome_trace(path)
    with open(path) as f:
        data = json.load(f)
    evs = data.get("traceEvents", data) if isinstance(data, dict) else data
    return path, evs


def analyse(evs, steps) -> dict:
    """Kernels per step, and per step / per layer the kernels by outermost aten op around their launch."""
    import bisect

    X = [e for e in evs if isinstance(e, dict) and e.get("ph") == "X"]
    kern = [e for e in X if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
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

    def spans(tid, pred, outermost=True):
        xs = sorted((e for e in by_tid.get(tid, []) if pred(e)), key=lambda e: (e["ts"], -e.get("dur", 0)))
        top, end = [], -1.0
        for e in xs:
            if not outermost or e["ts"] >= end:
                top.append(e)
                end = e["ts"] + e.get("dur", 0)
        return top

    idx = {}

    def find(tid, kind, t):
        if (tid, kind) not in idx:
            if kind == "op":
                sp = spans(tid, lambda e: e.get("cat") == "cpu_op")
            elif kind == "layer":
                sp = spans(tid, lambda e: e.get("cat") == "user_annotation" and e["name"].startswith("round_f_layer"))
            else:
                sp = spans(tid, lambda e: e.get("cat") == "user_annotation" and e["name"].startswith("round_f_step"))
            idx[(tid, kind)] = ([e["ts"] for e in sp], sp)
        starts, sp = idx[(tid, kind)]
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and sp[i]["ts"] <= t <= sp[i]["ts"] + sp[i].get("dur", 0):
            return sp[i]["name"]
        return None

    per_step: dict = {}
    for k in kern:
        c = (k.get("args") or {}).get("correlation")
        la = launches.get(c)
        if la is None:
            step, layer, op = None, None, "?"
        else:
            step = find(la.get("tid"), "step", la["ts"])
            layer = find(la.get("tid"), "layer", la["ts"])
            op = find(la.get("tid"), "op", la["ts"]) or la.get("name", "?")
        s = per_step.setdefault(step or "none", {"kernels": 0, "memsets": 0, "memcpys": 0, "kernel_us": 0.0,
                                                 "layers": {}, "outside_ops": {}, "names": {}})
        cat = k.get("cat")
        s["kernels" if cat == "kernel" else "memsets" if cat == "gpu_memset" else "memcpys"] += 1
        if cat == "kernel":
            s["kernel_us"] += float(k.get("dur", 0))
            nm = k.get("name", "")[:110]
            s["names"][nm] = s["names"].get(nm, 0) + 1
        tgt = s["layers"].setdefault(layer, {}) if layer else s["outside_ops"]
        tgt[op] = tgt.get(op, 0) + 1
    out = {"steps": {}}
    for name, s in per_step.items():
        lay = s.pop("layers")
        s["kernels_per_layer"] = {ln: sum(v.values()) for ln, v in sorted(lay.items(), key=lambda kv: int(kv[0][13:]))}
        s["layer0_ops"] = lay.get("round_f_layer0", {})
        counts = sorted(set(s["kernels_per_layer"].values()))
        s["layer_kernel_counts_distinct"] = counts
        out["steps"][name] = s
    st = out["steps"].get("round_f_step%d" % (steps - 1)) or next(iter(out["steps"].values()), {})
    out["last_step"] = {k: st.get(k) for k in ("kernels", "memsets", "memcpys", "kernel_us")}
    return out


def layers_of(model):
    inner = getattr(model, "model", None)
    return list(getattr(inner, "layers", []) or [])


def save_gz(path, out_dir, name):
    with open(path, "rb") as f, gzip.open(os.path.join(out_dir, name + ".json.gz"), "wb", compresslevel=6) as g:
        shutil.copyfileobj(f, g)


def job_counts_hf(out_dir, quick):
    res = {"kind": "launchsim-round-f-counts-hf", "quick": quick, "environment": versions(), "rows": [], "errors": []}
    path = os.path.join(out_dir, "counts_hf.json")
    tdir = os.path.join(out_dir, "traces")
    os.makedirs(tdir, exist_ok=True)
    models = ("qwen3-0.6b",) if quick else HF_ORDER
    batches = (1,) if quick else BATCHES
    for short in models:
        try:
            model, cfg = build_hf(short, 2 if quick else None)
        except Exception as e:  # noqa: BLE001
            res["errors"].append({"what": f"build {short}", "error": err(e)})
            continue
        caches = ("static", "dynamic") if short in DYNAMIC_MODELS else ("static",)
        for cache in caches:
            for b in batches:
                try:
                    s = HFStep(model, cfg, b, cache=cache)
                    for _ in range(3):
                        s.step()
                    sync()
                    keep = b in TRACE_BATCHES
                    n = 2 if keep else 1
                    p, evs = _trace_of(s.step, n, layers_of(model), shapes=keep)
                    a = analyse(evs, n)
                    row = {"model": short, "batch": b, "ctx": CTX, "cache": cache, "layers": cfg.num_hidden_layers,
                           "attn_implementation": attn_ran(model), **a}
                    if keep:
                        name = f"hf_{short}_{cache}_b{b}.trace"
                        save_gz(p, tdir, name)
                        row["trace"] = f"traces/{name}.json.gz"
                    os.unlink(p)
                    res["rows"].append(row)
                    log(f"[counts] {short} {cache} b{b}: {a['last_step']}")
                    del s
                    free()
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    res["errors"].append({"what": f"{short} {cache} b{b}", "error": err(e)})
                    free()
                _dump(res, path)
        del model
        free()
    _dump(res, path)
    return 0


def job_counts_verify(out_dir, quick):
    from ..reference_decoder import make_weights

    res = {"kind": "launchsim-round-f-counts-verify", "quick": quick, "environment": versions(), "rows": [],
           "errors": []}
    path = os.path.join(out_dir, "counts_verify.json")
    chk = {}
    try:
        chk = check_verify_attention()
    except Exception as e:  # noqa: BLE001
        res["errors"].append({"what": "check", "error": err(e)})
    attn = "lower_right" if isinstance(chk.get("lower_right_q5"), float) and chk["lower_right_q5"] < 2e-2 else "bool_mask"
    res["verify_attention"] = attn
    qls = (1, 2) if quick else Q_LENS
    bs = (1,) if quick else (1, 64)
    for name in ("qwen3-0.6b", "llama3-8b"):
        m = ref_spec(name, 2 if quick else None)
        w = make_weights(m)
        for B in bs:
            for L in qls:
                try:
                    r = RefVerify(m, w, B, L, attn=attn)
                    for _ in range(2):
                        r.step()
                    p, evs = _trace_of(r.step, 1, None, shapes=False)
                    os.unlink(p)
                    a = analyse(evs, 1)
                    st = a["steps"].get("round_f_step0", {})
                    res["rows"].append({"impl": "reference", "model": name, "layers": m.num_hidden_layers, "batch": B,
                                        "q_len": L, "ctx": CTX, **a["last_step"], "names": st.get("names"),
                                        "ops": st.get("outside_ops")})
                    del r
                    free()
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    res["errors"].append({"what": f"ref {name} b{B} q{L}", "error": err(e)})
                _dump(res, path)
        del w
        free()
    try:
        model, cfg = build_hf("qwen3-0.6b", 2 if quick else None)
        for B in bs:
            for L in qls:
                try:
                    s = HFStep(model, cfg, B, q_len=L, room=VERIFY_ROOM)
                    for _ in range(2):
                        s.step()
                    p, evs = _trace_of(s.step, 1, layers_of(model), shapes=False)
                    os.unlink(p)
                    a = analyse(evs, 1)
                    st = a["steps"].get("round_f_step0", {})
                    res["rows"].append({"impl": "hf", "model": "qwen3-0.6b", "layers": cfg.num_hidden_layers,
                                        "batch": B, "q_len": L, "ctx": CTX, **a["last_step"],
                                        "layer0_ops": st.get("layer0_ops"), "outside_ops": st.get("outside_ops"),
                                        "names": st.get("names")})
                    del s
                    free()
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    res["errors"].append({"what": f"hf b{B} q{L}", "error": err(e)})
                _dump(res, path)
    except Exception as e:  # noqa: BLE001
        res["errors"].append({"what": "hf build", "error": err(e)})
    _dump(res, path)
    return 0


# ------------------------------------------------------------------------------------------ compile
def compile_batches(quick):
    return (1,) if quick else (1, 64)


def compile_dyns(quick):
    return (False,) if quick else (False, True)


def _compiled_runner(impl, name, B, dyn, fn_cache):
    """(step callable, compiled fn) for impl ref|hf at 2 layers; the compiled function is shared across batches."""
    import torch

    if impl == "ref":
        from ..reference_decoder import Runner, decode_step, make_weights

        m = ref_spec(name, 2)
        if ("w", name) not in fn_cache:
            fn_cache[("w", name)] = make_weights(m)
        w = fn_cache[("w", name)]
        if ("fn", dyn) not in fn_cache:
            def f(w, cache, ids, pos, cpos):
                return decode_step(m, w, cache, ids, pos, cpos, packed=False)
            fn_cache[("fn", dyn)] = torch.compile(f, dynamic=dyn, fullgraph=True)
        r = Runner(m, "none", B, CTX, weights=w)
        cf = fn_cache[("fn", dyn)]
        return (lambda: cf(r.w, r.cache, r.ids, r.pos, r.cpos)), r
    if ("model", name) not in fn_cache:
        fn_cache[("model", name)] = build_hf(name, 2)
    model, cfg = fn_cache[("model", name)]
    if ("fn", dyn) not in fn_cache:
        fn_cache[("fn", dyn)] = torch.compile(model, dynamic=dyn)
    s = HFStep(model, cfg, B)
    cm = fn_cache[("fn", dyn)]

    def step():
        with torch.no_grad():
            return cm(input_ids=s.ids, position_ids=s.pos, past_key_values=s.cache, use_cache=True,
                      cache_position=s.cpos).logits
    return step, s


def job_compile(out_dir, spec, quick):
    import torch

    _, impl, name = spec.split(":")
    T = Timing(out_dir, f"compile_{impl}_{name}", quick)
    for dyn in compile_dyns(quick):
        fc: dict = {}
        for B in compile_batches(quick):
            try:
                torch._dynamo.reset() if B == compile_batches(quick)[0] else None
                step, holder = _compiled_runner(impl, name, B, dyn, fc)
                t0 = time.time()
                step()
                sync()
                first = time.time() - t0
                r = {"table": "compile", "impl": impl, "model": name, "layers": 2, "dynamic": dyn, "batch": B,
                     "ctx": CTX, "first_call_s": first}
                r["compiled_eager_ms"] = iso_ms(step)
                try:
                    from ..reference_decoder import warm_then_capture

                    g, _ = warm_then_capture(step, 2)
                    r["compiled_graph_ms"] = iso_ms(g.replay, warm=3)
                    r["compiled_graph_b2b_ms"] = b2b_ms(g.replay)
                    del g
                except Exception as e:  # noqa: BLE001
                    traceback.print_exc()
                    r["graph_error"] = err(e)
                T.row(r)
                log(f"[compile] {impl} {name} dyn={dyn} b{B}: first {first:.1f}s, eager "
                    f"{r['compiled_eager_ms']['median']:.3f} ms, graph "
                    f"{r.get('compiled_graph_ms', {}).get('median', float('nan')):.3f} ms")
                del step, holder
                free()
            except Exception as e:  # noqa: BLE001
                T.error(f"compile {impl} {name} dyn={dyn} b{B}", e)
                free()
        del fc
        free()
    return T.finish()


def job_compile_counts(out_dir, spec, quick):
    import torch

    _, impl, name = spec.split(":")
    res = {"kind": "launchsim-round-f-compile-counts", "impl": impl, "model": name, "quick": quick,
           "environment": versions(), "rows": [], "errors": []}
    path = os.path.join(out_dir, f"compile_counts_{impl}_{name}.json")
    for dyn in compile_dyns(quick):
        fc: dict = {}
        for B in compile_batches(quick):
            try:
                torch._dynamo.reset() if B == compile_batches(quick)[0] else None
                step, holder = _compiled_runner(impl, name, B, dyn, fc)
                for _ in range(3):
                    step()
                sync()
                p, evs = _trace_of(step, 1, None, shapes=False)
                os.unlink(p)
                a = analyse(evs, 1)
                st = a["steps"].get("round_f_step0", {})
                from ..child_counts import kernel_kind

                kinds: dict = {}
                for nm, c in (st.get("names") or {}).items():
                    kinds[kernel_kind(nm)] = kinds.get(kernel_kind(nm), 0) + c
                res["rows"].append({"impl": impl, "model": name, "layers": 2, "dynamic": dyn, "batch": B, "ctx": CTX,
                                    **a["last_step"], "kinds": kinds, "names": st.get("names"),
                                    "ops": st.get("outside_ops")})
                log(f"[compile-counts] {impl} {name} dyn={dyn} b{B}: {a['last_step']} {kinds}")
                del step, holder
                free()
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                res["errors"].append({"what": f"{impl} {name} dyn={dyn} b{B}", "error": err(e)})
            _dump(res, path)
        del fc
        free()
    _dump(res, path)
    return 0


def job_host(out_dir, quick):
    from ..hygiene import canary, forbid_profiler

    forbid_profiler()
    t0 = time.time()
    c = canary()
    res = {"kind": "launchsim-round-f-host-only", "canary": c, "wall_s": time.time() - t0}
    _dump(res, os.path.join(out_dir, "host_only.json"))
    log(f"[host] {json.dumps(c)} in {res['wall_s']:.2f}s")
    return 0


# ------------------------------------------------------------------------------------------ driver
def summary(out_dir) -> dict:
    def load(n):
        try:
            with open(os.path.join(out_dir, n)) as f:
                return json.load(f)
        except Exception:  # noqa: BLE001
            return None

    s = {"hf": [], "verify": [], "draft": [], "compile": [], "canaries": {}}
    cnt = {}
    ch = load("counts_hf.json") or {}
    for r in ch.get("rows", []):
        cnt[(r["model"], r["cache"], r["batch"])] = (r.get("last_step") or {}).get("kernels")
    for fn in sorted(glob.glob(os.path.join(out_dir, "*.json"))):
        d = load(os.path.basename(fn)) or {}
        if "canary" in d and isinstance(d["canary"], dict) and "ratio" in d["canary"]:
            s["canaries"][os.path.basename(fn)] = {k: d["canary"][k] for k in ("ok", "host_start_us", "host_end_us",
                                                                               "device_start_us", "device_end_us")}
    ht = load("hf_timing.json") or {}
    for r in ht.get("rows", []):
        s["hf"].append([r["model"], r["cache"], r["batch"], r["attn_implementation"], cnt.get((r["model"], r["cache"], r["batch"])),
                        round(r["eager_ms"]["median"], 3), round(r.get("graph_ms", {}).get("median", -1), 3)])
    vt = load("verify_timing.json") or {}
    vh = load("verify_hf_timing.json") or {}
    for fn in sorted(glob.glob(os.path.join(out_dir, "attention_*.json"))):
        vh.setdefault("rows", []).extend((load(os.path.basename(fn)) or {}).get("rows", []))
    s["attention"] = []
    for r in vt.get("rows", []) + vh.get("rows", []):
        if r.get("table") == "attention" and r["batch"] in (1, 64) and r["ctx"] in (512, 8192):
            s["attention"].append([r["shape"], r["backend"], r["batch"], r["ctx"], r["q_len"],
                                   round(r["device_us"], 2) if "device_us" in r else r.get("error", "")[:60]])
        if r.get("table") == "verify":
            s["verify"].append([r["impl"], r["model"], r["batch"], r["q_len"], round(r["eager_ms"]["median"], 3),
                                round(r.get("graph_ms", {}).get("median", -1), 3)])
        elif r.get("table") == "draft_loop":
            s["draft"].append([r["batch"], round(r["replay_b2b_ms"], 4)] +
                              [round(r[f"k{k}_loop_ms"]["median"], 4) for k in DRAFT_K if f"k{k}_loop_ms" in r])
    for fn in sorted(glob.glob(os.path.join(out_dir, "compile_*.json"))):
        d = load(os.path.basename(fn)) or {}
        for r in d.get("rows", []):
            if "compiled_eager_ms" in r:
                s["compile"].append([r["impl"], r["model"], r["dynamic"], r["batch"], round(r["first_call_s"], 1),
                                     round(r["compiled_eager_ms"]["median"], 3),
                                     round(r.get("compiled_graph_ms", {}).get("median", -1), 3)])
            elif "kernels" in r:
                s["compile"].append([r["impl"], r["model"], r["dynamic"], r["batch"], "kernels", r["kernels"], r.get("kinds")])
    return s


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--job", default="all")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=560.0)
    ap.add_argument("--bundle", default=None)
    ap.add_argument("--skip", default="", help="comma-separated jobs to leave out")
    ap.add_argument("--only", default="", help="comma-separated job-name prefixes to run (default: all)")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if a.job != "all":
        j = a.job
        if j == "host":
            return job_host(a.out, a.quick)
        if j == "hf_timing":
            return job_hf_timing(a.out, a.quick)
        if j == "verify_timing":
            return job_verify_timing(a.out, a.quick)
        if j.startswith("attention:"):  # attention:SHAPE:CTX, a timing process of its own (a rerun's rest)
            _, shape, c = j.split(":")
            T = Timing(a.out, f"attention_{shape}_{c}", a.quick)
            try:
                attention_table(T, a.quick, shapes=(shape,), ctxs=(int(c),))
            except Exception as e:  # noqa: BLE001
                T.error("attention table", e)
            return T.finish()
        if j == "verify_hf_timing":
            return job_verify_hf(a.out, a.quick)
        if j == "counts_hf":
            return job_counts_hf(a.out, a.quick)
        if j == "counts_verify":
            return job_counts_verify(a.out, a.quick)
        if j.startswith("compile:"):
            return job_compile(a.out, j, a.quick)
        if j.startswith("compile_counts:"):
            return job_compile_counts(a.out, j, a.quick)
        raise SystemExit(f"unknown job {j}")
    t0 = time.time()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/round-f-inductor")
    env.setdefault("TRITON_CACHE_DIR", "/tmp/round-f-triton")
    q = ["--quick"] if a.quick else []
    skip = set(x for x in a.skip.split(",") if x)
    plan = [("host", 20), ("hf_timing", 165), ("verify_timing", 185), ("verify_hf_timing", 115), ("counts_hf", 145),
            ("counts_verify", 55)]
    for v in COMPILE_VARIANTS if not a.quick else COMPILE_VARIANTS[:2]:
        plan += [(f"compile:{v}", 150), (f"compile_counts:{v}", 90)]
    status = {}
    os.makedirs(os.path.join(a.out, "logs"), exist_ok=True)

    def bundle():
        if a.bundle:
            subprocess.call(["tar", "czf", a.bundle + ".tmp", "-C", os.path.dirname(os.path.abspath(a.out)),
                             os.path.basename(os.path.abspath(a.out))])
            os.replace(a.bundle + ".tmp", a.bundle)

    for extra in (x for x in a.only.split(",") if x.startswith("attention:")):
        plan.insert(0, (extra, 60))
    for job, limit in plan:
        only = [x for x in a.only.split(",") if x]
        if job in skip or (only and not any(job.startswith(o) for o in only)):
            status[job] = "skipped (--skip)"
            continue
        left = a.deadline - (time.time() - t0)
        if job.startswith("compile") and left < 45:
            status[job] = f"skipped: {left:.0f}s left of the deadline"
            continue
        if left < 10:
            status[job] = f"skipped: {left:.0f}s left of the deadline"
            continue
        lim = int(min(limit, left))
        ts = time.time()
        lf = open(os.path.join(a.out, "logs", job.replace(":", "_") + ".log"), "w")
        try:
            p = subprocess.run(["timeout", str(lim), sys.executable, "-m", "calibration.scripts.round_f", "--out",
                                a.out, "--job", job, *q], stdout=lf, stderr=subprocess.STDOUT, env=env)
            rc = p.returncode
        finally:
            lf.close()
        status[job] = {"rc": rc, "wall_s": round(time.time() - ts, 1), "limit_s": lim}
        log(f"[round_f] {job}: rc {rc} in {time.time() - ts:.1f}s (limit {lim})")
        if rc != 0:
            with open(os.path.join(a.out, "logs", job.replace(":", "_") + ".log")) as f:
                tail = f.read()[-1500:]
            log(tail)
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
