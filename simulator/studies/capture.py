"""Runs the `startup` and `graph_memory` kinds (what `launchsim startup` / `launchsim graph-memory` run): the cost of
capturing a layout for one `StepSetup` (its recipe decides the captured nodes and the warm-up passes). Each returns
the JSON record the command prints; the CLI only fills the scenario and prints."""

from __future__ import annotations

from pathlib import Path

from simulator.common.errors import UserError
from simulator.config.capture import GraphMemoryScenario, StartupScenario


def _setup_and_sizes(sc):
    from simulator.config.stepopts import build_setup
    from simulator.layouts.buckets import parse_layout

    from simulator.engine.graph_memory import check_weights_fit

    setup = build_setup(sc, sc.model, sc.profile, sc.fusion, sc.graph)
    check_weights_fit(setup.model, setup.profile)
    tp = sc.tensor_parallel_size
    if sc.spec_tokens:
        sizes = list(_spec_layout(sc).tokens)
        return setup, sizes
    try:
        sizes = parse_layout(sc.layout, sc.max_size, sc.max_num_seqs, tp=tp)
    except UserError as e:
        raise UserError(f"field 'layout': {e}") from None
    return setup, sizes


def _spec_layout(sc):
    """spec_tokens: the layout names the engine whose speculative capture rule applies (simulator/layouts/spec.py)."""
    from simulator.layouts.spec import SPEC_ENGINES, spec_layout

    if sc.layout not in SPEC_ENGINES:
        raise UserError(f"field 'layout': with spec_tokens it must be one of {', '.join(SPEC_ENGINES)} (the engine "
                        f"whose speculative capture rule applies), got {sc.layout!r}")
    try:
        return spec_layout(sc.layout, sc.spec_tokens, sc.max_size, sc.max_num_seqs, tp=sc.tensor_parallel_size,
                           graph="piecewise" if sc.graph == "piecewise" else "full",
                           draft=sc.draft if sc.draft in ("eagle", "mtp") else "model")
    except UserError as e:
        raise UserError(f"field 'spec_tokens': {e}") from None


def _draft(sc):
    """The draft of the scenario's target (simulator/model/spec.py), its ModelSpec sharded and dtyped as the
    target's, and the engine's draft graph mode (engine/setup.DRAFT_GRAPH)."""
    from dataclasses import replace

    from simulator.engine.setup import DRAFT_GRAPH
    from simulator.model.dtype import with_dtype
    from simulator.model.parallel import shard
    from simulator.model.resolve import resolve_model
    from simulator.model.spec import draft_for

    target = resolve_model(sc.model, sc.dtype, sc.kv_dtype, 1, sc.assume_family)
    try:
        dr = draft_for(target, sc.draft)
        dm = shard(with_dtype(dr.model, sc.dtype, sc.kv_dtype) if dr.kind == "model" else dr.model,
                   sc.tensor_parallel_size)
    except UserError as e:
        raise UserError(f"field 'draft': {e}") from None
    return replace(dr, model=dm), DRAFT_GRAPH[sc.layout]


def _draft_memory(sc, costs, ret) -> dict:
    """The draft's graphs (each family of simulator/layouts/spec.py in its own shared pool: an upper bound, the
    engines share the target's pool), their capture time, the draft's weights (a head shares the target's embedding
    and lm_head) and its KV bytes per token."""
    from simulator.engine.graph_memory import GraphMemoryModel

    L = _spec_layout(sc)
    dr, mode = _draft(sc)
    total = cap = 0.0
    graphs, per = 0, {}
    for name, sizes in (L.draft or {}).items():
        lm = GraphMemoryModel(dr.model, costs, sc.fusion, mode, ret).layout(list(sizes), shared_pool=not sc.private)
        total, cap, graphs = total + lm.total_bytes, cap + lm.capture_s, graphs + lm.graphs
        per[name] = {"sizes": list(sizes), "graphs": lm.graphs, "total_bytes": lm.total_bytes,
                     "capture_s": lm.capture_s}
    return {"spec_tokens": L.k, "spec_engine": L.engine, "draft": sc.draft, "draft_kind": dr.kind,
            "draft_graph_mode": mode, "draft_graphs": graphs, "draft_total_bytes": total, "draft_capture_s": cap,
            "draft_families": per, "draft_weights_bytes": dr.weight_bytes,
            "draft_kv_bytes_per_token": dr.kv_bytes_per_token(), "spec_requests": list(L.requests)}


