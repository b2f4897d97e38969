"""Measurement hygiene (calibration/hygiene.py): the canary check, and the profiler ban in timing processes."""

from __future__ import annotations

import pytest

from calibration.hygiene import CANARY_TOLERANCE, check_canary
from tests.paths import ROOT


def _c(host, dev=1.8):
    return {"host_tiny_op_us": {"p50": host}, "device_queued_kernel_us": {"p50": dev}}


def test_canary_within_tolerance_passes():
    r = check_canary(_c(6.5), _c(6.5 * (1 + CANARY_TOLERANCE) - 1e-9))
    assert r["ok"] and r["ratio"] == pytest.approx(1 + CANARY_TOLERANCE)


@pytest.mark.parametrize("end", [8.4, 4.0])  # 6.5 -> 8.4 us is what one profiler session did on the H200
def test_canary_drift_fails(end):
    r = check_canary(_c(6.5), _c(end))
    assert not r["ok"] and r["host_start_us"] == 6.5 and r["host_end_us"] == end


def test_canary_zero_start_fails():
    assert not check_canary(_c(0.0), _c(1.0))["ok"]


def test_timing_modules_never_import_the_profiler():
    """The timing process's modules reach no profiling code (counts live in child_counts.py)."""
    import ast

    root = ROOT / "calibration"
    for name in ("child_timing.py", "depth_sweep.py", "microbench.py", "tables.py", "streams.py",
                 "reference_decoder.py", "hf_decoder.py"):
        tree = ast.parse((root / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mods = [node.module or ""] + ([a.name for a in node.names] if not node.module else [])
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            else:
                continue
            assert not any(m.endswith("profiling") or m.endswith("profiler") for m in mods), f"{name} imports {mods}"


def test_forbid_profiler_blocks_every_entry():
    torch = pytest.importorskip("torch")
    import subprocess
    import sys

    code = ("from calibration.hygiene import forbid_profiler, ProfilerForbidden\n"
            "forbid_profiler()\nimport torch\n"
            "for f in (lambda: torch.profiler.profile(), lambda: torch.autograd.profiler.profile()):\n"
            "    try:\n        f().__enter__()\n    except ProfilerForbidden:\n        print('blocked')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["blocked", "blocked"], torch.__version__
