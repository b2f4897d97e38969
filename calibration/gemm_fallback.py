"""Leave-one-shape-out check of the GEMM fallback (simulator/model/gemm_model.py) on a profile's own GEMM tables:
each measured (n, k) is predicted from the other tables only (time per M, and the split-K kernel count per M), and
compared with its measurement; the roofline alone is listed for reference. CPU only.

    python -m calibration.gemm_fallback [--profile h200] [--round calibration/measured/h200-round-f]
                                        [--out DIR | --write-shipped]

Writes gemm_fallback.md to out/calibration, or DIR (`--write-shipped`: the committed calibration/validation one).

Then, as a held-out look only (nothing is fitted to it), each round-f transformers trace's GEMM kernel time per
step (cuBLAS / nvjet kernels, split-K reduces included; profiler on) against the `hf` recipe's GEMMs priced by the
profile with the fallback and with the roofline it replaces.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HERE = Path(__file__).parent


def loo(profile: str = "h200") -> dict:
    from simulator.model.costs import CostModel
    from simulator.model.gemm_model import MIN_DIM, GemmFallback
    from simulator.model.profile import load_profile

    cm = CostModel(load_profile(profile))
    tabs = [t for t in cm.profile.device.tables.gemm if t.n >= MIN_DIM and t.k >= MIN_DIM]
    rows = []
    for i, t in enumerate(tabs):
        fb = GemmFallback([u for j, u in enumerate(tabs) if j != i], cm.peak_flops, cm.bw)
        for g, (m, us) in enumerate(zip(t.m, t.us)):
            p = fb.time_s(t.n, t.k, m)
            r = fb.roofline_s(t.n, t.k, m)
            rows.append({"n": t.n, "k": t.k, "m": m, "us": us, "pred_us": None if p is None else p * 1e6,
                         "roof_us": r * 1e6, "kernels": None if t.kernels is None else t.kernels[g],
                         "pred_kernels": fb.kernels(t.n, t.k, m)})
    return {"profile": profile, "rows": rows}


def loo_grid(profile: str = "h200") -> dict | None:
    """Leave-one-shape-out over the profile's GEMM grid (round k): each grid (n, k) the tables lack predicted from
    the tables and the other grid rows; None where the profile has no grid."""
    from simulator.model.costs import CostModel
    from simulator.model.gemm_model import MIN_DIM, GemmFallback, grid_tables
    from simulator.model.profile import load_profile

    cm = CostModel(load_profile(profile))
    grid = cm.profile.device.tables.gemm_grid
    if grid is None:
        return None
    tabs = [t for t in cm.profile.device.tables.gemm if t.n >= MIN_DIM and t.k >= MIN_DIM]
    have = {(t.n, t.k) for t in tabs}
    gt = [t for key, t in grid_tables(grid).items() if key not in have]
    rows = []
    for i, t in enumerate(gt):
        fb = GemmFallback(tabs + gt[:i] + gt[i + 1:], cm.peak_flops, cm.bw)
        for g, (m, us) in enumerate(zip(t.m, t.us)):
            p = fb.time_s(t.n, t.k, m)
            rows.append({"n": t.n, "k": t.k, "m": m, "us": us, "pred_us": None if p is None else p * 1e6,
                         "roof_us": fb.roofline_s(t.n, t.k, m) * 1e6,
                         "kernels": None if t.kernels is None else t.kernels[g],
                         "pred_kernels": fb.kernels(t.n, t.k, m)})
    same = [(u, v) for key, t in grid_tables(grid).items() if key in have
            for u, v in zip(t.us, cm.gemm_table(*key).us)]
    return {"profile": profile, "rows": rows, "source": grid.source, "overlap": same,
            "overlap_shapes": sorted(k for k in grid_tables(grid) if k in have)}


def grid_report(res: dict) -> str:
    rows = res["rows"]
    ms = sorted({r["m"] for r in rows})
    L = ["", f"## Leave-one-shape-out on the GEMM grid ({res['source']})", "",
         f"The {len({(r['n'], r['k']) for r in rows})} grid shapes the tables lack, each predicted from the tables and "
         "the other grid rows (so from neighbours a whole grid step away: a shape between grid points has them half as "
         "far). The split-K count is read the same way.", "",
         *_summary(rows, ms)]
    kc = [r for r in rows if r["kernels"] is not None]
    split = [sum(r["kernels"] > 1 for r in kc if r["m"] == m) for m in ms]
    L.append("| shapes that split (measured) | " + " | ".join(str(v) for v in split) + f" | {sum(split)} |")
    ov = res["overlap"]
    if ov:
        L += ["", f"Same method, two machines: the {len(res['overlap_shapes'])} grid shapes the tables also hold "
              f"(round b's) differ by {_mape(ov):.1f} % MAPE over their {len(ov)} (shape, M) cells (grid against "
              "tables); the tables' figure is the one priced."]
    return "\n".join(L) + "\n"


def _summary(rows: list[dict], ms: list[int]) -> list[str]:
    """The summary table of leave-one-shape-out rows: MAPE of the fallback and the roofline per M, split-K right."""
    L = ["| M | " + " | ".join(str(m) for m in ms) + " | all |", "|---|" + "---:|" * (len(ms) + 1)]
    for label, key in (("fallback MAPE %", "pred_us"), ("roofline MAPE %", "roof_us")):
        per = [_mape([(r[key], r["us"]) for r in rows if r["m"] == m and r[key] is not None]) for m in ms]
        tot = _mape([(r[key], r["us"]) for r in rows if r[key] is not None])
        L.append(f"| {label} | " + " | ".join(f"{v:.1f}" for v in per) + f" | {tot:.1f} |")
    kc = [r for r in rows if r["kernels"] is not None]
    per = [sum(r["pred_kernels"] == r["kernels"] for r in kc if r["m"] == m) for m in ms]
    L.append("| split-K count right / shapes | " + " | ".join(
        f"{v}/{sum(1 for r in kc if r['m'] == m)}" for v, m in zip(per, ms)) + f" | {sum(per)}/{len(kc)} |")
    return L


def _mape(xs):
    return 100.0 * sum(abs(a - b) / b for a, b in xs) / len(xs) if xs else float("nan")


def report(res: dict) -> str:
    rows = res["rows"]
    ms = sorted({r["m"] for r in rows})
    shapes = sorted({(r["n"], r["k"]) for r in rows}, key=lambda s: (s[1], s[0]))
    L = [f"# GEMM fallback: leave-one-shape-out on profile `{res['profile']}`'s GEMM tables", "",
         "Each measured (n, k) predicted from the other tables only by simulator/model/gemm_model.py (slowdown over the",
         "roofline, inverse-distance mean of the 2 nearest tables in (ln nk, 0.25 ln k/n), floored at the fastest measured",
         "GEMM at that M; split-K count of the nearest counted table in (ln n, ln k)). Regenerate:",
         "`python -m calibration.gemm_fallback --write-shipped`.", "",
         *_summary(rows, ms)]
    L += ["", "Per shape: error % of the fallback at each M (measured µs in brackets at M = 1).", "",
          "| n | k | " + " | ".join(str(m) for m in ms) + " |", "|---:|---:|" + "---:|" * len(ms)]
    for n, k in shapes:
        rs = {r["m"]: r for r in rows if (r["n"], r["k"]) == (n, k)}
        cells = [f"{100 * (rs[m]['pred_us'] - rs[m]['us']) / rs[m]['us']:+.0f}" if m in rs and rs[m]["pred_us"]
                 else "—" for m in ms]
        cells[0] += f" ({rs[ms[0]]['us']:.1f})" if ms[0] in rs else ""
        L.append(f"| {n} | {k} | " + " | ".join(cells) + " |")
    return "\n".join(L) + "\n"


def traces(round_dir: Path, profile: str = "h200") -> list[dict]:
    import gzip
    import json
    import re

    from simulator.model.costs import CostModel
    from simulator.model.kernels import OpClass
    from simulator.model.models import load_model
    from simulator.model.profile import load_profile
    from simulator.model.workload import build_step, decode

    cm = CostModel(load_profile(profile))
    timing = {(r["model"], r["cache"], r["batch"]): r
              for r in json.loads((round_dir / "hf_timing.json").read_text())["rows"]}
    pat = re.compile(r"nvjet|gemm|gemv|splitK|cutlass|cublas", re.I)
    out = []
    for f in sorted((round_dir / "traces").glob("hf_*_static_b*.trace.json.gz")):
        model, b = re.match(r"hf_(.*)_static_b(\d+)\.trace", f.name).groups()
        r, cfg = timing.get((model, "static", int(b))), HERE / "configs" / "hf" / f"{model}.json"
        if r is None or not cfg.is_file():
            continue
        ev = json.loads(gzip.open(f).read())["traceEvents"]
        steps = sum(1 for e in ev if e.get("cat") == "user_annotation" and re.fullmatch(r"round_f_step\d+", e["name"]))
        meas = sum(e["dur"] for e in ev if e.get("cat") == "kernel" and pat.search(e["name"])
                   and "sdpa" not in e["name"]) / max(steps, 1)
        st = build_step(load_model(str(cfg)), decode(int(b), r["ctx"]), "none", "hf", cache="static",
                        max_cache_len=r.get("max_cache_len"))
        gem = [o for o in st.ops if o.op_class is OpClass.GEMM]
        miss = [o for o in gem if (o.dim("n"), o.dim("k")) not in cm._gemm]
        out.append({"model": model, "batch": int(b), "steps": steps, "meas_us": meas,
                    "pred_us": sum(cm.gpu_s(o) for o in gem) * 1e6,
                    "roof_us": sum(cm.roofline_s(o) if o in miss else cm.gpu_s(o) for o in gem) * 1e6,
                    "unmeasured": len({(o.dim("n"), o.dim("k")) for o in miss})})
    return out


def trace_report(rows: list[dict]) -> str:
    L = ["", "## Round f's transformers traces (held out: a look, nothing fitted)", "",
         "GEMM kernel time per step in each trace (profiler on; split-K reduces included) against the `hf` recipe's",
         "GEMMs priced by the profile: with the fallback, and with the roofline it replaces. Shapes the tables hold",
         "are priced identically by both (llama3-8b, qwen3-0.6b: the tables' own offset to a profiled trace).", "",
         "| model | batch | (n, k) not in the tables | trace ms | fallback ms (err) | roofline ms (err) |",
         "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        e = lambda v: 100 * (v - r["meas_us"]) / r["meas_us"]  # noqa: E731
        L.append(f"| {r['model']} | {r['batch']} | {r['unmeasured']} | {r['meas_us'] / 1e3:.3f} | "
                 f"{r['pred_us'] / 1e3:.3f} ({e(r['pred_us']):+.0f} %) | {r['roof_us'] / 1e3:.3f} ({e(r['roof_us']):+.0f} %) |")
    L += ["", "## Notes", "",
          "- Chosen on the tables only: W = 0.25, 2 neighbours, power 1 and the floor were the best of a 36-point grid",
          "  (W 0.25 / 0.5 / 1, power 1 / 2, 2-4 neighbours, floor on / off; a scratch loop over the module constants) by",
          "  the leave-one-shape-out MAPE above: 12.0-23.7 % over the grid (12.0-17.8 % with the floor). Worst cells: M <= 4 of k >= 2048, n <= 1024",
          "  (cuBLAS's gemv-like kernels at M = 1-4 run 7-13 us there, no neighbour predicts it) and 128 x 2048 (floor).",
          "- Split-K count: leave-one-shape-out cannot tell the aspect weight 1 from 2 (23 vs 21 of 165 cells wrong);",
          "  1 (plain distance in (ln n, ln k)) was taken after round f's held-out kernel counts had been seen (weight 2",
          "  splits llama-3.2-1b's 512 x 2048 and 2048 x 2048: held-out kernels MAPE 3.1 % against 0.8 %), so that one",
          "  binary choice is not held out. A GEMM's time does not depend on it (a table's time includes its reduce); a graph's",
          "  node count does (one more node per split-K call, simulator/engine/plan.py).",
          "- Shapes the tables hold are priced exactly as before (tests/model/test_gemm_model.py), and so is M outside",
          "  the tables' grid (the roofline). Held-out effect (calibration/validation/impl_hf.md, `--impl hf`):",
          "  full-graph MAPE 9.7 -> 2.6 %, kernels 1.8 -> 0.8 %, eager unchanged (16.9 %: host-bound)."]
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    from calibration.jsonio import add_out_args, out_dir

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="h200")
    ap.add_argument("--round", default=str(HERE / "measured" / "h200-round-f"))
    add_out_args(ap)
    a = ap.parse_args(argv)
    out = Path(out_dir(a, HERE.parent)) / "gemm_fallback.md"
    res = loo(a.profile)
    text = report(res)
    rd = Path(a.round)
    if (rd / "hf_timing.json").is_file() and (rd / "traces").is_dir():
        text += trace_report(traces(rd, a.profile))
    g = loo_grid(a.profile)
    if g is not None:
        text += grid_report(g)
    from simulator.common.jsonfile import atomic_write_text

    atomic_write_text(out, text)
    rows = res["rows"]
    print(f"summary: {len(rows)} (shape, M) cells; leave-one-shape-out MAPE fallback "
          f"{_mape([(r['pred_us'], r['us']) for r in rows if r['pred_us']]):.1f} %, roofline "
          f"{_mape([(r['roof_us'], r['us']) for r in rows]):.1f} %; wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