def _draft_startup(sc, costs) -> dict:
    """The draft's start-up: its own torch.compile (fusion compiled, once) and a warm-up + capture pass per size of
    each graph family in the engine's draft graph mode; SGLang's draft graph holds the k - 1 forwards of its
    multi-step draft_forward (speculative/eagle_draft_cuda_graph_runner.py)."""
    from simulator.engine.startup import StartupModel

    L = _spec_layout(sc)
    dr, mode = _draft(sc)
    comp = w = c = 0.0
    n = 0
    for i, (name, sizes) in enumerate((L.draft or {}).items()):
        r = StartupModel(dr.model, costs, sc.fusion, mode, ctx=sc.ctx, warmup_runs=sc.warmups).layout(
            list(sizes), sc.compile, sc.compile_cache)
        comp = comp if i else r.compile_s
        steps = max(1, L.k - 1) if (L.engine, name) == ("sglang", "draft") else 1
        w, c, n = w + steps * r.warmup_s, c + steps * r.capture_s, n + r.graphs
    return {"spec_tokens": L.k, "spec_engine": L.engine, "draft": sc.draft, "draft_kind": dr.kind,
            "draft_graph_mode": mode, "draft_graphs": n, "draft_compile_s": comp, "draft_warmup_s": w,
            "draft_capture_s": c, "draft_total_s": comp + w + c}


def _write(out: Path | None, sc, d: dict) -> None:
    from simulator.studies.record import write_record

    write_record(out, sc, d, "result", sc.kind)


def run_startup(sc: StartupScenario, out: Path | None = None) -> dict:
    from simulator.engine.startup import StartupModel, figures

    setup, sizes = _setup_and_sizes(sc)
    m, prof = setup.model, setup.profile
    if sc.ctx + 1 > m.max_position_embeddings:
        raise UserError(f"field 'ctx': {sc.ctx} (+1 new token) exceeds {m.name}'s max_position_embeddings "
                        f"{m.max_position_embeddings}")
    prefill = list(setup.capture.prefill_sizes) if setup.capture.prefill_sizes is not None else None
    res = StartupModel.of(setup, ctx=sc.ctx, warmup_runs=sc.warmups).layout(sizes, sc.compile, sc.compile_cache,
                                                                            prefill)
    d = res.as_dict()
    runs = figures(prof)[0].warmup_runs if sc.warmups is None else sc.warmups
    rec = {k: d[k] for k in ("compile_s", "warmup_s", "capture_s", "total_s", "graphs")}
    rec.update(model=m.name, profile=prof.name, layout=sc.layout, sizes=sorted(sizes), fusion=sc.fusion,
               impl=setup.recipe, graph=sc.graph, compile=sc.compile, compile_cache=sc.compile_cache,
               warmup_runs=runs, ctx=sc.ctx, compile_measured=d["compile_measured"], per_graph=d["per_graph"],
               notes=d["notes"], source=d["source"])
    if prefill is not None:
        rec.update(prefill_sizes=prefill)
    if sc.spec_tokens:
        sd = _draft_startup(sc, setup.costs)
        rec.update(sd, total_with_draft_s=rec["total_s"] + sd["draft_total_s"])
    _write(out, sc, rec)
    return rec


def run_graph_memory(sc: GraphMemoryScenario, out: Path | None = None) -> dict:
    from simulator.engine.graph_memory import GraphMemoryModel, default_retention, kv_cache_bytes, kv_cache_tokens
    from simulator.model.models import load_model
    from simulator.model.parallel import tp_fields

    setup, sizes = _setup_and_sizes(sc)
    m, prof = setup.model, setup.profile
    ret = default_retention(sc.layout) if sc.retention == "auto" else sc.retention
    prefill = list(setup.capture.prefill_sizes) if setup.capture.prefill_sizes is not None else None
    mem = GraphMemoryModel.of(setup, ret).layout(sizes, shared_pool=not sc.private, prefill_sizes=prefill)
    kv = kv_cache_bytes(m, prof, mem, sc.workspace, sc.gpu_memory_utilization)
    kv_tok = kv_cache_tokens(m, kv)
    sd = _draft_memory(sc, setup.costs, ret) if sc.spec_tokens else None
    total = mem.total_bytes
    if sd is not None:  # the draft's graphs and weights come off the KV cache; each token holds the draft's KV too
        kv = kv - sd["draft_total_bytes"] - sd["draft_weights_bytes"]
        kv_tok = max(0, int(kv // (m.kv_bytes_per_token() + sd["draft_kv_bytes_per_token"])))
        total += sd["draft_total_bytes"]
    b = sc.memory_budget
    fits = b is None or total <= b
    d = {"model": load_model(sc.model, sc.assume_family).name, **tp_fields(m, prof), "profile": prof.name,
         "fusion": sc.fusion, "graph": sc.graph, "layout": sc.layout, "impl": setup.recipe, "retention": ret, **mem.as_dict(), "budget_bytes": b,
         "fits_budget": fits, "weights_bytes": m.weight_bytes, "kv_cache_bytes": kv,
         "kv_tokens": kv_tok, "kv_fits": kv > 0}
    if sd is not None:
        d.update(sd, total_with_draft_bytes=total)
    if prefill is not None:
        d["prefill_sizes"] = prefill
    _write(out, sc, d)
    return d


def run_startup_scenario(sc: StartupScenario, out: Path | None) -> dict:
    from simulator.studies.record import as_result

    return as_result(run_startup(sc, out), "result")


def run_graph_memory_scenario(sc: GraphMemoryScenario, out: Path | None) -> dict:
    from simulator.studies.record import as_result

    return as_result(run_graph_memory(sc, out), "result")
