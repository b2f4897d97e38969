"""Validate the `hf` recipe (simulator/model/recipes.py) on transformers' decoders measured in a round (round f's
hf_timing.json / counts_hf.json / traces/, calibration/scripts/round_f.py): predicted vs measured eager and full-graph
step time and kernels per step, per model x cache x batch, fit and held-out models marked, each row with its
process's canary (fast host: the mean of its start and end p50 <= FAST_CANARY_US; the issue's fast processes read
6.8-7.1 us, its slow ones 9.3-10.1).

    python -m calibration.validate_impl [ROUND_DIR] [--out calibration/validation/impl_hf]

Fit models (the recipe's constants were taken from their traces): FIT below; every other model is held out.
Predictions: `build_step(model, decode(batch, ctx), "none", "hf", cache=..., max_cache_len=...)` priced by the
`h200` profile through simulator.engine.predict.simulate (graph none = eager, full = one CUDA graph), kernels per
step by CostModel.step_kernels (split-K reduce kernels from the GEMM tables). CPU only; prints a summary last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).parent
CONFIGS = HERE / "configs" / "hf"
FIT = ("qwen3-0.6b", "gemma-2-2b")  # qwen3-0.6b: round c's traces; gemma-2-2b: the sliding-window mask and cache order (round f)
FAST_CANARY_US = 7.6
TARGETS = {"full": 7.0, "eager": 15.0, "kernels": 3.0}  # issue 20: MAPE %, kernels within +-3 %


def _load(d: Path, name: str):
    p = d / name
    return json.loads(p.read_text()) if p.is_file() else None


def _err(pred: float, meas: float) -> float:
    return 100.0 * (pred - meas) / meas


def rows(round_dir: Path, profile: str = "h200") -> tuple[list[dict], dict]:
    from simulator.engine.predict import simulate
    from simulator.model.costs import CostModel
    from simulator.model.models import load_model
    from simulator.model.profile import load_profile
    from simulator.model.workload import build_step, decode

    cm = CostModel(load_profile(profile))
    timing = _load(round_dir, "hf_timing.json") or {"rows": []}
    counts = _load(round_dir, "counts_hf.json") or {"rows": []}
    can = timing.get("canary") or {}
    fast = bool(can) and (can.get("host_start_us", 99) + can.get("host_end_us", 99)) / 2 <= FAST_CANARY_US
    kcount = {(r["model"], r["cache"], r["batch"]): r for r in counts.get("rows", [])}
    out = []
    for r in timing.get("rows", []) + [dict(c, counts_only=True) for c in counts.get("rows", [])
                                       if (c["model"], c["cache"], c["batch"]) not in
                                       {(t["model"], t["cache"].replace("_nocudnn", ""), t["batch"])
                                        for t in timing.get("rows", [])}]:
        cache = r["cache"].replace("_nocudnn", "")
        cfg = CONFIGS / f"{r['model']}.json"
        if not cfg.is_file():
            continue
        m = load_model(str(cfg))
        if r.get("layers") and r["layers"] != m.num_hidden_layers:
            from dataclasses import replace

            m = replace(m, num_hidden_layers=r["layers"])
        slots = r.get("max_cache_len") if cache == "static" else None
        # round f's dynamic steps pass no cache_position / position_ids (transformers derives them)
        pos = "computed" if cache == "dynamic" else "given"
        st = build_step(m, decode(r["batch"], r["ctx"]), "none", "hf", cache=cache, max_cache_len=slots, positions=pos)
        if r["cache"].endswith("_nocudnn"):
            continue  # SDPA's flash backend: not the recipe's (cuDNN) attention; listed in the notes, not priced
        row = {"model": r["model"], "fit": r["model"] in FIT, "source": "round f", "cache": r["cache"], "batch": r["batch"],
               "ctx": r["ctx"], "max_cache_len": slots, "attn": r.get("attn_implementation"),
               "kernels_predicted": cm.step_kernels(st.ops)}
        c = kcount.get((r["model"], cache, r["batch"]))
        if c and (c.get("last_step") or {}).get("kernels"):
            row["kernels_measured"] = c["last_step"]["kernels"]
            row["kernels_error"] = _err(row["kernels_predicted"], row["kernels_measured"])
        if not r.get("counts_only"):
            e, _ = simulate(st, cm, "none")
            row["eager_predicted_ms"] = e.step_s * 1e3
            row["eager_measured_ms"] = r["eager_ms"]["median"]
            row["eager_error"] = _err(row["eager_predicted_ms"], row["eager_measured_ms"])
            row["fast_host"] = fast
            if "graph_ms" in r:
                f, _ = simulate(st, cm, "full")
                row["full_predicted_ms"] = f.step_s * 1e3
                row["full_measured_ms"] = r["graph_ms"]["median"]
                row["full_error"] = _err(row["full_predicted_ms"], row["full_measured_ms"])
        out.append(row)
    return out, {"canary": can, "fast_host": fast, "environment": timing.get("environment")}


def mape(rs: list[dict], key: str) -> float | None:
    xs = [abs(r[key]) for r in rs if key in r]
    return statistics.fmean(xs) if xs else None


def sequences(round_dir: Path) -> list[dict]:
    """The per-layer kernel sequence of each round trace against the recipe (calibration/build_recipes.compare)."""
    from dataclasses import replace

    from calibration.build_recipes import compare
    from simulator.model.models import load_model

    out = []
    counts = _load(round_dir, "counts_hf.json") or {"rows": []}
    for r in counts.get("rows", []):
        if not r.get("trace"):
            continue
        m = load_model(str(CONFIGS / f"{r['model']}.json"))
        if r.get("layers") and r["layers"] != m.num_hidden_layers:
            m = replace(m, num_hidden_layers=r["layers"])
        slots = r.get("max_cache_len") or (r["ctx"] + 128 if r["cache"] == "static" else None)
        try:
            c = compare(round_dir / r["trace"], m, r["cache"], r["batch"], r["ctx"], slots,
                        "computed" if r["cache"] == "dynamic" else "given")
        except Exception as e:  # noqa: BLE001  (a trace this reader cannot split is reported, not fatal)
            c = {"error": f"{type(e).__name__}: {e}"}
        c.update(model=r["model"], cache=r["cache"], batch=r["batch"], fit=r["model"] in FIT)
        out.append(c)
    return out


def markdown(rs: list[dict], meta: dict, seqs: list[dict], round_dir: Path) -> str:
    def f(x, d=2):
        return "—" if x is None else f"{x:.{d}f}"

    can = meta["canary"]
    try:
        round_dir = Path(round_dir).resolve().relative_to(HERE.parent.resolve())
    except ValueError:
        pass
    lines = [f"# `--impl hf` against transformers' own decoders ({round_dir})", "",
             "Recipe: simulator/model/recipes.py (transformers 5.17, torch 2.11, SDPA); fit on "
             f"{', '.join(FIT)} (round c's traces); every other model is held out. Profile `h200`. "
             f"Last timing process's canary: start {f(can.get('host_start_us'))} µs, end {f(can.get('host_end_us'))} µs "
             f"({'fast host' if meta['fast_host'] else 'NOT a fast-host process'}: fast = their mean ≤ {FAST_CANARY_US} µs). "
             "Regenerate: `python -m calibration.validate_impl " + str(round_dir) + "`.", "",
             "| model | fit | source | cache | batch | kernels pred / meas (err) | eager pred / meas ms (err) | "
             "full pred / meas ms (err) |", "|---|---|---|---|---:|---:|---:|---:|"]
    for r in rs:
        k = (f"{r['kernels_predicted']} / {r.get('kernels_measured', '—')} ({f(r.get('kernels_error'), 1)}%)")
        e = (f"{f(r.get('eager_predicted_ms'))} / {f(r.get('eager_measured_ms'))} ({f(r.get('eager_error'), 1)}%)")
        g = (f"{f(r.get('full_predicted_ms'), 3)} / {f(r.get('full_measured_ms'), 3)} ({f(r.get('full_error'), 1)}%)")
        fh = "" if "eager_error" not in r else (" (fast host)" if r.get("fast_host") else " (slow host)")
        lines.append(f"| {r['model']} | {'fit' if r['fit'] else 'held out'} | {r.get('source', 'round f')} | "
                     f"{r['cache']} | {r['batch']} | {k} | {e}{fh} | {g} |")
    lines += ["", "| group | kernels MAPE % | eager MAPE % fast-host rows | eager MAPE % all rows | "
              "full-graph MAPE % | rows |", "|---|---:|---:|---:|---:|---:|"]
    for name, sel in (("fit", [r for r in rs if r["fit"]]), ("held out", [r for r in rs if not r["fit"]]),
                      ("all", rs)):
        fast = [r for r in sel if r.get("fast_host")]
        lines.append(f"| {name} | {f(mape(sel, 'kernels_error'), 1)} | {f(mape(fast, 'eager_error'), 1)} | "
                     f"{f(mape(sel, 'eager_error'), 1)} | {f(mape(sel, 'full_error'), 1)} | {len(sel)} |")
    lines += ["", f"Targets (issue 20): full graph MAPE ≤ {TARGETS['full']} %, eager ≤ {TARGETS['eager']} % on "
              f"fast-host processes, kernels ±{TARGETS['kernels']} %.", "", "## Per-layer kernel sequences", "",
              "| model | fit | cache | batch | layer meas / recipe | equal | first mismatch | preamble meas / recipe | "
              "preamble and tail equal |", "|---|---|---|---:|---:|---|---:|---:|---|"]
    for s in seqs:
        if "error" in s:
            lines.append(f"| {s['model']} | {'fit' if s['fit'] else 'held out'} | {s['cache']} | {s['batch']} | "
                         f"{s['error'][:60]} | | |")
            continue
        lines.append(f"| {s['model']} | {'fit' if s['fit'] else 'held out'} | {s['cache']} | {s['batch']} | "
                     f"{s['measured_layer']} / {s['recipe_layer']} | {s['layer_equal']} | "
                     f"{'' if s['layer_equal'] else s['first_layer_mismatch']} |")
    return "\n".join(lines + ["", NOTES])


def _without_python(step):
    from simulator.model.kernels import Step

    ops = tuple(o for o in step.ops if not (o.name.startswith("python.") or o.name == "sdpa.cudnn_plan"))
    return Step(ops, step.label, step.layers, step.tokens)


def python_per_call_fit(round_dir: Path = HERE / "measured" / "h200-round-f", profile: str = "h200") -> dict:
    """recipes.PYTHON_US_PER_CALL and CUDNN_PLAN_MS from a round's hf_timing.json: for each fit model's static rows,
    (measured eager median - the recipe's eager step without its Python ops) / its host calls, the median over the
    batches; the mean over the fit models. The cuDNN plan: qwen3-0.6b's dynamic rows less its dynamic_nocudnn rows
    (medians over the batches)."""
    from simulator.engine.predict import simulate
    from simulator.model.costs import CostModel
    from simulator.model.models import load_model
    from simulator.model.profile import load_profile
    from simulator.model.workload import build_step, decode

    cm = CostModel(load_profile(profile))
    t = json.loads((round_dir / "hf_timing.json").read_text())
    per_model = {}
    for name in FIT:
        xs = []
        for r in t["rows"]:
            if r["model"] != name or r["cache"] != "static":
                continue
            m = load_model(str(CONFIGS / f"{name}.json"))
            st = _without_python(build_step(m, decode(r["batch"], r["ctx"]), "none", "hf",
                                            max_cache_len=r["max_cache_len"]))
            e, _ = simulate(st, cm, "none")
            xs.append((r["eager_ms"]["median"] - e.step_s * 1e3) * 1e3 / st.host_calls)
        per_model[name] = statistics.median(xs)
    dyn = {c: statistics.median(r["eager_ms"]["median"] for r in t["rows"]
                                if r["model"] == "qwen3-0.6b" and r["cache"] == c)
           for c in ("dynamic", "dynamic_nocudnn")}
    return {"per_model_us": per_model, "python_us_per_call": statistics.fmean(per_model.values()),
            "cudnn_plan_ms": dyn["dynamic"] - dyn["dynamic_nocudnn"]}


def round_c_rows(profile: str = "h200") -> tuple[list[dict], dict]:
    """The fit model's own rows: round c's transformers Qwen3-0.6B timing (timing.json `hf`, static cache of 1024
    slots, its process canary) and kernel counts (counts_hf.json)."""
    from simulator.engine.predict import simulate
    from simulator.model.costs import CostModel
    from simulator.model.models import PRESETS
    from simulator.model.profile import load_profile
    from simulator.model.workload import build_step, decode

    d = HERE / "measured" / "h200-round-c"
    cm = CostModel(load_profile(profile))
    t = json.loads((d / "timing.json").read_text())
    c = json.loads((d / "counts_hf.json").read_text())
    can = t.get("canary") or {}
    fast = bool(can) and (can.get("host_start_us", 99) + can.get("host_end_us", 99)) / 2 <= FAST_CANARY_US
    out = []
    for r in t.get("hf", []):
        st = build_step(PRESETS[r["model"]], decode(r["batch"], r["ctx"]), "none", "hf", max_cache_len=r["max_cache_len"])
        e, _ = simulate(st, cm, "none")
        f, _ = simulate(st, cm, "full")
        em, fm = r["eager"]["isolated"]["step_ms"]["p50"], r["full"]["isolated"]["step_ms"]["p50"]
        out.append({"model": r["model"], "fit": True, "cache": "static", "batch": r["batch"], "ctx": r["ctx"],
                    "max_cache_len": r["max_cache_len"], "source": "round c timing", "fast_host": fast,
                    "eager_predicted_ms": e.step_s * 1e3, "eager_measured_ms": em, "eager_error": _err(e.step_s * 1e3, em),
                    "full_predicted_ms": f.step_s * 1e3, "full_measured_ms": fm, "full_error": _err(f.step_s * 1e3, fm),
                    "kernels_predicted": cm.step_kernels(st.ops)})
    for r in c.get("hf", []):
        # the traced steps ran 4 decode calls after the prefill: ctx + 4 keys before the step
        st = build_step(PRESETS[r["model"]], decode(r["batch"], r["ctx"] + 4), "none", "hf", cache=r["cache"],
                        max_cache_len=r["max_cache_len"])
        k = cm.step_kernels(st.ops)
        out.append({"model": r["model"], "fit": True, "cache": r["cache"], "batch": r["batch"], "ctx": r["ctx"],
                    "max_cache_len": r["max_cache_len"], "source": "round c counts", "kernels_predicted": k,
                    "kernels_measured": r["kernels"], "kernels_error": _err(k, r["kernels"])})
    return out, {"canary": can, "fast_host": fast}


def round_d_moe_rows(profile: str = "h200") -> list[dict]:
    """Held out: transformers' Qwen3-MoE (Qwen3-30B-A3B shapes cut to its measured layers, static cache), kernels
    per step from round d's moe_counts.json (no timing of the whole eager step was kept there)."""
    from dataclasses import replace

    from simulator.model.costs import CostModel
    from simulator.model.models import PRESETS
    from simulator.model.profile import load_profile
    from simulator.model.workload import build_step, decode

    cm = CostModel(load_profile(profile))
    d = json.loads((HERE / "measured" / "h200-round-d" / "moe_counts.json").read_text())
    out = []
    for r in d.get("rows", []):
        if r.get("experts_impl") not in ("default", "grouped_mm") or "layers" not in r:
            continue  # batched_mm is another experts implementation than the recipe's grouped_mm
        m = replace(PRESETS["qwen3-30b-a3b"], num_hidden_layers=r["layers"])
        st = build_step(m, decode(r["batch"], 512), "none", "hf", max_cache_len=1024)
        k = cm.step_kernels(st.ops)
        out.append({"model": f"qwen3-30b-a3b ({r['layers']} layers, experts {r['experts_impl']})", "fit": False,
                    "cache": "static", "batch": r["batch"], "ctx": 512, "source": "round d moe_counts",
                    "kernels_predicted": k, "kernels_measured": r["kernels"], "kernels_error": _err(k, r["kernels"])})
    return out


NOTES = """## Notes

- Fit and held out. The recipe's op lists were built from round c's transformers Qwen3-0.6B traces; round f's
  gemma-2-2b trace fixed two sliding-window pieces (the static sliding mask is 12 kernels; a sliding layer's cache
  advances after its writes) and its eager timing is one of the two fits of the Python-per-call figure, so it is a
  fit model. Every other row is held out: qwen2's bias GEMMs (one addmm each), phi3's packed projections and
  pass-through cats, Llama / Mistral / Qwen3-4B layers were predicted from transformers' source before round f and
  match its traces kernel by kernel; phi3 also checks the sliding mask taken from gemma2.
- Kernels per step: the recipe's ops plus cuBLAS's split-K reduce kernels: the GEMM tables' counts for the shapes
  they hold (qwen3-0.6b's and llama3-8b's; mistral-7b shares llama3-8b's), the nearest table's count otherwise
  (simulator/model/gemm_model.py); the recipe's own ops match the traces exactly, the rest of the error is split-K.
- Full graph: where the profile's GEMM tables hold the model's shapes (qwen3-0.6b, llama3-8b, mistral-7b) the GEMMs
  are table lookups; the other models' (n, k) shapes are priced by simulator/model/gemm_model.py from the tables'
  own measured efficiencies (nearest shapes in log n*k and k/n; calibration/validation/gemm_fallback.md:
  leave-one-shape-out MAPE 12.0 % against 49.3 % for the roofline it replaced), and their split-K reduce counts
  from the nearest table that records them. Nothing there is fitted to these rows, except one binary choice of that
  split-K rule's distance weight, taken after seeing round f's kernel counts (gemm_fallback.md says so).
- Eager: transformers' Python is charged per host call (10.0 us, fitted on the two fit models in this process); the
  eager medians of one process move by up to 2x between neighbouring rows (round f README), so single rows miss by
  up to +-35 % while the MAPE over a model's four batches is 7-20 %. DynamicCache with cuDNN SDPA pays a cuDNN plan
  build per step (a new key length each step: 28.9 ms, fitted on qwen3-0.6b); the `dynamic_nocudnn` rows (flash
  SDPA) are another attention backend and are not priced here.
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m calibration.validate_impl")
    ap.add_argument("round_dir", nargs="?", default=str(HERE / "measured" / "h200-round-f"))
    ap.add_argument("--out", default=str(HERE / "validation" / "impl_hf"))
    ap.add_argument("--no-sequences", action="store_true")
    a = ap.parse_args(argv)
    d = Path(a.round_dir)
    fit_rows, fit_meta = round_c_rows()
    rs, meta = fit_rows + round_d_moe_rows(), fit_meta
    seqs = []
    if not a.no_sequences:
        from calibration.build_recipes import FIT as C_FIT
        from calibration.build_recipes import ROUND_C, compare
        from simulator.model.models import PRESETS

        for t, mname, c, b, x, slots in C_FIT:
            r = compare(ROUND_C / t, PRESETS[mname], c, b, x, slots)
            r.update(model=mname, cache=c, batch=b, fit=True)
            seqs.append(r)
    if (d / "hf_timing.json").is_file() or (d / "counts_hf.json").is_file():
        more, meta = rows(d)
        rs += more
        seqs += [] if a.no_sequences else sequences(d)
    else:
        print(f"{d}: no hf_timing.json or counts_hf.json (that round is not here): fit rows and round d only",
              file=sys.stderr)
    Path(a.out + ".md").write_text(markdown(rs, meta, seqs, d))
    Path(a.out + ".json").write_text(json.dumps({"rows": rs, "meta": meta, "sequences": [
        {k: v for k, v in s.items() if k not in ("measured", "recipe")} for s in seqs]}, indent=1))
    held = [r for r in rs if not r["fit"]]
    print(f"summary: {len(rs)} rows ({len(held)} held out); held-out MAPE kernels {mape(held, 'kernels_error')}, "
          f"eager {mape(held, 'eager_error')}, full {mape(held, 'full_error')}; sequences equal "
          f"{sum(bool(s.get('layer_equal') and s.get('preamble_equal') and s.get('tail_equal')) for s in seqs)}/{len(seqs)}; "
          f"wrote {a.out}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
