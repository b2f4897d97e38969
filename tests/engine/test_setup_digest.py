"""engine/setup.py: the profile digest made when first used (`Digest`). It is the digest's text wherever it is read
(equal, same hash, pickled as the text), setups made with it and with the text are equal and find the same memo
entries, and a `predict` process never makes it (no memo reads it)."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

from simulator.engine.setup import (Capture, Digest, StepSetup, _load_named, load_cached_costs, load_cached_profile,
                                    profile_digest, resolve)
from simulator.model.models import load_model
from simulator.model.profile import load_profile


def test_digest_is_the_text_wherever_it_is_read():
    p = load_profile("datasheet-h200")
    d, text = Digest(p), profile_digest(p)
    assert d._text is None  # not made yet
    assert str(d) == text and d == text and text == d and d == Digest(p) and hash(d) == hash(text)
    assert d != "x" and d != profile_digest(load_profile("h200"))
    assert {text: 1}[d] == 1 and {d: 1}[text] == 1
    assert repr(d) == repr(text)
    back = pickle.loads(pickle.dumps(d))
    assert type(back) is str and back == text


def test_setups_with_the_lazy_digest_and_with_the_text_are_one_key():
    m = load_model("qwen3-0.6b")
    lazy = StepSetup.of(m, "datasheet-h200", "fused", Capture("full"))
    _, costs, text = resolve("datasheet-h200")
    assert isinstance(lazy.digest, Digest) and type(text) is str
    plain = StepSetup(m, costs, text, "fused", None, Capture("full"))
    assert lazy == plain and hash(lazy) == hash(plain) and lazy.cost_key == plain.cost_key
    assert {plain.cost_key: 1}[lazy.cost_key] == 1
    assert load_cached_profile("datasheet-h200")[2] == text == profile_digest(load_profile("datasheet-h200"))
    assert load_cached_costs("datasheet-h200")[1] is costs  # one cached load, with or without the digest


def test_a_predict_process_makes_no_digest():
    code = ("import io, sys, runpy, contextlib\n"
            "sys.argv = ['launchsim', 'predict', '--model', 'qwen3-0.6b', '--json']\n"
            "out = io.StringIO()\n"
            "try:\n    with contextlib.redirect_stdout(out):\n"
            "        runpy.run_module('simulator.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "from simulator.engine.setup import _load_named\n"
            "print(repr(_load_named(None)[2]._text), out.getvalue().startswith('{'))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.split() == ["None", "True"], r.stderr
    assert json.loads(json.dumps(str(_load_named(None)[2])))  # made on demand in this process
