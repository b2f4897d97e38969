"""The kernel loop (serving/plainloop.py: a lean loop where no limit binds, its bookkeeping in numpy afterwards)
against the inlined loop (serving/fastloop.py) and the reference loop: identical results, bit for bit, on random
workloads with the real step engine, limits binding (the kernel hands the run over to the inlined loop at the first
scheduling point where one could) or not."""

import dataclasses

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.layouts.buckets import preset_sizes
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.serving import plainloop
from simulator.serving.arrivals import ArrivalSpec, LengthSpec, Workload, make_workload
from simulator.serving.replica import ServeConfig, prepare, simulate_serving
from simulator.serving.steptime import clear_step_cache
from tests.serving.test_serving_fastloop import same

MODEL = load_model("qwen3-0.6b")
PROFILE = load_profile("datasheet-h200")


def run(cfg, wl, duration, **kw):
    clear_step_cache()  # each run from a cold step memo: the step evaluations are compared too
    r = simulate_serving(cfg, wl, duration, prepare(cfg), **kw)
    r.wall_s = 0.0
    return dataclasses.asdict(r)


def kernel_equals_inlined(cfg, wl, duration, reference=False):
    """The kernel's result (or its hand-over's) equals the inlined loop's; returns whether the kernel ran to the
    end."""
    t0 = plainloop.taken
    a = run(cfg, wl, duration)
    ran = plainloop.taken > t0
    same(a, run(cfg, wl, duration, kernel=False))
    if reference:
        same(a, run(cfg, wl, duration, reference=True))
    return ran


@settings(max_examples=80, deadline=None)
@given(st.data())
def test_kernel_equals_inlined_loop_on_random_workloads(data):
    rate = data.draw(st.floats(2.0, 300.0))
    duration = data.draw(st.sampled_from([0.5, 1.0, 2.0]))
    seed = data.draw(st.integers(0, 2**16))
    pm = data.draw(st.sampled_from([16, 128, 600]))
    om = data.draw(st.sampled_from([1, 8, 64, 300]))
    graph = data.draw(st.sampled_from(["full_and_piecewise", "none"]))
    cfg = ServeConfig(
        MODEL, PROFILE, "fused", graph, tuple(preset_sizes("vllm")) if graph != "none" else (1,),
        max_num_seqs=data.draw(st.sampled_from([1, 4, 32, 256])),
        max_num_batched_tokens=data.draw(st.sampled_from([64, 700, 8192])),
        chunked_prefill=data.draw(st.booleans()),
        kv_blocks=data.draw(st.sampled_from([None, 60, 300, 3000])),
        block_size=data.draw(st.sampled_from([1, 4, 16])),
        ctx_bucket=data.draw(st.sampled_from([16, 64, 256])),
        merge_steps=data.draw(st.booleans()),
        warmup_frac=data.draw(st.sampled_from([0.0, 0.1, 0.5])),
        drain_s=data.draw(st.sampled_from([None, 0.05, 0.5])),
        max_model_len=data.draw(st.sampled_from([None, 400, 2048])),
        scheduling=data.draw(st.sampled_from(["none", "none", "none", "async"])))
    wl = make_workload(ArrivalSpec(data.draw(st.sampled_from(["poisson", "gamma"])), cv=2.0),
                       LengthSpec("lognormal", mean=pm, cv=1.0, low=1, high=4 * pm),
                       LengthSpec("lognormal", mean=om, cv=1.0, low=1, high=4 * om), rate, duration, seed)
    kernel_equals_inlined(cfg, wl, duration)


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_kernel_equals_loops_on_hand_made_traffic(data):
    """Arrivals at equal times, in bursts, at time 0, one-token outputs, an empty system between requests."""
    n = data.draw(st.integers(1, 40))
    span = data.draw(st.floats(0.001, 1.0))
    times = sorted(data.draw(st.lists(st.sampled_from([0.0, span / 3, span / 2]) | st.floats(0, span),
                                      min_size=n, max_size=n)))
    P = data.draw(st.lists(st.integers(1, 300), min_size=n, max_size=n))
    O = data.draw(st.lists(st.integers(1, 200), min_size=n, max_size=n))
    cfg = ServeConfig(MODEL, PROFILE, "fused", "full_and_piecewise", tuple(preset_sizes("vllm")),
                      max_num_seqs=data.draw(st.sampled_from([2, 16, 256])),
                      block_size=data.draw(st.sampled_from([1, 4, 16])),
                      kv_blocks=data.draw(st.sampled_from([None, 200])),
                      ctx_bucket=data.draw(st.sampled_from([16, 256])),
                      warmup_frac=data.draw(st.sampled_from([0.0, 0.3])),
                      drain_s=data.draw(st.sampled_from([None, 0.01])))
    wl = Workload(np.asarray(times, float), np.asarray(P), np.asarray(O), "t", 1.0)
    kernel_equals_inlined(cfg, wl, span, reference=True)


def test_kernel_runs_where_no_limit_binds_and_gives_up_where_one_does():
    cfg = ServeConfig(MODEL, PROFILE, "fused", "full_and_piecewise", tuple(preset_sizes("vllm")))
    wl = make_workload(ArrivalSpec("poisson"), LengthSpec("lognormal", mean=512, cv=1.0, low=1, high=4096),
                       LengthSpec("lognormal", mean=256, cv=1.0, low=1, high=2048), 80.0, 300.0, 0)
    assert kernel_equals_inlined(cfg, wl, 300.0)  # the benchmark's traffic, 300 s of it (24k requests)
    wl = dataclasses.replace(wl, times=wl.times[:1600], prompt=wl.prompt[:1600], output=wl.output[:1600])
    assert kernel_equals_inlined(cfg, wl, 20.0, reference=True)  # 20 s of it, against the reference loop too
    for small in (dict(kv_blocks=300), dict(max_num_seqs=4), dict(max_num_batched_tokens=512)):
        h0 = plainloop.handed
        assert not kernel_equals_inlined(dataclasses.replace(cfg, **small), wl, 20.0)
        assert plainloop.handed == h0 + 1
