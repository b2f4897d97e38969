"""Compiled steps on a moving host (issue 20): launchsim against round i's interleaved passes (CPU only):

    python -m calibration.validate_compiled_host [--out DIR | --write-shipped]

Round i (calibration/measured/h200-round-i, calibration/scripts/round_i.py job_host) timed eight decode steps in one
process, pass after pass (95 passes over ~3 minutes) while the VM's host flipped between its fast and slow states;
each row in each pass carries the tiny-op canary taken right before and right after it. Rows: the reference decoder
(calibration/reference_decoder.py) qwen3-0.6b eager b1, torch.compile(dynamic=False) b1 and b16, and 4 layers
compiled b1; the independent decoder (calibration/independent_decoder.py) qwen3-0.6b eager b1, compiled b1 and b16,
and llama-3.2-1b compiled b1; ctx 512.

Which rows are fitted: host.compiled_wrapper_us is fitted on the reference decoder's 28-layer compiled rows (b1, b16;
fast-host passes, with round b's rows: calibration/build_compiled.py). Those two rows are marked `fit`; every other
row is held out (the reference decoder at 4 layers, its eager row, and all of the independent decoder's).

Each steady pass (before / after canaries within 10 % of each other) is predicted as a user would ask, on its own host:

    launchsim predict --model qwen3-0.6b|calibration/configs/hf/llama-3.2-1b.json --fusion compiled|none \\
        --graph none --batch B --ctx 512 --no-compile-dynamic --host-canary-us C

(C = the mean of the row's two canaries; the reference rows at ctx 511: the reference decoder writes the new token
at slot ctx - 1). The 4-layer row is predicted from calibration/configs/hf/qwen3-0.6b.json with num_hidden_layers 4 (a temporary
copy). Reported per row:
passes, MAPE and mean error over fast-host passes (both canaries <= 7.6 us) and over the others, and the least-squares
line of step time against canary (how steeply the row follows the host). Writes DIR/compiled_host.json and .md
(default DIR out/calibration; --write-shipped: calibration/validation) and prints the markdown.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from calibration.build_compiled import FAST_US, ROW_AGREE
from calibration.jsonio import add_out_args, dump, out_dir

ROOT = Path(__file__).resolve().parent
RI = ROOT / "measured" / "h200-round-i"
LLAMA = str(ROOT / "configs" / "hf" / "llama-3.2-1b.json")
# row -> (model, fusion, batch, ctx, layers or None, fit)
ROWS = {
    "ref_eager_b1": ("qwen3-0.6b", "none", 1, 511, None, False),
    "ref_c28_b1": ("qwen3-0.6b", "compiled", 1, 511, None, True),
    "ref_c28_b16": ("qwen3-0.6b", "compiled", 16, 511, None, True),
    "ref_c4_b1": ("qwen3-0.6b", "compiled", 1, 511, 4, False),
    "ind_eager_b1": ("qwen3-0.6b", "none", 1, 512, None, False),
    "ind_c_b1": ("qwen3-0.6b", "compiled", 1, 512, None, False),
    "ind_c_b16": ("qwen3-0.6b", "compiled", 16, 512, None, False),
    "indl_c_b1": (LLAMA, "compiled", 1, 512, None, False),
}
TARGET_PCT = 15.0  # issue 20: compiled eager <= 15 % (independent decoder), judged on fast-host passes


def predicted_ms(row: str, canary_us: float, _memo: dict = {}) -> float:  # noqa: B006 (a per-process memo)
    key = (row, round(canary_us, 4))
    if key not in _memo:
        from simulator.config.predict import PredictScenario
        from simulator.studies.predict import run_predict

        model, fusion, b, ctx, layers, _ = ROWS[row]
        kw = {"model": model, "profile": "h200", "fusion": fusion, "graph": "none", "batch": b, "ctx": ctx,
              "host_canary_us": round(canary_us, 4)}
        if fusion == "compiled":
            kw["compile_dynamic"] = False
        if layers is not None:  # the preset's config.json cut to `layers` (the reference decoder's model_spec cut)
            kw["model"] = _cut_config(model, layers)
        _memo[key] = run_predict(PredictScenario(**kw))["step_ms"]
    return _memo[key]


def _cut_config(preset: str, layers: int) -> str:
    import tempfile

    cfg = json.loads((ROOT / "configs" / "hf" / f"{preset}.json").read_text())
    cfg["num_hidden_layers"] = layers
    f = Path(tempfile.mkdtemp(prefix="launchsim-cut-")) / f"{preset}-{layers}l.json"
    f.write_text(json.dumps(cfg))
    return str(f)


def passes(host: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {k: [] for k in ROWS}
    for ps in host["passes"]:
        for r in ps["rows"]:
            a, b = r["canary_before_us"], r["canary_after_us"]
            if r["row"] not in ROWS or abs(a / b - 1) > ROW_AGREE:
                continue
            c = 0.5 * (a + b)
            p = predicted_ms(r["row"], c)
            m = r["step_ms"]["median"]
            out[r["row"]].append({"pass": ps["pass"], "canary_us": c, "fast": max(a, b) <= FAST_US, "measured_ms": m,
                                  "predicted_ms": p, "err_pct": 100.0 * (p - m) / m})
    return out


def _line(xs, ys) -> tuple[float, float]:
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return b, my - b * mx


def summary(by_row: dict[str, list[dict]]) -> list[dict]:
    out = []
    for row, ps in by_row.items():
        fast = [p for p in ps if p["fast"]]
        slow = [p for p in ps if not p["fast"]]

        def mape(xs):
            return statistics.fmean(abs(p["err_pct"]) for p in xs) if xs else None

        def bias(xs):
            return statistics.fmean(p["err_pct"] for p in xs) if xs else None
        slope, icpt = _line([p["canary_us"] for p in ps], [p["measured_ms"] for p in ps]) if len(ps) > 1 else (0, 0)
        out.append({"row": row, "fit": ROWS[row][5], "model": "llama-3.2-1b" if ROWS[row][0] == LLAMA else ROWS[row][0], "fusion": ROWS[row][1],
                    "batch": ROWS[row][2], "passes": len(ps), "fast_passes": len(fast),
                    "fast_median_ms": statistics.median(p["measured_ms"] for p in fast) if fast else None,
                    "fast_mape_pct": mape(fast), "fast_bias_pct": bias(fast), "other_mape_pct": mape(slow),
                    "other_bias_pct": bias(slow), "all_mape_pct": mape(ps),
                    "slope_ms_per_us": slope, "intercept_ms": icpt})
    return out


def report(d: Path = RI) -> dict:
    host = json.loads((d / "host.json").read_text())
    by_row = passes(host)
    s = summary(by_row)
    held = [p for r in s if not r["fit"] and r["fusion"] == "compiled" for p in by_row[r["row"]]]
    ind = [p for r in s if r["row"].startswith("ind") and r["fusion"] == "compiled" for p in by_row[r["row"]]]
    agg = {
        "held_out_compiled_fast_mape_pct": statistics.fmean(abs(p["err_pct"]) for p in held if p["fast"]),
        "held_out_compiled_all_mape_pct": statistics.fmean(abs(p["err_pct"]) for p in held),
        "independent_compiled_fast_mape_pct": statistics.fmean(abs(p["err_pct"]) for p in ind if p["fast"]),
        "independent_compiled_all_mape_pct": statistics.fmean(abs(p["err_pct"]) for p in ind),
    }
    return {"profile": "h200", "measured": str(d.relative_to(ROOT.parent)), "canary": host.get("canary"),
            "passes_total": len(host["passes"]), "rows": s, "aggregate": agg, "target_pct": TARGET_PCT,
            "passes": by_row}


def _f(v, fmt="{:.1f}") -> str:
    return "—" if v is None else fmt.format(v)


def markdown(rep: dict) -> str:
    a = rep["aggregate"]
    lines = [
        "# Compiled steps on a moving host: round i (issue 20)", "",
        f"Written by `python -m calibration.validate_compiled_host --write-shipped` from {rep['measured']} (README "
        "there: the run, versions, canaries); the module docstring says how each pass is predicted. Profile h200. "
        f"{rep['passes_total']} passes in one timing process; its start / end canaries "
        f"{rep['canary']['host_start_us']:.2f} / {rep['canary']['host_end_us']:.2f} us (the host moved between its "
        "fast and slow states during the run, as intended: every row carries its own canaries). A pass counts when "
        f"its row's two canaries agree within {ROW_AGREE:.0%}; fast host: both <= {FAST_US} us.", "",
        "| row | fit | model | fusion | batch | passes (fast) | fast-host median ms | fast MAPE % (mean err) | "
        "other MAPE % (mean err) | all MAPE % | step vs canary: ms per us, intercept ms |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rep["rows"]:
        lines.append(
            f"| {r['row']} | {'fit' if r['fit'] else 'held out'} | {r['model']} | {r['fusion']} | {r['batch']} | "
            f"{r['passes']} ({r['fast_passes']}) | {_f(r['fast_median_ms'], '{:.3f}')} | {_f(r['fast_mape_pct'])} "
            f"({_f(r['fast_bias_pct'], '{:+.1f}')}) | {_f(r['other_mape_pct'])} ({_f(r['other_bias_pct'], '{:+.1f}')})"
            f" | {_f(r['all_mape_pct'])} | {r['slope_ms_per_us']:.3f}, {r['intercept_ms']:+.2f} |")
    ok = a["independent_compiled_fast_mape_pct"] <= rep["target_pct"]
    lines += [
        "", "| group | MAPE % fast-host passes | MAPE % all steady passes |", "|---|---:|---:|",
        f"| held out, compiled (reference 4 layers + independent decoder) | {a['held_out_compiled_fast_mape_pct']:.1f} "
        f"| {a['held_out_compiled_all_mape_pct']:.1f} |",
        f"| independent decoder, compiled | {a['independent_compiled_fast_mape_pct']:.1f} | "
        f"{a['independent_compiled_all_mape_pct']:.1f} |", "",
        f"Target (issue 20): compiled eager <= {rep['target_pct']:.0f} % on the independent decoder, predicted on each "
        f"pass's own host: fast-host passes {a['independent_compiled_fast_mape_pct']:.1f} % — "
        f"{'met' if ok else 'NOT met'} (all steady passes {a['independent_compiled_all_mape_pct']:.1f} %).", "",
        "Notes:", "",
        "- Every compiled row follows the host: step time against the row canary has correlation 0.85-0.91 in "
        "round_i's summary (calibration/measured/h200-round-i/summary.json), slow / fast medians 1.5-1.6x. Round h's "
        "reading that compiled steps did not slow with the canary came from rows inside the fast state only, where "
        "the canary's own spread (6.5-7.6 us) is mostly noise: there the old wrapper figure (7.04 us a kernel, "
        "fitted on one round-b row) made the canary-scaled prediction 20-25 % high on the reference decoder itself.",
        "- The steps rise faster than the canary (a line with a negative intercept, not a proportion): "
        "the slow state costs compiled steps ~1.55x where the canary moves ~1.4x; launchsim scales the host lane "
        "in proportion to the canary (model/profile.host_scaled), so slow-host passes come out a few per cent low "
        "and fast ones a few per cent high. The per-row lines are in the table; nothing is fitted on them.",
        "- ind_eager_b1 is not a like-for-like check: `--fusion none` prices the reference decoder's op list "
        "(1,615 kernels at b1) against this code's 1,124 (round h's counts; its layer has no hand-written RMSNorm "
        "chain); it is shown for the host behaviour of an eager step, not scored.",
        "- host.compiled_wrapper_us is now the mean of two machines (rounds b and i, their reference rows): "
        "round i's machine ran the same compiled step ~15 % faster than round b's at the same canary, so each "
        "round's rows sit on either side of the fitted figure (this table's fit rows: + on the fast passes).",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="launchsim against round i's compiled steps on a moving host (CPU only)")
    add_out_args(ap)
    a = ap.parse_args(argv)
    d = Path(out_dir(a, ROOT.parent))
    d.mkdir(parents=True, exist_ok=True)
    rep = report()
    md = markdown(rep)
    dump(rep, d / "compiled_host.json")
    tmp = d / "compiled_host.md.tmp"
    tmp.write_text(md)
    tmp.replace(d / "compiled_host.md")
    print(md)
    print(f"wrote {d / 'compiled_host.json'} and {d / 'compiled_host.md'}")


if __name__ == "__main__":
    main()
