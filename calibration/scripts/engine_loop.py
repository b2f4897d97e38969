"""The engine around the forward pass, measured on the H200 (issue 11): a vLLM-style decode loop, HF
`generate()`, graph capture and torch.compile start-up times. One timing process, no profiler.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.engine_loop --out DIR [--quick]

Writes DIR/engine_loop.json (atomically, after every section; a failing section records its error and the
run goes on) and prints a summary last. Sections:
- `loop`: a minimal continuous-batching decode loop in the style of vLLM's model runner around the reference
  decoder (qwen3-0.6b, fusion none, ctx 512, batch 1/8/64): persistent pinned host input buffers, copy_(...,
  non_blocking=True) into the runner's static inputs (r.ids, r.pos, r.cpos), the forward (eager, or the
  replay of one full graph), sampling on the GPU (greedy argmax, or vLLM's top-p: sort, softmax, cumsum, mask,
  scatter, exponential race), the sampled tokens to the host (`.tolist()`), a fake detokeniser (dict look-ups
  per token). `sync`: the host waits for step n's tokens before it schedules step n+1. `async`: the next
  step's input ids are copied on the GPU from the sampled tokens, the D2H copy of the tokens runs on a second
  stream into double-buffered pinned memory with an event, and the host waits for step n's tokens only after
  launching step n+1. Timed: wall time per step over `STEPS` steps (rounds; median of rounds) and each step's
  delivery time; in a separate pass, each host part with perf_counter (schedule, prep, h2d, forward, sample,
  d2h, wait, tolist, detok); device times of sampling and of a small copy by CUDA events behind a sleeping
  stream. Positions written each step stay ctx-1 (the reference decoder's static cache has ctx slots); the
  host bookkeeping still advances every sequence.
- `hf_generate`: transformers' `generate()` on Qwen3ForCausalLM (random weights from launchsim's preset), eager,
  with the dynamic cache and with a StaticCache (`cache_implementation="static"`; generate()'s automatic
  torch.compile of static-cache decoding is switched off: `disable_compile` and the criterion overridden), greedy; per-token time = (t(N new tokens) - t(1 new token)) / (N - 1).
- `capture`: per-graph start-up for qwen3-0.6b and llama3-8b (fusion none, ctx 512) at several batches,
  largest first as engines capture: the warm-up runs (each timed) and the capture itself.
- `compile`: torch.compile (Inductor, fullgraph) of the reference decoder's step for qwen3-0.6b cut to two
  depths, dynamic=False and True, each compiled twice in fresh child processes sharing one
  TORCHINDUCTOR_CACHE_DIR / TRITON_CACHE_DIR (cold, then warm cache). Bounded by a time budget; runs that
  do not fit are recorded as skipped.
Hygiene: `forbid_profiler()` first; a canary at start and end (`check_canary`); exit 3 when it drifted.
The whole run stays under ~5.5 minutes (sections check a deadline). torch is imported inside functions only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from ..hygiene import canary, check_canary, exit_code, forbid_profiler, queued_device_us
from ..jsonio import dump as _dump
from ..microbench import _pct

MODEL, CTX = "qwen3-0.6b", 512
DEADLINE_S = 330.0  # the whole run by default (--deadline overrides; section thresholds scale with it)
COMPILE_BUDGET_S = 150.0
TOP_P_OPS = 13  # kernel-launching torch calls in `sample_top_p`
GREEDY_OPS = 1
BLOCK = 16


class Clock:
    def __init__(self, limit: float):
        self.t0, self.limit = time.time(), limit

    def left(self) -> float:
        return self.limit - (time.time() - self.t0)


# --------------------------------------------------------------------------------------------- sampling
def sample_greedy(logits):
    return logits.argmax(dim=-1)


def sample_top_p(logits, gen, p: float = 0.9, temperature: float = 0.8):
    """vLLM's top-p (apply_top_k_top_p) and random_sample (exponential race): no host sync."""
    import torch

    x = logits.float().div_(temperature)
    s, idx = x.sort(dim=-1, descending=False)
    cum = s.softmax(dim=-1).cumsum_(dim=-1)
    mask = cum <= (1 - p)
    mask[:, -1] = False
    s.masked_fill_(mask, float("-inf"))
    x = s.scatter(-1, idx, s)
    probs = x.softmax(dim=-1)
    q = torch.empty_like(probs).exponential_(generator=gen)
    return probs.div_(q).argmax(dim=-1)


