"""Profile section for speculative verify attention from round f's measurement (CPU only, no torch):

    from calibration.build_spec import verify_attention_tables, add_to_profile

Input: calibration/measured/h200-round-f/verify_timing.json (calibration/scripts/round_f.py, `attention_table`):
rows {"table": "attention", "q_heads", "kv_heads", "head_dim", "batch", "ctx", "q_len", "device_us", "backend"},
SDPA device µs per call (each point with SDPA's own dispatch and with the flash backend forced; GQA, lower-right
causal mask within the q_len new tokens), from CUDA events around the replay of a graph of calls rotating over K/V copies larger than L2. `ctx` is
the number of keys (past + the q_len new tokens), the same axis as the workload's attention `ctx` dimension.

Output: one `device.tables.attention` entry per (heads, kv_heads, head_dim, q_len) with q_len > 1 on the measured
(batch, ctx) grid (simulator/model/profile.py `AttentionTable.q_len`; simulator/model/costs.py
`verify_attention_s` reads them). q_len 1 rows are not added: the profile's decode table (round b) stays, and the
q_len-1 rows of round f serve only to compare the two methods (`decode_ratio`). A grid point missing (a failed
call) leaves the whole (shape, q_len) table out rather than filling it in.

Round g (what the shipped profile carries now): calibration/measured/h200-round-g/inplace.json
(calibration/scripts/round_g.py `job_inplace`), rows {"table": "attention_inplace", "layout": "ref" | "hf", "q_heads",
"kv_heads", "head_dim", "batch", "ctx", "slots", "q_len", "attn_us", ...}: the verify attention timed as the step
calls it (q a transposed view of the projection, the new K/V index_copy_-ed into the cache right before, caches
rotated past L2), `attn_us` = (copies + attention) - (copies alone) per call. `inplace_tables` turns them into
`layout: reference` tables (ctx = keys) and `layout: hf_static` tables (transformers' sdpa_attention_forward over
every StaticCache slot under a boolean mask, repeat_kv and SDPA's mask kernels included; ctx = slots), q_len 2-8.
Round f's isolated rows timed the reference kernel 2-14 % (b8-b64, ctx 512) under what it costs in place; the
round-g profiler trace of verify steps (trace_verify.json) agrees with the in-place figures within 2-4 % at b64.
"""

from __future__ import annotations

SOURCE = ("calibration/measured/h200-round-f/verify_timing.json + attention_llama3-8b_8192.json (the llama3-8b ctx "
          "8192 points verify_timing lost to its time limit)")
SOURCE_G = ("calibration/measured/h200-round-g/inplace.json (calibration/scripts/round_g.py job_inplace: SDPA timed in "
            "place, reference layout over ctx keys and transformers' StaticCache layout over all slots)")
LAYOUTS = {"ref": "reference", "hf": "hf_static"}


def _inplace_rows(raw) -> list[dict]:
    raws = raw if isinstance(raw, (list, tuple)) else [raw]
    return [r for x in raws for r in x.get("rows", [])
            if r.get("table") == "attention_inplace" and isinstance(r.get("attn_us"), (int, float))]


def inplace_tables(raw, min_q_len: int = 2) -> tuple[list[dict], list[str]]:
    """(tables, notes): AttentionTable dicts (with `layout`) for every complete (layout, shape, q_len >= min_q_len)
    grid of round g's in-place rows; the grid's ctx axis is the keys (reference) or the StaticCache slots (hf)."""
    groups: dict[tuple[str, int, int, int, int], dict[tuple[int, int], float]] = {}
    for r in _inplace_rows(raw):
        lay = LAYOUTS[r["layout"]]
        c = int(r["ctx"]) if lay == "reference" else int(r["slots"])
        key = (lay, int(r["q_heads"]), int(r["kv_heads"]), int(r["head_dim"]), int(r["q_len"]))
        groups.setdefault(key, {})[(int(r["batch"]), c)] = float(r["attn_us"])
    tables, notes = [], []
    for key in sorted(groups):
        lay, h, kv, hd, q = key
        if q < min_q_len:
            continue
        pts = groups[key]
        bs, cs = sorted({b for b, _ in pts}), sorted({c for _, c in pts})
        missing = [(b, c) for b in bs for c in cs if (b, c) not in pts]
        if missing:
            notes.append(f"{lay} heads {h}/{kv} hd {hd} q_len {q}: {len(missing)} grid points missing, table left out")
            continue
        tables.append({"heads": h, "kv_heads": kv, "head_dim": hd, "q_len": q, "layout": lay, "batch": bs, "ctx": cs,
                       "us": [[pts[(b, c)] for c in cs] for b in bs]})
        notes.append(f"{lay} heads {h}/{kv} hd {hd} q_len {q}: {len(bs)}x{len(cs)} points "
                     f"({'slots' if lay == 'hf_static' else 'keys'} {cs[0]}-{cs[-1]}), in place")
    return tables, notes


