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
Measured (round g, calibration/scripts/round_g.py, `eager_rows.json`): the same eager verify rows again, a canary
immediately before and after every row in each of 3-8 seeded shuffled passes; a row's figure is the median over its
fast-host passes (the lower-mode passes where none was fast).
Predicted: `simulator.engine.predict.predict` of the same step (fusion none, StepShape(batch, ctx - q_len,
q_len)), graph none / full, with the h200 profile plus the verify-attention tables of `--tables` (round g's
inplace.json: SDPA timed in place by its own harness, calibration/build_spec.py; not the verify steps, nothing is
fitted on the rows scored here); a round-g eager row on the host its passes ran on (the profile's host lane
rescaled to their median canary: simulator/model/profile.py `host_scaled`). The draft loop: one replay's isolated time + (k - 1) x its pipelined period
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
ROUND_G = ROOT / "measured" / "h200-round-g"
DEFAULT_MEASURED = tuple(ROUND_F / f for f in ("verify_timing.json", "verify_hf_timing.json", "counts_verify.json")) + (
    ROUND_G / "eager_rows.json",)
DEFAULT_TABLES = ROUND_G / "inplace.json"  # the verify-attention tables: a different measurement from the rows scored
TARGETS = {"full": 5.0, "none": 12.0, "draft_loop": 7.0}


def _err(pred: float, meas: float) -> float:
    return 100.0 * (pred - meas) / meas


def profile_with_verify(raw, base: str = "h200"):
    """The `base` profile with the verify-attention tables of `raw` (round g's inplace.json, or round f's files)."""
    from simulator.model.profile import load_profile, parse_profile

    from .build_spec import _inplace_rows, add_to_profile

    p = load_profile(base).model_dump()
    notes = add_to_profile(p, raw)
    tag = "round-g-inplace" if _inplace_rows(raw) else "round-f-verify-attention"
    return parse_profile(p, f"{base}+{tag}"), notes


def round_g_verify(raw: dict) -> dict:
    """Round g's eager_rows.json (calibration/scripts/round_g.py `combine`) as round-f-shaped verify rows: eager only
    (`eager_ms`: the median over fast-host passes, or lower-mode passes where none was fast; `eager_ms_from`)."""
    import statistics

    impl = {"ref_verify": "reference", "hf_verify": "hf"}
    rows = []
    for r in raw.get("rows", []):
        if r.get("impl") not in impl or not isinstance(r.get("eager_ms"), (int, float)):
            continue
        used = [x for x in r.get("passes", []) if x.get(r["eager_ms_from"] if r.get("eager_ms_from") == "fast"
                                                       else "lower_mode")]
        # the host those passes ran on: the median of their canaries (each pass's mean of before and after)
        host = statistics.median((x["canary_before_us"] + x["canary_after_us"]) / 2 for x in used) if used else None
        rows.append({"table": "verify", "impl": impl[r["impl"]], "model": r["model"], "layers": r.get("layers"),
                     "batch": r["batch"], "ctx": r["ctx"], "q_len": r["q_len"], "max_cache_len": r.get("max_cache_len"),
                     "eager_ms": {"median": r["eager_ms"]}, "eager_ms_from": r.get("eager_ms_from"),
                     "fast_passes": r.get("fast_passes"), "passes": len(r.get("passes", [])), "host_canary_us": host})
    return {"rows": rows, "source": "round g"}


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
                   "graph": graph, "measured_ms": meas, "source": raw.get("source", "round f")}
            if "eager_ms_from" in r:
                row["eager_ms_from"] = r["eager_ms_from"]
            pr = prof
            if graph == "none" and r.get("host_canary_us"):
                # predicted on the host the row was measured on: the profile's host lane rescaled to that canary
                # (simulator/model/profile.py host_scaled, what --host-canary-us does), device figures unchanged
                from simulator.model.profile import host_scaled

                row["host_canary_us"] = r["host_canary_us"]
                pr = host_scaled(prof, float(r["host_canary_us"]))
            try:
                if hf:
                    from simulator.engine.predict import predict_setup
                    from simulator.engine.setup import Capture, StepSetup

                    st = StepSetup.of(m, pr, "none", Capture.of(graph), impl="hf",
                                      max_cache_len=int(r["max_cache_len"]))
                    p = predict_setup(st, shape)
                else:
                    p = predict(m, B, ctx - q, "none", graph, pr, shape=shape)
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
        for graph, src in (("full", "round f"), ("none", "round g"), ("none", "round f")):
            sel = [r for r in vrows if r["impl"] == impl and r["graph"] == graph and "err_pct" in r
                   and r.get("source", "round f") == src]
            if not sel:
                continue
            spec = [r["err_pct"] for r in sel if 1 <= r["k"] <= 4 and 1 <= r["batch"] <= 64]
            # round f's eager rows are listed beside round g's, not scored: that process's host drifted (canary)
            scored = not (graph == "none" and src == "round f")
            s[f"{impl} {graph} ({src})"] = {
                "k1-4": _stats(spec), "target_pct": TARGETS[graph], "scored": scored,
                "meets": scored and bool(spec) and _stats(spec)["mape"] <= TARGETS[graph],
                "k0 (decode)": _stats([r["err_pct"] for r in sel if r["k"] == 0]),
                "k7 (q_len 8)": _stats([r["err_pct"] for r in sel if r["k"] == 7])}
    d = [r["err_pct"] for r in drows]
    s["draft_loop"] = {"all": _stats(d), "target_pct": TARGETS["draft_loop"],
                       "meets": bool(d) and _stats(d)["mape"] <= TARGETS["draft_loop"]}
    return s


