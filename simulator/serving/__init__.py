"""Serving simulation: one GPU replica under continuous batching, built on the step engine.

Modules (each small, each owns one thing):
- `arrivals`:  request streams (Poisson, bursty gamma, CSV trace) and prompt/output length distributions;
- `kv`:        KV-cache capacity from the graph-memory model, and paged-block bookkeeping of decoding requests;
- `steptime`:  step times from the step engine (`stepcost.step_time` of the routed, padded step), memoised by
               (mode, padded step, context bucket), mixed steps interpolated on a grid;
- `scheduler`: the vLLM-V1-like scheduler (max_num_seqs, max_num_batched_tokens, chunked prefill,
               mixed prefill/decode steps, preemption by recompute);
- `metrics`:   what a run measures (throughput, TTFT/TPOT percentiles, busy fractions, KV use, batch log);
- `replica`:   the discrete-event loop tying them together (`simulate_serving`);
- `capacity`:  highest SLO-meeting arrival rate by bisection, replicas for a target rate;
- `setup`, `study`: from validated scenario settings to runs, and the `serve` report (the capacity report is
               simulator/studies/capacity.py). The modules above them know nothing of YAML, flags or reports.
"""

from .arrivals import ArrivalSpec, LengthSpec, Workload, load_trace, make_workload
from .replica import ServeConfig, ServeResult, simulate_serving

__all__ = ["ArrivalSpec", "LengthSpec", "Workload", "load_trace", "make_workload", "ServeConfig", "ServeResult",
           "simulate_serving"]
