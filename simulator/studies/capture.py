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
    try:
        sizes = parse_layout(sc.layout, sc.max_size, sc.max_num_seqs, tp=tp)
    except UserError as e:
        raise UserError(f"field 'layout': {e}") from None
    return setup, sizes


def _write(out: Path | None, sc, d: dict) -> None:
    if out is not None:
        from simulator.common.jsonfile import write_json

        from simulator.report.html import table_html, write_html

        flat = {k: v for k, v in d.items() if not isinstance(v, (list, dict))}
        write_json(out / "result.json", {"scenario": sc.model_dump(mode="json"), "result": d, "rows": [d],
                                         "summary_columns": list(flat)[:12]})
        write_html(out / "report.html", f"launchsim: {sc.name} ({sc.kind})", [], [table_html([flat], sc.kind)],
                   intro=sc.description)


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
    b = sc.memory_budget
    fits = b is None or mem.total_bytes <= b
    d = {"model": load_model(sc.model, sc.assume_family).name, **tp_fields(m, prof), "profile": prof.name,
         "fusion": sc.fusion, "graph": sc.graph, "layout": sc.layout, "impl": setup.recipe, "retention": ret, **mem.as_dict(), "budget_bytes": b,
         "fits_budget": fits, "weights_bytes": m.weight_bytes, "kv_cache_bytes": kv,
         "kv_tokens": kv_cache_tokens(m, kv), "kv_fits": kv > 0}
    if prefill is not None:
        d["prefill_sizes"] = prefill
    _write(out, sc, d)
    return d


def _as_result(d: dict) -> dict:
    flat = {k: v for k, v in d.items() if not isinstance(v, (list, dict))}
    return {"result": d, "rows": [flat], "summary_columns": list(flat)[:12]}


def run_startup_scenario(sc: StartupScenario, out: Path | None) -> dict:
    return _as_result(run_startup(sc, out))


def run_graph_memory_scenario(sc: GraphMemoryScenario, out: Path | None) -> dict:
    return _as_result(run_graph_memory(sc, out))
