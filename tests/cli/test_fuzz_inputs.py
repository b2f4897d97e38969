"""Fuzz suite: generated bad inputs over every command, scenario kind and input file type (tests/fuzz_cases.py),
plus hypothesis-generated scenarios, CSVs and config.json files.

For every case: exit code 2 with exactly one stderr line `launchsim: error: ...` naming the file (with line and
field where the input has them) or the flag, no traceback, no output left behind, within a time limit; valid input
exits 0 and writes its outputs. Cases run in-process (main()) under a SIGALRM watchdog, so a hang fails fast.
"""

from __future__ import annotations

import io
import json
import re
import signal
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.cli import main
from tests import fuzz_cases as F

CASES = F.all_cases()
TIME_LIMIT_S = 20


class Hang(BaseException):
    """Raised by the watchdog; a BaseException so that no handler in launchsim can swallow it."""


def invoke(argv: list[str], limit: int = TIME_LIMIT_S) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()

    def on_alarm(signum, frame):
        raise Hang(f"launchsim {' '.join(argv)} ran past {limit} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(limit)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(argv)
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return code, out.getvalue(), err.getvalue()


def assert_one_line_error(code: int, err: str, needles=(), field: str | None = None) -> str:
    lines = err.strip().splitlines()
    assert code == 2, f"exit {code}, stderr: {err[-2000:]}"
    assert "Traceback" not in err, err
    assert len(lines) == 1, f"{len(lines)} stderr lines: {err[-2000:]}"
    line = lines[0]
    assert line.startswith("launchsim: error: "), line
    for n in needles:
        assert n in line, f"{n!r} not named in: {line}"
    if field:
        assert re.search(field, line), f"no match for {field!r} in: {line}"
    return line


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("fuzz")
    F.make_fixtures(d)
    return d


def _write(d: Path, name: str, content) -> None:
    p = d / name
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        p.write_bytes(content)
    elif isinstance(content, str):
        p.write_text(content)
    elif isinstance(content, tuple) and content and content[0] == "profile-mutation":
        p.write_text(F.mutated_profile_text(*content[1:]))
    elif isinstance(content, tuple) and content and content[0] == "wl-mutation":
        _, loc, v = content
        doc = json.loads((d / "workload.json").read_text())
        cur = doc
        for k in loc[:-1]:
            cur = cur[k]
        cur[loc[-1]] = v
        p.write_text(json.dumps(doc, indent=1).replace('"NaN!"', "NaN").replace('"1e999!"', "1e999"))
    else:  # a scenario mapping
        p.write_text(yaml.safe_dump(content, sort_keys=False, allow_unicode=True))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fuzz_case(case: F.Case, fixtures: Path, tmp_path: Path):
    for name, content in case.files.items():
        _write(fixtures, name, content)
    out = tmp_path / "out"
    argv = [a.replace("{d}", str(fixtures)).replace("{out}", str(out)) for a in case.argv]
    before = sorted(p.name for p in fixtures.iterdir())
    code, stdout, err = invoke(argv)
    if case.expect == 0:
        assert code == 0, f"exit {code}: {err[-3000:]}"
        assert "Traceback" not in err
        for name in case.outputs:
            assert (out / name).is_file(), f"{name} not written"
        for p in out.rglob("*") if out.exists() else []:
            assert not p.name.endswith(".tmp") and p.name != ".launchsim.lock", p
        if "--json" in argv:
            json.loads(stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON output"))
        return
    needles = tuple(n.replace("{d}/", "") for n in case.needles)
    assert_one_line_error(code, err, needles, case.field_re)
    assert not out.exists(), f"left behind: {list(out.rglob('*'))}"
    assert sorted(p.name for p in fixtures.iterdir()) == before, "a file appeared beside the inputs"


def test_case_count():
    assert len(CASES) >= 900


# -- hypothesis: generated scenarios, CSV rows and config.json values ---------------------------------------------
ANY = st.one_of(st.integers(min_value=-10**40, max_value=10**40), st.floats(allow_nan=True, allow_infinity=True),
                st.text(max_size=8), st.booleans(), st.none(), st.lists(st.integers(-5, 5), max_size=3),
                st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
SMALL_INT = st.one_of(st.integers(min_value=-3, max_value=40), ANY)
HYP = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


def _check(code: int, err: str) -> None:
    if code != 0:
        assert_one_line_error(code, err)


@HYP
@given(case=st.fixed_dictionaries({"label": ANY, "layers": SMALL_INT, "kernels_per_layer": SMALL_INT,
                                   "launch_us": ANY, "kernel_us": ANY}))
def test_hypothesis_toy_scenarios(case, tmp_path_factory):
    d = tmp_path_factory.mktemp("hyp")
    p = d / "toy.yaml"
    p.write_text(yaml.safe_dump({"kind": "toy", "name": "h", "engine": "fast", "cases": [case]}))
    code, _, err = invoke(["run", str(p), "--out", str(d / "out")])
    _check(code, err)
    if code == 2:
        assert re.search(r"toy\.yaml(:\d+)?: ", err), err
        assert not (d / "out").exists()


@HYP
@given(fields=st.dictionaries(st.sampled_from(["batch", "ctx", "fusion", "graph", "replicates", "seed", "model",
                                               "engine", "profile"]), ANY, max_size=4))
def test_hypothesis_step_scenarios(fields, tmp_path_factory):
    d = tmp_path_factory.mktemp("hyp")
    p = d / "step.yaml"
    doc = {"kind": "step", "name": "h", "model": "qwen3-0.6b", "batch": [1], "ctx": 128, **fields}
    p.write_text(yaml.safe_dump(doc))
    code, _, err = invoke(["run", str(p), "--out", str(d / "out")])
    _check(code, err)
    if code == 2:
        assert re.search(r"step\.yaml:\d+: field '", err), err


@HYP
@given(rows=st.lists(st.tuples(st.one_of(st.integers(-5, 10**20), st.text(max_size=6),
                                         st.floats(allow_nan=True, allow_infinity=True)),
                               st.one_of(st.integers(-5, 10**20), st.floats(allow_nan=True, allow_infinity=True))),
                     max_size=5))
def test_hypothesis_distribution_csv(rows, tmp_path_factory):
    d = tmp_path_factory.mktemp("hyp")
    p = d / "dist.csv"
    p.write_text("batch,count\n" + "".join(f"{b},{c}\n" for b, c in rows))
    code, stdout, err = invoke(["optimize", "--dist", str(p), "--model", "qwen3-0.6b", "--max-graphs", "4", "--json"])
    _check(code, err)
    if code == 0:
        json.loads(stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON output"))
    else:
        assert "dist.csv" in err


@HYP
@given(key=st.sampled_from(sorted(F.CONFIG)), value=ANY)
def test_hypothesis_config_json(key, value, tmp_path_factory):
    d = tmp_path_factory.mktemp("hyp")
    p = d / "config.json"
    p.write_text(json.dumps({**F.CONFIG, key: value}))
    code, stdout, err = invoke(["predict", "--model", str(p), "--ctx", "128", "--json"])
    _check(code, err)
    if code == 2:
        assert "config.json" in err
    else:
        json.loads(stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON output"))
