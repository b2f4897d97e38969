"""Score the graph-memory model (simulator/engine/graph_memory.py) on every measured layout. CPU only.

    python3 -m calibration.validate_memory [--measured DIR] [--out DIR | --write-shipped]

Builds the memory section with calibration/build_memory.py (constants fitted on FIT_MODEL/FIT_FUSION
only), patches it into a copy of the h200 profile in memory and predicts, per model / fusion / graph mode:
- shared keep and shared drop, every cumulative row (sizes >= b captured largest first; row b=1 is the
  ten-size total, which is also vLLM's default layout intersected with the measured sizes), two ways:
  `table` (P(s) from the layout's measured private pools: scores the shared formula) and `formula`
  (this model's tables removed: P(s) from the segment formula, constants kept);
- private pools per size from the segment formula (the table reproduces them exactly, so only the
  formula is scored), and the private totals of the ten sizes and of SGLang's default layout (max 256)
  intersected with the measured sizes;
- static buffers (formula bytes against measured bytes and reserved).
The measurement process paid the capture-stream workspace W in its first private pool (full, b1), so
shared rows are predicted without W and that private pool with it. Rows of FIT_MODEL/FIT_FUSION are
marked `fit` (alpha, sigma, W came from them); all others are `held-out`.
Writes graph_memory.json and graph_memory.md; the issue's independent figures are compared at the end.
"""

from __future__ import annotations

import argparse

from calibration.jsonio import add_out_args, out_dir
import json
import os

from calibration.build_memory import FIT_FUSION, FIT_MODEL, load_measured, memory_section

MiB = 1 << 20
TARGET_PCT = 15.0
ISSUE = {"ten private pools": 534 * MiB, "one shared pool": 116 * MiB, "private b512": 198 * MiB}
MEASURED_DIR = "calibration/measured/h200-round-a"


def _profile(section: dict):
    """A copy of the h200 profile whose graph-memory section is `section` (nothing is written)."""
    from simulator.model.profile import GraphMemoryTable, load_profile

    p = load_profile("h200")
    gm = {k: GraphMemoryTable(**v) for k, v in section.items()}
    return p.model_copy(update={"device": p.device.model_copy(update={"graph_memory": gm})})


def _err(pred: float, meas: float) -> float:
    return 100.0 * (pred / meas - 1.0) if meas else float("nan")


def _summ(rows: list[dict]) -> dict:
    e = [abs(r["err_pct"]) for r in rows]
    worst = max(rows, key=lambda r: abs(r["err_pct"]))
    return {"n": len(rows), "mape_pct": sum(e) / len(e), "worst_pct": worst["err_pct"], "worst_row": worst["row"]}


