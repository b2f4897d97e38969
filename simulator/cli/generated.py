"""Flags generated from a scenario model: one typer option per pydantic field (name `--field-name`, plus the
aliases a command declares beside it), its help the field's description with the field's default, choices from
`Literal` fields (`--help` lists them; a bad value is one line naming the flag and the field). Every option
defaults to None ("not given"), so the scenario model's own default applies and an error on a field the user did
not type stays the scenario's. `model_options(Model, ...)` returns the `inspect.Parameter`s; `command(...)` wraps a
body `f(values: dict, **extra)` into a typer command whose signature is those parameters plus the command's own.
"""

from __future__ import annotations

import inspect
import types
import typing
from pathlib import Path
from typing import Any, Callable, Literal, Optional, Union

import typer

from .choices import BadChoice, choice_error

SKIP = ("kind", "name", "description")
# what a choice field's values are, in error messages ("unknown graph mode 'x'"); default: the field's name
WHAT = {"graph": "graph mode", "fusion": "fusion level", "attention_backend": "attention backend",
        "kv_dtype": "KV-cache dtype", "tensor_parallel_size": "tensor-parallel size", "compile": "compile mode",
        "compile_cache": "cache state", "retention": "output retention"}


def flag_of(field: str) -> str:
    return "--" + field.replace("_", "-")


def _literal_values(ann) -> tuple | None:
    if typing.get_origin(ann) is Literal:
        return tuple(typing.get_args(ann))
    if typing.get_origin(ann) in (Union, types.UnionType):
        for a in typing.get_args(ann):
            v = _literal_values(a)
            if v is not None:
                return v
    return None


def _scalar(ann) -> type:
    """The Python type typer parses a field's flag text into (str for unions, lists and paths)."""
    args = [a for a in typing.get_args(ann) if a is not type(None)] if typing.get_origin(ann) in (
        Union, types.UnionType) else [ann]
    if len(args) == 1:
        a = typing.get_origin(args[0]) or args[0]
        if typing.get_origin(args[0]) is typing.Annotated:
            a = typing.get_args(args[0])[0]
        if a in (int, float, bool):
            return a
    return str


def _choice_parser(flag: str, field: str, allowed: tuple):
    by = {str(v): v for v in allowed}

    def parse(v: Any):
        if v is None:
            return None
        if str(v) not in by:
            raise BadChoice(choice_error(flag, v, [str(a) for a in allowed], WHAT.get(field, field.replace("_", " ")),
                                          field))
        return by[str(v)]
    return parse


def model_options(model: Any, aliases: dict[str, tuple[str, ...]] | None = None,
                  skip: tuple[str, ...] = SKIP) -> tuple[list[inspect.Parameter], dict[str, str]]:
    """(typer parameters for every field of `model` not in `skip`, {field: the flag text errors name})."""
    aliases = aliases or {}
    params, flags = [], {}
    from simulator.config.stepopts import ShardedStepOptions

    shared = set(ShardedStepOptions.model_fields)  # the step knobs every kind inherits: listed after the kind's own
    order = sorted(model.model_fields, key=lambda n: n in shared)
    for name in order:
        f = model.model_fields[name]
        if name in skip:
            continue
        decls = (flag_of(name),) + tuple(aliases.get(name, ()))
        flags[name] = "/".join(decls)
        default = None if f.is_required() else f.get_default(call_default_factory=True)
        dflt = getattr(default, "value", default)
        help_ = (f.description or "") + (f"  [default: {dflt}]" if default is not None else "")
        allowed = _literal_values(f.annotation)
        kw: dict[str, Any] = {"help": help_, "show_default": False}
        ann: Any
        if allowed is not None:
            kw.update(parser=_choice_parser(flags[name], name, allowed), metavar="[" + "|".join(map(str, allowed)) + "]")
            ann = Optional[str]
        else:
            typ = _scalar(f.annotation)
            ann = Optional[typ]
            if typ is bool:
                decls = tuple(f"{d}/--no-{d[2:]}" if i == 0 else d for i, d in enumerate(decls))
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=typer.Option(None, *decls, **kw),
                                        annotation=ann))
    return params, flags


def command(body: Callable[..., None], model: Any, extra: list[inspect.Parameter],
            aliases: dict[str, tuple[str, ...]] | None = None, doc: str = "") -> Callable[..., None]:
    """A function typer can register: keyword parameters = the model's generated options + `extra`; calling it
    calls `body(given, flags, **extra_values)` with `given` the model fields the user typed (None: not given)."""
    params, flags = model_options(model, aliases)
    names = {p.name for p in params}

    def run(**kw):
        given = {k: v for k, v in kw.items() if k in names}
        rest = {k: v for k, v in kw.items() if k not in names}
        return body(given, flags, **rest)

    run.__signature__ = inspect.Signature(params + extra)  # type: ignore[attr-defined]
    run.__doc__ = doc or body.__doc__
    run.__name__ = body.__name__
    run.__module__ = body.__module__
    return run


def extra_option(name: str, annotation, default, *decls: str, help: str) -> inspect.Parameter:
    """A command's own option (not a field of its scenario model), e.g. --json or --workload."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=typer.Option(default, *decls, help=help),
                             annotation=annotation)


__all__ = ["command", "extra_option", "flag_of", "model_options", "Path"]
