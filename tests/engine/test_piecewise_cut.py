"""Where a piecewise graph cuts a transformers step (simulator/engine/plan.py, Op.in_attention): at each SDPA call,
which launches aten's boolean-mask conversion (two scalar fills and a where: kernels.SDPA_CALL), cuDNN's attention
kernel and, at batch x heads <= CUDNN_SPLIT_MAX, its split-KV reduce; everything else (repeat_kv copies, the cache
writes, norms, GEMMs) is inside the pieces. As round y measured it (calibration/scripts/round_y.py cuts at the SDPA
call), calibration/measured/h200-round-y."""

from __future__ import annotations

import pytest

from simulator.engine.predict import simulate
from simulator.model.costs import CostModel
from simulator.model.kernels import SDPA_CALL
from simulator.model.models import PRESETS, load_model
from simulator.model.profile import load_profile
from simulator.model.workload import build_step, decode
from tests.paths import ROOT

CM = CostModel(load_profile("h200"))
QWEN = ROOT / "calibration" / "configs" / "hf" / "qwen3-0.6b.json"


def _step(batch, impl="hf"):
    if impl == "hf":
        return build_step(load_model(str(QWEN)), decode(batch, 512), "none", "hf", max_cache_len=640)
    return build_step(PRESETS["qwen3-0.6b"], decode(batch, 511), "none")


@pytest.mark.parametrize("batch,eager_per_layer", [(1, 5), (8, 4)])
def test_hf_piecewise_launches_are_the_pieces_and_each_sdpa_calls_kernels(batch, eager_per_layer):
    # 28 layers: 29 pieces (before layer 0's SDPA, between layers, after the last); per layer eager: fill, fill,
    # where, attention, and the split-KV reduce at batch 1 (16 heads x 1 <= cuDNN's split limit; not at batch 8)
    r, _ = simulate(_step(batch), CM, "piecewise")
    assert r.launches == 29 + 28 * eager_per_layer
    f, _ = simulate(_step(batch), CM, "full")
    assert f.launches == 1 and f.kernels == r.kernels


def test_mask_conversion_is_eager_in_the_cut_but_keeps_its_own_cost():
    st = _step(1)
    masks = [o for o in st.ops if o.name.startswith("sdpa.mask_")]
    assert len(masks) == 28 * 3 and all(o.in_attention and not o.attention_part and o.dim(SDPA_CALL) == 1
                                        for o in masks)
    assert all(CM.gpu_s(o) > 0 for o in masks)  # priced as elementwise kernels, not folded into attention
    reduce_ = [o for o in st.ops if o.name == "attention.split_kv_reduce"]
    assert reduce_ and all(o.attention_part for o in reduce_)


def test_reference_decoder_cut_has_no_mask_kernels():
    # launchsim's reference decoder calls SDPA with enable_gqa and no mask: attention (+ split reduce at batch 1)
    r, _ = simulate(_step(1, "reference"), CM, "piecewise")
    st = _step(1, "reference")
    per_layer = sum(o.in_attention for o in st.ops if o.launches_kernel) // 28
    assert per_layer in (1, 2) and r.launches == 29 + 28 * per_layer


def test_moving_the_mask_kernels_out_of_the_pieces_changes_no_full_or_eager_step():
    # the marker changes where the piecewise cut falls, nothing else: full and eager figures as before (round y's
    # predictions were made before the marker: calibration/measured/h200-round-y/predicted_before.json)
    import json

    pred = json.loads((ROOT / "calibration" / "measured" / "h200-round-y" / "predicted_before.json").read_text())
    row = next(r for r in pred["rows"] if r["impl"] == "hf" and r["model"] == "qwen3-0.6b" and r["batch"] == 1
               and r["ctx"] == 512)
    f, _ = simulate(_step(1), CM, "full")
    assert f.step_s * 1e3 == pytest.approx(row["full_ms"], abs=1e-3)
    p, _ = simulate(_step(1), CM, "piecewise")
    assert p.step_s * 1e3 > row["piecewise_ms"]  # three more eager kernels a layer
