"""From validated scenario settings to serving runs: replica configurations, workloads, replications.

Seeds: one root `SeedSequence(seed)`; replication r uses its r-th child (spawned without mutating the root),
and that child spawns the arrival, prompt and output streams. Every configuration and every rate of a study
reuses the same replication seeds (common random numbers), so comparisons see the same requests.
"""

from __future__ import annotations

import numpy as np

from simulator.common.memo import memo
from simulator.layouts.buckets import parse_layout
from simulator.engine.graph_memory import GiB
from simulator.model.profile import load_profile
from .arrivals import Trace, child_seeds, load_trace, make_workload  # noqa: F401
from .replica import Prepared, ServeConfig, ServeResult, prepare, simulate_serving

# Metrics averaged across replications (the rest are taken from the first replication or summed).
_SUMMED = ("requests", "completed", "unfinished", "rejected", "preemptions", "steps", "decode_steps", "mixed_steps")


def build_config(run, model, profile: str | None, fusion: str, graph: str, layout, layout_label: str | None = None
                 ) -> ServeConfig:
    """A `ServeConfig` from a scenario's run settings (`RunModel`) and one configuration; `model`: a name, a path or
    the ModelSpec it resolved to (config/refs.py passes the one its model check loaded)."""
    from simulator.engine.setup import StepSetup
    from simulator.model.resolve import resolve_model

    tp = run.tensor_parallel_size  # per-GPU shard: weights, KV and step time are one GPU's
    m = resolve_model(model, run.dtype, run.kv_dtype, tp, run.assume_family)
    prof = load_profile(profile)
    e = run.engine
    spec_engine = "vllm"
    if run.spec_tokens and graph != "none":
        sizes, spec_engine = spec_sizes(run, layout, graph, tp)
    else:
        sizes = tuple(parse_layout(layout, max_num_seqs=e.max_num_seqs, tp=tp)) if graph != "none" else (1,)
    if run.spec_tokens and graph == "none" and isinstance(layout, str) and layout in ("vllm", "sglang", "trtllm"):
        spec_engine = layout
    label = layout_label or (layout if isinstance(layout, str) else f"{len(sizes)} sizes")
    return ServeConfig(
        model=m, profile=prof, fusion=fusion, graph=graph, sizes=sizes,
        layout_label=label if graph != "none" else "-",
        max_num_seqs=e.max_num_seqs, max_num_batched_tokens=e.max_num_batched_tokens,
        chunked_prefill=e.chunked_prefill, max_model_len=e.max_model_len, gpu_util=e.gpu_memory_utilization,
        workspace_bytes=e.workspace_gib * GiB, kv_blocks=e.kv_blocks, ctx_bucket=e.ctx_bucket,
        warmup_frac=run.warmup_frac, drain_s=run.drain_s, merge_steps=e.merge_steps,
        scheduling=run.scheduling, sampling=run.sampling, attention_backend=run.attention_backend,
        prefill_sizes=run.prefill_sizes() if graph != "none" else None,
        step=StepSetup.from_options(run, model, prof, fusion, graph, sizes if graph != "none" else (), spec_engine),
    )


def spec_sizes(run, layout, graph: str, tp: int) -> tuple[tuple[int, ...], str]:
    """Verify capture sizes in tokens and the engine whose draft routing applies: a preset vllm / sglang / trtllm
    gives that engine's speculative capture rule (simulator/layouts/spec.py, at the run's max_num_seqs and token
    budget); explicit sizes are taken as verify token counts (vLLM's draft routing); other presets are refused."""
    from simulator.common.errors import UserError
    from simulator.layouts.spec import SPEC_ENGINES, SpecLayoutError, spec_layout

    e = run.engine
    if isinstance(layout, str):
        if layout not in SPEC_ENGINES:
            raise UserError(f"field 'layout': with spec_tokens it must be one of {', '.join(SPEC_ENGINES)} (the "
                            f"engine whose speculative capture rule applies) or a list of verify token sizes, got "
                            f"{layout!r}")
        try:
            L = spec_layout(layout, run.spec_tokens, None, e.max_num_seqs, tp=tp,
                            graph="piecewise" if graph == "piecewise" else "full",
                            max_num_batched_tokens=e.max_num_batched_tokens,
                            draft=run.draft if run.draft in ("eagle", "mtp") else "model")
        except SpecLayoutError as err:
            raise UserError(f"field 'spec_tokens': {err}") from None
        return tuple(L.tokens), layout
    return tuple(parse_layout(layout, max_num_seqs=e.max_num_seqs, tp=tp)), "vllm"


