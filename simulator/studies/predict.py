"""Runs the `predict` kind (what `launchsim predict --model ...` runs): one step of a `StepSetup`, routed once
(padded to the layout, or eager above it), its host-noise band, and optionally the engine loop around it with its
two-lane report. Returns the JSON record the command prints; the CLI only fills the scenario and prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulator.common.errors import UserError
from simulator.config.predict import PredictScenario


def setup_of(sc: PredictScenario):
    """The scenario's `StepSetup` (config/stepopts.build_setup) with its capture layout parsed. With spec_tokens a
    layout naming an engine (vllm, sglang, trtllm) means that engine's verify capture sizes in tokens
    (simulator/layouts/spec.py) and its draft routing; any other layout's sizes count verify tokens as given."""
    from simulator.config.stepopts import build_setup

    sizes, engine = None, "vllm"
    if sc.layout is not None:
        from simulator.layouts.buckets import parse_layout

        if sc.spec_tokens and isinstance(sc.layout, str) and sc.layout in ("vllm", "sglang", "trtllm"):
            from simulator.layouts.spec import spec_layout

            engine = sc.layout
            sizes = list(spec_layout(engine, sc.spec_tokens, tp=sc.tensor_parallel_size,
                                     graph="piecewise" if sc.graph == "piecewise" else "full",
                                     draft=sc.draft if sc.draft in ("eagle", "mtp") else "model").tokens)
        else:
            sizes = parse_layout(sc.layout)
    return build_setup(sc, sc.model, sc.profile, sc.fusion, sc.graph, sizes, spec_engine=engine)


def _spec(sc: PredictScenario, setup) -> tuple[dict, Any]:
    """The speculative step: the verify step's figures (the record's step fields) and the per-token ones
    (simulator/engine/spec.py), against plain decode at the layout's plain sizes."""
    from simulator.engine.spec import predict_spec_setup

    base_sizes = None
    if sc.layout is not None:
        from simulator.layouts.buckets import parse_layout

        base_sizes = parse_layout(sc.layout, tp=sc.tensor_parallel_size) if isinstance(sc.layout, str) \
            else parse_layout(sc.layout)
    sp = predict_spec_setup(setup, sc.batch, sc.ctx, sc.engine, sc.replicates, sc.seed, baseline_sizes=base_sizes)
    d = {**sp.verify.as_dict(), **sp.as_dict(), "draft": sc.draft, "acceptance": sc.acceptance,
         "spec_engine": setup.spec.engine, "q_len": 1 + sc.spec_tokens}
    d.pop("draft_passes")
    d["draft_passes"] = sp.draft_passes
    return d, sp


def run_predict(sc: PredictScenario, out: Path | None = None) -> dict:
    from simulator.engine.predict import predict_setup
    from simulator.model.dtype import dtype_fields
    from simulator.model.models import family_info
    from simulator.model.parallel import tp_fields
    from simulator.model.workload import StepShape

    setup = setup_of(sc)
    m = setup.model
    extra = max(sc.prefill_len, 1 + sc.spec_tokens, 1)
    if sc.ctx + extra > m.max_position_embeddings:
        raise UserError(f"field 'ctx': {sc.ctx} (+{extra} new token(s)) exceeds {m.name}'s max_position_embeddings "
                        f"{m.max_position_embeddings}")
    shape = StepShape(sc.batch, sc.ctx, sc.prefill_seqs, sc.prefill_len)
    if setup.spec is not None:  # the verify step (q_len 1 + k) and its draft loop: engine/spec.py
        sd, sp = _spec(sc, setup)
        p = sp.verify
        d = {"model": sc.model, "batch": sc.batch, "ctx": sc.ctx, "fusion": sc.fusion, "engine": sc.engine,
             "impl": setup.recipe, **sd, **tp_fields(m, setup.profile), **dtype_fields(m), **family_info(m)}
    else:
        p = predict_setup(setup, shape, sc.engine, sc.replicates, sc.seed)
        d = {"model": sc.model, "batch": sc.batch, "ctx": sc.ctx, "fusion": sc.fusion, "engine": sc.engine,
             "impl": setup.recipe, **p.as_dict(), **tp_fields(m, setup.profile), **dtype_fields(m), **family_info(m)}
    d.update(_host_fields(setup, sc, p, band=setup.spec is None))
    if sc.fusion == "compiled":  # which torch.compile the step assumes (None: vLLM's, dynamic=False)
        d.update(compile_dynamic=setup.dynamic)
        if setup.dynamic and setup.compile_inputs:
            d.update(compile_inputs=setup.compile_inputs)
    if setup.lora_rank:  # the adapter the step carries (workload.py lora_delta)
        d.update(lora_rank=setup.lora_rank)
    if setup.recipe == "vllm":  # an op list read from vLLM's source, not profiled: said in every prediction
        from simulator.model.recipes import RECIPES

        d.update(impl_checked_by=RECIPES["vllm"].measured)
    if setup.recipe == "hf":
        d.update(kv_cache=setup.cache, max_cache_len=setup.max_cache_len or sc.ctx + 1 if setup.cache == "static"
                 else None)
    routed = sc.attention_backend != "flashinfer" or sc.prefill_layout is not None
    if sc.layout is not None or routed:  # where the capture sent the step (graph: the mode it ran in)
        d.update(layout=sc.layout if isinstance(sc.layout, str) or sc.layout is None
                 else ",".join(map(str, sc.layout)), requested_graph=sc.graph,
                 padded=p.route.padded if p.route is not None else None)
    if routed:
        d.update(attention_backend=sc.attention_backend, prefill_layout=sc.prefill_layout)
    if sc.prefill_seqs:
        d.update(prefill_seqs=sc.prefill_seqs, prefill_len=sc.prefill_len, tokens=shape.tokens)
    if sc.steps:
        from simulator.engine.steploop import loop_of

        loop, _ = loop_of(setup, shape, sc.engine, sc.steps, sc.scheduling, sc.sampling)
        d.update(forward_step_ms=d["step_ms"], forward_bound=d["bound"], sampling=sc.sampling, **loop.as_dict())
        if sc.report is not None:
            loop_report(Path(sc.report), d, loop.timeline)
    from simulator.studies.record import write_record

    write_record(out, sc, d, "prediction", "prediction")
    return d


