"""Round ab on one H200 (issue 20): the `fused` implementation (vLLM-style custom ops, every command's default)
against a decoder that launches its kernel list from real fused kernels (calibration/fused_decoder.py: liger-kernel's
Triton fused add-RMSNorm and SiLU-and-mul, one Triton kernel of ours for q/k-norm + RoPE + the K/V cache write,
cuDNN SDPA, cuBLAS GEMMs); launchsim's figures committed before measuring (calibration/scripts/round_ab_predict.py).

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_ab --out DIR --job time --name time_ab1 [--quick]
    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_ab --out DIR --job counts [--quick]   # profiles
    python3 -m calibration.scripts.round_ab --out DIR --job combine                         # CPU only

Run from the repository root with liger-kernel importable (it travels as a wheel). Why: `fused` is the default of
every command and was never timed against a step that launches its kernels; its fused kernels are priced by bytes
from the profile's elementwise and reduction tables (torch's own kernels), and the step's GPU time is what full
and piecewise graphs (vLLM's decode) leave.

Protocol, per timing process (never profiled: round g's Proc forbids it; canary at its start and end): first the
fused kernels alone (queued device time per call, 200 calls behind a held stream, 5 repetitions) at 1..2048 tokens
for two hidden sizes; then models in a shuffled order, one loaded at a time (random bf16 weights, a cache of
`keys` slots per sequence: the step writes slot keys-1 and SDPA reads all keys, the reference decoder's shapes);
rows (batch, keys) shuffled; per row: the Triton kernel checked against torch in fp32 (outputs poisoned first),
EAGER_PASSES eager passes (3 warm-ups + 12 isolated steps, a canary pair each), then a canary, the full graph (20
isolated replays), the piecewise graph cut at each SDPA call (round y's Pieces, 20 isolated replays), a canary.
Counts process: one eager step per row at batch 1 and 32, keys 512, under torch.profiler (kernels per step).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

from ..jsonio import dump as _dump
from . import round_f as F
from . import round_g as G

UNSEEN_DIR = os.path.join(os.path.dirname(__file__), "..", "configs", "hf_unseen")
MODELS = ("qwen3-0.6b", "llama3-8b", "qwen2.5-0.5b", "qwen3-1.7b", "qwen2.5-7b", "mistral-nemo-12b")
GRID = ((512, (1, 8, 32, 128)), (2048, (1, 32)))
COUNT_BATCHES = (1, 32)
KERNEL_TOKENS = (1, 8, 32, 128, 512, 2048)
KERNEL_SHAPES = {"qwen3-0.6b": "qwen3-0.6b", "llama3-8b": "llama3-8b"}
SEED = 20261207
WARM, REPS, GRAPH_REPS = 3, 12, 20
EAGER_PASSES = 2


def log(*a):
    print(*a, flush=True)


def spec(name: str, layers: int | None = None):
    """The ModelSpec launchsim reads for `name`: a preset, else the published config in hf_unseen."""
    import dataclasses

    from simulator.model.models import PRESETS, load_model

    m = PRESETS[name] if name in PRESETS else load_model(os.path.join(UNSEEN_DIR, name + ".json"))
    return dataclasses.replace(m, num_hidden_layers=layers) if layers else m


def kernels_alone(quick) -> list[dict]:
    """Queued device µs per call of each fused kernel at `tokens` rows (hygiene.queued_device_us)."""
    import torch
    from liger_kernel.ops.fused_add_rms_norm import fused_add_rms_norm_forward
    from liger_kernel.ops.swiglu import swiglu_fused_gate_up_forward

    from ..fused_decoder import EPS, FusedDecoder, qknorm_rope_cache

    out = []
    for name in KERNEL_SHAPES:
        m = spec(name, layers=1)
        for T in (KERNEL_TOKENS[:2] if quick else KERNEL_TOKENS):
            d = FusedDecoder(m, T, 64)
            L = d.layers[0]
            H, In = m.hidden_size, m.intermediate_size
            x = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
            r = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
            gu = torch.randn(T, 2 * In, device="cuda", dtype=torch.bfloat16)
            qkv = torch.randn(T, m.q_dim + 2 * m.kv_dim, device="cuda", dtype=torch.bfloat16)
            fns = {
                "fused_add_rmsnorm": lambda: fused_add_rms_norm_forward(x, r, L["ln1"], EPS, 0.0, "llama"),
                "silu_and_mul": lambda: swiglu_fused_gate_up_forward(gu),
                "fused_rope_cache_write": lambda: qknorm_rope_cache(m, qkv, d.q_out, L["kc"], L["vc"], d.cos, d.sin,
                                                                    d.pos, L["qn"], L["kn"]),
            }
            for k, fn in fns.items():
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
                us = graph_device_us(fn, GRAPH_CALLS, reps=5)
                out.append({"model": name, "kernel": k, "tokens": T, "device_us": sorted(us)[len(us) // 2],
                            "device_us_all": us})
            log(f"[kernels] {name} T={T}: " + ", ".join(f"{o['kernel']} {o['device_us']:.2f}"
                                                        for o in out[-3:]))
            del d
            F.free()
    return out


GRAPH_CALLS = 50


def graph_device_us(fn, calls: int, reps: int = 5) -> list[float]:
    """Device µs per call of fn: `calls` calls captured as one CUDA graph, each replay timed by CUDA events (the
    host's launcher cost is out: liger's and our wrappers cost 20-60 µs of host a call, more than the kernels, so
    round ab's first queued timing of them measured the host)."""
    import torch

    from ..reference_decoder import warm_then_capture

    def many():
        for _ in range(calls):
            fn()

    g, _ = warm_then_capture(many, 1)
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        g.replay()
        st.record()
        g.replay()
        en.record()
        en.synchronize()
        out.append(st.elapsed_time(en) * 1e3 / calls)
    return out


def time_row(rec, d, quick):
    """Eager passes with a canary pair each, then canary, full graph, piecewise graph, canary."""
    import torch

    from ..hygiene import canary
    from ..reference_decoder import warm_then_capture
    from .round_y import Pieces

    rec["check"] = d.check()
    for p in range(1 if quick else EAGER_PASSES):
        c0 = canary()
        t = F.iso_ms(d.step, warm=WARM, reps=REPS)
        c1 = canary()
        rec["passes"].append({"pass": p, "canary_before": G._can(c0), "canary_after": G._can(c1), **t})
    c0 = canary()
    try:
        g, _ = warm_then_capture(d.step, 2)
        rec["full_ms"] = F.iso_ms(g.replay, warm=3, reps=GRAPH_REPS)
        rec["full_b2b_ms"] = F.b2b_ms(g.replay, reps=GRAPH_REPS)
        del g
        F.free()
    except Exception as e:  # noqa: BLE001
        rec["full_error"] = F.err(e)
    try:
        pw = Pieces(d.step)
        rec["pieces"] = {"graphs": pw.graphs, "eager_calls": pw.eager_calls}
        rec["piecewise_ms"] = F.iso_ms(pw.replay, warm=3, reps=GRAPH_REPS)
        rec["pieces"]["address_misses"] = pw.misses
        del pw
    except Exception as e:  # noqa: BLE001
        rec["piecewise_error"] = F.err(e)
    c1 = canary()
    rec["canary_before"], rec["canary_after"] = G._can(c0), G._can(c1)
    torch.cuda.synchronize()


def job_time(out_dir, name, quick, deadline):
    import torch

    from ..fused_decoder import FusedDecoder

    torch.set_grad_enabled(False)
    P = G.Proc(out_dir, name, quick)
    P.res["kind"] = "launchsim-round-ab-time"
    t0 = P.t0
    import liger_kernel

    salt = 11 if name.endswith("2") else 0
    models = list(MODELS[:2] if quick else MODELS)
    random.Random(SEED + salt).shuffle(models)
    P.res["protocol"] = {"warm": WARM, "reps": REPS, "eager_passes": EAGER_PASSES, "graph_reps": GRAPH_REPS,
                         "seed": SEED, "fast_canary_us": G.FAST_CANARY_US, "torch": torch.__version__,
                         "liger_kernel": getattr(liger_kernel, "__version__", "?"), "model_order": models}
    try:
        P.res["kernels_alone"] = kernels_alone(quick)
    except Exception as e:  # noqa: BLE001
        P.error("kernels alone", e)
    P.save()
    grid = ((512, (1, 8)),) if quick else GRID
    for short in models:
        if deadline - (time.time() - t0) < 30:
            P.res["errors"].append({"what": f"{short} skipped at the deadline", "error": "deadline"})
            continue
        m = spec(short, 2 if quick else None)
        rows = [(b, k) for k, bs in grid for b in bs]
        random.Random(SEED + salt + len(short)).shuffle(rows)
        for b, k in rows:
            if deadline - (time.time() - t0) < 15:
                P.res["errors"].append({"what": f"{short} b{b} keys{k} cut at the deadline", "error": "deadline"})
                break
            rec = {"impl": "fused", "model": short, "batch": b, "keys": k, "layers": m.num_hidden_layers,
                   "passes": []}
            try:
                d = FusedDecoder(m, b, k, seed=b * 31 + k)
                torch.cuda.synchronize()
                time_row(rec, d, quick)
                del d
            except Exception as e:  # noqa: BLE001
                P.error(f"row {short} b{b} keys{k}", e)
            P.res["rows"].append(rec)
            P.save()
            log(f"[ab] {short} b{b} keys{k}: check {rec.get('check')} eager "
                f"{[round(x['median'], 3) for x in rec['passes']]} full {rec.get('full_ms', {}).get('median')} "
                f"piecewise {rec.get('piecewise_ms', {}).get('median')} "
                f"canary {[x['canary_before']['host_us'] for x in rec['passes']]} {time.time() - t0:.0f}s")
            F.free()
    return P.finish()


def job_kernels(out_dir, quick):
    """A timing process (never profiled, canary at both ends) of the fused kernels alone, each timed in a graph."""
    import torch

    torch.set_grad_enabled(False)
    P = G.Proc(out_dir, "kernels_ab" + ("quick" if quick else ""), quick)
    P.res["kind"] = "launchsim-round-ab-kernels"
    P.res["protocol"] = {"graph_calls": GRAPH_CALLS, "reps": 5, "tokens": KERNEL_TOKENS}
    try:
        P.res["kernels_alone"] = kernels_alone(quick)
    except Exception as e:  # noqa: BLE001
        P.error("kernels alone", e)
    return P.finish()


def job_counts(out_dir, quick):
    import torch

    from ..fused_decoder import FusedDecoder

    torch.set_grad_enabled(False)
    res = {"kind": "launchsim-round-ab-counts", "quick": quick, "environment": F.versions(), "rows": [],
           "errors": []}
    path = os.path.join(out_dir, "counts_ab" + ("quick" if quick else "") + ".json")
    for short in (MODELS[:1] if quick else MODELS):
        m = spec(short, 2 if quick else None)
        for b in COUNT_BATCHES:
            try:
                d = FusedDecoder(m, b, 512)
                for _ in range(3):
                    d.step()
                F.sync()
                p, evs = F._trace_of(d.step, 1, None, shapes=False)
                a = F.analyse(evs, 1)
                os.unlink(p)
                names = a["steps"].get("round_f_step0", {}).get("names", {})
                res["rows"].append({"model": short, "batch": b, "keys": 512, "layers": m.num_hidden_layers,
                                    "last_step": a.get("last_step"), "names": names, "us_by_name": us_by_name(evs)})
                log(f"[counts] {short} b{b}: {a.get('last_step')}")
                del d
            except Exception as e:  # noqa: BLE001
                res["errors"].append({"what": f"{short} b{b}", "error": F.err(e)})
            F.free()
            _dump(res, path)
    _dump(res, path)
    return 0


def us_by_name(evs) -> dict:
    """CUPTI kernel µs per kernel name (first 110 characters) over the traced step: {name: [calls, total µs]}."""
    out: dict = {}
    for e in evs:
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") == "kernel":
            nm = e.get("name", "")[:110]
            c = out.setdefault(nm, [0, 0.0])
            c[0] += 1
            c[1] += float(e.get("dur", 0))
    return out


def combine(out_dir, prefix: str = "time_ab", out_name: str = "rows_ab.json") -> dict:
    """rows_ab.json: per (model, batch, keys) the median over timing processes of full / piecewise, and eager
    over fast-host passes (both canaries <= FAST_CANARY_US) and over all passes; kernels from the counts file.
    `prefix`: the timing processes' file names (a later round's, e.g. round af's time_af*); `out_name`: the file
    written in `out_dir`."""
    import statistics

    procs = [json.load(open(os.path.join(out_dir, f))) for f in sorted(os.listdir(out_dir))
             if f.startswith(prefix) and f.endswith(".json") and "quick" not in f]
    by: dict = {}
    for pr in procs:
        for r in pr["rows"]:
            by.setdefault((r["model"], r["batch"], r["keys"]), []).append(r)
    counts = {}
    cpath = os.path.join(out_dir, "counts_ab.json")
    if os.path.exists(cpath):
        for r in json.load(open(cpath))["rows"]:
            counts[(r["model"], r["batch"], r["keys"])] = (r["last_step"] or {}).get("kernels")
    rows = []
    for (mo, b, k), rs in sorted(by.items()):
        passes = [p for r in rs for p in r["passes"]]
        fast = [p["median"] for p in passes if max(p["canary_before"]["host_us"], p["canary_after"]["host_us"])
                <= G.FAST_CANARY_US]

        def med(key, rs=rs):
            xs = [r[key]["median"] for r in rs if key in r]
            return statistics.median(xs) if xs else None

        rows.append({"model": mo, "batch": b, "keys": k, "processes": len(rs),
                     "kernels": counts.get((mo, b, k)),
                     "eager_fast_ms": statistics.median(fast) if fast else None, "eager_fast_passes": len(fast),
                     "eager_all_ms": statistics.median([p["median"] for p in passes]) if passes else None,
                     "full_ms": med("full_ms"), "piecewise_ms": med("piecewise_ms"),
                     "check_max_rel": max(max(r["check"][x] for x in ("q", "k", "v")) for r in rs if "check" in r)
                     if any("check" in r for r in rs) else None})
    # the fused kernels alone: the graph-timed process (job kernels); the timing processes' own queued figures of
    # them measured the host (liger's and our Python wrappers issue slower than the GPU runs them) and are not used
    kern = [k for f in sorted(os.listdir(out_dir)) if f.startswith("kernels_ab") and "quick" not in f
            for k in json.load(open(os.path.join(out_dir, f))).get("kernels_alone", [])]
    out = {"kind": "launchsim-round-ab-rows", "processes": [
        {"name": pr.get("kind"), "canary_start_us": pr["canary_start"]["host_tiny_op_us"]["p50"],
         "canary_end_us": (pr.get("canary_end") or {}).get("host_tiny_op_us", {}).get("p50")} for pr in procs],
        "rows": rows, "kernels_alone": kern}
    _dump(out, os.path.join(out_dir, out_name))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--job", default="time", choices=("time", "counts", "combine", "kernels"))
    ap.add_argument("--name", default="time_ab1")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=240.0)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if a.job == "combine":
        out = combine(a.out)
        for r in out["rows"]:
            log(json.dumps(r))
        return 0
    if a.job == "counts":
        return job_counts(a.out, a.quick)
    if a.job == "kernels":
        return job_kernels(a.out, a.quick)
    return job_time(a.out, a.name + ("quick" if a.quick else ""), a.quick, a.deadline)


if __name__ == "__main__":
    sys.exit(main())