# --------------------------------------------------------------------------------------------- the loop
class Seq:
    __slots__ = ("sid", "tokens", "pos", "blocks", "text", "delta", "max_tokens", "done")

    def __init__(self, sid: int, prompt_len: int):
        self.sid, self.tokens, self.pos = sid, [1], prompt_len
        self.blocks = list(range(prompt_len // BLOCK + 1))
        self.text: list[str] = []
        self.delta = ""
        self.max_tokens, self.done = 1 << 30, False


class EngineLoop:
    """One decode loop around a reference-decoder Runner (`graph`: replay its captured full graph)."""

    def __init__(self, r, graph: bool, sampling: str, scheduling: str, vocab: dict):
        import torch

        B = r.batch
        self.r, self.graph, self.sampling, self.scheduling, self.vocab = r, graph, sampling, scheduling, vocab
        self.B, self.ctx = B, r.ctx
        pin = dict(dtype=torch.long, pin_memory=True)
        self.ids_cpu = [torch.zeros((B, 1), **pin) for _ in range(2)]
        self.pos_cpu = [torch.zeros((B, 1), **pin) for _ in range(2)]
        self.cpos_cpu = [torch.zeros((1,), **pin) for _ in range(2)]
        self.tok_cpu = [torch.zeros((B,), **pin) for _ in range(2)]
        try:
            self.np = [(a.numpy(), b.numpy(), c.numpy()) for a, b, c in zip(self.ids_cpu, self.pos_cpu, self.cpos_cpu)]
        except Exception:  # noqa: BLE001  (no numpy: write through torch)
            self.np = None
        self.torch = torch
        self.copy_stream = torch.cuda.Stream()
        self.ev_sampled = [torch.cuda.Event() for _ in range(2)]
        self.ev_copied = [torch.cuda.Event() for _ in range(2)]
        self.gen = torch.Generator(device="cuda").manual_seed(0)
        self.seqs = [Seq(i, self.ctx - 1) for i in range(B)]
        self.next_block = B * (self.ctx // BLOCK + 1)
        self.n = 0
        self.prev_tok = None  # async: the last step's sampled tokens, on the GPU
        self.pending = None  # async: (event, pinned buffer, running) of the step not yet delivered
        self.delivered: list[float] = []
        self.parts: dict[str, list[float]] | None = None

    # host parts ------------------------------------------------------------------------------
    def schedule(self):
        running = []
        for s in self.seqs:
            if s.done:
                continue
            if len(s.tokens) >= s.max_tokens:
                s.done = True
                continue
            if s.pos % BLOCK == 0:  # a new KV block for the next token
                s.blocks.append(self.next_block)
                self.next_block += 1
            running.append(s)
        return running

    def prep(self, running, k: int):
        last = self.ctx - 1
        positions = [min(s.pos, last) for s in running]
        ids = [s.tokens[-1] for s in running]
        if self.np is not None:
            a, b, c = self.np[k]
            a[:, 0] = ids
            b[:, 0] = positions
            c[0] = last
        else:
            import torch

            self.ids_cpu[k][:, 0] = torch.tensor(ids)
            self.pos_cpu[k][:, 0] = torch.tensor(positions)
            self.cpos_cpu[k][0] = last

    def h2d(self, k: int):
        r = self.r
        if self.scheduling == "async" and self.prev_tok is not None:
            r.ids.copy_(self.prev_tok.view(self.B, 1))  # device copy: the host never needs these tokens
        else:
            r.ids.copy_(self.ids_cpu[k], non_blocking=True)
        r.pos.copy_(self.pos_cpu[k], non_blocking=True)
        r.cpos.copy_(self.cpos_cpu[k], non_blocking=True)

    def forward(self):
        if self.graph:
            self.r.replay()
            return self.r.out
        return self.r.step()

    def sample(self, logits):
        return sample_greedy(logits) if self.sampling == "greedy" else sample_top_p(logits, self.gen)

    def detok(self, running, toks):
        vocab = self.vocab
        for s, t in zip(running, toks):
            s.tokens.append(t)
            s.pos += 1
            s.text.append(vocab[t])
            s.delta = "".join(s.text[-4:])  # incremental detokenisation: the streamed delta
        self.delivered.append(time.perf_counter())

    # steps -----------------------------------------------------------------------------------
    def step(self):
        pc, P = time.perf_counter, self.parts
        k = self.n & 1
        self.n += 1
        t0 = pc()
        running = self.schedule()
        t1 = pc()
        self.prep(running, k)
        t2 = pc()
        self.h2d(k)
        t3 = pc()
        logits = self.forward()
        t4 = pc()
        tok = self.sample(logits)
        t5 = pc()
        if self.scheduling == "sync":
            if P is not None:  # the parts pass separates the wait from .tolist() (on an idle GPU then)
                self.ev_sampled[k].record()
                self.ev_sampled[k].synchronize()
            t6 = pc()
            toks = tok.tolist()
            t7 = pc()
            self.detok(running, toks)
            t8 = pc()
            if P is not None:
                self._record(P, (("schedule", t0, t1), ("prep", t1, t2), ("h2d", t2, t3), ("forward", t3, t4),
                                 ("sample", t4, t5), ("wait", t5, t6), ("tolist", t6, t7), ("detok", t7, t8)))
            return
        torch = self.torch
        es, ec, cs = self.ev_sampled[k], self.ev_copied[k], self.copy_stream
        es.record()
        cs.wait_event(es)
        with torch.cuda.stream(cs):
            self.tok_cpu[k].copy_(tok, non_blocking=True)
            ec.record(cs)
        tok.record_stream(cs)
        self.prev_tok = tok
        t6 = pc()
        prev, self.pending = self.pending, (ec, self.tok_cpu[k], running)
        parts = [("schedule", t0, t1), ("prep", t1, t2), ("h2d", t2, t3), ("forward", t3, t4), ("sample", t4, t5),
                 ("d2h", t5, t6)]
        if prev is not None:
            prev[0].synchronize()
            t7 = pc()
            toks = prev[1].tolist()
            t8 = pc()
            self.detok(prev[2], toks)
            t9 = pc()
            parts += [("wait", t6, t7), ("tolist", t7, t8), ("detok", t8, t9)]
        if P is not None:
            self._record(P, parts)

    @staticmethod
    def _record(P, parts):
        for name, a, b in parts:
            P.setdefault(name, []).append((b - a) * 1e6)

    def finish(self):
        """Deliver the step still in flight (async)."""
        if self.pending is not None:
            ev, buf, running = self.pending
            self.pending = None
            ev.synchronize()
            self.detok(running, buf.tolist())


def run_rounds(loop: EngineLoop, steps: int, rounds: int) -> dict:
    """Wall time per step over `steps` steps, `rounds` times; the delivery intervals of each round."""
    import torch

    per, steady = [], []
    for _ in range(rounds):
        torch.cuda.synchronize()
        loop.delivered = []
        t0 = time.perf_counter()
        for _ in range(steps):
            loop.step()
        loop.finish()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        per.append((t1 - t0) * 1e3 / steps)
        d = loop.delivered
        if len(d) > 4:  # steady state: deliveries 2 .. n-2 (async's tail delivers two at once)
            steady.append((d[-2] - d[2]) * 1e3 / (len(d) - 4))
    out = {"step_ms": _pct(per), "steps": steps, "rounds": rounds}
    if steady:
        out["steady_ms"] = _pct(steady)
    return out


def run_parts(loop: EngineLoop, steps: int) -> dict:
    import torch

    loop.parts = {}
    torch.cuda.synchronize()
    for _ in range(steps):
        loop.step()
    loop.finish()
    torch.cuda.synchronize()
    parts, loop.parts = loop.parts, None
    return {k: _pct(v) for k, v in parts.items()}


def device_us(fn, reps: int = 15, inner: int = 1) -> dict:
    """Device time of `fn` queued behind a sleeping stream (no host gaps), µs per call (p10/p50/p90)."""
    return _pct(queued_device_us(fn, inner, reps, hold_cycles=3_000_000))


def loop_section(res, save, quick, clock, log):
    import torch

    from ..reference_decoder import Runner, make_cache, make_weights, model_spec

    m = model_spec(MODEL, quick)
    vocab = {i: f"\u2581t{i}" for i in range(m.vocab_size)}
    w = make_weights(m)
    steps, rounds, pst = (12, 2, 10) if quick else (50, 3, 30)
    out = res.setdefault("loop", [])
    for b in ((1, 8) if quick else (1, 8, 64)):
        if clock.left() < 0.6 * clock.limit:
            out.append({"batch": b, "skipped": "deadline"})
            continue
        cache = make_cache(m, b, CTX)
        r = Runner(m, "none", b, CTX, weights=w, cache=cache)
        row = {"model": MODEL, "layers": m.num_hidden_layers, "fusion": "none", "batch": b, "ctx": CTX, "runs": []}
        for graph in (False, True):
            try:
                if graph:
                    t0 = time.perf_counter()
                    r.capture(warmup=2)
                    torch.cuda.synchronize()
                    row["capture_s"] = time.perf_counter() - t0
                    row["graph_device_us"] = device_us(r.replay, reps=10)
                for sampling in (("greedy", "top_p") if graph else ("greedy",)):
                    for sched in ("sync", "async"):
                        t0 = time.time()
                        lp = EngineLoop(r, graph, sampling, sched, vocab)
                        for _ in range(5):
                            lp.step()
                        lp.finish()
                        run = {"graph": "full" if graph else "none", "sampling": sampling, "scheduling": sched,
                               "wall": run_rounds(lp, steps, rounds), "parts_us": run_parts(lp, pst)}
                        row["runs"].append(run)
                        log(f"[loop] b{b:<3d} {run['graph']:4s} {sampling:6s} {sched:5s} "
                            f"{run['wall']['step_ms']['p50']:8.3f} ms/step ({time.time() - t0:.1f}s)")
                        save()
            except Exception as e:  # noqa: BLE001
                import traceback

                traceback.print_exc()
                row.setdefault("errors", []).append(f"{'graph' if graph else 'eager'}: {type(e).__name__}: {e}"[:400])
        try:  # device times of the engine's own kernels at this batch
            logits = torch.randn(b, m.vocab_size, device="cuda", dtype=torch.bfloat16)
            gen = torch.Generator(device="cuda").manual_seed(1)
            src = torch.zeros((b, 1), dtype=torch.long, pin_memory=True)
            dst = torch.zeros((b, 1), dtype=torch.long, device="cuda")
            row["device_us"] = {
                "sample_greedy": device_us(lambda: sample_greedy(logits)),
                "sample_top_p": device_us(lambda: sample_top_p(logits, gen)),
                "h2d_copy": device_us(lambda: dst.copy_(src, non_blocking=True), inner=20),
            }
        except Exception as e:  # noqa: BLE001
            row.setdefault("errors", []).append(f"device: {type(e).__name__}: {e}"[:400])
        r.release()
        del r, cache
        torch.cuda.empty_cache()
        out.append(row)
        save()
    res["loop_ops"] = {"greedy": GREEDY_OPS, "top_p": TOP_P_OPS, "h2d_copies": 3}


# --------------------------------------------------------------------------------------------- HF generate
def hf_section(res, save, quick, clock, log, reps: int = 5):
    import torch

    from ..hf_decoder import hf_config

    cfg, cls = hf_config(MODEL)
    if quick:
        cfg.num_hidden_layers = 2
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = cls(cfg).to(torch.bfloat16).eval()
    # no torch.compile: generate() compiles the forward on its own when the cache is static unless told not to
    model.generation_config.disable_compile = True
    model._valid_auto_compile_criteria = lambda *a, **k: False
    out = res.setdefault("hf_generate", [])
    new = 16 if quick else 64
    reps = 1 if quick else reps
    for b in ((1,) if quick else (1, 8)):
        g = torch.Generator(device="cuda").manual_seed(b)
        prompt = torch.randint(0, cfg.vocab_size, (b, CTX), device="cuda", generator=g)
        mask = torch.ones_like(prompt)
        for cache in ("dynamic", "static"):
            if clock.left() < 0.36 * clock.limit:
                out.append({"batch": b, "cache": cache, "skipped": "deadline"})
                continue
            kw = dict(attention_mask=mask, do_sample=False, pad_token_id=0)
            if cache == "static":
                kw["cache_implementation"] = "static"
            try:
                def gen(n, model=model, prompt=prompt, kw=kw):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    o = model.generate(prompt, max_new_tokens=n, min_new_tokens=n, **kw)
                    torch.cuda.synchronize()
                    return time.perf_counter() - t0, int(o.shape[1] - CTX)

                gen(4)  # warm-up
                t_n = [gen(new) for _ in range(reps)]
                t_1 = [gen(1) for _ in range(reps)]
                tn = sorted(t for t, _ in t_n)[len(t_n) // 2]
                t1 = sorted(t for t, _ in t_1)[len(t_1) // 2]
                got = t_n[0][1]
                row = {"model": MODEL, "layers": cfg.num_hidden_layers, "batch": b, "prompt": CTX, "cache": cache,
                       "new_tokens": new, "generated": got, "t_new_s": [t for t, _ in t_n], "t_1_s": [t for t, _ in t_1],
                       "per_token_ms": (tn - t1) * 1e3 / max(got - 1, 1), "torch_compile": False}
                log(f"[hf] b{b} {cache:7s} {row['per_token_ms']:.3f} ms/token ({got} tokens)")
            except Exception as e:  # noqa: BLE001
                import traceback

                traceback.print_exc()
                row = {"batch": b, "cache": cache, "error": f"{type(e).__name__}: {e}"[:400]}
            out.append(row)
            save()
    del model
    torch.cuda.empty_cache()


# --------------------------------------------------------------------------------------------- capture
def capture_section(res, save, quick, clock, log):
    import torch

    from ..reference_decoder import Runner, make_cache, make_weights, model_spec

    out = res.setdefault("capture", [])
    for name in ("qwen3-0.6b", "llama3-8b"):
        if clock.left() < 0.45 * clock.limit:
            out.append({"model": name, "skipped": "deadline"})
            continue
        try:
            m = model_spec(name, quick)
            w = make_weights(m)
            order = (8, 1, 8) if quick else (64, 8, 1, 64)  # largest first, as engines capture; then a repeat
            for i, b in enumerate(order):
                cache = make_cache(m, b, CTX)
                r = Runner(m, "none", b, CTX, weights=w, cache=cache)
                torch.cuda.synchronize()
                warm = []
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):  # the warm-up runs a capture makes (Runner.capture's side stream)
                    for _ in range(2):
                        t0 = time.perf_counter()
                        r.step()
                        torch.cuda.synchronize()
                        warm.append(time.perf_counter() - t0)
                torch.cuda.current_stream().wait_stream(s)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                r.capture(warmup=0)
                torch.cuda.synchronize()
                cap = time.perf_counter() - t0
                r.replay()
                torch.cuda.synchronize()
                row = {"model": name, "layers": m.num_hidden_layers, "fusion": "none", "batch": b, "ctx": CTX,
                       "order": i, "repeat": b in order[:i], "warmup_s": warm, "capture_s": cap}
                out.append(row)
                log(f"[capture] {name} b{b}: warm-up {sum(warm) * 1e3:.1f} ms, capture {cap * 1e3:.1f} ms")
                r.release()
                del r, cache
                save()
            del w
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            out.append({"model": name, "error": f"{type(e).__name__}: {e}"[:400]})
            save()
            torch.cuda.empty_cache()


# --------------------------------------------------------------------------------------------- compile
def compile_child(spec: dict, out_path: str) -> int:
    """In a fresh process: build qwen3-0.6b at `layers`, time the first (compiling) call and the second."""
    t_start = time.time()
    import dataclasses

    import torch

    forbid_profiler()
    from simulator.model.models import PRESETS

    from ..reference_decoder import Runner, make_weights

    t_import = time.time() - t_start
    m = dataclasses.replace(PRESETS[spec["model"]], num_hidden_layers=spec["layers"])
    r = Runner(m, "compiled", spec["batch"], CTX, weights=make_weights(m), dynamic=spec["dynamic"])
    torch.cuda.synchronize()
    t0 = time.time()
    r.step()
    torch.cuda.synchronize()
    t1 = time.time()
    r.step()
    torch.cuda.synchronize()
    t2 = time.time()
    _dump({**spec, "import_s": t_import, "compile_s": t1 - t0, "second_call_s": t2 - t1,
           "process_s": time.time() - t_start}, out_path)
    return 0


def _run_child(spec: dict, env: dict, path: str, timeout: float, root: str) -> dict:
    """One compile child in its own session; on timeout the whole group (Inductor's compile workers too) dies."""
    import signal

    p = subprocess.Popen([sys.executable, "-m", "calibration.scripts.engine_loop", "--compile-child", json.dumps(spec),
                          "--child-out", path], env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return {**spec, "error": f"timed out after {timeout:.0f}s (compile budget)"}
    finally:
        try:  # workers left behind by a child that exited
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if p.returncode == 0 and os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {**spec, "error": f"exit {p.returncode}: {(err or '')[-400:]}"}


def parse_compile_runs(spec: str) -> list[tuple[str, int, bool]]:
    """`model:layers:static|dynamic,...` -> [(model, layers, dynamic)] (the order the runs are made in)."""
    out = []
    for item in filter(None, (x.strip() for x in spec.split(","))):
        name, layers, mode = item.split(":")
        if mode not in ("static", "dynamic"):
            raise ValueError(f"--compile-runs: {item!r}: mode must be static or dynamic")
        out.append((name, int(layers), mode == "dynamic"))
    return out


def compile_section(res, save, quick, clock, log, runs=None, budget_s=COMPILE_BUDGET_S):
    """Cold compiles first (each in a fresh cache), then the warm ones reusing each cold run's cache."""
    out = res.setdefault("compile", [])
    if runs is None:
        depths = (1, 2) if quick else (2, 8)
        runs = [(MODEL, d, False) for d in depths] + [(MODEL, depths[0], True)]
    budget = min(60.0 if quick else budget_s, clock.left() - 20)
    t_sec = time.time()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    dirs = {run: tempfile.mkdtemp(prefix="launchsim_inductor_") for run in runs}
    try:
        for run in runs:  # each configuration cold, then warm (its cache reused)
            model, depth, dyn = run
            for cache in ("cold", "warm"):
                tmp = dirs[run]
                spec = {"model": model, "layers": depth, "batch": 8, "dynamic": dyn, "cache": cache}
                left = budget - (time.time() - t_sec)
                if left < 15:
                    out.append({**spec, "skipped": "compile budget"})
                    continue
                if cache == "warm" and not any(r.get("cache") == "cold" and r.get("layers") == depth
                                               and r.get("model", MODEL) == model
                                               and r.get("dynamic") == dyn and "compile_s" in r for r in out):
                    out.append({**spec, "skipped": "no cold run to warm the cache"})
                    continue
                env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
                           TRITON_CACHE_DIR=os.path.join(tmp, "triton"), PYTHONUNBUFFERED="1")
                t0 = time.time()
                row = _run_child(spec, env, os.path.join(tmp, f"child_{cache}.json"), left, root)
                row["wall_s"] = time.time() - t0
                out.append(row)
                save()
                log(f"[compile] {model} layers {depth} {'dynamic' if dyn else 'static '} {cache}: "
                    + (f"{row['compile_s']:.1f}s" if "compile_s" in row else row.get("error", "")[:120]))
    finally:
        for tmp in dirs.values():
            shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------------------------- main
def summary(res) -> list[str]:
    lines = ["engine_loop summary (ms per step, p50 of rounds):"]
    for row in res.get("loop", []):
        for run in row.get("runs", []):
            p = run["parts_us"]
            host = sum(p[k]["p50"] for k in ("schedule", "prep", "detok") if k in p)
            lines.append(f"  b{row['batch']:<3d} {run['graph']:4s} {run['sampling']:6s} {run['scheduling']:5s} "
                         f"{run['wall']['step_ms']['p50']:8.3f}   (schedule+prep+detok {host:.0f} us)")
        for e in row.get("errors", []):
            lines.append(f"  b{row.get('batch')} ERROR {e[:150]}")
    for row in res.get("hf_generate", []):
        lines.append(f"  HF generate b{row.get('batch')} {row.get('cache')}: "
                     + (f"{row['per_token_ms']:.3f} ms/token" if "per_token_ms" in row else
                        str(row.get("error") or row.get("skipped"))[:150]))
    for row in res.get("capture", []):
        if "capture_s" in row:
            lines.append(f"  capture {row['model']} b{row['batch']}: warm-up {sum(row['warmup_s']) * 1e3:.1f} ms "
                         f"+ capture {row['capture_s'] * 1e3:.1f} ms")
        else:
            lines.append(f"  capture {row.get('model')}: {str(row.get('error') or row.get('skipped'))[:150]}")
    for row in res.get("compile", []):
        lines.append(f"  compile {row.get('model', MODEL)} L{row.get('layers')} {'dyn' if row.get('dynamic') else 'static'} {row.get('cache')}: "
                     + (f"{row['compile_s']:.1f}s" if "compile_s" in row else
                        str(row.get("error") or row.get("skipped"))[:150]))
    for k, v in res.items():
        if isinstance(v, dict) and "error" in v:
            lines.append(f"  section {k}: ERROR {v['error'][:150]}")
    c = res.get("canary")
    if c:
        lines.append(f"  canary {c['host_start_us']:.2f} -> {c['host_end_us']:.2f} us (ratio {c['ratio']:.3f}): "
                     f"{'OK' if c['ok'] else 'FAILED'}")
    lines.append(f"  total {res.get('total_s', 0):.0f}s")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=DEADLINE_S, help="seconds for the whole run")
    ap.add_argument("--sections", default="loop,capture,hf_generate,compile",
                    help="comma-separated sections to run, in this order: loop, capture, hf_generate, compile")
    ap.add_argument("--compile-runs", default=None,
                    help="compile configurations `model:layers:static|dynamic,...` (default: qwen3-0.6b at 2 and "
                         "8 layers static, 2 layers dynamic)")
    ap.add_argument("--compile-budget", type=float, default=COMPILE_BUDGET_S, help="seconds for all compiles")
    ap.add_argument("--hf-reps", type=int, default=5, help="generate() calls per length (median taken)")
    ap.add_argument("--compile-child", help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.compile_child:
        return compile_child(json.loads(a.compile_child), a.child_out)
    if not a.out:
        ap.error("--out DIR is required")
    clock = Clock(a.deadline)
    forbid_profiler()
    import torch

    from .. import microbench as mb

    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "engine_loop.json")
    log = lambda s: print(s, flush=True)  # noqa: E731
    res: dict = {"kind": "launchsim-engine-loop", "quick": a.quick, "date": time.strftime("%Y-%m-%d")}

    def save():
        _dump(res, path)

    try:
        res["environment"] = mb.environment()
    except Exception as e:  # noqa: BLE001
        res["environment"] = {"error": f"{type(e).__name__}: {e}"}
    torch.zeros(1, device="cuda")
    res["canary_start"] = canary()
    log(f"[engine_loop] canary start: {res['canary_start']['host_tiny_op_us']['p50']:.2f} us")
    save()
    import functools

    table = {"loop": loop_section, "capture": capture_section,
             "hf_generate": functools.partial(hf_section, reps=a.hf_reps),
             "compile": functools.partial(compile_section, budget_s=a.compile_budget,
                                          runs=parse_compile_runs(a.compile_runs) if a.compile_runs else None)}
    wanted = [x.strip() for x in a.sections.split(",") if x.strip()]
    unknown = [x for x in wanted if x not in table]
    if unknown:
        ap.error(f"--sections: unknown {', '.join(unknown)} (choose from {', '.join(table)})")
    res["sections"] = wanted
    for name, fn in ((n, table[n]) for n in wanted):
        t0 = time.time()
        try:
            fn(res, save, a.quick, clock, log)
        except Exception as e:  # noqa: BLE001
            import traceback

            traceback.print_exc()
            res[name + "_error"] = {"error": f"{type(e).__name__}: {e}"[:400]}
        res.setdefault("section_s", {})[name] = time.time() - t0
        log(f"[engine_loop] {name}: {time.time() - t0:.1f}s")
        save()
    res["canary_end"] = canary()
    res["canary"] = check_canary(res["canary_start"], res["canary_end"])
    res["total_s"] = time.time() - clock.t0
    save()
    print("\n".join(summary(res)), flush=True)
    return exit_code(res["canary"])


if __name__ == "__main__":
    sys.exit(main())
