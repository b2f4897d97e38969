"""Round v on one H200 (issue 20): transformers' own decoders, eager and full graph, at ctx 512 and at ctx 2048
(a context no recipe, fit or table row of `--impl hf` was built on), each eager figure with a canary pair of its
own, in fresh timing processes.

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_v --out DIR --job eager --name eager_v1 [--quick]
    ... --rows "gemma-2-2b@4224:1,8,32 ..."   # round x: other rows, same protocol
    python3 -m calibration.scripts.round_v --out DIR --job combine          # CPU only: DIR/rows_v.json

Run from the repository root. Why: `--impl hf`'s eager check rests on round g's passes (9.5 % on held-out rows)
beside round f's single process, whose rows flip between host states (round g README); round v adds independent
fast-host passes in processes that never profiled, and a second context for both eager and full graph.

Protocol (round g's, calibration/scripts/round_g.py `job_eager`, reused: its Proc record, forbid_profiler, warm
host, canary at process start and end): rows = the nine HF decoders of calibration/configs/hf (random bf16
weights, StaticCache max_cache_len ctx + 128, q_len 1) x batch 1/8/32/64 at ctx 512, and batch 1/8/32 at ctx 2048.
Each pass visits the rows in `random.Random(SEED + pass)` order, builds the row's step fresh (prefill of ctx tokens,
last position's logits only), takes a canary right before and right after 3 warm-ups + 12 isolated steps (sync,
step, sync). After the passes every row gets one full-CUDA-graph timing (20 isolated replays: round f's method),
for rows whose HF step captures (gemma-3-1b's does not: round g). Fast-host pass: both canaries <= 7.6 us.
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

ROWS_512 = (512, (1, 8, 32, 64))
ROWS_2048 = (2048, (1, 8, 32))
ROOM = 128
SEED = 20261203
WARM, REPS = 3, 12


def log(*a):
    print(*a, flush=True)


class Step(F.HFStep):
    """round_f.HFStep with the prefill keeping only the last position's logits (ctx 2048 x batch 32 x a 150k
    vocabulary would be 20 GB of logits otherwise); the decode step itself is HFStep's, unchanged."""

    def __init__(self, model, cfg, batch, ctx):
        import torch
        from transformers import StaticCache

        self.model, self.batch, self.ctx, self.q = model, batch, ctx, 1
        self.cache_kind = "static"
        try:
            self.cache = StaticCache(config=cfg, max_batch_size=batch, max_cache_len=ctx + ROOM, device="cuda",
                                     dtype=torch.bfloat16)
        except TypeError:
            self.cache = StaticCache(config=cfg, max_cache_len=ctx + ROOM)
        g = torch.Generator(device="cuda").manual_seed(batch * 31 + ctx + 1)
        V = cfg.vocab_size
        prompt = torch.randint(0, V, (batch, ctx), device="cuda", generator=g)
        with torch.no_grad():
            model(input_ids=prompt, past_key_values=self.cache, use_cache=True,
                  cache_position=torch.arange(ctx, device="cuda"), logits_to_keep=1)
        self.ids = torch.randint(0, V, (batch, 1), device="cuda", generator=g)
        self.pos = torch.full((batch, 1), ctx, device="cuda", dtype=torch.long)
        self.cpos = torch.full((1,), ctx, device="cuda", dtype=torch.long)
        self.graph = None


def parse_rows(spec: str) -> list[tuple[str, int, int]]:
    """`MODEL@CTX:B,B,...` items separated by spaces -> [(model, batch, ctx)] (round x: contexts past a window)."""
    out = []
    for item in spec.split():
        m, rest = item.split("@")
        ctx, bs = rest.split(":")
        out += [(m, int(b), int(ctx)) for b in bs.split(",")]
    return out


def job_eager(out_dir, name, quick, deadline, passes_max, only=None):
    import torch

    from ..hygiene import canary

    P = G.Proc(out_dir, name, quick)
    P.res["kind"] = "launchsim-round-v-eager"
    t0 = P.t0
    layers = 2 if quick else None
    models = ("qwen3-0.6b", "phi-3-mini-4k") if quick else G.HF_MODELS
    if only:
        models = tuple(dict.fromkeys(m for m, _, _ in only))
    hf = {}
    for short in models:
        try:
            hf[short] = F.build_hf(short, layers)
        except Exception as e:  # noqa: BLE001
            P.error(f"build {short}", e)
    P.res["memory_allocated_gib"] = torch.cuda.memory_allocated() / 2**30
    P.res["build_s"] = time.time() - t0
    P.res["attn_implementation"] = {k: F.attn_ran(v[0]) for k, v in hf.items()}
    P.res["protocol"] = {"warm": WARM, "reps": REPS, "seed": SEED, "room": ROOM, "fast_canary_us": G.FAST_CANARY_US}
    grid = [ROWS_512, ROWS_2048] if not quick else [(512, (1,)), (2048, (1,))]
    rows = [(s, b, c) for s in models if s in hf for c, bs in grid for b in bs]
    if only:
        rows = [r for r in only if r[0] in hf][:2 if quick else None]
    rec = {r: {"impl": "hf", "model": r[0], "batch": r[1], "ctx": r[2], "q_len": 1, "max_cache_len": r[2] + ROOM,
               "layers": hf[r[0]][1].num_hidden_layers, "passes": []} for r in rows}
    P.res["rows"] = list(rec.values())
    pass_s: list[float] = []
    reserve = 20 if quick else 110  # the graph timings after the passes
    for p in range(2 if quick else passes_max):
        left = deadline - (time.time() - t0)
        if p >= 1 and left - reserve < 1.1 * max(pass_s):
            break
        order = list(rows)
        random.Random(SEED + p + (100 if name.endswith("2") else 0)).shuffle(order)
        ts = time.time()
        for r in order:
            if deadline - (time.time() - t0) < reserve:
                P.res["errors"].append({"what": f"pass {p} cut at the deadline", "error": "deadline"})
                break
            try:
                o = Step(*hf[r[0]], r[1], r[2])
                torch.cuda.synchronize()
                c0 = canary()
                t = F.iso_ms(o.step, warm=WARM, reps=REPS)
                c1 = canary()
                rec[r]["passes"].append({"pass": p, "canary_before": G._can(c0), "canary_after": G._can(c1), **t})
                del o
            except Exception as e:  # noqa: BLE001
                P.error(f"pass {p} {r}", e)
            F.free()
        pass_s.append(time.time() - ts)
        P.res["pass_s"] = pass_s
        P.save()
        log(f"[eager] {name} pass {p}: {pass_s[-1]:.1f}s, {time.time() - t0:.0f}s into the process")
    for r in rows:
        if r[0] == "gemma-3-1b":
            rec[r]["graph_error"] = "not captured: round g found its HF decode copies a CPU tensor during capture"
            continue
        if deadline - (time.time() - t0) < 12:
            P.res["errors"].append({"what": "graph timings cut at the deadline", "error": "deadline"})
            break
        try:
            o = Step(*hf[r[0]], r[1], r[2])
            o.capture()
            rec[r]["graph_ms"] = F.iso_ms(o.replay, warm=3, reps=20)
            del o
        except Exception as e:  # noqa: BLE001
            rec[r]["graph_error"] = F.err(e)
        F.free()
    P.save()
    return P.finish()


