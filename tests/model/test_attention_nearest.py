"""CostModel.attention_nearest_s: transformers' masked SDPA (kernels.SDPA_MASK) of a shape the profile has no table
for is read from the nearest table (head_dim, then query heads, then fewest KV heads) at the context of equal KV bytes, linear outside its grid;
the batched column path (`prime_column`) gives the same figures bitwise; without any attention table, the roofline."""

from __future__ import annotations

import pytest

from simulator.model.costs import CostModel, lerp_table
from simulator.model.kernels import Op, OpClass
from simulator.model.kernels import LaunchPath as P
from simulator.model.profile import load_profile

CM = CostModel(load_profile("h200"))


def _attn(b, ctx, H, KV, hd, masked=True):
    return Op("attention", OpClass.ATTENTION, P.EAGER_ATTENTION, 4.0 * H * hd * b * ctx, 2.0 * KV * hd * 2 * b * ctx,
              (("batch", b), ("ctx", ctx), ("head_dim", hd), ("heads", H), ("kv_heads", KV), ("q_len", 1))
              + ((("sdpa_mask", 1),) if masked else ()))


def test_exact_table_unchanged_and_untabled_shape_reads_the_nearest_at_equal_kv_bytes():
    have = sorted(CM._attn)
    assert (16, 8, 128) in have and (12, 2, 128) not in have
    t = CM._attn[(16, 8, 128)]
    # qwen2-1.5b's shape (12 heads, 2 KV, d 128): nearest in head_dim (128), then heads (16 closer to 12 than 32)
    assert CM.nearest_attention_table(12, 2, 128) is t
    op = _attn(1, 3840, 12, 2, 128)  # 3840 keys x 2 KV heads read what 960 keys x 8 KV heads read
    assert CM.gpu_s(op) == pytest.approx(lerp_table(t.batch, t.ctx, t.us, 1, 960) * 1e-6, rel=1e-12)
    assert CM.gpu_s(op) > CM.roofline_s(op)  # cuDNN's floor: round z measured 12.9-19.5 us a call at batch 1
    exact = _attn(8, 640, 16, 8, 128)
    assert CM.table_s(exact) == pytest.approx(CM.gpu_s(exact))
    assert CM.nearest_attention_table(16, 8, 128) is t


def test_column_path_equals_op_by_op():
    ops = [_attn(b, c, 12, 2, 128) for b in (1, 3, 8, 64, 300) for c in (100, 640, 5000)]
    vals = {k: [o.dim(k) for o in ops] for k in ("heads", "kv_heads", "head_dim", "batch", "ctx", "q_len")}
    fresh = CostModel(load_profile("h200"))
    out, _ = fresh.prime_column(ops[0], lambda f: vals.get(f), lambda j: ops[j], len(ops))
    assert out == [CostModel(load_profile("h200")).gpu_s(o) for o in ops]


def test_unmasked_attention_without_a_table_keeps_the_roofline():
    # the reference / gpt-fast layout (enable_gqa, no mask): not what round z measured; the roofline, as before
    op = _attn(1, 640, 32, 8, 64, masked=False)
    assert CM.table_s(op) is None and CM.gpu_s(op) == CM.roofline_s(op)


def test_no_attention_table_means_roofline():
    cm = CostModel(load_profile("datasheet-h200"))
    if cm._attn:
        pytest.skip("this datasheet profile carries attention tables")
    op = _attn(1, 640, 12, 2, 128)
    assert cm.nearest_attention_table(12, 2, 128) is None and cm.gpu_s(op) == cm.roofline_s(op)
