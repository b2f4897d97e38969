"""Speculative decoding on the H200: predicted vs measured verify steps and draft loops (CPU only, no torch).

    python -m calibration.validate_spec [--measured calibration/measured/h200-round-f/verify_timing.json]
                                        [--out out/spec_decode]      # writes spec_decode.json and spec_decode.md

Measured (calibration/scripts/round_f.py `job_verify_timing`, one timing process, canary at start and end):
- `verify` rows: the reference decoder's op sequence generalised to q_len = 1 + k tokens per sequence (impl
  `reference`: qwen3-0.6b and llama3-8b, fusion none) and transformers' own Qwen3-0.6B (impl `hf`), batch 1-64,
  ctx 512 keys (the q_len new tokens at positions ctx - q_len .. ctx - 1), eager (sync, step, sync: median) and one
  full CUDA graph of the step (sync, replay, sync: median);
- `draft_loop` rows: a 1-layer reference decoder at qwen3-0.6b shape + lm_head + argmax fed back into the input
  ids, captured as one graph and replayed k = 1..4 times between two syncs.
Predicted: `simulator.engine.predict.predict` of the same step (fusion none, StepShape(batch, ctx - q_len,
q_len)), graph none / full, with the h200 profile plus the verify-attention tables of the same file
(calibration/build_spec.py: the SDPA microbenchmark rows, not the verify steps; nothing is fitted on the rows
scored here). The draft loop: one replay's isolated time + (k - 1) x its pipelined period
max(host busy, GPU busy + gaps) (calibration/validate.py `pipelined_ms`), the step being the 1-layer decoder plus
an argmax (a reduction over batch x vocab) and a copy of the ids.
Targets (issue 21): verify within 5 % under full graphs and 12 % eager (k = 1-4, batch 1-64); draft loop 7 %.
q_len 1 rows (k = 0) are the plain decode cross-check, listed apart and not scored against the spec targets.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent
ROUND_F = ROOT / "measured" / "h200-round-f"
DEFAULT_MEASURED = tuple(ROUND_F / f for f in ("verify_timing.json", "attention_llama3-8b_8192.json",
                                                "verify_hf_timing.json", "counts_verify.json"))
TARGETS = {"full": 5.0, "none": 12.0, "draft_loop": 7.0}


def _err(pred: float, meas: float) -> float:
    return 100.0 * (pred - meas) / meas


def profile_with_verify(raw: dict, base: str = "h200"):
    from simulator.model.profile import load_profile, parse_profile

    from .build_spec import add_to_profile

    p = load_profile(base).model_dump()
    notes = add_to_profile(p, raw)
    return parse_profile(p, f"{base}+round-f-verify-attention"), notes


def verify_rows(raw: dict, prof) -> list[dict]:
    from simulator.engine.predict import predict
    from simulator.model.models import PRESETS
    from simulator.model.workload import StepShape

    out = []
    for r in raw.get("rows", []):
        if r.get("table") != "verify":
            continue
        m = PRESETS[r["model"]]
        if r.get("layers") and r["layers"] != m.num_hidden_layers:
            m = replace(m, num_hidden_layers=int(r["layers"]))
        q, B, ctx = int(r["q_len"]), int(r["batch"]), int(r["ctx"])
        hf = r.get("impl") == "hf"
        # the reference writes the q_len tokens at ctx - q_len .. ctx - 1 and attends over ctx keys; transformers'
        # StaticCache (the hf recipe, simulator/model/recipes.py) holds ctx past tokens and attends over all
        # max_cache_len slots under a mask
        shape = StepShape(B, ctx, q_len=q) if hf else StepShape(B, ctx - q, q_len=q)
        for graph, key in (("none", "eager_ms"), ("full", "graph_ms")):
            meas = (r.get(key) or {}).get("median")
            if not isinstance(meas, (int, float)):
                continue
            row = {"impl": r["impl"], "model": r["model"], "batch": B, "ctx": ctx, "q_len": q, "k": q - 1,
                   "graph": graph, "measured_ms": meas}
            try:
                if hf:
                    from simulator.engine.predict import predict_setup
                    from simulator.engine.setup import Capture, StepSetup

                    st = StepSetup.of(m, prof, "none", Capture.of(graph), impl="hf",
                                      max_cache_len=int(r["max_cache_len"]))
                    p = predict_setup(st, shape)
                else:
                    p = predict(m, B, ctx - q, "none", graph, prof, shape=shape)
                row["predicted_ms"] = p.result.step_s * 1e3
                row["err_pct"] = _err(row["predicted_ms"], meas)
            except Exception as e:  # noqa: BLE001 - a row the model refuses is reported, not dropped
                row["refused"] = str(e)
            out.append(row)
    return out


def draft_rows(raw: dict, prof) -> list[dict]:
    from simulator.engine.predict import simulate
    from simulator.model.costs import CostModel
    from simulator.model.kernels import LaunchPath as P
    from simulator.model.kernels import Op, OpClass, Step
    from simulator.model.models import PRESETS
    from simulator.model.workload import build_step, decode

    from .validate import pipelined_ms

    costs = CostModel(prof)
    out = []
    for r in raw.get("rows", []):
        if r.get("table") != "draft_loop":
            continue
        m = replace(PRESETS[r["model"]], num_hidden_layers=int(r["layers"]))
        B, ctx = int(r["batch"]), int(r["ctx"])
        st = build_step(m, decode(B, ctx - 1), "none")  # the reference's ctx counts the new token (validate.py)
        V = m.vocab_size
        extra = (Op("argmax", OpClass.REDUCTION, P.EAGER_REDUCTION, float(B * V), float(B * V * 2 + B * 8)),
                 Op("ids.copy_", OpClass.COPY, P.EAGER_COPY, float(B), float(B * 16)))
        step = Step(st.ops + extra, label=st.label + " + argmax + ids copy", layers=st.layers, tokens=st.tokens)
        res, _ = simulate(step, costs, "full")
        one, period = res.step_s * 1e3, pipelined_ms(res)
        for k in (1, 2, 3, 4):
            meas = (r.get(f"k{k}_loop_ms") or {}).get("median")
            if not isinstance(meas, (int, float)):
                continue
            pred = one + (k - 1) * period
            out.append({"model": r["model"], "layers": m.num_hidden_layers, "batch": B, "ctx": ctx, "k": k,
                        "measured_ms": meas, "predicted_ms": pred, "err_pct": _err(pred, meas),
                        "replay_b2b_ms": r.get("replay_b2b_ms"), "predicted_period_ms": period})
    return out


def kernel_rows(counts: dict, prof) -> list[dict]:
    """Kernels per verify step: torch.profiler's count (counts_verify.json, a profiled process) vs the workload's
    kernel list (CostModel.step_kernels: split-K reduce kernels of the GEMM tables included)."""
    from simulator.model.costs import CostModel
    from simulator.model.models import PRESETS
    from simulator.model.workload import StepShape, build_step

    costs = CostModel(prof)
    out = []
    for r in counts.get("rows", []):
        if not isinstance(r.get("kernels"), int):
            continue
        m = PRESETS[r["model"]]
        if r.get("layers") and r["layers"] != m.num_hidden_layers:
            m = replace(m, num_hidden_layers=int(r["layers"]))
        q, B, ctx = int(r["q_len"]), int(r["batch"]), int(r["ctx"])
        st = (build_step(m, StepShape(B, ctx, q_len=q), "none", "hf", max_cache_len=ctx + 1024) if r["impl"] == "hf"
              else build_step(m, StepShape(B, ctx - q, q_len=q), "none"))  # round_f: hf max_cache_len ctx + 1024
        pred = costs.step_kernels(st.ops)
        meas = r["kernels"] + (r.get("memsets") or 0) + (r.get("memcpys") or 0)
        out.append({"impl": r["impl"], "model": r["model"], "batch": B, "q_len": q, "measured": meas,
                    "measured_kernels_only": r["kernels"], "predicted": pred, "err_pct": _err(pred, meas)})
    return out


def _stats(errs: list[float]) -> dict:
    import numpy as np

    if not errs:
        return {"n": 0}
    a = np.abs(np.asarray(errs))
    return {"n": len(errs), "mape": float(a.mean()), "max_abs": float(a.max()),
            "within_5": int((a <= 5).sum()), "within_12": int((a <= 12).sum())}


def summarize(vrows: list[dict], drows: list[dict]) -> dict:
    s = {}
    for impl in sorted({r["impl"] for r in vrows}):
        for graph in ("full", "none"):
            sel = [r for r in vrows if r["impl"] == impl and r["graph"] == graph and "err_pct" in r]
            spec = [r["err_pct"] for r in sel if 1 <= r["k"] <= 4 and 1 <= r["batch"] <= 64]
            s[f"{impl} {graph}"] = {"k1-4": _stats(spec), "target_pct": TARGETS[graph],
                                   "meets": bool(spec) and _stats(spec)["mape"] <= TARGETS[graph],
                                   "k0 (decode)": _stats([r["err_pct"] for r in sel if r["k"] == 0]),
                                   "k7 (q_len 8)": _stats([r["err_pct"] for r in sel if r["k"] == 7])}
    d = [r["err_pct"] for r in drows]
    s["draft_loop"] = {"all": _stats(d), "target_pct": TARGETS["draft_loop"],
                       "meets": bool(d) and _stats(d)["mape"] <= TARGETS["draft_loop"]}
    return s


READING = """## Reading (round f, 2026-12-01)

