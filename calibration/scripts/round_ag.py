"""Round ag (issue 24's new step knob, `lora_rank`): the reference decoder with a LoRA adapter of rank r on every
projection of each layer (calibration/reference_decoder.py `_lin`: PEFT's forward, base + lora_B(lora_A(x)) *
scaling), timed against launchsim's figures committed before measuring (calibration/scripts/round_ag_predict.py).

    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_ag --out DIR --job time [--quick]
    PYTHONUNBUFFERED=1 python3 -m calibration.scripts.round_ag --out DIR --job counts [--quick]   # profiles
    ... [--rows unseen]   # round ai: UNSEEN_ROWS, two models no LoRA figure was checked on

Why: the knob's op list (model/workload.py `lora_delta`: two GEMMs, the scaling and the add per projection;
Inductor fuses the last two into their readers) and its prices (the adapter's skinny GEMMs from the GEMM model's
fallback, which has no table of rank-r shapes) are stated formulas; nothing here was fitted.

Protocol as round ab's (`round_ab.time_row`): per timing process (never profiled; canary at its start and end),
models one at a time (random bf16 weights, the adapters drawn after the base weights), per row eager passes with a
canary pair each, then the full graph (20 isolated replays) and the piecewise graph cut at each SDPA call, a canary.
Rows: ROWS (fusion none: 2 models x 3 ranks x 3 batches; packed; compiled on a 4-layer qwen3-0.6b with dynamic=False,
vLLM's default, since every batch compiles anew), keys 512 (launchsim's ctx 511). Counts process: one step per
row under torch.profiler.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from . import round_f as F
from . import round_g as G
from .round_ab import spec  # a preset, else the published config in calibration/configs/hf_unseen

KEYS = 512
SEED = 20261207
# (model, layers or None, fusion, ranks, batches)
ROWS = (("qwen3-0.6b", None, "none", (0, 16, 64), (1, 8, 64)),
        ("llama3-8b", None, "none", (0, 16, 64), (1, 8, 64)),
        ("qwen3-0.6b", None, "packed", (0, 16), (1, 64)),
        ("qwen3-0.6b", 4, "compiled", (0, 16), (1, 8)))
QUICK_ROWS = (("qwen3-0.6b", 2, "none", (0, 16), (1,)), ("qwen3-0.6b", 2, "compiled", (0, 16), (1,)))
# `--rows unseen` (round ai): the same protocol on two models no LoRA figure was checked on, published configs of
# calibration/configs/hf_unseen with the reference decoder's architecture (no biases): SmolLM2-1.7B (hidden 2048)
# and Llama-3.2-3B (hidden 3072, an off-table width for the adapter's GEMMs)
UNSEEN_ROWS = (("smollm2-1.7b", None, "none", (0, 16, 64), (1, 8, 64)),
               ("llama-3.2-3b", None, "none", (0, 16, 64), (1, 8, 64)))
ROW_SETS = {"ag": ROWS, "unseen": UNSEEN_ROWS}


def log(*a):
    print(*a, flush=True)


def label(name: str, layers: int | None) -> str:
    return f"{name}@{layers}" if layers else name


class Row:
    """round_ab.time_row's decoder: `step()` and `check()` over a reference_decoder.Runner."""

    def __init__(self, runner):
        self.r = runner

    def step(self):
        return self.r.step()

    def check(self) -> dict:
        import torch

        out = self.r.step()
        torch.cuda.synchronize()
        ok = bool(torch.isfinite(out.float()).all())
        return {"q": 0.0 if ok else 1.0, "k": 0.0, "v": 0.0, "finite": ok}


