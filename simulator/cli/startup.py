"""`launchsim startup`: an engine's start-up cost (torch.compile, warm-up runs, CUDA-graph capture) for a model
and capture layout, from the measured start-up model (simulator/engine/startup.py)."""

from __future__ import annotations

from typing import Optional

import typer

from . import app, choices
from simulator.common import vocab as V
from simulator.common.errors import UserError
from simulator.layouts.buckets import parse_layout
from simulator.common.jsonfile import dumps
from .buckets import LAYOUT_HELP


@app.command()
def startup(
    model: str = typer.Option(..., "--model", help="model preset or config.json path"),
    layout: str = typer.Option("vllm", "--layout", help=LAYOUT_HELP),
    fusion: V.Fusion = choices.option(V.Fusion, V.Fusion.FUSED, "--fusion", help="fusion level", what="fusion level"),
    graph: V.GraphMode = choices.option(V.GraphMode, V.GraphMode.FULL, "--graph", help="CUDA-graph mode",
                                        what="graph mode"),
    compile_mode: V.CompileMode = choices.option(V.CompileMode, V.CompileMode.STATIC, "--compile",
                                                 help="torch.compile mode for --fusion compiled: static "
                                                      "(dynamic=False, measured) or dynamic (not measured: refused)",
                                                 what="compile mode"),
    compile_cache: V.CompileCache = choices.option(V.CompileCache, V.CompileCache.COLD, "--compile-cache", "--cache",
                                                   help="torch.compile cache: cold (first start) or warm (restart; "
                                                        "--cache is an alias)", what="cache state"),
    max_size: Optional[int] = typer.Option(None, "--max-size", help="largest capture size of a preset"),
    max_num_seqs: Optional[int] = typer.Option(None, "--max-num-seqs", help="vllm: max = min(2 x this, 512)"),
    warmups: Optional[int] = typer.Option(None, "--warmups",
                                          help="eager warm-up runs before each capture (default: the profile's, 2)"),
    ctx: int = typer.Option(512, "--ctx", help="context length of the warm-up runs (512 as measured)"),
    profile: Optional[str] = typer.Option(None, "--profile", help="profile name or path (default h200)"),
    dtype: V.Dtype = choices.option(V.Dtype, V.Dtype.BF16, "--dtype", help="weights (fp8: 1-byte projection weights)", what="dtype", field="dtype"),
    kv_dtype: V.Dtype = choices.option(V.Dtype, V.Dtype.BF16, "--kv-dtype", help="KV cache (fp8: 1 byte per element)", what="KV-cache dtype", field="kv_dtype"),
    prefill_layout: Optional[str] = typer.Option(None, "--prefill-layout", help="prefill (token-count) sizes "
                                                 "captured as piecewise graphs too (SGLang PCG): sglang_pcg, "
                                                 "sglang_pcg:M or a list; one pass each under piecewise and "
                                                 "full_and_piecewise"),
    spec_tokens: Optional[int] = typer.Option(None, "--spec-tokens", help="speculative decoding: k draft tokens; "
                                              "--layout vllm|sglang|trtllm then means that engine's verify sizes "
                                              "(tokens), and the draft's graphs are captured too"),
    draft: str = typer.Option("eagle", "--draft", help="with --spec-tokens: eagle | mtp (a one-layer head) or a draft "
                              "model preset / config.json"),
    as_json: bool = typer.Option(False, "--json", help='print {"compile_s", "warmup_s", "capture_s", "total_s", '
                                                       '"graphs", ...}'),
) -> None:
    """Start-up seconds of an engine: torch.compile + warm-up runs + graph capture over a capture layout."""
    from simulator.common import limits as L
    from simulator.engine.startup import StartupModel
    from .checks import count, ctx_fits, model_flag, named, profile_flag

    fusion, graph, compile_mode, compile_cache = fusion.value, graph.value, compile_mode.value, compile_cache.value
    count("--warmups", warmups, 100, low=0)
    count("--ctx", ctx, L.MAX_CTX)
    from simulator.model.dtype import with_dtype

    m, prof = model_flag("--model", model), profile_flag("--profile", profile)
    m = with_dtype(m, dtype, kv_dtype)
    ctx_fits(m, ctx)
    spec = None
    if spec_tokens is not None:
        from simulator.layouts.spec import MAX_SPEC_TOKENS, SPEC_ENGINES, spec_layout

        count("--spec-tokens", spec_tokens, MAX_SPEC_TOKENS, low=0)
        if layout not in SPEC_ENGINES:
            raise UserError(f"--spec-tokens: --layout must be one of {', '.join(SPEC_ENGINES)} (the engine whose "
                            f"speculative capture rule applies), got {layout!r}")
        with named("--spec-tokens"):
            spec = spec_layout(layout, spec_tokens, max_size, max_num_seqs,
                               graph="piecewise" if graph == "piecewise" else "full",
                               draft=draft if draft in ("eagle", "mtp") else "model")
        sizes = list(spec.tokens)
    else:
        with named("--layout"):
            sizes = parse_layout(layout, max_size, max_num_seqs)
    prefill = None
    if prefill_layout is not None:
        from simulator.layouts.prefill import parse_prefill_layout

        with named("--prefill-layout"):
            prefill = parse_prefill_layout(prefill_layout)
    res = StartupModel(m, prof, fusion, graph, ctx=ctx, warmup_runs=warmups).layout(sizes, compile_mode,
                                                                                    compile_cache, prefill)
    sd = _draft_startup(spec, draft, m, prof, fusion, ctx, warmups, compile_mode, compile_cache) if spec else None
    if as_json:
        d = res.as_dict()
        out = {k: d[k] for k in ("compile_s", "warmup_s", "capture_s", "total_s", "graphs")}
        out.update(model=m.name, profile=prof.name, layout=layout, sizes=sorted(sizes), fusion=fusion, graph=graph,
                   compile=compile_mode, compile_cache=compile_cache, warmup_runs=_runs(prof, warmups), ctx=ctx,
                   compile_measured=d["compile_measured"], per_graph=d["per_graph"], notes=d["notes"],
                   source=d["source"])
        if prefill is not None:
            out.update(prefill_sizes=prefill)
        if sd is not None:
            out.update(sd)
            out["total_with_draft_s"] = res.total_s + sd["draft_total_s"]
        print(dumps(out))
        return
    print(f"{m.name} on {prof.name}, {fusion}/{graph}, layout {layout}: {len(sizes)} sizes, {res.graphs} capture "
          f"passes, {_runs(prof, warmups)} warm-up run(s) each")
    print(f"  compile     {res.compile_s:9.2f} s")
    print(f"  warm-up     {res.warmup_s:9.2f} s")
    print(f"  capture     {res.capture_s:9.2f} s")
    print(f"  total       {res.total_s:9.2f} s")
    if sd is not None:
        print(f"  spec k={spec.k} ({spec.engine}): target sizes in tokens; draft '{draft}' ({sd['draft_graph_mode']} "
              f"graphs): {sd['draft_graphs']} capture passes, compile {sd['draft_compile_s']:.2f} s, warm-up "
              f"{sd['draft_warmup_s']:.2f} s, capture {sd['draft_capture_s']:.2f} s")
        print(f"  total+draft {res.total_s + sd['draft_total_s']:9.2f} s")
    for n in res.notes:
        print(f"  note: {n}")
    print(f"  source: {res.source}")


