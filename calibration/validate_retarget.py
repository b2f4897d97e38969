"""Traces that retarget, validated on measured H200 steps: writes trace_retarget.md (out/calibration, or DIR;
`--write-shipped`: the committed calibration/validation/trace_retarget.md).

    python -m calibration.validate_retarget [--out DIR | --write-shipped]

Each row imports one committed torch.profiler trace (simulator/traces/workload.py), re-prices it at another
batch / context (simulator/traces/retarget.py) and predicts the full-graph step (`predict --workload W --batch N
--ctx C --graph full`), against the full-graph step measured in a clean timing process (no profiler) of the same
model and implementation:
- transformers' Qwen3-0.6B, static cache (round c: traces at batch 1 and 8, cache 576; timed rows at batch 1
  and 8 with max_cache_len 1024, so `--ctx 1024`: a static cache attends over every slot);
- launchsim's reference decoder (round a trace at batch 1, ctx 512, no recorded shapes: imported with the
  qwen3-0.6b preset as its model) against rounds b and c (batches 1-512, ctx 512);
- round f (calibration/measured/h200-round-f, when present): every `hf_*_b1*.trace.json.gz` with a timed row of
  the same model at other batches.
Also per class: the b1 trace re-priced at batch 8 against the b8 trace's own kernels (GPU µs by aten op).
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent
MEASURED = ROOT / "measured"
NAME = "trace_retarget.md"


def _full(row: dict) -> float | None:
    try:
        return float(row["full"]["isolated"]["step_ms"]["p50"])
    except (KeyError, TypeError):
        return None


def _predict(wl, batch, ctx, graph="full"):
    from simulator.traces.predict import predict_workload

    p, wi, _ = predict_workload(wl, batch, ctx, "none", graph)
    return p.result.step_s * 1e3, p.result.kernels, wi


def hf_round_c() -> list[dict]:
    from simulator.traces.workload import workload_from_trace

    t = json.loads((MEASURED / "h200-round-c" / "timing.json").read_text())
    rows = []
    wls = {b: workload_from_trace(MEASURED / "h200-round-c" / f"hf_qwen3-0.6b_static_b{b}.trace.json.gz")[0]
           for b in (1, 8)}
    for r in t.get("hf", []):
        m = _full(r)
        if m is None:
            continue
        for tb, wl in wls.items():
            pred, kern, wi = _predict(wl, r["batch"], r["max_cache_len"])
            rows.append({"set": "hf qwen3-0.6b static (round c)", "trace": f"b{tb} ctx {wl.ctx}",
                         "batch": r["batch"], "ctx": r["max_cache_len"], "measured_ms": m, "pred_ms": pred,
                         "kernels": kern, "dropped": sum("dropped" in n for n in wi.notes)})
    return rows


def reference_rounds() -> list[dict]:
    from simulator.traces.workload import workload_from_trace

    wl, _ = workload_from_trace(MEASURED / "h200-round-a" / "ref_qwen3-0.6b_none_b1_ctx512.trace.json.gz", batch=1,
                                model="qwen3-0.6b", ctx=512)
    rows = []
    for rnd in ("h200-round-b", "h200-round-c"):
        t = json.loads((MEASURED / rnd / "timing.json").read_text())
        for r in t["rows"]:
            m = _full(r)
            if r["model"] != "qwen3-0.6b" or r["fusion"] != "none" or r["ctx"] != 512 or m is None:
                continue
            pred, kern, _ = _predict(wl, r["batch"], 512)
            rows.append({"set": f"reference decoder, no shapes, model qwen3-0.6b ({rnd})", "trace": "b1 ctx 512",
                         "batch": r["batch"], "ctx": 512, "measured_ms": m, "pred_ms": pred, "kernels": kern})
    return rows


def _graph_ms(row: dict) -> float | None:
    """A round-f timing row's full-graph step (graph_ms.median), or a round-c style row's isolated p50."""
    g = row.get("graph_ms")
    if isinstance(g, dict) and isinstance(g.get("median"), (int, float)):
        return float(g["median"])
    return _full(row)


def strip_shapes(tr: Path, tmp: Path) -> Path:
    """The trace with every recorded input shape removed (a trace taken without record_shapes)."""
    import gzip

    raw = json.loads(gzip.decompress(tr.read_bytes()))
    for e in raw["traceEvents"]:
        if isinstance(e.get("args"), dict):
            e["args"].pop("Input Dims", None)
    out = tmp / tr.name.replace(".json.gz", ".noshapes.json")
    out.write_text(json.dumps(raw))
    return out


def _import(tr: Path, stripped: bool, short: str, tmp: Path):
    from simulator.traces.workload import workload_from_trace

    if not stripped:
        return workload_from_trace(tr)[0]
    return workload_from_trace(strip_shapes(tr, tmp), batch=1, model=str(ROOT / "configs" / "hf" / f"{short}.json"),
                               ctx=640)[0]


def round_f(stripped: bool = False) -> list[dict]:
    """Round f (calibration/scripts/round_f.py): every HF batch-1 trace (traces/hf_MODEL_CACHE_b1.trace.json.gz,
    static cache 640 = ctx 512 + room 128) against hf_timing.json's full-graph rows of the same model and cache at
    every timed batch (1, 8, 32, 64), re-priced at the row's batch and cache length. `stripped`: the traces with
    their recorded shapes removed, imported with the model's published config (calibration/configs/hf), batch 1
    and ctx 640 (the route of a trace taken without record_shapes)."""
    import tempfile

    from simulator.common.errors import UserError

    d = MEASURED / "h200-round-f"
    if not d.exists():
        return []
    timed = []
    for f in sorted(p for p in d.rglob("hf_timing*.json") if "quick" not in p.parts):
        try:
            t = json.loads(f.read_text())
        except ValueError:
            continue
        timed += [r for r in (t.get("rows", []) if isinstance(t, dict) else []) if isinstance(r, dict)]
    counts = {}
    cf = d / "counts_hf.json"
    if cf.exists():
        for r in json.loads(cf.read_text()).get("rows", []):
            ls = r.get("last_step") or {}
            if "kernels" in ls:
                counts[(r.get("model"), r.get("cache"), r.get("batch"))] = (ls["kernels"] + ls.get("memsets", 0)
                                                                         + ls.get("memcpys", 0))
    rows = []
    for tr in sorted(p for p in d.rglob("hf_*_b1.trace.json.gz") if "quick" not in p.parts):
        m = re.match(r"hf_(.+)_(static|dynamic)_b1\.trace\.json\.gz$", tr.name)
        if not m:
            continue
        short, cache = m.groups()
        try:
            with tempfile.TemporaryDirectory() as tmp:
                wl = _import(tr, stripped, short, Path(tmp))
        except UserError as e:
            rows.append({"set": f"round f {short} {cache}", "trace": tr.name, "error": str(e)})
            continue
        for r in timed:
            ms = _graph_ms(r)
            if r.get("model") != short or r.get("cache") != cache or ms is None:
                continue
            ctx = r.get("max_cache_len") or wl.ctx
            try:
                pred, kern, _ = _predict(wl, r["batch"], ctx)
            except UserError as e:
                rows.append({"set": f"round f {short} {cache}", "trace": tr.name, "batch": r.get("batch"),
                             "error": str(e)})
                continue
            rows.append({"set": f"round f {short} {cache}", "trace": f"b1 ctx {wl.ctx}", "batch": r["batch"],
                         "ctx": ctx, "measured_ms": ms, "pred_ms": pred, "kernels": kern,
                         "measured_kernels": counts.get((short, cache, r["batch"]))})
    return rows


def gpu_sums_b8() -> list[dict]:
    """Round f, per model: the b1 trace re-priced at batch 8 (with its recorded shapes, and stripped of them with
    the config) against the b8 trace's own GPU sum (same cache of 640 slots): the kernel side alone, no host."""
    import tempfile

    from simulator.model.costs import CostModel
    from simulator.model.profile import load_profile
    from simulator.traces.retarget import retarget
    from simulator.traces.workload import workload_from_trace

    d = MEASURED / "h200-round-f" / "traces"
    if not d.exists():
        return []
    costs = CostModel(load_profile(None))
    out = []
    for tr in sorted(d.glob("hf_*_static_b1.trace.json.gz")):
        short = re.match(r"hf_(.+)_static_b1", tr.name).group(1)
        t8 = d / tr.name.replace("_b1.", "_b8.")
        if not t8.exists():
            continue
        w8 = workload_from_trace(t8)[0]
        row = {"model": short, "b1": sum(k.gpu_us for k in workload_from_trace(tr)[0].kernels),
               "b8": sum(k.gpu_us for k in w8.kernels)}
        with tempfile.TemporaryDirectory() as tmp:
            for key, stripped in (("shaped", False), ("stripped", True)):
                r = retarget(_import(tr, stripped, short, Path(tmp)), costs, 8, None)
                row[key] = sum(r.gpu_us)
                row[key + "_recipe"] = r.roles.get("recipe", 0)
        out.append(row)
    return out