def validate(measured_dir: str = MEASURED_DIR) -> dict:
    from simulator.engine.graph_memory import GraphMemoryModel
    from simulator.model.models import load_model

    section = memory_section(measured_dir)
    full_prof = _profile(section)
    rows: list[dict] = []
    for d in load_measured(measured_dir):
        lays = [x for x in d.get("layouts", []) if "error" not in x]
        if not lays:
            continue
        name = lays[0]["model"]
        m = load_model(name)
        consts = full_prof.device.graph_memory[name].constants
        form_prof = _with_constants(full_prof, name, consts)
        for i, lay in enumerate(lays):
            fusion, mode, b = lay["fusion"], lay["mode"], lay["batch"]
            split = "fit" if (name, fusion) == (FIT_MODEL, FIT_FUSION) else "held-out"
            key = {"model": name, "fusion": fusion, "mode": mode, "split": split}
            w_first = consts.capture_workspace_bytes if i == 0 else 0.0
            for ret in ("keep", "drop"):
                for how, prof in (("table", full_prof), ("formula", form_prof)):
                    gm = GraphMemoryModel(m, prof, fusion, mode, ret)
                    for j, bb in enumerate(b):
                        sizes = b[j:]
                        pred = gm.layout(sizes, shared_pool=True).pool_bytes - consts.capture_workspace_bytes
                        meas = float(lay[f"shared_{ret}_reserved"][j])
                        rows.append({**key, "layout": f"shared_{ret}", "p_from": how,
                                     "row": f"{name} {fusion} {mode} shared_{ret} sizes {bb}..{b[-1]} ({how})",
                                     "sizes": sizes, "total": j == 0, "pred": pred, "meas": meas,
                                     "err_pct": _err(pred, meas)})
            gm = GraphMemoryModel(m, form_prof, fusion, mode)
            priv = []
            for j, bb in enumerate(b):
                pred = gm.pool_bytes(bb) + (w_first if j == 0 else 0.0)
                meas = float(lay["private_reserved"][j])
                priv.append(pred)
                rows.append({**key, "layout": "private", "p_from": "formula", "sizes": [bb], "total": False,
                             "row": f"{name} {fusion} {mode} private b{bb} (formula)", "pred": pred, "meas": meas,
                             "err_pct": _err(pred, meas)})
            for label, keep in (("ten sizes", lambda s: True), ("sglang<=256", lambda s: s <= 256)):
                idx = [j for j, s in enumerate(b) if keep(s)]
                pred, meas = sum(priv[j] for j in idx), float(sum(lay["private_reserved"][j] for j in idx))
                rows.append({**key, "layout": "private_total", "p_from": "formula", "sizes": [b[j] for j in idx],
                             "total": True, "row": f"{name} {fusion} {mode} private total {label} (formula)",
                             "pred": pred, "meas": meas, "err_pct": _err(pred, meas)})
        sb = d.get("static_buffers")
        if sb:
            pred = GraphMemoryModel(m, full_prof, "none", "full").static_buffer_bytes(sb["largest"])
            for what in ("bytes", "reserved"):
                rows.append({"model": name, "fusion": "-", "mode": "-", "split": "held-out", "layout": f"static_{what}",
                             "p_from": "formula", "sizes": [sb["largest"]], "total": True,
                             "row": f"{name} static buffers b{sb['largest']} vs measured {what}", "pred": pred,
                             "meas": float(sb[what]), "err_pct": _err(pred, float(sb[what]))})
    summary = {}
    for r in rows:
        k = f"{r['model']} | {r['fusion']} | {r['mode']} | {r['layout']} | {r['p_from']} | {r['split']}"
        summary.setdefault(k, []).append(r)
    summary = {k: _summ(v) for k, v in summary.items()}
    return {"constants": section[FIT_MODEL]["constants"], "target_pct": TARGET_PCT, "rows": rows,
            "summary": summary, "issue": issue_compare(section, full_prof)}


def _with_constants(prof, name, consts):
    """A profile whose table for `name` has only the constants (no measured pools): the formula path."""
    from simulator.model.profile import GraphMemoryTable

    from simulator.model.profile import GraphMemoryLayoutTable

    # an empty `layouts` would mean an old profile (its legacy table): one layout of no real fusion level
    dummy = GraphMemoryLayoutTable(fusion="-", mode="full", batch=[1], private_reserved=[0.0])
    gm = dict(prof.device.graph_memory)
    gm[name] = GraphMemoryTable(batch=[1], private_pool_bytes=[0.0], layouts=[dummy], constants=consts)
    return prof.model_copy(update={"device": prof.device.model_copy(update={"graph_memory": gm})})


def issue_compare(section: dict, prof) -> list[dict]:
    """The issue's independent qwen3-0.6b none full figures against our measurement and our model (engine
    view: W in the pool, since an engine's first capture is its shared pool's largest graph)."""
    from simulator.engine.graph_memory import GraphMemoryModel
    from simulator.model.models import load_model

    lay = next(x for x in section["qwen3-0.6b"]["layouts"] if x["fusion"] == "none" and x["mode"] == "full")
    b = lay["batch"]
    m = load_model("qwen3-0.6b")
    w = section["qwen3-0.6b"]["constants"]["capture_workspace_bytes"]
    drop = GraphMemoryModel(m, prof, "none", "full", "drop")
    keep = GraphMemoryModel(m, prof, "none", "full", "keep")
    logits512 = 512 * m.vocab_size * m.dtype_bytes
    out = [
        {"figure": "ten private pools", "issue": ISSUE["ten private pools"], "ours_measured": sum(lay["private_reserved"]),
         "model": drop.layout(b, shared_pool=False).pool_bytes},
        {"figure": "one shared pool", "issue": ISSUE["one shared pool"],
         "ours_measured": lay["shared_drop_reserved"][0] + w, "model": drop.layout(b).pool_bytes,
         "ours_measured_keep": lay["shared_keep_reserved"][0] + w, "model_keep": keep.layout(b).pool_bytes},
        {"figure": "private b512", "issue": ISSUE["private b512"], "ours_measured": lay["private_reserved"][-1],
         "model": drop.pool_bytes(512), "ours_without_logits": lay["private_reserved"][-1] - 150 * MiB,
         "logits_b512": logits512},
    ]
    for r in out:
        r["err_model_vs_issue_pct"] = _err(r["model"], r["issue"])
    return out


