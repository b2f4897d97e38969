"""Commands a user runs never rewrite tracked files (issue 22, item 7): the validators write to out/calibration
(or --out DIR), benchmarks/run_all.sh to out/benchmarks; the committed files change only with --write-shipped."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.paths import ROOT


def _status() -> str:
    try:
        return subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, check=True, capture_output=True,
                              text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs git")


# The --out run checks where the files go: a validator with an input option writes them from a smaller input there
# (validate_engine from round e's engine_loop.json alone: the same two files, ~1 s instead of ~9). The default run,
# first, reads every input.
OUT_RUN_ARGS = {"calibration.validate_engine": ["--engine-loop", "calibration/measured/h200-round-e/engine_loop.json"]}


@pytest.mark.parametrize("module,files", [
    ("calibration.validate_moe_fp8", ["moe_fp8.json", "moe_fp8.md"]),
    ("calibration.validation_report", ["validation.json", "validation.html", "validation.md"]),
    ("calibration.validate_memory", ["graph_memory.json", "graph_memory.md"]),
    ("calibration.validate_engine", ["engine_loop_validation.json", "engine_loop_validation.md"]),
])
def test_validators_leave_the_tree_clean(module, files, tmp_path):
    before = _status()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", module], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert _status() == before  # what git tracks is as it was (out/ is ignored)
    for f in files:
        assert (ROOT / "out" / "calibration" / f).stat().st_size > 0
    p = subprocess.run([sys.executable, "-m", module, "--out", str(tmp_path), *OUT_RUN_ARGS.get(module, [])],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and all((tmp_path / f).exists() for f in files)
    p = subprocess.run([sys.executable, "-m", module, "--out", str(tmp_path), "--write-shipped"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and "not both" in p.stderr
    assert _status() == before


def test_run_all_writes_out_benchmarks(tmp_path):
    """benchmarks/run_all.sh with a stand-in python (each benchmark prints one line): its log goes to
    out/benchmarks/LATEST.txt, the committed benchmarks/results/LATEST.txt is untouched."""
    fake = tmp_path / "py"
    fake.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then exec {sys.executable} "$@"; fi\necho "ran $*"\n')
    fake.chmod(0o755)
    before = _status()
    p = subprocess.run(["bash", "benchmarks/run_all.sh"], cwd=ROOT, env={**os.environ, "PY": str(fake)},
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    log = (ROOT / "out" / "benchmarks" / "LATEST.txt").read_text()
    assert "ran benchmarks/bench_serve.py --runs 1" in log
    assert _status() == before
    bad = subprocess.run(["bash", "benchmarks/run_all.sh", "--nope"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr


# The validators whose full run takes minutes (the retargeting report ~6 min of CPU, the GEMM fallback's ~1 min):
# their report functions stand in for the work, and what is checked is where main() writes. Each used to write its
# committed file in calibration/validation by default.
SLOW_VALIDATORS = [
    ("calibration.hostprobe", ["--validate"], {"validate": lambda: ("# host\n## r\n", [])}, ["host_scaling.md"]),
    ("calibration.validate_retarget", [], {"report": lambda: "# retarget\n"}, ["trace_retarget.md"]),
    ("calibration.validate_impl", ["--lofo"], {"lofo": lambda: {}, "lofo_markdown": lambda res: "# lofo"},
     ["lofo.md", "lofo.json"]),
    ("calibration.gemm_fallback", ["--round", "/nonexistent"],
     {"loo": lambda profile: {"rows": []}, "report": lambda res: "# fallback\n", "loo_grid": lambda profile: None},
     ["gemm_fallback.md"]),
]


@pytest.mark.parametrize("module,args,stand_ins,files", SLOW_VALIDATORS, ids=[m for m, *_ in SLOW_VALIDATORS])
def test_slow_validators_write_out_calibration_unless_asked(module, args, stand_ins, files, tmp_path, monkeypatch,
                                                            capsys):
    import importlib

    mod = importlib.import_module(module)
    for name, f in stand_ins.items():
        monkeypatch.setattr(mod, name, f)
    before = _status()
    monkeypatch.chdir(tmp_path)  # the default folder, out/calibration, is relative to where the command runs
    assert mod.main(list(args)) == 0
    assert all((tmp_path / "out" / "calibration" / f).stat().st_size > 0 for f in files)
    assert mod.main([*args, "--out", str(tmp_path / "mine")]) == 0
    assert all((tmp_path / "mine" / f).exists() for f in files)
    assert f"wrote {tmp_path / 'mine'}" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="not both"):
        mod.main([*args, "--out", str(tmp_path / "x"), "--write-shipped"])
    assert _status() == before
