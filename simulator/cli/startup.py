"""`launchsim startup`: an engine's start-up cost (torch.compile, warm-up runs, CUDA-graph capture) for a model
and capture layout, from the measured start-up model (simulator/engine/startup.py)."""

from __future__ import annotations

from typing import Optional

import typer

from . import app, choices
from simulator.common import vocab as V
from simulator.layouts.buckets import parse_layout
from simulator.common.jsonfile import dumps
from .buckets import LAYOUT_HELP


@app.command()
def startup(
    model: str = typer.Option(..., "--model", help="model preset or config.json path"),
    layout: str = typer.Option("vllm", "--layout", help=LAYOUT_HELP),
    fusion: V.Fusion = choices.option(V.Fusion, V.DEFAULT_FUSION, "--fusion", help="fusion level (vLLM V1's "
                                      "default)", what="fusion level"),
    graph: V.GraphMode = choices.option(V.GraphMode, V.DEFAULT_GRAPH, "--graph", help="CUDA-graph mode (vLLM V1's "
                                        "default)", what="graph mode"),
    compile_mode: Optional[V.CompileMode] = choices.option(
        V.CompileMode, None, "--compile", help="torch.compile mode, for --fusion compiled only: static "
        "(dynamic=False, measured; the default) or dynamic (dynamic=True: from the dynamic-compile rows, no "
        "held-out check)", what="compile mode"),
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
    as_json: bool = typer.Option(False, "--json", help='print {"compile_s", "warmup_s", "capture_s", "total_s", '
                                                       '"graphs", ...}'),
) -> None:
    """Start-up seconds of an engine: torch.compile + warm-up runs + graph capture over a capture layout."""
    from simulator.common import limits as L
    from simulator.engine.startup import StartupModel
    from .checks import count, ctx_fits, model_flag, named, profile_flag

    from simulator.common.errors import UserError

    if compile_mode is not None and fusion != V.Fusion.COMPILED:  # honoured only when torch.compile runs
        raise UserError(f"--compile {compile_mode.value} sets torch.compile, which runs only under --fusion "
                        f"compiled (got --fusion {fusion.value})")
    compile_mode = compile_mode or V.CompileMode.STATIC
    fusion, graph, compile_mode, compile_cache = fusion.value, graph.value, compile_mode.value, compile_cache.value
    count("--warmups", warmups, 100, low=0)
    count("--ctx", ctx, L.MAX_CTX)
    from simulator.model.dtype import with_dtype

    m, prof = model_flag("--model", model), profile_flag("--profile", profile)
    m = with_dtype(m, dtype, kv_dtype)
    from simulator.engine.graph_memory import check_weights_fit

    check_weights_fit(m, prof)
    ctx_fits(m, ctx)
    with named("--layout"):
        sizes = parse_layout(layout, max_size, max_num_seqs)
    prefill = None
    if prefill_layout is not None:
        from simulator.layouts.prefill import parse_prefill_layout

        with named("--prefill-layout"):
            prefill = parse_prefill_layout(prefill_layout)
    res = StartupModel(m, prof, fusion, graph, ctx=ctx, warmup_runs=warmups).layout(sizes, compile_mode,
                                                                                    compile_cache, prefill)
    if as_json:
        d = res.as_dict()
        out = {k: d[k] for k in ("compile_s", "warmup_s", "capture_s", "total_s", "graphs")}
        out.update(model=m.name, profile=prof.name, layout=layout, sizes=sorted(sizes), fusion=fusion, graph=graph,
                   compile=compile_mode, compile_cache=compile_cache, warmup_runs=_runs(prof, warmups), ctx=ctx,
                   compile_measured=d["compile_measured"], per_graph=d["per_graph"], notes=d["notes"],
                   source=d["source"])
        if prefill is not None:
            out.update(prefill_sizes=prefill)
        print(dumps(out))
        return
    print(f"{m.name} on {prof.name}, {fusion}/{graph}, layout {layout}: {len(sizes)} sizes, {res.graphs} capture "
          f"passes, {_runs(prof, warmups)} warm-up run(s) each")
    print(f"  ({V.defaults_note(fusion, graph)})")
    print(f"  compile     {res.compile_s:9.2f} s")
    print(f"  warm-up     {res.warmup_s:9.2f} s")
    print(f"  capture     {res.capture_s:9.2f} s")
    print(f"  total       {res.total_s:9.2f} s")
    for n in res.notes:
        print(f"  note: {n}")
    print(f"  source: {res.source}")


def _runs(prof, warmups: Optional[int]) -> int:
    from simulator.engine.startup import figures

    return figures(prof)[0].warmup_runs if warmups is None else warmups
