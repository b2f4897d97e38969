"""aten's row mean priced by (rows, row length): the reader (model/tables.row_mean), the profile's schema
(profile.RowMeanTable), the cost model's routing (costs.CostModel: eager norm means by the table, everything else
as before) and the builders' ops (workload._Builder.row_mean: the norms' means carry rows and cols)."""

import copy
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from pydantic import ValidationError

from simulator.model import workload as W
from simulator.model.costs import CostModel
from simulator.model.kernels import LaunchPath as P
from simulator.model.kernels import Op, OpClass
from simulator.model.models import PRESETS
from simulator.model.profile import Profile, RowMeanTable, load_profile
from simulator.model.tables import EXTRAPOLATE, POLICIES, REFUSE, CLAMP, row_mean

# a tiny table: rows 1, 2, 16, 32; cols 100, 200, 300 | break | 400, 500
R = [1, 2, 16, 32]
C = [100, 200, 300, 400, 500]
U = [[1.0, 2.0, 3.0, 1.5, 1.75],
     [1.5, 2.5, 3.5, 1.6, 1.8],
     [2.0, 4.0, 6.0, 2.0, 2.5],
     [3.0, 5.0, 7.0, 3.0, 3.5]]
BR = [400]


def rd(r, c):
    return row_mean(r, c, R, C, U, BR, 16)


def test_policies_pinned():
    assert POLICIES["row_mean.rows"] == (CLAMP, EXTRAPOLATE)
    assert POLICIES["row_mean.cols"] == (REFUSE, REFUSE)


def test_grid_points_exact():
    for i, r in enumerate(R):
        for j, c in enumerate(C):
            assert rd(r, c) == U[i][j]


def test_rows_below_step_read_at_grid_row_below():
    # rows 3..15: aten's block of 2 rows (the grid row <= rows), never interpolated towards 16
    for r in range(2, 16):
        assert rd(r, 200) == 2.5
    assert rd(1, 150) == 1.5  # cols still linear: (1 + 2) / 2


def test_rows_linear_from_step_and_extrapolated_above():
    assert rd(24, 200) == 4.5  # halfway between 16 (4.0) and 32 (5.0)
    assert rd(64, 200) == 7.0  # end segment's slope carried on: 5 + (5 - 4) / 16 * 32
    assert rd(16, 250) == 5.0


def test_cols_never_interpolated_across_a_break():
    # 350 is past the segment's last point (300) and below the break: the 200..300 slope carried on, not a line
    # towards 400's other launch
    assert rd(1, 350) == 3.5
    assert rd(16, 350) == 7.0
    assert rd(16, 450) == 2.25  # inside the second segment
    assert rd(1, 400) == 1.5  # the break itself: the second launch


def test_cols_outside_the_grid_refused():
    assert rd(16, 99) is None and rd(16, 501) is None and rd(1, 50) is None


@settings(max_examples=200, deadline=None)
@given(r=hs.integers(1, 100), c=hs.integers(100, 500))
def test_reader_monotone_in_rows_within_the_grid(r, c):
    # every column of U grows with rows: so must the reading (from the step on; below it, steps)
    a, b = rd(r, c), rd(r + 1, c)
    assert a is not None and b is not None and b >= a - 1e-12


def table(**over):
    d = {"rows": R, "cols": C, "us": U, "breaks": BR}
    d.update(over)
    return RowMeanTable(**d)


@pytest.mark.parametrize("over, msg", [
    ({"rows": [1, 2, 2, 32]}, "rows must be positive and strictly increasing"),
    ({"cols": [100, 300, 200, 400, 500]}, "cols must be positive"),
    ({"us": U[:3]}, "us must be len(rows)"),
    ({"us": [U[0], U[1], U[2], U[3][:4]]}, "us must be len(rows)"),
    ({"breaks": [350]}, "each break must be a grid col"),
    ({"breaks": [100]}, "each break must be a grid col"),
    ({"rows": [2, 4, 16, 32]}, "rows must start at 1"),
    ({"us": [U[0], U[1], U[2], [3.0, 0.0, 7.0, 3.0, 3.5]]}, "greater than 0"),
    ({"us": [U[0], U[1], U[2], [3.0, math.inf, 7.0, 3.0, 3.5]]}, "finite"),
])
def test_schema_refuses(over, msg):
    with pytest.raises(ValidationError, match=re.escape(msg)):
        table(**over)


PROF = load_profile("h200")


def mean_op(rows, cols, path=P.EAGER_REDUCTION):
    return Op("n.mean", OpClass.REDUCTION, path, float(rows * cols), rows * cols * (4 + 4 / cols),
              (("cols", cols), ("rows", rows)))