def loop_report(path: Path, d: dict, tl) -> None:
    """The engine loop's CPU and GPU lanes across its steps (at most 4,000 launches drawn)."""
    from simulator.report import charts
    from simulator.report.html import write_html

    n = min(tl.plan.launches, 4000)
    title = (f"{d['model']} batch {d['batch']}, {d['graph']} graph, {d['steps']} steps, {d['scheduling']} "
             f"scheduling: step {d['step_ms']:.3f} ms, bound {d['bound']}")
    note = (f"host work per step {d['host_ms_per_step']:.3f} ms (engine {d['engine_host_ms_per_step']:.3f} ms), "
            f"GPU per step {d['gpu_ms_per_step']:.3f} ms, host waiting {d['host_wait_ms_per_step']:.3f} ms; "
            f"first {n} of {tl.plan.launches} launches drawn")
    try:
        write_html(path, "launchsim: engine loop", [charts.timeline_figure(tl, n, title)], intro=note)
    except OSError as e:
        raise UserError(f"field 'report': {path}: cannot write the report ({e.strerror or e.__class__.__name__}"
                        f"{': ' + str(e.filename) if e.filename and str(e.filename) != str(path) else ''})") from None


def run_predict_scenario(sc: PredictScenario, out: Path | None) -> dict:
    """The `predict` kind under `launchsim run`: the record as the result's one row."""
    from simulator.studies.record import as_result

    return as_result(run_predict(sc, out), "prediction")


def _host_fields(setup, sc: PredictScenario, p, band: bool = True) -> dict:
    """The host state a prediction assumes (`host_canary_us`, `host_state`) and, for a step with eager launches,
    `step_ms_host_band`: the same step with the profile's host lane at the calibration machine's fast and slow
    canaries (model/profile.canary_band), the band a host of unknown state lies in. `band` False (a speculative
    step, whose figure is verify + draft): no band (re-pricing `shape` would price a plain decode step instead)."""
    from simulator.engine.predict import predict_setup
    from simulator.model.profile import assumed_canary, canary_band, host_scaled, host_state

    prof = setup.profile
    out: dict = {"host_canary_us": assumed_canary(prof), "host_state": host_state(prof)}
    if not band or prof.host.canary is None or p.route is None or p.route.mode == "full":
        return out
    from dataclasses import replace

    from simulator.engine.setup import StepSetup
    from simulator.model.workload import StepShape

    shape = StepShape(sc.batch, sc.ctx, sc.prefill_seqs, sc.prefill_len)
    here = assumed_canary(prof)

    def at(c: float) -> float:  # the step on a host of canary c (the prediction itself where c is its host)
        if c == here:
            return p.result.step_s * 1e3
        scaled = StepSetup.of(setup.model, host_scaled(prof, c))
        return predict_setup(replace(setup, costs=scaled.costs, digest=scaled.digest), shape,
                             sc.engine).result.step_s * 1e3

    out["step_ms_host_band"] = [at(c) for c in canary_band(prof)]
    return out

