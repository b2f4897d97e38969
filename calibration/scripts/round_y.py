"""Round y on one H200 (issue 20): transformers' own decoders as piecewise CUDA graphs (graph pieces cut at
attention, attention eager between them, as vLLM's piecewise mode runs a step), beside the full graph of the same
step in the same process, with a canary pair per row.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_y --out DIR --name piece_y1 [--quick] [--deadline S]
    python3 -m calibration.scripts.round_y --out DIR --job combine     # CPU only: DIR/rows_y.json

Run from the repository root. Why: `--impl hf --graph piecewise` was never checked on a measurement
(calibration/validation/lofo.md's hf piecewise column is empty): transformers has no piecewise mode of its own.

How a step is cut (`Pieces`): the step runs once under capture with `torch.nn.functional.scaled_dot_product_attention`
wrapped; at each call the wrapper ends the graph piece being captured, runs SDPA eagerly, and begins the next
piece, so everything transformers launches outside SDPA (repeat_kv copies, the cache writes, the transpose after
SDPA, norms, GEMMs, rotary, the mask) is inside a graph, and SDPA's own kernels (cuDNN's mask helpers, its split-KV
reduce) run eager: the cut launchsim's plan makes (`Op.in_attention`). Replay runs the pieces and the eager SDPA
calls in order on one stream. The SDPA output must land where the next captured piece reads it: the eager calls
allocate from a pool of their own (`torch.cuda.MemPool`), whose one block each call reuses, and every replay
checks the address (a miss is counted; a row with any miss is dropped). Checked against the reference decoder's
explicitly cut pieces (calibration/reference_decoder.Runner, rounds j and l): the `control` rows.

Rows: the eight HF decoders of calibration/configs/hf whose step captures (gemma-3-1b's does not: round g) x batch
1/8/32/64 at ctx 512 and 1/8/32 at ctx 2048 (round v's rows), StaticCache ctx + 128, random bf16 weights. Per row:
canary, full graph (20 isolated replays, round f's method), piecewise (same), canary. Order shuffled under SEED.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

from ..jsonio import dump as _dump
from ..microbench import _pct
from . import round_f as F
from . import round_g as G
from .round_v import Step, processes

SEED = 20261204
GRID = ((512, (1, 8, 32, 64)), (2048, (1, 8, 32)))
REPS = 20


def log(*a):
    print(*a, flush=True)


class Pieces:
    """A step (anything with `.step()`) captured as graph pieces cut at each SDPA call, SDPA eager between them."""

    def __init__(self, step_fn, warmup: int = 2):
        import torch
        import torch.nn.functional as TF

        self.torch, self.sdpa = torch, TF.scaled_dot_product_attention
        self.s = torch.cuda.Stream()
        self.s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.s):
            for _ in range(warmup):
                step_fn()
        torch.cuda.synchronize()
        self.pool = _pool()
        self.gpool = torch.cuda.graph_pool_handle()
        self.items: list = []
        self.misses = 0
        cur: dict = {}

        def begin():
            g = torch.cuda.CUDAGraph()
            g.capture_begin(pool=self.gpool)
            cur["g"] = g

        def end():
            g = cur.pop("g")
            g.capture_end()
            self.items.append(g)

        def cut(q, k, v, *a, **kw):
            end()
            call = _Eager(self, (q, k, v) + a, kw)
            out = call.first()
            self.items.append(call)
            begin()
            return out

        with torch.cuda.stream(self.s):
            TF.scaled_dot_product_attention = cut
            try:
                begin()
                self.out = step_fn()
                end()
            except BaseException:
                if "g" in cur:  # a failed capture (a host copy: phi-3 past its window) ends before it is dropped
                    try:
                        cur.pop("g").capture_end()
                    except Exception:  # noqa: BLE001
                        pass
                raise
            finally:
                TF.scaled_dot_product_attention = self.sdpa
        torch.cuda.synchronize()
        self.graphs = sum(1 for x in self.items if not isinstance(x, _Eager))
        self.eager_calls = len(self.items) - self.graphs

    def replay(self):
        with self.torch.cuda.stream(self.s):
            for x in self.items:
                x.replay()
        self.torch.cuda.current_stream().wait_stream(self.s)


_POOL: list = []


def _pool():
    """One MemPool for the process's eager SDPA outputs (never destroyed: a pool freed while a failed capture is
    still registered aborts the process, as round y's first try found)."""
    import torch

    if not _POOL:
        _POOL.append(torch.cuda.MemPool())
    return _POOL[0]