def job_time(out_dir, quick, deadline, rows=ROWS):
    import torch

    from ..reference_decoder import Runner, make_weights
    from .round_ab import time_row

    torch.set_grad_enabled(False)
    P = G.Proc(out_dir, "time_ag" + ("quick" if quick else ""), quick)
    P.res["kind"] = "launchsim-round-ag-time"
    P.res["protocol"] = {"keys": KEYS, "seed": SEED, "rows": rows if not quick else QUICK_ROWS,
                         "torch": torch.__version__, "compile": "dynamic=False, fullgraph=True"}
    t0 = P.t0
    for name, layers, fusion, ranks, batches in (QUICK_ROWS if quick else rows):
        m = spec(name, layers)
        for r in ranks:
            if deadline - (time.time() - t0) < 30:
                P.res["errors"].append({"what": f"{name} {fusion} r{r} skipped at the deadline", "error": "deadline"})
                continue
            try:
                w = make_weights(m, "cuda", seed=SEED, lora_rank=r)
            except Exception as e:  # noqa: BLE001
                P.error(f"weights {name} r{r}", e)
                continue
            for b in batches:
                rec = {"model": label(name, layers), "fusion": fusion, "lora_rank": r, "batch": b, "keys": KEYS,
                       "layers": m.num_hidden_layers, "passes": []}
                try:
                    d = Row(Runner(m, fusion, b, KEYS, weights=w, dynamic=False))
                    torch.cuda.synchronize()
                    time_row(rec, d, quick)
                    del d
                except Exception as e:  # noqa: BLE001
                    P.error(f"row {name} {fusion} r{r} b{b}", e)
                P.res["rows"].append(rec)
                P.save()
                log(f"[ag] {label(name, layers)} {fusion} r{r} b{b}: eager "
                    f"{[round(x['median'], 3) for x in rec['passes']]} full {rec.get('full_ms', {}).get('median')} "
                    f"piecewise {rec.get('piecewise_ms', {}).get('median')} "
                    f"canary {[x['canary_before']['host_us'] for x in rec['passes']]} {time.time() - t0:.0f}s")
                F.free()
            del w
            F.free()
    return P.finish()


def job_counts(out_dir, quick, rows=ROWS):
    import torch

    from ..jsonio import dump
    from ..reference_decoder import Runner, make_weights

    torch.set_grad_enabled(False)
    res = {"kind": "launchsim-round-ag-counts", "quick": quick, "environment": F.versions(), "rows": [], "errors": []}
    path = os.path.join(out_dir, "counts_ag" + ("quick" if quick else "") + ".json")
    for name, layers, fusion, ranks, batches in (QUICK_ROWS if quick else rows):
        m = spec(name, layers)
        for r in ranks:
            w = make_weights(m, "cuda", seed=SEED, lora_rank=r)
            for b in (batches[0], batches[-1]):
                try:
                    d = Runner(m, fusion, b, KEYS, weights=w, dynamic=False)
                    for _ in range(3):
                        d.step()
                    F.sync()
                    p, evs = F._trace_of(d.step, 1, None, shapes=False)
                    a = F.analyse(evs, 1)
                    os.unlink(p)
                    res["rows"].append({"model": label(name, layers), "fusion": fusion, "lora_rank": r, "batch": b,
                                        "keys": KEYS, "layers": m.num_hidden_layers,
                                        "last_step": a.get("last_step")})
                    log(f"[counts] {label(name, layers)} {fusion} r{r} b{b}: {a.get('last_step')}")
                    del d
                except Exception as e:  # noqa: BLE001
                    res["errors"].append({"what": f"{name} {fusion} r{r} b{b}", "error": F.err(e)})
                F.free()
                dump(res, path)
            del w
            F.free()
    dump(res, path)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--job", default="time", choices=("time", "counts"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--deadline", type=float, default=330.0)
    ap.add_argument("--rows", choices=tuple(ROW_SETS), default="ag", help="ag: ROWS; unseen: UNSEEN_ROWS (round ai)")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    if a.job == "counts":
        return job_counts(a.out, a.quick, ROW_SETS[a.rows])
    return job_time(a.out, a.quick, a.deadline, ROW_SETS[a.rows])


if __name__ == "__main__":
    sys.exit(main())