READING = """## Reading (round g tables and eager rows, 2026-12-02)

The verify-attention tables now come from round g's in-place harness (calibration/measured/h200-round-g/inplace.json:
q a transposed view of the projection, the new K/V written by index_copy_ right before, caches rotated past L2;
transformers' own sdpa_attention_forward for the hf layout). Nothing here is fitted on the verify steps scored;
the graph rows are round f's, the eager rows round g's (one canary before and one after every row and pass).

- **Full graphs, reference decoder**: k 1-4 MAPE 3.4 % (27 of 32 rows within 5 %; target 5 %: met). qwen3-0.6b
  -3.1 .. +3.7 % at every batch (round f's isolated table left batch 32-64 8-9 % under); llama3-8b -1.6 .. -3.0 % at
  batch 1, -3.5 .. -5.2 % at 32-64, but **-8.2 .. -8.6 % at batch 8** (also -4.1 % at k 0): 25 us a layer missing,
  of which the attention explains about 4 (in-step kernel 43 us by the round-g trace, table 38.7 us): the rest is
  outside attention and not found this round. In place the reference kernel costs 2-3 us (b1-8) to 17 us (b64)
  more than alone; round g's trace of the steps agrees with the in-place table within 2-4 % at batch 64.
- **Full graphs, transformers' Qwen3-0.6B** (hf recipe, StaticCache 1536 slots): k 1-4 MAPE 1.2 %, every row
  within 4.6 % (round f: 8.8 %, the attention at q_len > 1 had no table and fell to the roofline). The measured
  block is repeat_kv's two copies (0.47 ms each at batch 64 in the trace), SDPA's mask kernels and cuDNN's masked
  attention over all 1536 slots (in place 1.20 ms a layer at batch 64 q_len 2; the trace's sum 1.23 ms).
- **Eager, reference decoder** (round g, fast-host passes: both canaries <= 7.6 us; 1 of 32 rows from the lower
  mode <= 8.5 us where no pass was fast), each row predicted on its own host (the profile's host lane rescaled to
  the median canary of its passes, 6.8-7.9 us; the profile was calibrated at 6.49 us): k 1-4 MAPE 8.3 % (target
  12 %: met by MAPE; 27 of 32 rows within 12 %, worst -27.5 %), under-predicted (median -6.8 %, every row but one
  below). The plain decode rows of the same passes (k 0): MAPE 6.0 %. Fast passes of one row still spread by up to
  30 % (e.g. qwen3-0.6b b8 k3: 28.4 ms against 20-22 ms for its neighbours), so single rows carry that noise.
  Round f's eager rows (one drifting process) are listed beside, unscored (MAPE 41.5 %).
- **Eager, transformers' Qwen3-0.6B** (round g, each row on its own host as above): k 1-4 MAPE 6.4 % (target 12 %:
  met by MAPE; 14 of 16 rows within 12 %; worst -25.1 % at batch 8 k 4 and -24.2 % at batch 32 k 2, both rows whose
  fast passes sit 40-50 % above their neighbours' (44.1 and 41.4 ms against 28-32 ms));
  batch 64 (device-bound) -3.0 .. -4.2 % at every k. The k 0 rows (plain decode): MAPE 9.4 %. Not independent of a
  fit: the hf recipe's transformers-Python cost per call (PYTHON_US_PER_CALL, 3.27 us) is refit on round g's HF
  *decode* eager rows of qwen3-0.6b and gemma-2-2b (calibration/validate_impl.py; impl_hf.md), and qwen3-0.6b is the
  model verified here; the verify rows (q_len 2-8 over 1536 slots) were not in that fit. Round f's eager rows
  (MAPE 18.5 %) are listed beside, unscored.
- **Draft loop** (one graph = 1-layer step + argmax + ids copy, replayed k times): within 3.7 % at every batch and k
  (MAPE 1.3 %; target 7 %: met).
- **Kernels per verify step**: MAPE 0.9 %; reference within 0.1 % at batch 1 and 1.7-4.8 % over at batch 64
  (cuBLAS drops split-K reduce kernels at M = 64·q_len that the GEMM table's nearest-M entry keeps); hf 0.1-1.7 %
  under.
"""