class _Eager:
    """One eager SDPA call between two pieces: its inputs are the capture's tensors (graph-pool memory, held here),
    its output comes from the pool `P.pool` at the address the next piece was captured reading."""

    def __init__(self, P, args, kw):
        self.P, self.args, self.kw = P, args, kw

    def first(self):
        with self.P.torch.cuda.use_mem_pool(self.P.pool):
            out = self.P.sdpa(*self.args, **self.kw)
        self.ptr = out.data_ptr()
        return out

    def replay(self):
        with self.P.torch.cuda.use_mem_pool(self.P.pool):
            out = self.P.sdpa(*self.args, **self.kw)
        if out.data_ptr() != self.ptr:
            self.P.misses += 1


def time_row(P, rec, build, quick):
    """Canary, full graph, piecewise, canary, on one freshly built step."""
    import torch

    from ..hygiene import canary

    o = build()
    torch.cuda.synchronize()
    c0 = canary()
    try:
        o.capture()
        rec["full_ms"] = F.iso_ms(o.replay, warm=3, reps=REPS)
        o.graph = None
        F.free()
    except Exception as e:  # noqa: BLE001
        rec["full_error"] = F.err(e)
    try:
        pw = Pieces(o.step)
        rec["pieces"] = {"graphs": pw.graphs, "eager_calls": pw.eager_calls}
        rec["piecewise_ms"] = F.iso_ms(pw.replay, warm=3, reps=REPS)
        rec["pieces"]["address_misses"] = pw.misses
        del pw
    except Exception as e:  # noqa: BLE001
        rec["piecewise_error"] = F.err(e)
    c1 = canary()
    rec["canary_before"], rec["canary_after"] = G._can(c0), G._can(c1)
    del o
    F.free()


def job_piece(out_dir, name, quick, deadline):
    import torch

    from ..reference_decoder import Runner

    P = G.Proc(out_dir, name, quick)
    P.res["kind"] = "launchsim-round-y-piecewise"
    t0 = P.t0
    layers = 2 if quick else None
    models = ("qwen3-0.6b", "llama-3.2-1b") if quick else tuple(m for m in G.HF_MODELS if m != "gemma-3-1b")
    hf = {}
    for short in models:
        try:
            hf[short] = F.build_hf(short, layers)
        except Exception as e:  # noqa: BLE001
            P.error(f"build {short}", e)
    P.res["build_s"] = time.time() - t0
    P.res["attn_implementation"] = {k: F.attn_ran(v[0]) for k, v in hf.items()}
    P.res["protocol"] = {"reps": REPS, "seed": SEED, "room": 128, "fast_canary_us": G.FAST_CANARY_US,
                         "torch": torch.__version__}
    grid = ((512, (1, 8)),) if quick else GRID
    rows = [("hf", s, b, c) for s in models if s in hf for c, bs in grid for b in bs]
    rows += [("control", "qwen3-0.6b", b, 512) for b in ((1,) if quick else (1, 8, 32))]
    random.Random(SEED + (7 if name.endswith("2") else 0)).shuffle(rows)
    for impl, s, b, c in rows:
        if deadline - (time.time() - t0) < 15:
            P.res["errors"].append({"what": "rows cut at the deadline", "error": "deadline"})
            break
        rec = {"impl": impl, "model": s, "batch": b, "ctx": c, "q_len": 1}
        try:
            if impl == "hf":
                rec.update(max_cache_len=c + 128, layers=hf[s][1].num_hidden_layers)
                time_row(P, rec, lambda: Step(*hf[s], b, c), quick)
            else:  # the reference decoder: interception-cut pieces against its explicit pieces (rounds j/l)
                r = Runner(F.ref_spec(s, layers), "none", b, c)
                rec["layers"] = r.m.num_hidden_layers

                class _R:
                    def __init__(self):
                        self.step = r.step
                        self.graph = None

                    def capture(self):
                        r.capture(mode="piecewise")

                    def replay(self):
                        r.replay()

                time_row(P, rec, _R, quick)  # full_ms here: the explicit pieces (Runner piecewise)
                rec["note"] = "full_ms holds Runner's explicit piecewise graphs; piecewise_ms the interception cut"
                r.release()
                del r
        except Exception as e:  # noqa: BLE001
            P.error(f"row {impl} {s} b{b} ctx{c}", e)
        P.res["rows"].append(rec)
        P.save()
        log(f"[y] {impl} {s} b{b} ctx{c}: full {rec.get('full_ms', {}).get('median')} "
            f"piecewise {rec.get('piecewise_ms', {}).get('median')} {rec.get('pieces')} "
            f"canary {rec.get('canary_before', {}).get('host_us')}->{rec.get('canary_after', {}).get('host_us')}")
        F.free()
    return P.finish()


