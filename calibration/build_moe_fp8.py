"""Profile sections for FP8 and MoE kernels from calibration/scripts/moe_fp8.py's output (CPU only, no torch):

    from calibration.build_moe_fp8 import moe_fp8_tables, derive_h100_moe

`moe_fp8_tables(raw)` -> the `device.tables` entries (simulator/model/profile_moe.py):
- `gemm_fp8`: per (n, k), `fp8_tensor_us` (torch._scaled_mm, e4m3, PER-TENSOR fp32 scales, bf16 out) on the
  table grid M only: the held-out M (`fp8_gemm.held_out_m`) are dropped here and used only by
  calibration/validate_moe_fp8.py. Times are per node of identical back-to-back nodes in a replayed graph, the
  same measure as the bf16 `gemm` tables (calibration/tables.graph_op_us), so they are stored as they are;
- `gemm_bf16_extra`: the bf16 rows (`bf16_us`, grid M) of shapes the profile's bf16 table lacks (the MoE
  router and expert shapes), for make_profiles to append to `gemm`;
- `fp8_quant`: abs-max and scale + cast µs per (k, m);
- `grouped_gemm`: the `controlled` rows (the first e experts get t tokens each) as an experts x tokens grid;
- `moe_routing`: router kernel µs per decode batch.
`derive_h100_moe(p)`: the same datasheet ratio as build_profile.derive_h100 (HBM 3.35 vs 4.8 TB/s) on the
bandwidth-bound part of each new table above its floor; the routing table (latency-bound) unchanged.
"""

from __future__ import annotations

SOURCE = "calibration/measured/h200-round-d/moe_fp8.json"


def fp8_gemm_rows(raw: dict, key: str = "fp8_tensor_us", held_out: bool = False) -> list[dict]:
    """Rows {n, k, m, us} of one column of `fp8_gemm` on the grid M (or only the held-out M)."""
    f = raw["fp8_gemm"]
    ho = set(f["held_out_m"])
    out = []
    for r in f["rows"]:
        pts = [(m, u) for m, u in zip(r["m"], r[key]) if u is not None and ((m in ho) == held_out)]
        if pts:
            out.append({"n": r["n"], "k": r["k"], "m": [m for m, _ in pts], "us": [u for _, u in pts]})
    return out


def grouped_rows(raw: dict) -> list[dict]:
    out = []
    for g in raw["grouped_gemm"]["gemms"]:
        es = sorted({r["experts"] for r in g["controlled"]})
        ts = sorted({r["tokens_per_expert"] for r in g["controlled"]})
        at = {(r["experts"], r["tokens_per_expert"]): r["us"] for r in g["controlled"]}
        out.append({"name": g["name"], "n": g["n"], "k": g["k"], "experts": es, "tokens_per_expert": ts,
                    "us": [[at[(e, t)] for t in ts] for e in es],
                    "source": f"{SOURCE} grouped_gemm controlled rows (torch._grouped_mm, bf16)"})
    return out


def moe_fp8_tables(raw: dict, have_bf16: set | None = None) -> dict:
    have = have_bf16 or set()
    rout = sorted(raw["routing"], key=lambda r: r["batch"])
    cols = ("softmax_us", "topk_us", "argsort_us", "gather_us", "scatter_add_us", "renorm_us")
    return {
        "gemm_fp8": fp8_gemm_rows(raw),
        "gemm_bf16_extra": [r for r in fp8_gemm_rows(raw, "bf16_us") if (r["n"], r["k"]) not in have],
        "fp8_quant": [{"k": q["k"], "m": q["m"], "absmax_us": q["absmax_us"], "scale_cast_us": q["scale_cast_us"]}
                      for q in sorted(raw["fp8_quant"], key=lambda q: q["k"])],
        "grouped_gemm": grouped_rows(raw),
        "moe_routing": {"batch": [r["batch"] for r in rout], **{c: [r[c] for r in rout] for c in cols},
                        "source": f"{SOURCE} routing rows"},
    }


def add_to_profile(p: dict, raw: dict) -> dict:
    """Add the sections to a built profile dict (in place) and return it."""
    t = p["device"]["tables"]
    s = moe_fp8_tables(raw, {(g["n"], g["k"]) for g in t["gemm"]})
    t["gemm"] = t["gemm"] + s.pop("gemm_bf16_extra")  # appended: the measured rows keep their order
    t.update(s)
    p["device"]["source"] += (f"; gemm_fp8 (per-tensor e4m3, grid M only), fp8_quant, grouped_gemm, moe_routing and "
                              f"the bf16 router/expert GEMM rows from {SOURCE} (calibration/scripts/moe_fp8.py, one H200, "
                              "2026-12-01; that process's end canary was not taken)")
    return p


def derive_h100_moe(q: dict) -> dict:
    """Scale the new tables of a derived H100 profile (see the module docstring), in place."""
    from .build_profile import DATASHEET

    r = DATASHEET["H200"]["hbm"] / DATASHEET["H100"]["hbm"]
    t = q["device"]["tables"]

    def scale(us, floor):
        return floor + (us - floor) * r if us > floor else us

    for g in t.get("gemm_fp8", []):  # fp8 ridge: twice the bf16 peak, 1-byte operands
        d = q["device"]
        ridge = 2 * d["peak_bf16_tflops"] * d["gemm_efficiency"] / (d["hbm_tbps"] * d["bw_efficiency"])
        floor = min(g["us"])
        g["us"] = [scale(u, floor) if 2.0 * m * g["n"] * g["k"] / (m * g["k"] + g["n"] * g["k"] + 2 * m * g["n"])
                   < ridge else u for m, u in zip(g["m"], g["us"])]
    for qt in t.get("fp8_quant", []):
        for key in ("absmax_us", "scale_cast_us"):
            floor = min(qt[key])
            qt[key] = [scale(u, floor) for u in qt[key]]
    for g in t.get("grouped_gemm", []):  # decode-sized expert GEMMs read every active expert's weights
        floor = min(min(row) for row in g["us"])
        g["us"] = [[scale(u, floor) for u in row] for row in g["us"]]
    return q