- **Full graphs, reference decoder** (the device time of the verify step; the rerun of the same rows,
  verify_timing.rerun.json, agrees within 1.5 %): batch 1 within 3.6 % at k 1-4 on both models; once q_len >= 2,
  qwen3-0.6b is under-predicted by 3 % at batch 8 and 8-9 % at batch 32-64, llama3-8b by 5-11 % at batch 8-64. The
  q_len-1 rows of the same process (plain decode) are within 0.1-5.6 %.
  What is missing is device time of the attention kernel inside the step: at batch 64 the CUPTI kernel sum of a
  verify step (counts_verify.json, `kernel_us`) exceeds the model's kernel sum by 0.70-0.98 ms (qwen3-0.6b) and
  1.14-1.38 ms (llama3-8b), about 25-43 us per layer, while the q_len-1 rows differ by -0.03 and +0.35 ms. At q_len
  >= 2 SDPA switches from cuDNN to `flash_fwd_splitkv_kernel` + combine (round f README); the isolated SDPA table
  (contiguous q, K/V rotated over copies larger than L2) times that kernel 15-30 % faster than it runs in the step
  (q a transposed view of the projections, K/V written by index_copy_ just before). Not fitted away: a measurement
  of the attention kernel in place (a per-kernel trace of a verify step) is the next step. Target 5 %: not met.