PROBE_ROWS = (("qwen3-0.6b", 1), ("qwen3-0.6b", 32), ("llama-3.2-1b", 1), ("qwen2-1.5b", 1), ("phi-3-mini-4k", 8))


def _host_return_ms(fn, reps=REPS) -> float:
    """Median host time of fn's call (from the call until it returns, before the sync): launch-bound when ~ the step."""
    xs = []
    for _ in range(reps):
        F.sync()
        t0 = time.perf_counter()
        fn()
        xs.append((time.perf_counter() - t0) * 1e3)
        F.sync()
    return _pct(xs)["p50"]


def job_probe(out_dir, name, quick, deadline):
    """Why hf piecewise costs more than full graph by more than launchsim says (round y): per row, in one timing
    process: full, piecewise, the piecewise replay's host-return time, the pieces alone (graphs back to back, the
    eager SDPA calls skipped: not the step, a bound), and the eager SDPA calls alone (host + GPU, graphs skipped)."""
    import torch

    from ..hygiene import canary

    P = G.Proc(out_dir, name, quick)
    P.res["kind"] = "launchsim-round-y-probe"
    rows = PROBE_ROWS[:1] if quick else PROBE_ROWS
    hf = {s: F.build_hf(s, 2 if quick else None) for s in dict.fromkeys(m for m, _ in rows)}
    for s, b in rows:
        if deadline - (time.time() - P.t0) < 15:
            break
        rec = {"model": s, "batch": b, "ctx": 512}
        try:
            o = Step(*hf[s], b, 512)
            c0 = canary()
            o.capture()
            rec["full_ms"] = F.iso_ms(o.replay, warm=3, reps=REPS)["median"]
            o.graph = None
            pw = Pieces(o.step)
            graphs = [x for x in pw.items if not isinstance(x, _Eager)]
            calls = [x for x in pw.items if isinstance(x, _Eager)]

            def only(xs):
                def run():
                    with torch.cuda.stream(pw.s):
                        for x in xs:
                            x.replay()
                    torch.cuda.current_stream().wait_stream(pw.s)
                return run

            rec["piecewise_ms"] = F.iso_ms(pw.replay, warm=3, reps=REPS)["median"]
            rec["piecewise_host_return_ms"] = _host_return_ms(pw.replay)
            rec["graphs_only_ms"] = F.iso_ms(only(graphs), warm=3, reps=REPS)["median"]
            rec["graphs_only_host_return_ms"] = _host_return_ms(only(graphs))
            rec["sdpa_only_ms"] = F.iso_ms(only(calls), warm=3, reps=REPS)["median"]
            rec["sdpa_only_host_return_ms"] = _host_return_ms(only(calls))
            rec["pieces"] = {"graphs": len(graphs), "eager_calls": len(calls), "address_misses": pw.misses}
            rec["canary_before"], rec["canary_after"] = G._can(c0), G._can(canary())
            del pw, o
        except Exception as e:  # noqa: BLE001
            P.error(f"probe {s} b{b}", e)
        P.res["rows"].append(rec)
        P.save()
        log(f"[probe] {rec}")
        F.free()
    return P.finish()


