"""Capture-layout presets, padding a batch, and the `buckets` / `pad` commands."""

import json

import pytest
from hypothesis import given, strategies as st
from typer.testing import CliRunner

from simulator.layouts.buckets import BucketError, pad, parse_layout, preset_sizes
from simulator.cli import app, main

runner = CliRunner()


def test_vllm_51_sizes_at_512():
    s = preset_sizes("vllm")  # max_num_seqs 256 -> max min(512, 512)
    assert len(s) == 51
    assert s[:4] == [1, 2, 4, 8] and s[-3:] == [480, 496, 512]
    assert s == [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))


def test_vllm_max_from_max_num_seqs():
    s = preset_sizes("vllm", max_num_seqs=64)  # max = 128
    assert s[-1] == 128 and len(s) == 3 + 16
    assert preset_sizes("vllm", max_num_seqs=1024)[-1] == 512  # capped at 512


def test_other_presets():
    sg = preset_sizes("sglang")
    assert sg[:6] == [1, 2, 4, 8, 12, 16] and sg[-1] == 256 and len(sg) == 5 + 31
    sg512 = preset_sizes("sglang", max_size=512)
    assert sg512[-2:] == [496, 512] and 272 in sg512
    tr = preset_sizes("trtllm")
    assert tr == [1, 2, 4] + list(range(8, 129, 8))
    assert preset_sizes("seed") == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
    assert preset_sizes("pow2", max_size=100) == [1, 2, 4, 8, 16, 32, 64]
    assert preset_sizes("all", max_size=5) == [1, 2, 3, 4, 5]


def test_parse_layout_forms():
    assert parse_layout("8,1, 4,4") == [1, 4, 8]
    assert parse_layout([3, 1]) == [1, 3]
    with pytest.raises(BucketError, match="neither a preset"):
        parse_layout("vlm")
    with pytest.raises(BucketError, match="positive"):
        parse_layout([0, 2])


@pytest.mark.parametrize("batch,padded,waste", [(1, 1, 0.0), (3, 4, 0.25), (9, 16, 7 / 16), (257, 272, 15 / 272),
                                                (512, 512, 0.0), (513, None, 0.0), (600, None, 0.0)])
def test_pad_vllm(batch, padded, waste):
    p = pad(batch, preset_sizes("vllm"))
    assert p.padded == padded
    assert p.waste == pytest.approx(waste, abs=0)


@given(st.lists(st.integers(1, 600), min_size=1, max_size=30), st.integers(1, 700))
def test_pad_is_smallest_fitting_size(sizes, batch):
    sizes = parse_layout(sizes)
    p = pad(batch, sizes)
    fitting = [s for s in sizes if s >= batch]
    assert p.padded == (min(fitting) if fitting else None)
    assert 0 <= p.waste < 1


def test_cli_buckets_json():
    r = runner.invoke(app, ["buckets", "vllm", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["sizes"] == preset_sizes("vllm")
    assert set(d["engine_syntax"]) == {"vllm", "sglang", "sglang_decode", "trtllm"}
    r = runner.invoke(app, ["buckets", "vllm", "--max-num-seqs", "32", "--json"])
    assert json.loads(r.stdout)["sizes"][-1] == 64
    r = runner.invoke(app, ["buckets", "trtllm", "--max-size", "32", "--json"])
    assert json.loads(r.stdout)["sizes"] == [1, 2, 4, 8, 16, 24, 32]


def test_cli_pad_json():
    r = runner.invoke(app, ["pad", "257", "--layout", "vllm", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == {"batch": 257, "padded": 272, "waste": 15 / 272}
    r = runner.invoke(app, ["pad", "600", "--layout", "vllm", "--json"])
    assert json.loads(r.stdout)["padded"] is None
    r = runner.invoke(app, ["pad", "5", "--layout", "1,2,8", "--json"])
    assert json.loads(r.stdout) == {"batch": 5, "padded": 8, "waste": 3 / 8}


@pytest.mark.parametrize("argv,needle", [
    (["buckets", "nope"], "unknown layout 'nope'"),
    (["buckets", "vllm", "--max-size", "0"], "--max-size must be a positive integer"),
    (["pad", "0", "--layout", "vllm"], "batch must be a positive integer"),
    (["pad", "3", "--layout", "1,x"], "neither a preset"),
])
def test_cli_errors_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
