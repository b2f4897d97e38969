"""Leave-one-shape-out check of the GEMM fallback (simulator/model/gemm_model.py) on a profile's own GEMM tables:
each measured (n, k) is predicted from the other tables only (time per M, and the split-K kernel count per M), and
compared with its measurement; the roofline alone is listed for reference. CPU only.

    python -m calibration.gemm_fallback [--profile h200] [--out calibration/validation/gemm_fallback.md]
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
         "`python -m calibration.gemm_fallback`.", "",
         "| M | " + " | ".join(str(m) for m in ms) + " | all |", "|---|" + "---:|" * (len(ms) + 1)]
    for label, key in (("fallback MAPE %", "pred_us"), ("roofline MAPE %", "roof_us")):
        per = [_mape([(r[key], r["us"]) for r in rows if r["m"] == m and r[key] is not None]) for m in ms]
        tot = _mape([(r[key], r["us"]) for r in rows if r[key] is not None])
        L.append(f"| {label} | " + " | ".join(f"{v:.1f}" for v in per) + f" | {tot:.1f} |")
    kc = [r for r in rows if r["kernels"] is not None]
    per = [sum(r["pred_kernels"] == r["kernels"] for r in kc if r["m"] == m) for m in ms]
    L.append("| split-K count right / shapes | " + " | ".join(
        f"{v}/{sum(1 for r in kc if r['m'] == m)}" for v, m in zip(per, ms)) +
        f" | {sum(per)}/{len(kc)} |")
    L += ["", "Per shape: error % of the fallback at each M (measured µs in brackets at M = 1).", "",
          "| n | k | " + " | ".join(str(m) for m in ms) + " |", "|---:|---:|" + "---:|" * len(ms)]
    for n, k in shapes:
        rs = {r["m"]: r for r in rows if (r["n"], r["k"]) == (n, k)}
        cells = [f"{100 * (rs[m]['pred_us'] - rs[m]['us']) / rs[m]['us']:+.0f}" if m in rs and rs[m]["pred_us"]
                 else "—" for m in ms]
        cells[0] += f" ({rs[ms[0]]['us']:.1f})" if ms[0] in rs else ""
        L.append(f"| {n} | {k} | " + " | ".join(cells) + " |")
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="h200")
    ap.add_argument("--out", default=str(HERE / "validation" / "gemm_fallback.md"))
    a = ap.parse_args(argv)
    res = loo(a.profile)
    text = report(res)
    Path(a.out).write_text(text)
    rows = res["rows"]
    print(f"summary: {len(rows)} (shape, M) cells; leave-one-shape-out MAPE fallback "
          f"{_mape([(r['pred_us'], r['us']) for r in rows if r['pred_us']]):.1f} %, roofline "
          f"{_mape([(r['roof_us'], r['us']) for r in rows]):.1f} %; wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