def replication_seeds(seed: int, n: int) -> list[np.random.SeedSequence]:
    return child_seeds(np.random.SeedSequence(seed), n)


def load_run_trace(run) -> Trace | None:
    return load_trace(run.arrivals.trace) if run.arrivals.process == "trace" else None


def run_replications(run, cfg: ServeConfig, rate: float | None, prep: Prepared | None = None,
                     trace: Trace | None = None) -> list[ServeResult]:
    """`run.replications` serving runs of `cfg` at `rate` (None: a trace's own rate)."""
    prep = prep or prepare(cfg)
    arr, pr, out = run.arrivals.to_spec(), _spec(run.prompt), _spec(run.output)
    results = []
    for ss in replication_seeds(run.seed, run.replications):
        wl = make_workload(arr, pr, out, rate, run.duration_s, ss, trace)
        # the accepted-token draws: the replication's 4th stream (make_workload takes its first three)
        results.append(simulate_serving(cfg, wl, run.duration_s, prep, spec_seed=child_seeds(ss, 4)[3]))
    return results


_SPECS = memo("serving.setup._SPECS", "length models' samplers (`lm.to_spec()`) by the model's JSON (a value): a "
              "csv length model reads its file once per process, not once per rate", 256)


def _spec(lm):
    """`lm.to_spec()`, memoised: a csv length model reads its file once per process, not once per rate."""
    key = lm.model_dump_json()
    hit = _SPECS.get(key)
    if hit is None:
        hit = _SPECS.put(key, lm.to_spec())
    return hit


def mean_metrics(results: list[ServeResult]) -> dict:
    """Metrics averaged over replications (counts summed; None where any replication has none)."""
    if len(results) == 1:
        return dict(results[0].metrics)
    out = {}
    for k, v in results[0].metrics.items():
        vals = [r.metrics.get(k) for r in results]
        if any(x is None for x in vals):
            out[k] = None
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = sum(vals) if k in _SUMMED else float(np.mean(vals))
        else:
            out[k] = v
    return out


def merged_batch_log(results: list[ServeResult]) -> list[dict]:
    hist: dict[int, int] = {}
    for r in results:
        for row in r.batch_log:
            hist[row["batch"]] = hist.get(row["batch"], 0) + row["count"]
    return [{"batch": b, "count": hist[b]} for b in sorted(hist)]


def start_rate(cfg: ServeConfig, prep: Prepared, run) -> float:
    """A first guess at the sustainable rate: half of what decode steps of batch 64 could emit, per request."""
    mean_out = _mean_len(run.output)
    mean_ctx = int(_mean_len(run.prompt) + mean_out / 2)
    n = min(64, cfg.max_num_seqs)
    step = prep.timer.decode(n, max(1, min(mean_ctx, cfg.model.max_position_embeddings - 1))).step_s
    if cfg.spec is not None:  # a speculative step emits the acceptance model's expected tokens per sequence
        step /= cfg.spec.acceptance.tokens_per_step
    return max(0.5 * n / step / max(mean_out, 1.0), 1e-3)


def _mean_len(lm) -> float:
    if lm.kind == "csv":
        return lm.to_spec().mean_len()
    if lm.kind == "fixed":
        return float(lm.value)
    if lm.kind == "uniform":
        return (lm.low + lm.high) / 2
    return float(min(max(lm.mean, lm.low), lm.high))
