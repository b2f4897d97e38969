"""Capture-layout commands: `buckets` (a preset's sizes), `pad` (where one batch lands) and `graph-memory`
(pinned graph memory and capture time of a layout, checked against a budget; exit 1 when over it)."""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from . import app, choices
from simulator.common import vocab as V
from simulator.layouts.buckets import pad as _pad
from simulator.layouts.buckets import parse_layout, preset_sizes
from simulator.common.errors import UserError
from simulator.common.jsonfile import dumps

MiB = 1 << 20
LAYOUT_HELP = ("capture sizes: a preset name, 1,2,4,8, '[1, 2, 8]', a vLLM compilation_config JSON "
               "(cudagraph_capture_sizes) or an SGLang flag list '--cuda-graph-bs 1 2 4'")


@app.command()
def buckets(
    preset: Optional[V.LayoutPreset] = choices.argument(V.LayoutPreset, None, "preset", help="a capture-size preset",
                                                         what="layout"),
    layout: Optional[str] = typer.Option(None, "--layout", help="any layout instead of a preset: 1,2,4 | '[1, 2, 8]' "
                                         "| a vLLM compilation_config JSON | '--cuda-graph-bs 1 2 4'"),
    max_size: Optional[int] = typer.Option(None, "--max-size", help="largest capture size (preset default if unset)"),
    max_num_seqs: Optional[int] = typer.Option(None, "--max-num-seqs", help="vllm: max = min(2 x this, 512)"),
    spec_tokens: Optional[int] = typer.Option(None, "--spec-tokens", help="speculative decoding: k draft tokens per "
                                              "sequence; prints the engine's verify capture sizes in tokens (vllm, "
                                              "sglang, trtllm presets)"),
    tp: int = typer.Option(1, "--tp", help="tensor-parallel GPUs (sglang: max batch 512 at tp >= 4)"),
    as_json: bool = typer.Option(False, "--json", help='print {"sizes": [...]}'),
) -> None:
    """Print the capture sizes of a layout preset (or any layout) and the same sizes in each engine's syntax."""
    from simulator.layouts.buckets import LAYOUT_PRESETS
    from simulator.layouts.engine_syntax import engine_lines, engine_syntax
    from .checks import named

    if (preset is None) == (layout is None):
        raise UserError("give a preset name or --layout LAYOUT")
    if spec_tokens is not None:
        _spec_buckets(preset, layout, spec_tokens, max_size, max_num_seqs, tp, as_json)
        return
    with named("preset" if layout is None else "--layout"):
        name = (preset.value if layout is None else layout).strip()
        sizes = (preset_sizes(name, max_size, max_num_seqs) if layout is None
                 else parse_layout(name, max_size, max_num_seqs))
    if as_json:
        print(dumps({"sizes": sizes, "engine_syntax": engine_syntax(sizes)}))
    else:
        print(f"{preset if name in LAYOUT_PRESETS else 'layout'}: {len(sizes)} sizes: {', '.join(map(str, sizes))}")
        from .tables import raw_lines

        raw_lines(engine_lines(sizes))


def _spec_memory(spec, draft, m, prof, fusion, ret, private, with_dtype, dtype, kv_dtype, tp) -> dict:
    """The draft's graphs (each family of simulator/layouts/spec.py in its own shared pool), capture time, weights
    and KV bytes per token, for `graph-memory --spec-tokens`."""
    from simulator.engine.graph_memory import GraphMemoryModel
    from simulator.engine.spec import DRAFT_GRAPH
    from simulator.model.parallel import shard
    from simulator.model.spec import draft_for
    from .checks import named

    with named("--draft"):
        dr = draft_for(m, draft)  # `m`: the target before sharding
    with named("--draft"):
        dm = shard(with_dtype(dr.model, dtype, kv_dtype) if dr.kind == "model" else dr.model, tp)
    mode = DRAFT_GRAPH[spec.engine]
    fams = spec.draft or {}
    total = cap = 0.0
    graphs = 0
    per = {}
    for name, sizes in fams.items():
        lm = GraphMemoryModel(dm, prof, fusion, mode, ret).layout(list(sizes), shared_pool=not private)
        total, cap, graphs = total + lm.total_bytes, cap + lm.capture_s, graphs + lm.graphs
        per[name] = {"sizes": list(sizes), "graphs": lm.graphs, "total_bytes": lm.total_bytes, "capture_s": lm.capture_s}
    from dataclasses import replace as _r

    w = _r(dr, model=dm).weight_bytes
    return {"spec_tokens": spec.k, "spec_engine": spec.engine, "draft": draft, "draft_kind": dr.kind,
            "draft_graph_mode": mode, "draft_graphs": graphs, "draft_total_bytes": total, "draft_capture_s": cap,
            "draft_families": per, "draft_weights_bytes": w, "draft_kv_bytes_per_token": dm.kv_bytes_per_token(),
            "spec_requests": list(spec.requests)}


