"""A full sliding window in transformers' StaticCache (recipes.py, round g / v / w): the whole K and V cache rolled
every step (ops marked ROLL, priced by the profile's roll curve), the write indexed by a host tensor the host
waits on (HOST_SYNC: plan.lower's wait_kernel), and graph modes refused for such a step."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulator.engine.batched import step_seconds
from simulator.engine.des import simulate_des
from simulator.engine.fastpath import simulate_fast
from simulator.engine.plan import PlanError, lower
from simulator.engine.setup import StepSetup
from simulator.engine.stepcost import StepCostCache
from simulator.engine.timeline import step_s
from simulator.model.costs import CostModel
from simulator.model.kernels import HOST_SYNC, ROLL
from simulator.model.models import load_model
from simulator.model.profile import load_profile
from simulator.model.workload import StepShape, build_step, decode
from tests.cli.test_fuzz_inputs import assert_one_line_error, invoke

ROOT = Path(__file__).resolve().parents[2]
PHI3 = str(ROOT / "calibration" / "configs" / "hf" / "phi-3-mini-4k.json")  # 32 layers, every one slides, window 2047
GEMMA3 = str(ROOT / "calibration" / "configs" / "hf" / "gemma-3-1b.json")  # 26 layers, 5 of 6 slide, window 512
ROUND_W = ROOT / "calibration" / "measured" / "h200-round-w" / "round_w.json"
CM = CostModel(load_profile("h200"))


def _step(path, batch, ctx, layers=None):
    m = load_model(path)
    if layers:
        m = replace(m, num_hidden_layers=layers)
    return build_step(m, decode(batch, ctx), "none", "hf", max_cache_len=ctx + 128)


def test_full_window_rolls_and_syncs_once_per_sliding_layer():
    st = _step(PHI3, 8, 2048)  # ctx 2048 >= window 2047: every layer's window is full
    rolls = [o for o in st.ops if o.dim(ROLL)]
    syncs = [o for o in st.ops if o.dim(HOST_SYNC)]
    assert len(rolls) == 2 * 32 and len(syncs) == 32
    # each roll moves the layer's whole window: 8 seqs x 32 kv heads x 2047 slots x 96 x bf16, read and written
    assert {o.bytes for o in rolls} == {8 * 32 * 2047 * 96 * 2 * 2}
    assert all(o.name == "cache.index_put_k" for o in syncs)
    g3 = _step(GEMMA3, 1, 512)  # gemma-3-1b: 22 of its 26 layers slide, at ctx 512 their 512-slot window is full
    assert sum(bool(o.dim(HOST_SYNC)) for o in g3.ops) == 22


def test_window_not_full_no_roll_no_sync():
    st = _step(PHI3, 8, 512)
    assert not any(o.dim(ROLL) or o.dim(HOST_SYNC) for o in st.ops)


def test_roll_priced_by_round_w_curve_at_its_points():
    pts = json.loads(ROUND_W.read_text())["points"]
    p = next(x for x in pts if (x["kv_heads"], x["slots"], x["head_dim"], x["batch"]) == (32, 2047, 96, 8))
    roll = next(o for o in _step(PHI3, 8, 2048).ops if o.dim(ROLL))
    assert CM.gpu_s(roll) == pytest.approx(p["roll_us"] * 1e-6, rel=1e-12)
    # the copy curve would price the same bytes about 4.5x faster: the roll is its own kernel
    assert p["copy_us"] < p["roll_us"] / 4


def test_eager_plan_waits_before_each_sync_and_engines_agree():
    st = _step(PHI3, 8, 2048, layers=3)
    plan = lower(st, CM, "none")
    w = plan.wait_kernel
    assert w is not None
    js = np.flatnonzero(w >= 0)
    assert len(js) == 3 and np.array_equal(w[js], js - 1)  # each waits for the kernel launched just before it
    names = plan.kernel_names
    assert all(names[j] == "cache.index_put_k" and names[j - 1] == "cache.roll_v" for j in js)
    fast, des = step_s(simulate_fast(plan)), step_s(simulate_des(plan))
    assert fast == pytest.approx(des, rel=1e-12)
    # the sync costs time: the same plan without its waits is no slower
    free = replace(plan, wait_kernel=None)
    assert step_s(simulate_fast(free)) <= fast


def test_syncs_serialise_the_rolls_at_batch_32():
    """With the GPU drained once a layer, the step is no shorter than the host's work plus the rolls' time."""
    st = _step(PHI3, 32, 2048)
    plan = lower(st, CM, "none")
    rolls = sum(CM.gpu_s(o) for o in st.ops if o.dim(ROLL))
    assert step_s(simulate_fast(plan)) >= plan.host_s.sum() * 0.5 + rolls


@pytest.mark.parametrize("mode", ["full", "piecewise"])
def test_graph_modes_refused_where_the_step_syncs(mode):
    with pytest.raises(PlanError, match="cannot be captured as a CUDA graph"):
        lower(_step(PHI3, 8, 2048, layers=2), CM, mode)
    lower(_step(PHI3, 8, 512, layers=2), CM, mode)  # below the window: captured as before


def test_batched_and_cache_paths_equal_the_scalar_lowering():
    m = replace(load_model(PHI3), num_hidden_layers=4)
    setup = StepSetup.of(m, "h200", "none", impl="hf", max_cache_len=2176)
    shapes = [StepShape(b, c) for b in (1, 4, 8, 16, 32, 2, 3, 5, 6, 7) for c in (512, 2048)]
    got = step_seconds(setup, "none", shapes)
    want = [step_s(simulate_fast(lower(setup.build(s), setup.costs, "none"))) for s in shapes]
    assert np.array_equal(got, np.array(want))
    c = StepCostCache()
    assert [c.step_time(setup, "none", s).step_s for s in shapes] == pytest.approx(want, rel=1e-12)


def test_cli_refuses_graph_for_a_syncing_step_with_one_line():
    argv = ["predict", "--model", PHI3, "--impl", "hf", "--fusion", "none", "--batch", "8", "--ctx", "2048"]
    code, _, err = invoke(argv + ["--graph", "full"])
    assert_one_line_error(code, err, ("cannot be captured as a CUDA graph",))
    code, out, err = invoke(argv + ["--graph", "none", "--json"])
    assert code == 0, err
    assert json.loads(out)["step_ms"] > 30.0  # round v measured 41.7 ms; 23 ms at ctx 512
