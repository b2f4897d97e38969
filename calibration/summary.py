"""Print a short summary of a calibration round's output folder (stdlib only)."""

from __future__ import annotations

import glob
import json
import os


def _load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def summarize(out: str) -> None:
    t = _load(os.path.join(out, "timing.json")) or {}
    c = t.get("canary")
    if c:
        print(f"canary host {c['host_start_us']:.2f} -> {c['host_end_us']:.2f} us (x{c['ratio']:.3f}, tol "
              f"{c['tolerance']}): {'OK' if c['ok'] else 'FAILED'}; device {c['device_start_us']:.3f} -> "
              f"{c['device_end_us']:.3f} us")
    h = (t.get("host") or {}).get("paths", {})
    if h:
        print("host p50 us: " + ", ".join(f"{k}={v['p50']:.2f}" for k, v in h.items()))
        print(f"mixed-block factor {t['host']['context']['factor']:.3f}")
    g = t.get("gaps") or {}
    if "graph_node_us" in g:
        print(f"gaps: graph node +{g['graph_node_us']:.3f} us, eager +{g['eager_gap_us']:.3f} us, tiny node "
              f"{g['tiny_graph_node_us']:.3f} us, tiny eager {g['tiny_eager_us']['p50']:.3f} us")
    gr = t.get("graph") or {}
    if "replay_fixed_us" in gr:
        print(f"replay host {gr['replay_fixed_us']:.2f} + {gr['replay_per_node_us']:.4f}/node us")
    gd = t.get("graph_device") or {}
    for p in gd.get("points", []):
        print(f"graph {p['nodes']} nodes: device {p['event_us']['p50']:.2f} us, isolated wall "
              f"{p['isolated_wall_us']['p50']:.2f} us")
    cm = t.get("compiled") or {}
    if "entry_us" in cm:
        print(f"compiled micro: entry {cm['entry_us']:.2f} + {cm['per_kernel_us']:.2f} us/kernel")
    for r in t.get("rows", [])[:400]:
        if "eager" not in r or r.get("batch") not in (1, 64, 512) or r.get("ctx") not in (512,):
            continue
        e = r["eager"]
        s = (f"{r['model']:11s} {r['fusion']:8s} {str(r.get('dynamic', '')):5s} b{r['batch']:<4d} eager "
             f"{e['isolated']['step_ms']['p50']:7.2f}/{e['pipelined']['step_ms']['p50']:7.2f}")
        for mode in ("full", "piecewise"):
            if mode in r:
                s += (f" {mode} {r[mode]['isolated']['step_ms']['p50']:6.3f}/{r[mode]['pipelined']['step_ms']['p50']:6.3f}"
                      f" dev {r[mode]['device_ms']['p50']:6.3f}")
        print(s)
    bad = [r for r in t.get("rows", []) if "error" in r]
    print(f"rows: {len(t.get('rows', []))}, errors {len(bad)}" + (f" first: {bad[0]['error'][:120]}" if bad else ""))
    for r in t.get("hf", []):
        if "eager" in r:
            print(f"HF b{r['batch']}: eager {r['eager']['isolated']['step_ms']['p50']:.2f}/"
                  f"{r['eager']['pipelined']['step_ms']['p50']:.2f} graph {r['full']['isolated']['step_ms']['p50']:.3f}")
        else:
            print(f"HF b{r.get('batch')}: {r.get('error')}")
    ce = _load(os.path.join(out, "counts_eager.json")) or {}
    for r in ce.get("rows", []):
        if r["batch"] == 1 and r["graph"] == "none":
            print(f"counts {r['model']} {r['fusion']} b1: {r['kernels']} kernels")
    for r in ce.get("hf", []):
        print(f"counts HF b{r.get('batch')}: {r.get('kernels', r.get('error'))}")
    for f in sorted(glob.glob(os.path.join(out, "compiled_*.json"))):
        d = _load(f) or {}
        for r in d.get("rows", [])[:1]:
            print(f"{os.path.basename(f)}: cold compile {r['compile_s_cold']:.1f}s, {r['kernels']} kernels {r['kinds']}")
    for f in sorted(glob.glob(os.path.join(out, "memory_*.json"))):
        d = _load(f) or {}
        for L in d.get("layouts", []):
            if "error" in L:
                print(f"{os.path.basename(f)} {L['mode']}: {L['error'][:150]}")
                continue
            M = 2 ** 20
            print(f"{L['model']} {L['fusion']} {L['mode']}: private sum {sum(L['private_reserved']) / M:.0f} MiB "
                  f"(max {max(L['private_reserved']) / M:.0f}), shared drop {L['shared_drop_reserved'][0] / M:.0f}, "
                  f"keep {L['shared_keep_reserved'][0] / M:.0f} MiB")
    for f in sorted(glob.glob(os.path.join(out, "logs", "*.log"))):
        txt = open(f).read()
        if "Traceback" in txt:
            print(f"TRACEBACK in {os.path.basename(f)}: " + txt[txt.index("Traceback"):][-400:].replace("\n", " | "))