def _spec_buckets(preset, layout, k, max_size, max_num_seqs, tp, as_json) -> None:
    """`buckets ENGINE --spec-tokens k`: the engine's verify capture sizes (simulator/layouts/spec.py)."""
    from simulator.layouts.spec import MAX_SPEC_TOKENS, SPEC_ENGINES, spec_layout
    from simulator.model.parallel import check_tp
    from .checks import count, named

    count("--spec-tokens", k, MAX_SPEC_TOKENS, low=0)
    check_tp(tp)
    if layout is not None or preset.value not in SPEC_ENGINES:
        raise UserError(f"--spec-tokens applies to the {', '.join(SPEC_ENGINES)} presets (each engine's own rule), "
                        f"not {'--layout' if layout is not None else repr(preset.value)}")
    with named("--spec-tokens"):
        L = spec_layout(preset.value, k, max_size, max_num_seqs, tp=tp)
    if as_json:
        print(dumps(L.as_dict()))
        return
    unit = "tokens (max_cudagraph_capture_size)" if L.engine == "vllm" else "requests x (1 + k) tokens"
    print(f"{L.engine} --spec-tokens {k}: query length {L.query_len}, {len(L.tokens)} target graphs, sizes in {unit}:")
    print(f"  tokens:    {', '.join(map(str, L.tokens))}")
    print(f"  sequences: {', '.join(map(str, L.requests))}")
    for name, sizes in L.draft.items():
        print(f"  {name} ({len(sizes)} graphs): {', '.join(map(str, sizes))}")
    if L.note:
        print(f"  ({L.note})")


@app.command()
def pad(
    batch: int = typer.Argument(..., help="real batch size"),
    layout: str = typer.Option("vllm", "--layout", help=LAYOUT_HELP),
    max_size: Optional[int] = typer.Option(None, "--max-size", help="largest capture size of a preset"),
    max_num_seqs: Optional[int] = typer.Option(None, "--max-num-seqs", help="vllm: max = min(2 x this, 512)"),
    as_json: bool = typer.Option(False, "--json", help='print {"batch", "padded", "waste"}'),
) -> None:
    """Pad a batch to the smallest captured size >= it (padded null: no captured size fits, no graph)."""
    from simulator.common import limits as L
    from .checks import count, named

    count("batch", batch, L.MAX_BATCH)
    with named("--layout"):
        sizes = parse_layout(layout, max_size, max_num_seqs)
    p = _pad(batch, sizes)
    if as_json:
        print(dumps({"batch": p.batch, "padded": p.padded, "waste": p.waste}))
    elif p.padded is None:
        print(f"batch {batch}: above the largest captured size, runs without a graph")
    else:
        print(f"batch {batch} -> {p.padded}: {p.waste_rows} padded rows, waste {p.waste:.4f}")


def _bytes(v: Optional[str], flag: str) -> Optional[int]:
    from ..config.specs import parse_bytes

    if v is None:
        return None
    try:
        return parse_bytes(v if not v.strip().isdigit() else int(v))
    except ValueError as e:
        raise UserError(f"{flag}: {e}") from None


