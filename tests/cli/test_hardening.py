"""Hardening (issue 13) beyond the generated fuzz cases: the sweep cache under damage, the output lock, worker
processes and interrupts, HTML escaping of user text, errors found after validation keeping `FILE:LINE: field`,
and no NaN / Infinity in JSON."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from simulator.common.outpaths import LOCK_NAME, out_lock
from tests.cli.test_fuzz_inputs import assert_one_line_error, invoke
from tests.paths import ROOT

SWEEP = {"kind": "sweep", "name": "tiny", "models": ["qwen3-0.6b"], "profiles": ["datasheet-h200"],
         "fusion": ["fused"], "graph": ["none", "full"],
         "layouts": [{"name": "a", "sizes": [1, 2, 4, 8]}, {"name": "b", "sizes": "seed"}],
         "distributions": [{"name": "u", "uniform": [1, 8]}], "budgets": ["1GiB", "64MiB"], "workers": 1}


def _scenario(tmp_path: Path, doc: dict, name: str = "s.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


def _run(p: Path, out: Path):
    code, stdout, err = invoke(["run", str(p), "--out", str(out)])
    assert code == 0, err
    return (out / "results.csv").read_text(), json.loads((out / "results.json").read_text())


# -- sweep cache -----------------------------------------------------------------------------------------
def test_damaged_cache_lines_are_recomputed_in_order(tmp_path):
    p = _scenario(tmp_path, SWEEP)
    out = tmp_path / "out"
    csv0, rows0 = _run(p, out)
    cache = out / "cache.jsonl"
    lines = cache.read_text().splitlines()
    assert len(lines) == len(rows0) == 8
    first = json.loads(lines[0])
    wrong = json.dumps({"key": json.loads(lines[1])["key"], "row": {"model": "x"}})
    null = json.dumps({"key": json.loads(lines[2])["key"], "row": None})
    shuffled = json.dumps({"key": first["key"], "row": dict(sorted(first["row"].items()))})  # keys reordered
    junk = b"\x00\xff\xfe binary junk \x80\n" + b"{not json\n" + b'"a string"\n' + b"[1,2]\n"
    cache.write_bytes(junk + "\n".join([shuffled, wrong, null] + lines[3:]).encode() + b"\n")
    csv1, rows1 = _run(p, out)
    assert rows1 == rows0 and csv1 == csv0  # same rows, same columns, same order
    assert [list(r) for r in rows1] == [list(r) for r in rows0]
    res = json.loads((out / "result.json").read_text())
    assert res["computed"] == 2 and res["cached"] == 6


def test_resumed_run_has_the_same_columns(tmp_path):
    p = _scenario(tmp_path, SWEEP)
    a, b = tmp_path / "a", tmp_path / "b"
    csv_a, _ = _run(p, a)
    (b).mkdir()
    lines = (a / "cache.jsonl").read_text().splitlines()
    (b / "cache.jsonl").write_text("\n".join(lines[:3]) + "\n")  # an interrupted run
    csv_b, _ = _run(p, b)
    assert csv_b == csv_a


def test_second_run_into_a_locked_folder_stops_at_once(tmp_path):
    p = _scenario(tmp_path, SWEEP)
    out = tmp_path / "out"
    with out_lock(out):
        code, _, err = invoke(["run", str(p), "--out", str(out)])
        line = assert_one_line_error(code, err, ("--out", "another launchsim run"))
        assert str(out) in line
    assert not (out / LOCK_NAME).exists() and not (out / "results.csv").exists()
    _run(p, out)  # free again
    assert not (out / LOCK_NAME).exists()


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _slow_sweep(tmp_path: Path) -> Path:
    doc = {**SWEEP, "models": ["llama3-70b", "llama3-8b", "qwen3-8b", "qwen3-0.6b"], "graph": ["none", "full"],
           "fusion": ["none", "fused"], "distributions": [{"name": "u", "uniform": [1, 3000]}], "workers": 2,
           "chunk": 1}
    return _scenario(tmp_path, doc)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_workers_die_with_the_parent(tmp_path, sig):
    p = _slow_sweep(tmp_path)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "simulator.cli", "run", str(p), "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    kids: list[int] = []
    deadline = time.time() + 120  # start-up is slow on a loaded 2-core machine
    while time.time() < deadline and len(kids) < 2:
        time.sleep(0.2)
        kids = _children(proc.pid)
    assert len(kids) >= 2, "no worker processes started"
    time.sleep(0.5)
    proc.send_signal(sig)
    proc.wait(timeout=30)
    deadline = time.time() + 10
    while time.time() < deadline and any(_alive(k) for k in kids):
        time.sleep(0.2)
    assert not any(_alive(k) for k in kids), "worker processes outlived the parent"
    err = proc.stderr.read()
    assert "Traceback" not in err, err
    if sig == signal.SIGINT:
        assert proc.returncode == 130
        assert "rerun the same command to resume" in err and len(err.strip().splitlines()) == 1, err
    assert not (out / LOCK_NAME).exists() or sig == signal.SIGKILL


# -- HTML escaping -----------------------------------------------------------------------------------------------
EVIL = "<script>alert(1)</script>"


def test_capacity_report_escapes_labels_and_notes(tmp_path):
    doc = {"kind": "capacity", "name": EVIL, "description": EVIL, "models": ["qwen3-0.6b"],
           "profiles": ["datasheet-h200"], "fusion": ["fused"], "graph": ["full"],
           "layouts": [{"label": EVIL, "sizes": [1, 2, 4, 8], "note": EVIL + "<img src=x onerror=alert(2)>"}],
           "slo": {"tpot_ms": 50}, "duration_s": 2, "curve_fractions": [0.5],
           "search": {"rate_min": 0.5, "rate_max": 4, "max_runs": 3}}
    p = _scenario(tmp_path, doc)
    out = tmp_path / "out"
    code, _, err = invoke(["run", str(p), "--out", str(out)])
    assert code == 0, err
    page = (out / "report.html").read_text()
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize("doc", [
    {"kind": "toy", "name": EVIL, "description": EVIL, "engine": "fast",
     "cases": [{"label": EVIL, "layers": 2, "kernels_per_layer": 3, "launch_us": 5, "kernel_us": 2}]},
    {"kind": "step", "name": EVIL, "description": EVIL, "model": "qwen3-0.6b", "batch": [1, 2]},
    {"kind": "buckets", "name": EVIL, "description": EVIL, "model": "qwen3-0.6b",
     "distribution": {"histogram": {1: 3, 4: 1}}},
])
def test_reports_escape_user_text(tmp_path, doc):
    p = _scenario(tmp_path, doc)
    code, _, err = invoke(["run", str(p), "--out", str(tmp_path / "out")])
    assert code == 0, err
    assert "<script>alert" not in (tmp_path / "out" / "report.html").read_text()


# -- errors found after validation keep FILE:LINE: field ---------------------------------------------------------
@pytest.mark.parametrize("doc,fld", [
    ({"kind": "step", "name": "x", "model": "qwen3-0.6b", "ctx": 100000}, "ctx"),
    ({"kind": "step", "name": "x", "model": "nope-7b"}, "model"),
    ({"kind": "step", "name": "x", "model": "qwen3-0.6b", "profile": "nope"}, "profile"),
    ({**SWEEP, "distributions": [{"name": "z", "histogram": {1: 0, 2: 0}}]}, "distributions[0].histogram"),
    ({**SWEEP, "distributions": [{"name": "z", "csv": "missing.csv"}]}, "distributions[0].csv"),
    ({**SWEEP, "layouts": [{"name": "z", "sizes": "nope"}]}, "layouts[0].sizes"),
    ({"kind": "serve", "name": "x", "model": "llama3-70b", "rate": 1}, "engine"),  # 70B weights leave no KV cache
    ({"kind": "serve", "name": "x", "model": "qwen3-0.6b", "arrivals": {"process": "trace", "trace": "no.csv"}},
     "arrivals.trace"),
    ({"kind": "serve", "name": "x", "model": "qwen3-0.6b", "rate": 1, "engine": {"max_model_len": 100000}},
     "engine.max_model_len"),
    ({"kind": "buckets", "name": "x", "model": "qwen3-0.6b", "distribution": {"csv": "missing.csv"}},
     "distribution.csv"),
    ({"kind": "buckets", "name": "x", "model": "qwen3-0.6b", "distribution": {"samples": [5000]}},
     "distribution.samples"),
    ({"kind": "buckets", "name": "x", "model": "qwen3-0.6b", "distribution": {"samples": [5]},
      "memory_budget": "lots"}, "memory_budget"),
    ({"kind": "workload", "name": "x", "workload": "missing.json"}, "workload"),
    ({"kind": "capacity", "name": "x", "models": ["qwen3-0.6b", "nope"], "slo": {"tpot_ms": 5}}, "models[1]"),
])
def test_reference_errors_name_file_line_field(tmp_path, doc, fld):
    p = _scenario(tmp_path, doc)
    code, _, err = invoke(["run", str(p), "--out", str(tmp_path / "out")])
    line = assert_one_line_error(code, err, (str(p),))
    assert f"field '{fld}'" in line and f"{p}:" in line, line
    assert not (tmp_path / "out").exists()


def test_json_outputs_hold_no_nan(tmp_path):
    """Infeasible presets carry NaN figures internally; result.json and --json output write null instead."""
    d = tmp_path / "d.csv"
    d.write_text("batch,count\n1,5\n3,2\n")
    code, stdout, err = invoke(["optimize", "--dist", str(d), "--model", "qwen3-0.6b", "--max-graphs", "1",
                                "--json", "--out", str(tmp_path / "out")])
    assert code == 0, err
    for text in (stdout, (tmp_path / "out" / "result.json").read_text()):
        json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))


def test_huge_file_inputs_are_refused_quickly(tmp_path):
    p = tmp_path / "big.yaml"
    with open(p, "w") as f:
        f.write("kind: toy\nname: x\nsamples: [")
        f.write("1, " * (2 << 20))
        f.write("1]\n")
    t0 = time.perf_counter()
    code, _, err = invoke(["run", str(p), "--out", str(tmp_path / "out")])
    assert_one_line_error(code, err, ("big.yaml", "too large"))
    assert time.perf_counter() - t0 < 5
