"""calibration/regenerate.py: its step list names real modules, and a bad --only is one line, exit 2."""

from __future__ import annotations

import importlib.util

from calibration.regenerate import STEPS, main


def test_every_step_is_an_importable_module_listed_once(capsys):
    names = [n for n, _ in STEPS]
    assert len(set(names)) == len(names) and names[0] == "profiles"  # the profiles first: every validator reads them
    for _, cmd in STEPS:
        assert importlib.util.find_spec(cmd[0]) is not None, cmd
    assert main(["--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(STEPS) and out[0].split()[0] == "profiles" and "calibration.make_profiles" in out[0]


def test_an_unknown_step_is_refused(capsys):
    assert main(["--only", "profiles", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("regenerate: unknown step(s) nope") and "\n" not in err
