"""Capture-layout commands: `buckets` (a preset's sizes), `pad` (where one batch lands) and `graph-memory`
(pinned graph memory and capture time of a layout, checked against a budget; exit 1 when over it)."""

from __future__ import annotations

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
    from .checks import as_flags, named

    if (preset is None) == (layout is None):
        raise UserError("give a preset name or --layout LAYOUT")
    if spec_tokens is not None:
        _spec_buckets(preset, layout, spec_tokens, max_size, max_num_seqs, tp, as_json)
        return
    with named("preset" if layout is None else "--layout"), as_flags({"max_size": "--max-size", "max_num_seqs": "--max-num-seqs"}):
        name = (preset.value if layout is None else layout).strip()
        sizes = (preset_sizes(name, max_size, max_num_seqs) if layout is None
                 else parse_layout(name, max_size, max_num_seqs))
    if as_json:
        print(dumps({"sizes": sizes, "engine_syntax": engine_syntax(sizes)}))
    else:
        print(f"{preset if name in LAYOUT_PRESETS else 'layout'}: {len(sizes)} sizes: {', '.join(map(str, sizes))}")
        from .tables import raw_lines

        raw_lines(engine_lines(sizes))


def _spec_buckets(preset, layout, k, max_size, max_num_seqs, tp, as_json) -> None:
    """`buckets ENGINE --spec-tokens k`: the engine's verify capture sizes (simulator/layouts/spec.py)."""
    from simulator.layouts.spec import MAX_SPEC_TOKENS, SPEC_ENGINES, spec_layout
    from simulator.model.parallel import check_tp
    from .checks import count, named

    count("--spec-tokens", k, MAX_SPEC_TOKENS, low=0)
    check_tp(tp, "--tp")
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
    from .checks import as_flags, count, named

    count("batch", batch, L.MAX_BATCH)
    with named("--layout"), as_flags({"max_size": "--max-size", "max_num_seqs": "--max-num-seqs"}):
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


def _graph_memory(given: dict, flags: dict, as_json: bool = False) -> None:
    """Pinned graph memory, capture time and KV capacity of a layout; exit 1 when over --memory-budget. Every
    option but --json is a field of the `graph_memory` scenario kind (`launchsim schema`)."""
    from simulator.config.capture import GraphMemoryScenario
    from simulator.studies.capture import run_graph_memory
    from .flags import run_with_flags

    d = run_with_flags(GraphMemoryScenario, "graph_memory", given, flags, run_graph_memory)
    b, fits, kv = d["budget_bytes"], d["fits_budget"], d["kv_cache_bytes"]
    if as_json:
        print(dumps(d))
    else:
        print_graph_memory(d, given)
    if not fits:
        total = d.get("total_with_draft_bytes", d["total_bytes"])
        print(f"launchsim: graph memory {total:.0f} bytes exceeds the budget {b} bytes", file=sys.stderr)
        raise typer.Exit(1)
    if kv <= 0:
        print("launchsim: no memory left for the KV cache", file=sys.stderr)
        raise typer.Exit(1)


def print_graph_memory(d: dict, given: dict) -> None:
    """`graph-memory`'s text output of result `d` (`given`: the flags the user gave)."""
    b, fits, kv = d["budget_bytes"], d["fits_budget"], d["kv_cache_bytes"]
    private = bool(given.get("private"))
    pool = "private pools" if private else f"one shared pool (largest first, outputs {d['retention']})"
    tp = d.get("tp", 1)
    per_gpu = "" if tp == 1 else f" at tp {tp} (per GPU; collective figures unmeasured)"
    parts = d.get("parts", {})
    print(f"{d['model']}{per_gpu} on {d['profile']}, {given.get('fusion') or 'fused'}/"
          f"{given.get('graph') or 'full'} ({d['impl']}), layout {d['layout']}: {len(d['sizes'])} sizes, "
          f"{d['graphs']} graphs, {pool} [{d['source']}]")
    print(f"  graph pool      {d['pool_bytes'] / MiB:10.1f} MiB")
    for name, part in ((k, v) for k, v in parts.items() if k != "static_buffers"):
        print(f"    {name:<22}{part['bytes'] / MiB:10.1f} MiB  {part['source']}")
    print(f"  static buffers  {d['static_buffer_bytes'] / MiB:10.1f} MiB  (inputs + logits for size "
          f"{max(d['sizes'])})")
    print(f"  pinned total    {d['total_bytes'] / MiB:10.1f} MiB"
          + ("" if b is None else f"   budget {b / MiB:.1f} MiB: {'ok' if fits else 'OVER BUDGET'}"))
    print(f"  capture time    {d['capture_s']:10.2f} s")
    print(f"  ({V.defaults_note(d['fusion'], d['graph'])})")
    if d.get("spec_tokens"):
        print(f"  spec k={d['spec_tokens']} ({d['spec_engine']}): target sizes in tokens (multiples of "
              f"{d['spec_tokens'] + 1}); draft '{d['draft']}' in {d['draft_graph_mode']} graphs, {d['draft_graphs']} "
              "graphs (own shared pool per family: an upper bound, engines share the target's pool)")
        print(f"  draft graphs    {d['draft_total_bytes'] / MiB:10.1f} MiB, capture {d['draft_capture_s']:.2f} s, "
              f"weights {d['draft_weights_bytes'] / MiB:.0f} MiB")
        print(f"  pinned + draft  {d['total_with_draft_bytes'] / MiB:10.1f} MiB")
    print(f"  KV cache        {kv / MiB:10.1f} MiB = {d['kv_tokens']} tokens "
          f"(after {d['weights_bytes'] / MiB:.0f} MiB weights, graphs and workspace"
          + (", the draft's graphs, weights and its KV per token)" if d.get("spec_tokens") else ")"))



def _register_graph_memory() -> None:
    from simulator.config.capture import GraphMemoryScenario
    from .generated import command, extra_option

    extra = [extra_option("as_json", bool, False, "--json", help="print one JSON object")]
    app.command(name="graph-memory")(command(_graph_memory, GraphMemoryScenario, extra, aliases={
        "tensor_parallel_size": ("--tp",), "memory_budget": ("--budget",), "gpu_memory_utilization": ("--gpu-util",)}))


_register_graph_memory()