def _rows(raw) -> list[dict]:
    """Measured attention rows of one round-f file, or of several (a list: later files' points replace earlier ones,
    as attention_llama3-8b_8192.json re-measures the points verify_timing.json lost to its time limit)."""
    raws = raw if isinstance(raw, (list, tuple)) else [raw]
    return [r for x in raws for r in x.get("rows", [])
            if r.get("table") == "attention" and isinstance(r.get("device_us"), (int, float))]


def verify_attention_tables(raw, min_q_len: int = 2, backend: str = "default") -> tuple[list[dict], list[str]]:
    """(tables, notes): AttentionTable dicts for every complete (shape, q_len >= min_q_len) grid. Round f times each
    point twice, SDPA's own dispatch (`default`: what the reference decoder and transformers run, and what the
    profile's q_len-1 decode table measured) and the flash backend forced (`flash`); `backend` picks one, and a
    shape with no row of it falls back to the other backend's rows (said in the notes)."""
    by_backend: dict[tuple[int, int, int, int], dict[str, dict[tuple[int, int], float]]] = {}
    for r in _rows(raw):
        key = (int(r["q_heads"]), int(r["kv_heads"]), int(r["head_dim"]), int(r["q_len"]))
        by_backend.setdefault(key, {}).setdefault(r.get("backend", "?"), {})[(int(r["batch"]), int(r["ctx"]))] = \
            float(r["device_us"])
    groups, backends = {}, {}
    for key, d in by_backend.items():
        pick = backend if backend in d else sorted(d)[0]
        groups[key], backends[key] = d[pick], {pick if pick == backend else f"{pick} (no {backend} rows)"}
    tables, notes = [], []
    for key in sorted(groups):
        if key[3] < min_q_len:
            continue
        pts = groups[key]
        bs, cs = sorted({b for b, _ in pts}), sorted({c for _, c in pts})
        missing = [(b, c) for b in bs for c in cs if (b, c) not in pts]
        if missing:
            notes.append(f"heads {key[0]}/{key[1]} hd {key[2]} q_len {key[3]}: {len(missing)} grid points missing, "
                         "table left out")
            continue
        tables.append({"heads": key[0], "kv_heads": key[1], "head_dim": key[2], "q_len": key[3], "batch": bs,
                       "ctx": cs, "us": [[pts[(b, c)] for c in cs] for b in bs]})
        notes.append(f"heads {key[0]}/{key[1]} hd {key[2]} q_len {key[3]}: {len(bs)}x{len(cs)} points, backend "
                     f"{'/'.join(sorted(backends[key]))}")
    return tables, notes


def decode_ratio(raw: dict, profile: dict) -> list[dict]:
    """Round f's q_len-1 SDPA µs over the profile's decode table at the same (heads, batch, ctx): how the two
    measurements compare where both exist (a check on mixing round f's verify tables with round b's decode)."""
    from simulator.model.costs import _bilinear

    dec = {(t["heads"], t["kv_heads"], t["head_dim"]): t for t in profile["device"]["tables"].get("attention", [])
           if t.get("q_len", 1) == 1}
    out = []
    for r in _rows(raw):
        if int(r["q_len"]) != 1:
            continue
        t = dec.get((int(r["q_heads"]), int(r["kv_heads"]), int(r["head_dim"])))
        if t is None:
            continue
        v = _bilinear(t["batch"], t["ctx"], t["us"], int(r["batch"]), int(r["ctx"]))
        if v:
            out.append({"heads": int(r["q_heads"]), "batch": int(r["batch"]), "ctx": int(r["ctx"]),
                        "round_f_us": float(r["device_us"]), "profile_us": v * 1e6,
                        "ratio": float(r["device_us"]) / (v * 1e6)})
    return out


def add_to_profile(p: dict, raw, backend: str = "default") -> list[str]:
    """Append the verify tables to profile dict `p` (replacing earlier q_len > 1 tables and their source note); the
    notes. `raw`: round g's inplace.json (in-place rows: both layouts) or round f's files (isolated rows: reference)."""
    inplace = bool(_inplace_rows(raw))
    tables, notes = inplace_tables(raw) if inplace else verify_attention_tables(raw, backend=backend)
    att = [t for t in p["device"]["tables"].get("attention", []) if t.get("q_len", 1) == 1]
    p["device"]["tables"]["attention"] = att + tables
    if tables:
        parts = [x for x in p["device"].get("source", "").split("; ")
                 if x and not x.startswith("verify attention (q_len > 1): ")]
        parts.append(f"verify attention (q_len > 1): {SOURCE_G if inplace else SOURCE}")
        p["device"]["source"] = "; ".join(parts)
    return notes
