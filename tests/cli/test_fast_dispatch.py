"""cli/fast.py: a plain `predict` / `optimize` command line gives the command function exactly the values typer
would (same values, same types, defaults where not given), and every other line is left to typer (None)."""

from __future__ import annotations

import typing

import pytest
import typer
from typer.main import get_command

from simulator.cli.core import predict_parts
from simulator.cli.fast import _base, parse
from simulator.cli.generated import signed
from simulator.cli.optimize import optimize_parts

PARTS = {"predict": predict_parts, "optimize": optimize_parts}


def _typer_kwargs(parts, argv: list[str]) -> dict:
    """The keyword values typer passes the command's function for `argv`."""
    _, opts = parts()
    got: dict = {}

    def cmd(**kw):
        got.update(kw)

    app = typer.Typer()
    app.command()(signed(cmd, opts))
    get_command(app).main(args=argv, prog_name="launchsim", standalone_mode=False)
    return got


def _typed(d: dict) -> dict:
    return {k: (type(v), v) for k, v in d.items()}


def _samples(parts) -> list[list[str]]:
    """One plain argv per option that cli/fast.py parses (each choice with each of its values)."""
    _, opts = parts()
    out = []
    for o in opts:
        base, names = _base(o.annotation), [n for d in o.decls for n in d.split("/")]
        if typing.get_origin(base) is list:
            continue  # repeatable: left to typer
        if base is bool and "parser" not in o.kw:
            out += [[n] for n in names]
        elif "parser" in o.kw:
            out += [[n, v] for v in o.kw["metavar"].strip("[]").split("|") for n in names]
        elif base is int:
            out += [[n, v] for n in names for v in ("0", "7", "1024")]
        elif base is float:
            out += [[n, v] for n in names for v in ("6", "6.5", "0.25")]
        elif base is not None:
            out += [[n, v] for n in names for v in ("qwen3-0.6b", "a/b.json", "1,2,4")]
    return out


@pytest.mark.parametrize("command", PARTS)
def test_plain_lines_give_typers_values(command):
    parts = PARTS[command]
    _, opts = parts()
    samples = _samples(parts)
    assert len(samples) >= len(opts) - 3  # (list flags are left to typer)
    samples += [[], ["--model", "qwen3-0.6b", "--json"], ["--json", "--model", "qwen3-8b", "--fusion", "fused"]]
    for argv in samples:
        kw = parse(opts, argv)
        assert kw is not None, argv
        assert _typed(kw) == _typed(_typer_kwargs(parts, argv)), argv


@pytest.mark.parametrize("argv", [
    ["--batch=2"], ["--batch", "-1"], ["--batch", "007"], ["--batch", "1e3"], ["--batch", " 2"], ["--batch", ""],
    ["--batch"], ["--help"], ["-h"], ["--batch", "1", "--batch", "2"], ["--model", "a", "--model", "b"],
    ["--fusion", "nope"], ["--tp", "3"], ["--bogus"], ["extra"], ["--"], ["--json", "--json"],
    ["--host-canary-us", "1e3"], ["--host-canary-us", ".5"], ["--model", "--json"], ["--version"],
    ["--presets", "vllm"]])
def test_other_lines_are_left_to_typer(argv):
    for parts in PARTS.values():
        _, opts = parts()
        assert parse(opts, argv) is None, argv
