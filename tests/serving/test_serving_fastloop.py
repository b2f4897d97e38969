"""The inlined event loop (serving/fastloop.py) against the reference loop (replica._loop_reference, through the
scheduler's and collector's methods): identical results, bit for bit, on random traffic, limits, pools, windows and
step timers (fixed-formula timers and the real step engine)."""

import dataclasses
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.layouts.buckets import preset_sizes
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.serving.arrivals import ArrivalSpec, LengthSpec, Workload, make_workload
from simulator.serving.kv import KVCapacity
from simulator.serving.replica import Prepared, ServeConfig, prepare, simulate_serving
from simulator.serving.steptime import StepCost, clear_step_cache

MODEL = load_model("qwen3-0.6b")
PROFILE = load_profile("datasheet-h200")


class FormulaTimer:
    """Step times from a formula of the step (so that every figure the collector reads varies)."""

    misses = 0

    def __init__(self, a: float, b: float):
        self.a, self.b = a, b

    def decode(self, n, ctx):
        return StepCost(self.a + 1e-5 * n + 1e-9 * ctx, 0.4 * self.a + 1e-6 * n, n % 3 == 0,
                        "full" if n <= 8 else "none", n, -(-n // 4) * 4 if n <= 8 else n)

    def mixed(self, d, p, pt, ctx):
        return StepCost(self.b + 1e-6 * (d + pt) + 1e-9 * ctx, 0.5 * self.b, pt < 32, "piecewise" if pt < 64 else "none",
                        d + pt, d + pt + 3)


def same(a, b, path=""):
    """Exact equality of nested results (NaN equal to NaN, arrays elementwise)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), path
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), path
    else:
        assert type(a) is type(b) and a == b, (path, a, b)


def both(cfg, wl, duration, prep_fn):
    """Both loops from the same cold state (each its own fresh step memo: step_evals compared too)."""
    clear_step_cache()
    fast = simulate_serving(cfg, wl, duration, prep_fn())
    clear_step_cache()
    ref = simulate_serving(cfg, wl, duration, prep_fn(), reference=True)
    for r in (fast, ref):
        r.wall_s = 0.0
    same(dataclasses.asdict(fast), dataclasses.asdict(ref))
    return fast


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_fast_loop_equals_reference_on_random_traffic(data):
    n = data.draw(st.integers(1, 60))
    span = data.draw(st.floats(0.01, 2.0))
    times = sorted(data.draw(st.lists(st.floats(0, span), min_size=n, max_size=n)))
    P = data.draw(st.lists(st.integers(1, 400), min_size=n, max_size=n))
    O = data.draw(st.lists(st.integers(1, 300), min_size=n, max_size=n))
    limits = dict(max_num_seqs=data.draw(st.integers(1, 32)), max_num_batched_tokens=data.draw(st.integers(16, 512)),
                  chunked_prefill=data.draw(st.booleans()), ctx_bucket=data.draw(st.sampled_from([16, 64, 256])),
                  merge_steps=data.draw(st.booleans()), warmup_frac=data.draw(st.sampled_from([0.0, 0.1, 0.5])),
                  drain_s=data.draw(st.sampled_from([None, 0.05, 1.0])), max_model_len=data.draw(st.sampled_from(
                      [None, 300, 600])))
    blocks = data.draw(st.integers(4, 400))
    bs = data.draw(st.sampled_from([1, 4, 16]))
    a, b = data.draw(st.floats(1e-4, 5e-3)), data.draw(st.floats(1e-4, 5e-3))
    cfg = ServeConfig(MODEL, PROFILE, graph="none", block_size=bs, **limits)
    wl = Workload(np.asarray(times, float), np.asarray(P), np.asarray(O), "t", 1.0)
    both(cfg, wl, span, lambda: Prepared(FormulaTimer(a, b), KVCapacity(blocks, bs, 0.0, 0.0, 0.0, 0)))


@settings(max_examples=10, deadline=None)
@given(rate=st.floats(5.0, 200.0), seed=st.integers(0, 2**16), graph=st.sampled_from(["full_and_piecewise", "none"]),
       blocks=st.sampled_from([None, 400, 1500]), seqs=st.sampled_from([8, 256]),
       scheduling=st.sampled_from(["none", "async"]))
def test_fast_loop_equals_reference_on_the_step_engine(rate, seed, graph, blocks, seqs, scheduling):
    """The real StepTimer (its decode memo and mixed-step interpolation inlined by the fast loop), preemptions
    included (small pools), the engine's host work (scheduling async: the timer's own mixed step); each loop from a
    cold step memo, so the engine evaluations are counted alike too."""
    cfg = ServeConfig(MODEL, PROFILE, "fused", graph, tuple(preset_sizes("vllm")) if graph != "none" else (1,),
                      kv_blocks=blocks, max_num_seqs=seqs, scheduling=scheduling)
    wl = make_workload(ArrivalSpec("poisson"), LengthSpec("lognormal", mean=300, cv=1.0, low=1, high=2048),
                       LengthSpec("lognormal", mean=100, cv=1.0, low=1, high=1024), rate, 4.0, seed)
    both(cfg, wl, 4.0, lambda: prepare(cfg))