def job_trace(out_dir, name, quick):
    """A profiled process (never timed): the kernel timeline of piecewise replays, summarised per boundary: the gap
    from a piece's last kernel to the first eager kernel, the eager kernels (names, GPU us), and the gap from the
    last eager kernel to the next piece's first kernel. Graph kernels = those whose correlation id is a
    cudaGraphLaunch's."""
    import torch

    rows = PROBE_ROWS[:1] if quick else PROBE_ROWS[:2]
    hf = {s: F.build_hf(s, 2 if quick else None) for s in dict.fromkeys(m for m, _ in rows)}
    res = {"kind": "launchsim-round-y-trace", "quick": quick, "environment": F.versions(), "rows": []}
    for s, b in rows:
        o = Step(*hf[s], b, 512)
        pw = Pieces(o.step)
        for _ in range(3):
            pw.replay()
        F.sync()
        path = os.path.join(out_dir, f"_trace_{s}_{b}.json")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                pw.replay()
            F.sync()
        prof.export_chrome_trace(path)
        with open(path) as f:
            ev = json.load(f)["traceEvents"]
        os.remove(path)
        glaunch = {e["args"].get("correlation") for e in ev if e.get("name") == "cudaGraphLaunch"}
        ks = sorted((e for e in ev if e.get("cat") == "kernel"), key=lambda e: e["ts"])
        kinds = ["g" if k["args"].get("correlation") in glaunch else "e" for k in ks]
        g2e, e2g, eager_us, names = [], [], [], {}
        i = 0
        while i < len(ks):
            if kinds[i] == "e" and i > 0 and kinds[i - 1] == "g":
                g2e.append(ks[i]["ts"] - (ks[i - 1]["ts"] + ks[i - 1]["dur"]))
                j = i
                tot = 0.0
                while j < len(ks) and kinds[j] == "e":
                    tot += ks[j]["dur"]
                    nm = ks[j]["name"][:60]
                    names[nm] = names.get(nm, 0) + 1
                    j += 1
                eager_us.append((tot, j - i))
                if j < len(ks):
                    e2g.append(ks[j]["ts"] - (ks[j - 1]["ts"] + ks[j - 1]["dur"]))
                i = j
            else:
                i += 1
        span = (ks[-1]["ts"] + ks[-1]["dur"] - ks[0]["ts"]) / 3 if ks else None
        busy = sum(k["dur"] for k in ks) / 3
        res["rows"].append({"model": s, "batch": b, "kernels_per_step": len(ks) / 3, "span_us_per_step": span,
                            "busy_us_per_step": busy, "boundaries": len(g2e),
                            "graph_to_eager_gap_us": _pct(g2e), "eager_to_graph_gap_us": _pct(e2g),
                            "eager_section_gpu_us": _pct([t for t, _ in eager_us]),
                            "eager_kernels_per_section": _pct([n for _, n in eager_us]),
                            "eager_kernel_names": names})
        log(f"[trace] {res['rows'][-1]}")
        del pw, o
        F.free()
    _dump(res, os.path.join(out_dir, name + ".json"))
    return 0


def combine(src_dir) -> dict:
    """rows_y.json: each (impl, model, batch, ctx)'s timings over processes (median of the per-process medians),
    rows with an address miss dropped, canaries kept."""
    rows: dict = {}
    procs = []
    for name, d in processes(src_dir, "piece_"):
        procs.append({"process": name, "canary": d.get("canary"), "wall_s": d.get("wall_s")})
        for r in d["rows"]:
            key = (r["impl"], r["model"], r["batch"], r["ctx"])
            o = rows.setdefault(key, {k: r.get(k) for k in ("impl", "model", "batch", "ctx", "q_len", "layers",
                                                             "max_cache_len", "note") if r.get(k) is not None})
            run = {"process": name, "canary_before_us": r.get("canary_before", {}).get("host_us"),
                   "canary_after_us": r.get("canary_after", {}).get("host_us"), "pieces": r.get("pieces")}
            for k in ("full_ms", "piecewise_ms"):
                if k in r:
                    run[k] = r[k]["median"]
            for k in ("full_error", "piecewise_error"):
                if k in r:
                    run[k] = r[k]
            if (r.get("pieces") or {}).get("address_misses"):
                run.pop("piecewise_ms", None)
                run["dropped"] = "SDPA output address missed on replay"
            o.setdefault("runs", []).append(run)
    for o in rows.values():
        for k in ("full_ms", "piecewise_ms"):
            xs = [x[k] for x in o["runs"] if k in x]
            o[k] = _pct(xs)["p50"] if xs else None
    out = {"kind": "launchsim-round-y-rows", "processes": procs,
           "rows": sorted(rows.values(), key=lambda o: (o["impl"], o["model"], o["ctx"], o["batch"]))}
    _dump(out, os.path.join(src_dir, "rows_y.json"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--job", default="piece", choices=("piece", "probe", "trace", "combine"))
    ap.add_argument("--name", default="piece_y1")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=520.0)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if a.job == "combine":
        out = combine(a.out)
        log(json.dumps([(r["impl"], r["model"], r["batch"], r["ctx"], r["full_ms"], r["piecewise_ms"])
                        for r in out["rows"]]))
        return 0
    name = a.name + ("quick" if a.quick else "")
    if a.job == "probe":
        return job_probe(a.out, name, a.quick, a.deadline)
    if a.job == "trace":
        return job_trace(a.out, name, a.quick)
    return job_piece(a.out, name, a.quick, a.deadline)


if __name__ == "__main__":
    sys.exit(main())
