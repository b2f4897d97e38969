"""simulator/model/gemm_model.py: the fallback's floor over the tables that can be fastest equals the floor over every
table (hypothesis, synthetic tables on shared and own M grids), and one fallback is shared by the cost models of one
profile's device tables, not across profiles."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.model.costs import CostModel
from simulator.model.gemm_model import GemmFallback
from simulator.model.profile import GemmTable, load_profile

GRIDS = ([1, 8, 64, 512], [1, 4, 16, 64, 256, 1024], [2, 512])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(range(len(GRIDS))),
                          st.lists(st.floats(1.0, 500.0), min_size=6, max_size=6)), min_size=1, max_size=25),
       st.lists(st.integers(2, 512), min_size=1, max_size=20))
def test_the_floor_over_the_front_is_the_floor_over_all(specs, ms):
    tabs = []
    for i, (g, us) in enumerate(specs):
        grid = GRIDS[g]
        vals = sorted(us[:len(grid)])  # a GEMM does not get faster with more rows
        tabs.append(GemmTable.model_construct(n=256 + 64 * i, k=512, m=list(grid), us=vals, kernels=None))
    fb = GemmFallback(tabs, 989e12, 4.8e12)
    front = fb._floor_tables()
    assert front == sorted(set(front)) and set(front) <= set(range(len(fb.tables)))
    for m in ms:
        if not fb.m_lo <= m <= fb.m_hi:
            continue
        every = min(math.exp(fb._at_log_m(fb._log_m[i], fb._log_us[i], m)) for i in range(len(fb.tables)))
        assert min(math.exp(fb._at_log_m(fb._log_m[i], fb._log_us[i], m)) for i in front) == every


def test_one_fallback_per_cost_model_and_one_cost_model_per_named_profile():
    from simulator.engine.setup import StepSetup, load_cached_costs
    from simulator.model.models import PRESETS

    p = load_profile("h200")
    a = CostModel(p)
    assert a.gemm_fallback is a.gemm_fallback  # the grid's 1,028 tables are read once per cost model, which owns them
    assert CostModel(p).gemm_fallback is not a.gemm_fallback  # another cost model: its own (no process-wide memo)
    named = load_cached_costs("h200")[1]  # every setup of a named profile shares the process's one cost model
    assert StepSetup.of(PRESETS["qwen3-0.6b"], "h200").costs is named
    assert StepSetup.of(PRESETS["qwen3-0.6b"], named).costs is named  # a CostModel passes through, digest and all
    assert len(a.gemm_fallback._floor_tables()) < len(a.gemm_fallback.tables)