def dynamic_totals() -> tuple:
    """The DynamicCache traces (round c, b1 and b8): GPU sums and kernel counts, b1 re-priced at batch 8."""
    from simulator.model.costs import CostModel
    from simulator.model.profile import load_profile
    from simulator.traces.retarget import retarget
    from simulator.traces.workload import workload_from_trace

    w1 = workload_from_trace(MEASURED / "h200-round-c" / "hf_qwen3-0.6b_dynamic_b1.trace.json.gz")[0]
    w8 = workload_from_trace(MEASURED / "h200-round-c" / "hf_qwen3-0.6b_dynamic_b8.trace.json.gz")[0]
    r = retarget(w1, CostModel(load_profile(None)), 8, w8.ctx)
    return (sum(k.gpu_us for k in w1.kernels), sum(r.gpu_us), sum(k.gpu_us for k in w8.kernels), len(w1.kernels),
            len(r.kernels), len(w8.kernels), w1.ctx, w8.ctx)


def per_class() -> list[tuple]:
    from simulator.model.costs import CostModel
    from simulator.model.profile import load_profile
    from simulator.traces.retarget import retarget
    from simulator.traces.shapes import label
    from simulator.traces.workload import workload_from_trace

    w1 = workload_from_trace(MEASURED / "h200-round-c" / "hf_qwen3-0.6b_static_b1.trace.json.gz")[0]
    w8 = workload_from_trace(MEASURED / "h200-round-c" / "hf_qwen3-0.6b_static_b8.trace.json.gz")[0]
    r = retarget(w1, CostModel(load_profile(None)), 8, None)
    agg = defaultdict(lambda: [0.0, 0.0, 0.0, 0, 0])
    for k in w1.kernels:
        agg[label(k)][0] += k.gpu_us
        agg[label(k)][3] += 1
    for k, us in zip(r.kernels, r.gpu_us):
        agg[label(k)][1] += us
    for k in w8.kernels:
        agg[label(k)][2] += k.gpu_us
        agg[label(k)][4] += 1
    rows = sorted(agg.items(), key=lambda kv: -abs(kv[1][1] - kv[1][2]))
    total = (sum(k.gpu_us for k in w1.kernels), sum(r.gpu_us), sum(k.gpu_us for k in w8.kernels),
             len(w1.kernels), len(w8.kernels), len(r.kernels))
    return rows, total