- **Eager** rows are not a clean host measurement: verify_timing.json lost its end canary and its rerun failed the
  canary (ratio 1.25); medians of neighbouring rows move by up to 2x (round f README). Target 12 %: not assessable
  with these rows (the model under-predicts them by 10-56 %, MAPE 42 %; the q_len-1 rows of the same process by 38 %).
- **transformers' Qwen3-0.6B** (hf recipe, simulator/model/recipes.py): plain-decode rows of the same process are
  within 2.6 % under full graphs, but q_len >= 2 rows are 6-7 % under at batch 8-64 and 13-18 % under at batch 1
  (MAPE 8.8 %): its verify attention (SDPA with a boolean mask over all 1536 StaticCache slots, repeat_kv) has no
  measured table (round f timed the reference's lower-right-causal SDPA over ctx keys), so the recipe's attention
  falls back to the roofline at q_len > 1. Target 5 %: not met.
- **Draft loop** (one graph = 1-layer step + argmax + ids copy, replayed k times): within 3.7 % at every batch and k
  (MAPE 1.3 %; target 7 %: met).
- **Kernels per verify step**: reference within 0.1 % at batch 1 and 1.7-4.8 % over at batch 64 (cuBLAS drops
  split-K reduce kernels at M = 64·q_len that the GEMM table's nearest-M entry keeps); hf 0.1-1.7 % under.
"""


def markdown(res: dict) -> str:
    L = ["# Speculative decoding: verify steps and draft loops, predicted vs measured (H200)", "",
         f"Measured: {', '.join(f'`{m}`' for m in res['measured'])} (canaries: {json.dumps(res.get('canary'))})"
         + (f"; missing: {', '.join(res['missing'])}" if res.get("missing") else "") + f". Profile: `{res['profile']}` "
         "(the h200 profile + the SDPA q_len tables of the same round; calibration/build_spec.py). "
         "Command: `python -m calibration.validate_spec --out calibration/validation`.", "",
         "Targets (issue 21): verify within 5 % under full graphs, 12 % eager (k = 1-4, batch 1-64); draft loop 7 %. "
         "MAPE = mean |predicted - measured| / measured.", "", "| group | rows | MAPE % | max % | target % | meets |",
         "|---|---|---|---|---|---|"]
    for name, g in res["summary"].items():
        st = g.get("k1-4") or g.get("all")
        if st.get("n"):
            L.append(f"| {name} (k 1-4) | {st['n']} | {st['mape']:.1f} | {st['max_abs']:.1f} | {g['target_pct']:.0f} "
                     f"| {'yes' if g['meets'] else 'NO'} |")
        else:
            L.append(f"| {name} | 0 | - | - | {g['target_pct']:.0f} | no rows |")
        for sub in ("k0 (decode)", "k7 (q_len 8)"):
            if g.get(sub, {}).get("n"):
                t = g[sub]
                L.append(f"| {name}, {sub} | {t['n']} | {t['mape']:.1f} | {t['max_abs']:.1f} | (not scored) | |")
    L += ["", READING]
    L += ["", "## Verify rows", "", "| impl | model | batch | k | graph | measured ms | predicted ms | err % |",
          "|---|---|---|---|---|---|---|---|"]
    for r in res["verify"]:
        if "err_pct" in r:
            L.append(f"| {r['impl']} | {r['model']} | {r['batch']} | {r['k']} | {r['graph']} | {r['measured_ms']:.3f} "
                     f"| {r['predicted_ms']:.3f} | {r['err_pct']:+.1f} |")
        else:
            L.append(f"| {r['impl']} | {r['model']} | {r['batch']} | {r['k']} | {r['graph']} | {r['measured_ms']:.3f} "
                     f"| refused: {r['refused'][:80]} | |")
    L += ["", "## Draft loop (1-layer qwen3-0.6b + lm_head + argmax, one graph replayed k times)", "",
          "| batch | k | measured ms | predicted ms | err % |", "|---|---|---|---|---|"]
    for r in res["draft_loop"]:
        L.append(f"| {r['batch']} | {r['k']} | {r['measured_ms']:.3f} | {r['predicted_ms']:.3f} | {r['err_pct']:+.1f} |")
    if res.get("kernels"):
        L += ["", "## Kernels per verify step (torch.profiler, separate process) vs the workload's kernel list", "",
              "| impl | model | batch | q_len | measured | predicted | err % |", "|---|---|---|---|---|---|---|"]
        for r in res["kernels"]:
            L.append(f"| {r['impl']} | {r['model']} | {r['batch']} | {r['q_len']} | {r['measured']} | {r['predicted']} "
                     f"| {r['err_pct']:+.1f} |")
    if res.get("table_notes"):
        L += ["", "## Verify-attention tables read", ""] + [f"- {n}" for n in res["table_notes"]]
    return "\n".join(L) + "\n"


def _shown(p: Path) -> str:
    try:
        return str(Path(p).resolve().relative_to(ROOT.parent))
    except ValueError:
        return str(p)


def run(measured) -> dict:
    """`measured`: the round's files (verify_timing.json first: it holds the SDPA table; the HF verify rows and the
    kernel counts in their own files). Missing files are skipped and listed."""
    paths = [Path(m) for m in ([measured] if isinstance(measured, (str, Path)) else measured)]
    have = [p for p in paths if p.exists()]
    raws = {p.name: json.loads(p.read_text()) for p in have}
    att = [r for r in raws.values() if any(x.get("table") == "attention" for x in r.get("rows", []))]
    prof, notes = profile_with_verify(att or [next(iter(raws.values()))])
    v, d, kc = [], [], []
    for raw in raws.values():
        if raw.get("kind", "").endswith("counts-verify"):
            kc += kernel_rows(raw, prof)
            continue
        v += verify_rows(raw, prof)
        d += draft_rows(raw, prof)
    summary = summarize(v, d)
    if kc:
        summary["kernels"] = {"all": _stats([r["err_pct"] for r in kc]), "target_pct": 5.0,
                              "meets": _stats([r["err_pct"] for r in kc])["mape"] <= 5.0}
    return {"measured": [_shown(p) for p in have], "missing": [_shown(p) for p in paths if not p.exists()],
            "profile": prof.name, "canary": {k: r.get("canary") for k, r in raws.items()},
            "quick": any(r.get("quick") for r in raws.values()), "table_notes": notes, "summary": summary,
            "verify": v, "draft_loop": d, "kernels": kc}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", nargs="+", default=[str(p) for p in DEFAULT_MEASURED],
                    help="round f's verify_timing.json (+ verify_hf_timing.json, counts_verify.json)")
    ap.add_argument("--out", default="out/spec_decode")
    a = ap.parse_args(argv)
    if not Path(a.measured[0]).exists():
        print(f"validate_spec: no measured file {a.measured[0]}", file=sys.stderr)
        return 2
    res = run(a.measured)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "spec_decode.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "spec_decode.md").write_text(markdown(res))
    for name, g in res["summary"].items():
        st = g.get("k1-4") or g.get("all")
        print(f"{name}: n {st.get('n', 0)}" + (f", MAPE {st['mape']:.1f}% (target {g['target_pct']:.0f}%)"
                                               if st.get("n") else ""))
    print(f"wrote {out / 'spec_decode.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