def _draft_startup(spec, draft, m, prof, fusion, ctx, warmups, compile_mode, compile_cache) -> dict:
    """The draft's start-up: its own torch.compile (fusion compiled) and a warm-up + capture pass per size of each
    graph family (simulator/layouts/spec.py) in the engine's draft graph mode (simulator/engine/spec.py)."""
    from simulator.engine.spec import DRAFT_GRAPH
    from simulator.engine.startup import StartupModel
    from simulator.model.spec import draft_for
    from .checks import named

    with named("--draft"):
        dr = draft_for(m, draft)
    mode = DRAFT_GRAPH[spec.engine]
    comp = w = c = 0.0
    n = 0
    for i, (name, sizes) in enumerate((spec.draft or {}).items()):
        r = StartupModel(dr.model, prof, fusion, mode, ctx=ctx, warmup_runs=warmups).layout(list(sizes), compile_mode,
                                                                                            compile_cache)
        comp = comp if i else r.compile_s  # one compiled drafter, however many graph families
        # SGLang's draft graph holds the multi-step draft_forward: k - 1 forward passes warmed up and captured
        steps = max(1, spec.k - 1) if (spec.engine, name) == ("sglang", "draft") else 1
        w, c, n = w + steps * r.warmup_s, c + steps * r.capture_s, n + r.graphs
    return {"spec_tokens": spec.k, "spec_engine": spec.engine, "draft": draft, "draft_kind": dr.kind,
            "draft_graph_mode": mode, "draft_graphs": n, "draft_compile_s": comp, "draft_warmup_s": w,
            "draft_capture_s": c, "draft_total_s": comp + w + c}


def _runs(prof, warmups: Optional[int]) -> int:
    from simulator.engine.startup import figures

    return figures(prof)[0].warmup_runs if warmups is None else warmups