@app.command("graph-memory")
def graph_memory(
    model: str = typer.Option(..., "--model", help="model preset or config.json path"),
    layout: str = typer.Option("vllm", "--layout", help=LAYOUT_HELP),
    max_size: Optional[int] = typer.Option(None, "--max-size", help="largest capture size of a preset"),
    max_num_seqs: Optional[int] = typer.Option(None, "--max-num-seqs", help="vllm: max = min(2 x this, 512)"),
    profile: Optional[str] = typer.Option(None, "--profile", help="profile name or path (default h200)"),
    fusion: V.Fusion = choices.option(V.Fusion, V.Fusion.FUSED, "--fusion", help="fusion level", what="fusion level"),
    graph: V.GraphMode = choices.option(V.GraphMode, V.GraphMode.FULL, "--graph", help="CUDA-graph mode",
                                        what="graph mode"),
    budget: Optional[str] = typer.Option(None, "--memory-budget", "--budget",
                                          help="pinned graph-memory budget: bytes or 256MiB / 1GiB (--budget is an "
                                               "alias)"),
    private: bool = typer.Option(False, "--private", help="a private pool per graph instead of one shared pool"),
    retention: V.Retention = choices.option(V.Retention, V.Retention.AUTO, "--retention",
                                            help="graph outputs in the shared pool: keep (SGLang), drop (vLLM) or "
                                                 "auto (keep for --layout sglang, else drop)",
                                            what="output retention"),
    workspace: str = typer.Option("1GiB", "--workspace", help="workspace + eager activation memory"),
    prefill_layout: Optional[str] = typer.Option(None, "--prefill-layout", help="prefill (token-count) sizes "
                                                 "captured as piecewise graphs too (SGLang PCG): sglang_pcg, "
                                                 "sglang_pcg:M or a list; counted under piecewise and "
                                                 "full_and_piecewise"),
    gpu_util: float = typer.Option(0.9, "--gpu-util", help="fraction of GPU memory the engine may use"),
    tp: int = typer.Option(1, "--tp", help="tensor-parallel GPUs (1, 2, 4, 8): every figure is one GPU's (weights, "
                           "KV, graph pools); --layout sglang captures up to 512 at tp >= 4"),
    dtype: V.Dtype = choices.option(V.Dtype, V.Dtype.BF16, "--dtype", help="weights (fp8: 1-byte projection weights)", what="dtype", field="dtype"),
    kv_dtype: V.Dtype = choices.option(V.Dtype, V.Dtype.BF16, "--kv-dtype", help="KV cache (fp8: 1 byte per element)", what="KV-cache dtype", field="kv_dtype"),
    spec_tokens: Optional[int] = typer.Option(None, "--spec-tokens", help="speculative decoding: k draft tokens; "
                                              "--layout vllm|sglang|trtllm then means that engine's verify sizes "
                                              "(tokens) and the draft's graphs are counted too"),
    draft: str = typer.Option("eagle", "--draft", help="with --spec-tokens: eagle | mtp (a one-layer head) or a draft "
                              "model preset / config.json"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
) -> None:
    """Pinned graph memory, capture time and KV capacity of a layout; exit 1 when over --budget."""
    from simulator.engine.graph_memory import GraphMemoryModel, default_retention, kv_cache_bytes, kv_cache_tokens
    from simulator.model.models import load_model
    from simulator.model.profile import load_profile

    from .checks import model_flag, named, number, profile_flag

    number("--gpu-util", gpu_util, 1.0, "a fraction in (0, 1]")
    fusion, graph = fusion.value, graph.value
    b, ws = _bytes(budget, "--memory-budget (alias --budget)"), _bytes(workspace, "--workspace")
    from simulator.model.parallel import check_tp, shard, tp_fields

    check_tp(tp)
    m, prof = model_flag("--model", model), profile_flag("--profile", profile)
    from simulator.model.dtype import with_dtype

    base_name, m_one = m.name, with_dtype(m, dtype, kv_dtype)
    m = shard(m_one, tp)
    spec = None
    if spec_tokens is not None:
        from simulator.layouts.spec import MAX_SPEC_TOKENS, SPEC_ENGINES, spec_layout
        from .checks import count

        count("--spec-tokens", spec_tokens, MAX_SPEC_TOKENS, low=0)
        if layout not in SPEC_ENGINES:
            raise UserError(f"--spec-tokens: --layout must be one of {', '.join(SPEC_ENGINES)} (the engine whose "
                            f"speculative capture rule applies), got {layout!r}")
        with named("--spec-tokens"):
            spec = spec_layout(layout, spec_tokens, max_size, max_num_seqs, tp=tp,
                               graph="piecewise" if graph == "piecewise" else "full",
                               draft=draft if draft in ("eagle", "mtp") else "model")
        sizes = list(spec.tokens)
    else:
        with named("--layout"):
            sizes = parse_layout(layout, max_size, max_num_seqs, tp=tp)
    ret = default_retention(layout) if retention is V.Retention.AUTO else retention.value
    prefill = None
    if prefill_layout is not None:
        from simulator.layouts.prefill import parse_prefill_layout

        with named("--prefill-layout"):
            prefill = parse_prefill_layout(prefill_layout)
    mem = GraphMemoryModel(m, prof, fusion, graph, ret).layout(sizes, shared_pool=not private, prefill_sizes=prefill)
    kv = kv_cache_bytes(m, prof, mem, ws, gpu_util)
    kv_tok = kv_cache_tokens(m, kv)
    sd = _spec_memory(spec, draft, m_one, prof, fusion, ret, private, with_dtype, dtype, kv_dtype, tp) if spec else None
    if sd is not None:
        kv = kv - sd["draft_total_bytes"] - sd["draft_weights_bytes"]
        kv_tok = max(0, int(kv // (m.kv_bytes_per_token() + sd["draft_kv_bytes_per_token"])))
    total = mem.total_bytes + (sd["draft_total_bytes"] if sd else 0.0)
    fits = b is None or total <= b
    d = {"model": base_name, **tp_fields(m, prof), "profile": prof.name, "layout": layout, **mem.as_dict(),
         "budget_bytes": b, "fits_budget": fits, "weights_bytes": m.weight_bytes,
         "kv_cache_bytes": kv, "kv_tokens": kv_tok, "kv_fits": kv > 0}
    if sd is not None:
        d.update(sd)
        d["total_with_draft_bytes"] = total
    if prefill is not None:
        d["prefill_sizes"] = prefill
    if as_json:
        print(dumps(d))
    else:
        pool = "private pools" if private else f"one shared pool (largest first, outputs {ret})"
        per_gpu = "" if tp == 1 else f" at tp {tp} (per GPU; collective figures unmeasured)"
        print(f"{base_name}{per_gpu} on {prof.name}, {fusion}/{graph}, layout {layout}: {len(sizes)} sizes, "
              f"{mem.graphs} graphs, {pool} [{mem.source}]")
        print(f"  graph pool      {mem.pool_bytes / MiB:10.1f} MiB")
        for name, part in ((k, v) for k, v in mem.parts.items() if k != "static_buffers"):
            print(f"    {name:<22}{part['bytes'] / MiB:10.1f} MiB  {part['source']}")
        print(f"  static buffers  {mem.static_buffer_bytes / MiB:10.1f} MiB  (inputs + logits for size {max(sizes)})")
        print(f"  pinned total    {mem.total_bytes / MiB:10.1f} MiB"
              + ("" if b is None else f"   budget {b / MiB:.1f} MiB: {'ok' if fits else 'OVER BUDGET'}"))
        print(f"  capture time    {mem.capture_s:10.2f} s")
        if sd is not None:
            print(f"  spec k={spec.k} ({spec.engine}): target sizes in tokens (multiples of {spec.query_len}); draft "
                  f"'{draft}' in {sd['draft_graph_mode']} graphs, {sd['draft_graphs']} graphs (own shared pool per "
                  "family: an upper bound, engines share the target's pool)")
            print(f"  draft graphs    {sd['draft_total_bytes'] / MiB:10.1f} MiB, capture {sd['draft_capture_s']:.2f} s, "
                  f"weights {sd['draft_weights_bytes'] / MiB:.0f} MiB")
            print(f"  pinned + draft  {total / MiB:10.1f} MiB")
        print(f"  KV cache        {kv / MiB:10.1f} MiB = {kv_tok} tokens "
              f"(after {m.weight_bytes / MiB:.0f} MiB weights, graphs and workspace"
              + (", the draft's graphs, weights and its KV per token)" if sd else ")"))
    if not fits:
        print(f"launchsim: graph memory {total:.0f} bytes exceeds the budget {b} bytes", file=sys.stderr)
        raise typer.Exit(1)
    if kv <= 0:
        print("launchsim: no memory left for the KV cache", file=sys.stderr)
        raise typer.Exit(1)