def to_markdown(res: dict) -> str:
    c = res["constants"]
    L = ["# Graph memory validation (calibration/validate_memory.py)", "",
         f"Constants (fit on {FIT_MODEL} fusion {FIT_FUSION} only): W = {c['capture_workspace_bytes'] / MiB:.0f} MiB, "
         f"alpha = {c['reuse_fraction']}, sigma = {c['slack_bytes'] / MiB:.0f} MiB. {c['source']}.", "",
         f"Target: within ±{TARGET_PCT:.0f}% per layout (shared totals and private pools). `table`: P(s) from the "
         "layout's measured private pools (scores the shared formula); `formula`: P(s) from the segment formula "
         "(no measured pools of that model). Rows of the fit split trained alpha/sigma/W.", "",
         "| model | fusion | mode | layout | P from | split | n | MAPE % | worst % | total err % |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    totals = {}
    for r in res["rows"]:
        if r["total"]:
            k = f"{r['model']} | {r['fusion']} | {r['mode']} | {r['layout']} | {r['p_from']} | {r['split']}"
            totals.setdefault(k, r["err_pct"])
    for k, s in res["summary"].items():
        t = totals.get(k)
        L.append(f"| {k} | {s['n']} | {s['mape_pct']:.1f} | {s['worst_pct']:+.1f} | "
                 f"{'' if t is None else f'{t:+.1f}'} |")
    L += ["", "## Against the issue's independent figures (qwen3-0.6b, none, full, sizes 1..512)", "",
          "| figure | issue MiB | ours measured MiB | model MiB | model vs issue % |", "|---|---|---|---|---|"]
    for r in res["issue"]:
        L.append(f"| {r['figure']} | {r['issue'] / MiB:.0f} | {r['ours_measured'] / MiB:.0f} | {r['model'] / MiB:.0f} | "
                 f"{r['err_model_vs_issue_pct']:+.1f} |")
    L += ["", ("Our measured figures (engine view, W in the pool) and the model agree; the issue's do not fit "
               "them: its shared pool (116 MiB) is below its own batch-512 private pool (198 MiB), whereas in "
               "ours every shared pool is at least the largest graph's private pool (it must hold that graph's "
               "live set). Our graph ends with lm_head and returns logits [B, vocab]: at batch 512 that is "
               "148 MiB (150 MiB of segments) of the 180 MiB pool, so a graph without the head would pin about "
               "30 MiB at b512 plus W; theirs pins more at b512 (198 MiB) and less in total, so neither "
               "'with logits' nor 'without' alone explains both figures. Likely causes we cannot check: what "
               "their graph contains (attention backend workspaces, head outside), whether their shared "
               "figure is memory_allocated or excludes W, and their warm-up before the first capture. We "
               "score against our own measurements; the issue's figures are shown, not fitted."), ""]
    return "\n".join(L)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--measured", default=MEASURED_DIR)
    add_out_args(ap)
    a = ap.parse_args(argv)
    a.out = str(out_dir(a))
    res = validate(a.measured)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "graph_memory.json"), "w") as f:
        json.dump(res, f, indent=1)
    md = to_markdown(res)
    with open(os.path.join(a.out, "graph_memory.md"), "w") as f:
        f.write(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