def processes(src_dir, prefix: str):
    """(process name, record) of every full (not --quick) timing process `PREFIX*.json` in src_dir, by name."""
    for fn in sorted(os.listdir(src_dir)):
        if not (fn.startswith(prefix) and fn.endswith(".json")):
            continue
        with open(os.path.join(src_dir, fn)) as f:
            d = json.load(f)
        if not d.get("quick"):
            yield fn[:-5], d


def combine(src_dir) -> dict:
    """rows_v.json: every row's passes from eager_v*.json side by side with their canaries; `eager_ms` the median
    over fast-host passes (both canaries <= 7.6 us), None where no pass was fast; `graph_ms` the median over the
    processes' graph timings."""
    rows: dict = {}
    procs = []
    for name, d in processes(src_dir, "eager_"):
        procs.append({"process": name, "canary": d.get("canary"), "pass_s": d.get("pass_s")})
        for r in d["rows"]:
            key = (r["model"], r["batch"], r["ctx"])
            o = rows.setdefault(key, {k: r[k] for k in ("impl", "model", "batch", "ctx", "q_len", "layers",
                                                         "max_cache_len")})
            if "graph_ms" in r:
                o.setdefault("graph_runs", []).append({"process": name, **r["graph_ms"]})
            if "graph_error" in r:
                o["graph_error"] = r["graph_error"]
            for x in r["passes"]:
                cb, ca = x["canary_before"]["host_us"], x["canary_after"]["host_us"]
                o.setdefault("passes", []).append({
                    "process": name, "pass": x["pass"], "median_ms": x["median"], "p10_ms": x["p10"],
                    "p90_ms": x["p90"], "min_ms": x["min"], "n": x["n"], "canary_before_us": cb,
                    "canary_after_us": ca, "fast": max(cb, ca) <= G.FAST_CANARY_US})
    for o in rows.values():
        ps = o.get("passes", [])
        fast = [x["median_ms"] for x in ps if x["fast"]]
        o["fast_passes"] = len(fast)
        o["eager_ms"] = _pct(fast)["p50"] if fast else None
        o["median_all_ms"] = _pct([x["median_ms"] for x in ps])["p50"] if ps else None
        g = [x["median"] for x in o.get("graph_runs", [])]
        o["graph_ms"] = _pct(g)["p50"] if g else None
    out = {"kind": "launchsim-round-v-rows", "fast_canary_us": G.FAST_CANARY_US, "processes": procs,
           "rows": sorted(rows.values(), key=lambda o: (o["model"], o["ctx"], o["batch"]))}
    _dump(out, os.path.join(src_dir, "rows_v.json"))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--job", default="eager", choices=("eager", "combine"))
    ap.add_argument("--name", default="eager_v1")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=480.0)
    ap.add_argument("--passes", type=int, default=8)
    ap.add_argument("--rows", default="", help="MODEL@CTX:B,B ... (default: round v's grid)")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if a.job == "combine":
        out = combine(a.out)
        log(json.dumps({"rows": len(out["rows"]), "processes": out["processes"]}))
        return 0
    rc = job_eager(a.out, a.name, a.quick, a.deadline, a.passes, parse_rows(a.rows) if a.rows else None)
    with open(os.path.join(a.out, a.name + ".json")) as f:
        d = json.load(f)
    s = {"name": a.name, "canary": d.get("canary"), "pass_s": d.get("pass_s"), "errors": d["errors"][:5],
         "rows": [(r["model"], r["batch"], r["ctx"], len(r["passes"]),
                   sum(max(x["canary_before"]["host_us"], x["canary_after"]["host_us"]) <= G.FAST_CANARY_US
                       for x in r["passes"]),
                   round(_pct([x["median"] for x in r["passes"]])["p50"], 2) if r["passes"] else None,
                   round(r["graph_ms"]["median"], 3) if "graph_ms" in r else r.get("graph_error", "")[:40])
                  for r in d["rows"]]}
    log(json.dumps(s, separators=(",", ":")))
    return rc


if __name__ == "__main__":
    sys.exit(main())