def test_shipped_profile_has_round_t_table():
    t = PROF.device.tables.row_mean
    assert t is not None and t.breaks == [8192] and t.step_below_rows == 16
    assert "round_t" in t.source
    i, j = t.rows.index(16), t.cols.index(4096)
    assert CostModel(PROF).gpu_s(mean_op(16, 4096)) == t.us[i][j] * 1e-6
    # rows 12: aten's 8-row block, the rows-8 figure
    assert CostModel(PROF).gpu_s(mean_op(12, 4096)) == t.us[t.rows.index(8)][j] * 1e-6


def test_routing_only_eager_means_with_rows():
    cm = CostModel(PROF)
    no_table = Profile.model_validate(_without_table(PROF))
    bare = CostModel(no_table)
    m = mean_op(16, 4096)
    plain = Op("n.mean", OpClass.REDUCTION, P.EAGER_REDUCTION, m.flops, m.bytes)  # no rows: the curve
    assert cm.gpu_s(plain) == bare.gpu_s(plain) == bare.gpu_s(m)  # without the table: the reduction curve
    assert cm.gpu_s(m) > 2 * cm.gpu_s(plain)  # round s/t: 7.5 us against the curve's ~2.9
    custom = mean_op(16, 4096, P.CUSTOM_OP)  # a fused kernel of a serving engine: not aten's reduce
    assert cm.gpu_s(custom) == bare.gpu_s(custom)
    outside = mean_op(16, 32)  # row length below the grid: the curve
    assert cm.gpu_s(outside) == bare.gpu_s(outside)


def _without_table(p):
    d = copy.deepcopy(p.model_dump())
    d["device"]["tables"]["row_mean"] = None
    return d


def test_prime_leaves_row_means_to_gpu_s():
    cm = CostModel(PROF)
    ops = [mean_op(r, 4096) for r in (1, 16, 64)] + [Op("e", OpClass.ELEMENTWISE, P.EAGER_ELEMENTWISE, 10.0, 1e4)]
    g, k = cm.prime(ops)
    assert g[:3] == [None] * 3 and g[3] is not None
    assert cm.prime(ops[:3], alike=True) == ([None] * 3, [None] * 3)


@pytest.mark.parametrize("fusion", ["none", "packed"])
def test_reference_norm_means_carry_rows_and_cols(fusion):
    m = PRESETS["llama3-8b"]
    step = W.build_step(m, W.decode(16, 512), fusion)
    means = [o for o in step.ops if o.name.endswith(".mean")]
    assert len(means) == 2 * m.num_hidden_layers + 1  # two norms a layer and the final norm
    assert {(o.dim("rows"), o.dim("cols")) for o in means} == {(16, 4096)}
    assert all(o.path is P.EAGER_REDUCTION for o in means)


def test_qwen3_qk_norm_means_are_rows_of_head_dim():
    m = PRESETS["qwen3-0.6b"]
    step = W.build_step(m, W.decode(4, 512), "none")
    shapes = {(o.dim("rows"), o.dim("cols")) for o in step.ops if o.name.endswith(".mean")}
    assert shapes == {(4, m.hidden_size), (4 * m.num_attention_heads, m.head_dim),
                      (4 * m.num_key_value_heads, m.head_dim)}


def test_compiled_step_has_no_aten_mean():
    m = PRESETS["llama3-8b"]
    step = W.build_step(m, W.decode(16, 512), "compiled")
    assert not [o for o in step.ops if o.path is P.EAGER_REDUCTION and o.dim("rows")]


def test_h100_points_no_faster_than_their_bytes():
    """The derivation rule (calibration/build_profile.derive_h100), where no H100 row-mean table is measured: each
    point no faster than its bytes at the H100's bandwidth. (The shipped h100-sxm reads round ae's measured table:
    tests/calibration/test_calibration_profile.py.)"""
    import json

    from calibration.build_profile import derive_h100
    from tests.paths import ROOT

    raw = json.loads((ROOT / "simulator" / "profiles" / "h200.json").read_text())
    q = derive_h100(raw, copy_tbps=3.03)
    t, d = q["device"]["tables"]["row_mean"], q["device"]
    bw = d["hbm_tbps"] * d["bw_efficiency"] * 1e12
    src = PROF.device.tables.row_mean
    for r, line, line0 in zip(t["rows"], t["us"], src.us):
        for c, u, u0 in zip(t["cols"], line, line0):
            assert u == max(u0, 4.0 * r * c / bw * 1e6)
