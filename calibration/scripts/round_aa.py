"""Round aa on one H200 (issue 20): seven transformers decoders launchsim never saw (calibration/configs/hf_unseen:
published configs of Qwen2.5-0.5B, SmolLM2-1.7B, Qwen3-1.7B, Llama-3.2-3B, Qwen2.5-7B, Gemma-2-9B,
Mistral-Nemo-12B), eager, full graph and piecewise graph in fresh timing processes, kernel counts in a separate
profiled process; launchsim's figures committed before measuring (calibration/scripts/round_aa_predict.py).

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_aa --out DIR --job time --name time_aa1 [--quick]
    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_aa --out DIR --job counts [--quick]   # profiles
    python3 -m calibration.scripts.round_aa --out DIR --job combine                         # CPU only

Run from the repository root. Why: every `--impl hf` figure so far is on the nine decoders of calibration/configs/hf,
two of which fitted constants and all of which shaped the tables read for them; these seven are new sizes of the
same families (new hidden sizes, head counts, a multi-head model with no repeat_kv, head_dim 64 at 14/2 heads,
Gemma-2 at 42 layers, Mistral-Nemo whose heads x head_dim differs from its hidden size).

Protocol, per timing process (never profiled: round g's Proc forbids it; canary at its start and end): models in a
shuffled order, one loaded at a time (random bf16 weights from its config, StaticCache ctx + 128); rows batch 1/8/32
at ctx 512 and 1/8 at ctx 2048 in a shuffled order; per row: a fresh step (prefill of ctx tokens), then EAGER_PASSES
eager timings (3 warm-ups + 12 isolated steps, a canary right before and after each), then round y's `time_row`
(canary, full graph 20 isolated replays, piecewise graph cut at SDPA 20 isolated replays, canary). A fast-host eager
pass: both its canaries <= 7.6 us. Counts process: one eager step per row at batch 1 and 8, ctx 512, under
torch.profiler (kernels per step; round f's analyse).
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
from .round_v import Step
from .round_y import time_row

UNSEEN_DIR = os.path.join(os.path.dirname(__file__), "..", "configs", "hf_unseen")
MODELS = ("qwen2.5-0.5b", "smollm2-1.7b", "qwen3-1.7b", "llama-3.2-3b", "qwen2.5-7b", "gemma-2-9b",
          "mistral-nemo-12b")
GRID = ((512, (1, 8, 32)), (2048, (1, 8)))
COUNT_BATCHES = (1, 8)
SEED = 20261205
WARM, REPS = 3, 12
EAGER_PASSES = 2
ROOM = 128


def log(*a):
    print(*a, flush=True)


def _build(short, layers):
    F.HF_DIR = UNSEEN_DIR  # round f's builder reads configs from HF_DIR
    return F.build_hf(short, layers)


def job_time(out_dir, name, quick, deadline):
    import torch

    from ..hygiene import canary

    P = G.Proc(out_dir, name, quick)
    P.res["kind"] = "launchsim-round-aa-time"
    t0 = P.t0
    layers = 2 if quick else None
    salt = 11 if name.endswith("2") else 0
    models = list(MODELS[:2] if quick else MODELS)
    random.Random(SEED + salt).shuffle(models)
    P.res["protocol"] = {"warm": WARM, "reps": REPS, "eager_passes": EAGER_PASSES, "graph_reps": 20, "seed": SEED,
                         "room": ROOM, "fast_canary_us": G.FAST_CANARY_US, "torch": torch.__version__,
                         "model_order": models}
    P.res["build_s"] = {}
    grid = ((512, (1, 8)),) if quick else GRID
    for short in models:
        if deadline - (time.time() - t0) < 30:
            P.res["errors"].append({"what": f"{short} skipped at the deadline", "error": "deadline"})
            continue
        tb = time.time()
        try:
            model, cfg = _build(short, layers)
        except Exception as e:  # noqa: BLE001
            P.error(f"build {short}", e)
            continue
        P.res["build_s"][short] = time.time() - tb
        rows = [(b, c) for c, bs in grid for b in bs]
        random.Random(SEED + salt + len(short)).shuffle(rows)
        for b, c in rows:
            if deadline - (time.time() - t0) < 15:
                P.res["errors"].append({"what": f"{short} b{b} ctx{c} cut at the deadline", "error": "deadline"})
                break
            rec = {"impl": "hf", "model": short, "batch": b, "ctx": c, "q_len": 1, "max_cache_len": c + ROOM,
                   "layers": cfg.num_hidden_layers, "attn_implementation": F.attn_ran(model), "passes": []}
            try:
                o = Step(model, cfg, b, c)
                torch.cuda.synchronize()
                for p in range(EAGER_PASSES):
                    c0 = canary()
                    t = F.iso_ms(o.step, warm=WARM, reps=REPS)
                    c1 = canary()
                    rec["passes"].append({"pass": p, "canary_before": G._can(c0), "canary_after": G._can(c1), **t})
                del o
                F.free()
                time_row(P, rec, lambda: Step(model, cfg, b, c), quick)
            except Exception as e:  # noqa: BLE001
                P.error(f"row {short} b{b} ctx{c}", e)
            P.res["rows"].append(rec)
            P.save()
            eg = [x["median"] for x in rec["passes"]]
            log(f"[aa] {short} b{b} ctx{c}: eager {eg} full {rec.get('full_ms', {}).get('median')} "
                f"piecewise {rec.get('piecewise_ms', {}).get('median')} "
                f"canary {[x['canary_before']['host_us'] for x in rec['passes']]} {time.time() - t0:.0f}s")
            F.free()
        del model
        F.free()
    return P.finish()


def job_counts(out_dir, quick):
    res = {"kind": "launchsim-round-aa-counts", "quick": quick, "environment": F.versions(), "rows": [],
           "errors": []}
    path = os.path.join(out_dir, "counts_aa" + ("quick" if quick else "") + ".json")
    for short in (MODELS[:1] if quick else MODELS):
        try:
            model, cfg = _build(short, 2 if quick else None)
        except Exception as e:  # noqa: BLE001
            res["errors"].append({"what": f"build {short}", "error": F.err(e)})
            continue
        for b in COUNT_BATCHES:
            try:
                s = Step(model, cfg, b, 512)
                for _ in range(3):
                    s.step()
                F.sync()
                p, evs = F._trace_of(s.step, 1, F.layers_of(model), shapes=False)
                a = F.analyse(evs, 1)
                os.unlink(p)
                res["rows"].append({"model": short, "batch": b, "ctx": 512, "max_cache_len": 512 + ROOM,
                                    "layers": cfg.num_hidden_layers, **a})
                log(f"[counts] {short} b{b}: {a.get('last_step')}")
                del s
            except Exception as e:  # noqa: BLE001
                res["errors"].append({"what": f"{short} b{b}", "error": F.err(e)})
            F.free()
            _dump(res, path)
        del model
        F.free()
    _dump(res, path)
    return 0


def combine(out_dir) -> dict:
    """Timing processes' rows -> one record per (model, batch, ctx): eager median over fast-host passes (and over
    all passes), full and piecewise medians per process and their median; kernels from the counts process."""
    procs = []
    for n in sorted(os.listdir(out_dir)):
        if n.startswith("time_aa") and n.endswith(".json") and "quick" not in n:
            with open(os.path.join(out_dir, n)) as f:
                procs.append((n, json.load(f)))
    counts = {}
    cpath = os.path.join(out_dir, "counts_aa.json")
    if os.path.exists(cpath):
        with open(cpath) as f:
            for r in json.load(f)["rows"]:
                counts[(r["model"], r["batch"], r["ctx"])] = r.get("last_step")
    rows: dict = {}
    for n, d in procs:
        for r in d["rows"]:
            k = (r["model"], r["batch"], r["ctx"])
            e = rows.setdefault(k, {"model": k[0], "batch": k[1], "ctx": k[2], "passes": [], "full": [],
                                    "piecewise": [], "errors": []})
            e["passes"] += [{**x, "process": n} for x in r.get("passes", [])]
            for mode in ("full", "piecewise"):
                if f"{mode}_ms" in r:
                    e[mode].append(r[f"{mode}_ms"]["median"])
                if f"{mode}_error" in r:
                    e["errors"].append(f"{mode}: {r[f'{mode}_error'][:120]}")
    out = []
    for k, e in sorted(rows.items()):
        fast = [x["median"] for x in e["passes"]
                if max(x["canary_before"]["host_us"], x["canary_after"]["host_us"]) <= G.FAST_CANARY_US]
        out.append({"model": e["model"], "batch": e["batch"], "ctx": e["ctx"],
                    "eager_fast_ms": _pct(fast)["p50"] if fast else None, "eager_fast_passes": len(fast),
                    "eager_all_ms": _pct([x["median"] for x in e["passes"]])["p50"] if e["passes"] else None,
                    "eager_passes": len(e["passes"]),
                    "canaries_us": sorted({round(x[c]["host_us"], 2) for x in e["passes"]
                                           for c in ("canary_before", "canary_after")}),
                    "full_ms": _pct(e["full"])["p50"] if e["full"] else None,
                    "piecewise_ms": _pct(e["piecewise"])["p50"] if e["piecewise"] else None,
                    "kernels": counts.get(k), "errors": e["errors"]})
    res = {"kind": "launchsim-round-aa-rows", "processes": {n: d.get("canary") for n, d in procs}, "rows": out}
    _dump(res, os.path.join(out_dir, "rows_aa.json"))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--job", default="time", choices=("time", "counts", "combine"))
    ap.add_argument("--name", default="time_aa1")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=520.0)
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if a.job == "combine":
        out = combine(a.out)
        for r in out["rows"]:
            log(json.dumps(r))
        return 0
    if a.job == "counts":
        return job_counts(a.out, a.quick)
    return job_time(a.out, a.name + ("quick" if a.quick else ""), a.quick, a.deadline)


if __name__ == "__main__":
    sys.exit(main())