def markdown(res: dict) -> str:
    L = ["# Speculative decoding: verify steps and draft loops, predicted vs measured (H200)", "",
         f"Measured: {', '.join(f'`{m}`' for m in res['measured'])} (canaries: {json.dumps(res.get('canary'))})"
         + (f"; missing: {', '.join(res['missing'])}" if res.get("missing") else "") + f". Profile: `{res['profile']}` "
         f"(the h200 profile + the verify-attention q_len tables of {', '.join(f'`{t}`' for t in res.get('tables', []))}"
         ": SDPA timed in place by its own harness, not the verify steps scored here; calibration/build_spec.py). "
         "Command: `python -m calibration.validate_spec --out calibration/validation`.", "",
         "Targets (issue 21): verify within 5 % under full graphs, 12 % eager (k = 1-4, batch 1-64); draft loop 7 %. "
         "MAPE = mean |predicted - measured| / measured.", "", "| group | rows | MAPE % | max % | target % | meets |",
         "|---|---|---|---|---|---|"]
    for name, g in res["summary"].items():
        st = g.get("k1-4") or g.get("all")
        if st.get("n"):
            meets = ("yes" if g["meets"] else "NO") if g.get("scored", True) else "(not scored)"
            L.append(f"| {name} (k 1-4) | {st['n']} | {st['mape']:.1f} | {st['max_abs']:.1f} | {g['target_pct']:.0f} "
                     f"| {meets} |")
        else:
            L.append(f"| {name} | 0 | - | - | {g['target_pct']:.0f} | no rows |")
        for sub in ("k0 (decode)", "k7 (q_len 8)"):
            if g.get(sub, {}).get("n"):
                t = g[sub]
                L.append(f"| {name}, {sub} | {t['n']} | {t['mape']:.1f} | {t['max_abs']:.1f} | (not scored) | |")
    L += ["", READING]
    L += ["", "## Verify rows", "", "Eager rows of round g: the median over fast-host passes (both per-row canaries "
          "<= 7.6 us), marked `lower mode` where no pass was fast (both <= 8.5 us). Round f's eager rows (one pass, "
          "a drifting host) are listed beside them.", "",
          "| impl | model | batch | k | graph | source | measured ms | predicted ms | err % |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in res["verify"]:
        src = r.get("source", "round f") + (" (lower mode)" if r.get("eager_ms_from") == "lower_mode" else "")
        head = f"| {r['impl']} | {r['model']} | {r['batch']} | {r['k']} | {r['graph']} | {src} | {r['measured_ms']:.3f} "
        if "err_pct" in r:
            L.append(head + f"| {r['predicted_ms']:.3f} | {r['err_pct']:+.1f} |")
        else:
            L.append(head + f"| refused: {r['refused'][:80]} | |")
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


def run(measured, tables=DEFAULT_TABLES) -> dict:
    """`measured`: the files holding the rows scored (round f's verify_timing.json / verify_hf_timing.json: graph and
    eager verify rows and the draft loop; counts_verify.json: kernels; round g's eager_rows.json: eager rows with a
    canary per pass). `tables`: the verify-attention measurement the profile's q_len tables come from (round g's
    in-place harness; round f's verify_timing.json holds its isolated SDPA rows). Missing files are skipped and
    listed."""
    paths = [Path(m) for m in ([measured] if isinstance(measured, (str, Path)) else measured)]
    have = [p for p in paths if p.exists()]
    raws = {p.name: json.loads(p.read_text()) for p in have}
    tpaths = [Path(t) for t in ([tables] if isinstance(tables, (str, Path)) else tables)]
    traw = [json.loads(t.read_text()) for t in tpaths if t.exists()]
    att = traw or [r for r in raws.values() if any(x.get("table") == "attention" for x in r.get("rows", []))]
    prof, notes = profile_with_verify(att or [next(iter(raws.values()))])
    v, d, kc = [], [], []
    for raw in raws.values():
        if raw.get("kind", "").endswith("counts-verify"):
            kc += kernel_rows(raw, prof)
            continue
        if raw.get("kind") == "launchsim-round-g-eager-rows":
            v += verify_rows(round_g_verify(raw), prof)
            continue
        v += verify_rows(raw, prof)
        d += draft_rows(raw, prof)
    summary = summarize(v, d)
    if kc:
        summary["kernels"] = {"all": _stats([r["err_pct"] for r in kc]), "target_pct": 5.0,
                              "meets": _stats([r["err_pct"] for r in kc])["mape"] <= 5.0}
    return {"measured": [_shown(p) for p in have], "missing": [_shown(p) for p in paths if not p.exists()],
            "tables": [_shown(t) for t in tpaths if t.exists()], "profile": prof.name, "canary": {k: r.get("canary") for k, r in raws.items()},
            "quick": any(r.get("quick") for r in raws.values()), "table_notes": notes, "summary": summary,
            "verify": v, "draft_loop": d, "kernels": kc}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", nargs="+", default=[str(p) for p in DEFAULT_MEASURED],
                    help="round f's verify_timing.json (+ verify_hf_timing.json, counts_verify.json)")
    ap.add_argument("--tables", nargs="+", default=[str(DEFAULT_TABLES)],
                    help="the verify-attention measurement (round g's inplace.json)")
    ap.add_argument("--out", default="out/spec_decode")
    a = ap.parse_args(argv)
    for f in (a.measured[0], *a.tables):
        if not Path(f).exists():
            print(f"validate_spec: no measured file {f}", file=sys.stderr)
            return 2
    res = run(a.measured, a.tables)
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
