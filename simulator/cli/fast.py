"""A plain command line of `predict` or `optimize` run without typer.

Importing typer and building its command (typer 0.29 makes a pydantic TypeAdapter per option) was ~60 ms of the
~0.4 s `launchsim predict --model M --json`. `plain_call` parses the command line by the options' own description
(cli/generated.Opt, the same one typer is given) when every token is one of the few plain forms below, and calls
the command's function with exactly the values typer would pass; anything else (help, `--flag=value`, a value
starting with `-`, an option given twice, a list flag, an unknown flag, a number not written plainly, a choice
outside its set) returns None and typer parses the line as always, so that every message and exit code stays
typer's. tests/cli/test_fast_dispatch.py checks the values against typer's for each kind of option.

Plain forms: `--flag VALUE` for str, int (digits, no leading zero), float (digits with an optional fraction),
path and choice options; `--flag` / `--no-flag` for booleans.
"""

from __future__ import annotations

import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Callable, Optional, Union

_INT = re.compile(r"0|[1-9][0-9]{0,17}")
_FLOAT = re.compile(r"(0|[1-9][0-9]{0,14})(\.[0-9]{1,15})?")


class Abort(Exception):
    """Ctrl-C or end of input inside the command, as click reports it (simulator/cli.main matches the name)."""


def _base(ann) -> Any:
    """The annotation without Optional (None for a union of several types)."""
    if typing.get_origin(ann) in (Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        return args[0] if len(args) == 1 else None
    return ann


def _converter(opt) -> Callable[[str], Any] | None:
    """text -> value for an option that takes one (None: not one of the plain kinds)."""
    base = _base(opt.annotation)
    parser = opt.kw.get("parser")
    if parser is not None:
        return parser if base is str else None
    if base is str:
        return str
    if base is int:
        return lambda v: int(v) if _INT.fullmatch(v) else _NOT_PLAIN
    if base is float:
        return lambda v: float(v) if _FLOAT.fullmatch(v) else _NOT_PLAIN
    if base is Path:
        return Path
    return None


_NOT_PLAIN = object()


def parse(opts: list, tokens: list[str]) -> Optional[dict[str, Any]]:
    """{parameter: value} for every option (its default where not given), or None where the line is not plain."""
    names: dict[str, tuple[Any, Any]] = {}  # flag text -> (option, True/False for a boolean, else None)
    for o in opts:
        boolean = _base(o.annotation) is bool and "parser" not in o.kw
        for d in o.decls:
            parts = d.split("/")
            if len(parts) > 1 and not boolean:
                return None
            for i, name in enumerate(parts):
                names[name] = (o, (i == 0) if boolean else None)
    kw = {o.param: o.default for o in opts}
    seen: set[str] = set()
    i = 0
    while i < len(tokens):
        hit = names.get(tokens[i])
        if hit is None:
            return None
        o, flag = hit
        if o.param in seen:
            return None
        seen.add(o.param)
        if flag is not None:
            kw[o.param] = flag
            i += 1
            continue
        conv = _converter(o)
        if conv is None or i + 1 >= len(tokens):
            return None
        text = tokens[i + 1]
        if not text or text.startswith("-"):
            return None
        try:
            value = conv(text)
        except Exception:  # a choice outside its set (BadChoice): typer says so
            return None
        if value is _NOT_PLAIN:
            return None
        kw[o.param] = value
        i += 2
    return kw


def plain_call(module: str, parts: str, tokens: list[str]) -> Optional[Callable[[], Any]]:
    """The command of cli module `module` (its `parts()`: function and options) bound to `tokens`, or None."""
    from importlib import import_module

    run, opts = getattr(import_module(f"simulator.cli.{module}"), parts)()
    kw = parse(opts, tokens)
    if kw is None:
        return None

    def call():
        try:
            return run(**kw)
        except (EOFError, KeyboardInterrupt) as e:  # click: a line break on stderr, then Abort
            print(file=sys.stderr)
            raise Abort() from e
    return call