def _err(r):
    return 100 * (r["pred_ms"] / r["measured_ms"] - 1)


def report() -> str:
    hf, ref, rf, rfs = hf_round_c(), reference_rounds(), round_f(), round_f(stripped=True)
    cls, tot = per_class()
    L = ["# Traces that retarget: imported steps re-priced at other batches and contexts",
         "",
         "Generated by `python -m calibration.validate_retarget --write-shipped` (calibration/validate_retarget.py). "
         "A traced kernel's time is re-priced as traced x model(new shape) / model(traced shape) (simulator/traces/"
         "retarget.py); predicted full-graph step (`predict --workload W --batch N --ctx C --graph full`, profile "
         "h200) against the full-graph step measured in a clean timing process (isolated, p50). Target (issue 20): "
         "a batch-1 trace retargeted to batches 8 and 32, full graph within 7 %.", ""]
    for name, rows in (("transformers Qwen3-0.6B, static cache, traces and timings of round c", hf),
                       ("launchsim's reference decoder: round a trace without recorded shapes, shapes from the "
                        "qwen3-0.6b preset", ref), ("round f", rf),
                       ("round f, the same traces with their recorded shapes removed, imported with each model's "
                        "config (batch 1, ctx 640)", rfs)):
        L += [f"## {name}", ""]
        if not rows:
            L += ["(no data: calibration/measured/h200-round-f is not on this branch yet)", ""]
            continue
        ok = [r for r in rows if "error" not in r]
        if ok:
            mape = statistics.mean(abs(_err(r)) for r in ok)
            off = [r for r in ok if r["batch"] != 1 or "b1" not in r["trace"]]
            L += [f"MAPE {mape:.1f} % over {len(ok)} rows" + (f"; retargeted rows (other batch than traced) "
                  f"{statistics.mean(abs(_err(r)) for r in off):.1f} %" if off else ""), ""]
            by_b = {}
            for r in off:
                by_b.setdefault(r["batch"], []).append(r)
            if len(by_b) > 1:
                L += ["Retargeted rows by batch: " + "; ".join(
                    f"batch {b}: MAPE {statistics.mean(abs(_err(r)) for r in rs):.1f} %, "
                    f"{sum(abs(_err(r)) <= 7 for r in rs)}/{len(rs)} within 7 %" for b, rs in sorted(by_b.items())), ""]
            L += ["| set | trace | batch | ctx | measured ms | predicted ms | error | kernels (measured) |",
                  "|---|---|---|---|---|---|---|---|"]
            for r in ok:
                mk = r.get("measured_kernels")
                L.append(f"| {r['set']} | {r['trace']} | {r['batch']} | {r['ctx']} | {r['measured_ms']:.3f} | "
                         f"{r['pred_ms']:.3f} | {_err(r):+.1f} % | {r['kernels']}"
                         + (f" ({mk})" if mk is not None else "") + " |")
        for r in rows:
            if "error" in r:
                L.append(f"- {r['trace']} batch {r.get('batch', '')}: refused: {r['error']}")
        L.append("")
    L += ["## Per aten op: the b1 trace at batch 8 against the b8 trace (round c, cache 576, GPU µs per step)", "",
          f"Kernels: traced b1 {tot[3]}, retargeted {tot[5]}, traced b8 {tot[4]} (cuDNN's split-KV combine, 28 per "
          f"step at batch 1, is dropped at 8 x 16 KV heads: repeat_kv hands SDPA every head). GPU sum: b1 {tot[0]:.1f}, retargeted {tot[1]:.1f}, "
          f"b8 {tot[2]:.1f} ({100 * (tot[1] / tot[2] - 1):+.1f} %).", "",
          "| aten op | kernels b1 | b1 µs | retargeted µs | b8 µs | error µs |", "|---|---|---|---|---|---|"]
    for name, (a, b, c, n1, _n8) in cls[:12]:
        L.append(f"| {name} | {n1} | {a:.1f} | {b:.1f} | {c:.1f} | {b - c:+.1f} |")
    L += ["", "Round f (eight transformers decoders, static cache 640): batch-1 traces retargeted to batches 8 and 32 "
          "land within 7 % for 6 of 8 models at each; Phi-3-mini and Qwen2-1.5B miss (-10 % to -14 %): their "
          "small elementwise and norm kernels (mul, mean over [b, 1, 3072] fp32, silu) grow 1.4-2x from batch 1 to "
          "8 where the byte curves say a few per cent, and their GEMM shapes (hidden 1536 / 3072) have no profile "
          "table, so the roofline ratio is used and the split-K kernel count is not followed (Phi-3 measured 1536 "
          "and 1504 kernels at batch 32/64, retargeted 1568; Qwen3-4B 2367 at batch 64, retargeted 2404). At "
          "batch 64, llama3-8b, Mistral-7B and Qwen3-4B fall 13-16 % short: the step is then dominated by the "
          "repeat_kv copies over the static cache (19 ms of the predicted 30 ms for llama3-8b), extrapolated "
          "from a 10 MB copy at batch 1 to 670 MB; no batch-64 trace was kept to split the error by op."]
    sums = gpu_sums_b8()
    if sums:
        def e(a, b):
            return 100 * (a / b - 1)

        L += ["", "### Round f, kernels only: each b1 trace re-priced at batch 8 against the b8 trace's GPU sum", "",
              "With recorded shapes the small kernels are priced by their own shapes and the byte curves; without "
              "them (stripped, imported with the config) the calls are aligned with the `hf` recipe and priced by "
              "its ops (simulator/traces/align.py; `recipe` kernels). The attention call is priced at the K/V "
              "heads SDPA gets after transformers' repeat_kv (every query head: the recipe's `sdpa_kv_heads`), as a "
              "recorded trace's shapes say; until 2026-12-03 a stripped trace priced it at the config's KV heads, "
              "whose table grows more slowly with batch (stripped rows above: batch 32 MAPE 12.2 -> 7.5 %, batch 64 "
              "12.9 -> 7.2 %, batch 8 7.6 -> 5.0 %).", "",
              "| model | b1 µs | b8 trace µs | shaped -> b8 µs (err) | stripped -> b8 µs (err) | recipe kernels |",
              "|---|---:|---:|---:|---:|---:|"]
        for r in sums:
            L.append(f"| {r['model']} | {r['b1']:.1f} | {r['b8']:.1f} | {r['shaped']:.1f} ({e(r['shaped'], r['b8']):+.1f} %)"
                     f" | {r['stripped']:.1f} ({e(r['stripped'], r['b8']):+.1f} %) | {r['stripped_recipe']} |")
        L.append(f"| mean absolute error | | | {statistics.mean(abs(e(r['shaped'], r['b8'])) for r in sums):.1f} % | "
                 f"{statistics.mean(abs(e(r['stripped'], r['b8'])) for r in sums):.1f} % | |")
    dy = dynamic_totals()
    L += ["", f"DynamicCache traces (round c, no timed rows): b1 (ctx {dy[6]}) re-priced at batch 8 (ctx {dy[7]}): "
          f"GPU {dy[1]:.1f} µs against the b8 trace's {dy[2]:.1f} ({100 * (dy[1] / dy[2] - 1):+.1f} %), kernels "
          f"{dy[4]} against {dy[5]} (cuDNN keeps its split-KV combine at 8 x 8 KV heads: enable_gqa, no repeat_kv). "
          "The growing cache's torch.cat copies (1 -> 8 sequences: 2.5x measured, 2.0x by the copy curve) add to "
          "the small-elementwise shortfall."]
    L += ["", "Where the error comes from: small broadcasting elementwise kernels (aten::mul on [b, 1, 1024] x "
          "[b, 1, 1], aten::to, cat, neg) grow by ~15-30 % from batch 1 to 8 where the profile's byte curves are "
          "flat at those sizes (a few KB), and some switch to a slower non-vectorised kernel at batch 8: kernel "
          "choices the curves do not hold. The repeat_kv copies over the static cache (aten::reshape -> copy_) "
          "and the GEMMs (cuBLAS picks a faster kernel at m >= 4 for the 1024-wide projections, as the profile's "
          "table records) follow the tables. Every round-c timing row used max_cache_len 1024 while the traces "
          "used 576, so every row above is also a context retarget (a static cache attends over every slot). "
          "The reference-decoder trace was taken on another H200 VM (round a) than the timings (rounds b, c): "
          "its batch-1 row is that machine difference. Its non-GEMM kernels align with the reference recipe's ops "
          "and are re-priced by them (simulator/traces/align.py); taken as hidden-sized activations, as before that "
          "alignment, they under-state the growth with batch (the MLP's 3072-wide and fp32 intermediates are "
          "larger, the row mean steps with rows).", ""]
    return "\n".join(L) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    from simulator.common.jsonfile import atomic_write_text

    from .jsonio import add_out_args, out_dir

    ap = argparse.ArgumentParser(prog="python -m calibration.validate_retarget")
    add_out_args(ap)
    out = Path(out_dir(ap.parse_args(argv), ROOT.parent)) / NAME
    text = report()
    atomic_write_text(out, text)
    for ln in text.splitlines():
        if ln.startswith("## ") or ln.startswith("MAPE") or ln.startswith("Kernels:"):
            print(ln)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
