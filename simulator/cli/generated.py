"""Flags generated from a scenario model: one typer option per pydantic field (name `--field-name`, plus the
aliases a command declares beside it), its help the field's description with the field's default, choices from
`Literal` fields (`--help` lists them; a bad value is one line naming the flag and the field), list fields as
repeatable flags. Every option defaults to None ("not given"), so the scenario model's own default applies and an
error on a field the user did not type stays the scenario's.

A command names, as `Flag`s, what the plain rule cannot: a nested field under the engines' name
(`Flag("engine.max_num_seqs")` is `--max-num-seqs`), another name (`Flag("duration_s", ("--duration",))`), or
text a converter turns into the field's value (`--prompt-len lognormal:512` -> the `prompt` mapping). Nested
models (and lists of them) get flags only through a `Flag`. `model_options(Model, ...)` returns the
`inspect.Parameter`s and {field path: the flag text errors name}; `command(...)` wraps a body
`f(given, flags, **extra)` into a typer command (`given`: {field path: value typed, None if not});
`fill(data, given)` writes the given values into a scenario mapping at their paths.

The options are first described without typer (`Opt`: names, the annotation typer parses, typer.Option's
keywords; `option_specs`, `command_parts`), so that cli/fast.py can parse a plain command line by the same
description without importing typer; typer is imported where its options are built (`model_options`, `command`).
"""

from __future__ import annotations

import inspect
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Optional, Sequence, Union

from .choices import BadChoice, choice_error

SKIP = ("kind", "name", "description")
# what a choice field's values are, in error messages ("unknown graph mode 'x'"); default: the field's name
WHAT = {"graph": "graph mode", "fusion": "fusion level", "attention_backend": "attention backend",
        "kv_dtype": "KV-cache dtype", "tensor_parallel_size": "tensor-parallel size", "compile": "compile mode",
        "compile_cache": "cache state", "retention": "output retention", "presets": "preset",
        "profiles": "profile", "host_time": "--host-time"}
_UNSET = object()


@dataclass(frozen=True)
class Flag:
    """A flag the plain rule does not make: `path` the field it fills ("engine.max_num_seqs"), `decls` its names
    (default `--` + the last part of the path), `convert` text -> the field's value (may raise a UserError naming
    the flag), `annotation` what typer parses (default: from the field), `help` (default: the field's
    description), `default` shown in --help (default: the field's), `merge`: a mapping merged into the field's,
    `required`: typer itself refuses a command line without it (`Missing option '--out'`), `argument`: a positional
    argument named after the field (TRACE) instead of an option."""

    path: str
    decls: tuple[str, ...] = ()
    convert: Optional[Callable[[Any], Any]] = None
    annotation: Any = None
    help: Optional[str] = None
    default: Any = _UNSET
    merge: bool = False
    required: bool = False
    argument: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        return self.decls or (flag_of(self.path.rsplit(".", 1)[-1]),)


def flag_of(field: str) -> str:
    return "--" + field.replace("_", "-")


def param_of(path: str) -> str:
    """The Python parameter name of a field path ("engine.max_num_seqs" -> "engine__max_num_seqs")."""
    return path.replace(".", "__")


def _args(ann) -> list:
    """A union's members without None (the annotation itself otherwise)."""
    if typing.get_origin(ann) in (Union, types.UnionType):
        return [a for a in typing.get_args(ann) if a is not type(None)]
    return [ann]


def _strip(ann):
    return typing.get_args(ann)[0] if typing.get_origin(ann) is typing.Annotated else ann


def _literal_values(ann) -> tuple | None:
    ann = _strip(ann)
    if typing.get_origin(ann) is Literal:
        return tuple(typing.get_args(ann))
    if typing.get_origin(ann) in (Union, types.UnionType):
        for a in typing.get_args(ann):
            v = _literal_values(a)
            if v is not None:
                return v
    return None


def _list_item(ann):
    """The item type of a list field (`list[X]` or `list[X] | None`), else None."""
    args = [_strip(a) for a in _args(ann)]
    if len(args) == 1 and typing.get_origin(args[0]) is list:
        return typing.get_args(args[0])[0]
    return None


def _is_model(ann) -> bool:
    from pydantic import BaseModel

    def model(a) -> bool:
        a = _strip(a)
        return isinstance(a, type) and issubclass(a, BaseModel)

    item = _list_item(ann)
    return any(model(a) for a in _args(ann)) or (item is not None and any(model(a) for a in _args(item)))


def _scalar(ann) -> type:
    """The Python type typer parses a field's flag text into (str for unions, lists and paths)."""
    args = _args(ann)
    if len(args) == 1:
        a = _strip(args[0])
        a = typing.get_origin(a) or a
        if a in (int, float, bool):
            return a
    return str


def _choice_parser(flag: str, field: str, allowed: tuple):
    by = {str(v): v for v in allowed}

    def parse(v: Any):
        if v is None:
            return None
        if str(v) not in by:
            last = field.rsplit(".", 1)[-1]
            raise BadChoice(choice_error(flag, v, [str(a) for a in allowed], WHAT.get(last, last.replace("_", " ")),
                                          field))
        return by[str(v)]
    return parse


def field_info(model: Any, path: str):
    """The pydantic FieldInfo at a dotted path of `model` (nested models followed through their annotations)."""
    from pydantic import BaseModel

    cls, f = model, None
    for part in path.split("."):
        if f is not None:
            cls = next(_strip(a) for a in _args(f.annotation)
                       if isinstance(_strip(a), type) and issubclass(_strip(a), BaseModel))
        f = cls.model_fields[part]
    return f


def _default_text(v) -> str:
    v = getattr(v, "value", v)
    if isinstance(v, (list, tuple)):
        return ", ".join(str(getattr(x, "value", x)) for x in v)
    return str(v)


@dataclass
class Opt:
    """One keyword option of a command, as typer is given it but without typer: the parameter name, the option's
    names (`--x/--no-x` for a boolean pair), the annotation typer parses the text into, the default (`...`:
    required) and typer.Option's other keywords (help, show_default, parser, metavar); `argument`: a positional
    argument (typer.Argument, no names) instead."""

    param: str
    decls: tuple[str, ...]
    annotation: Any
    default: Any = None
    kw: dict[str, Any] = field(default_factory=dict)
    argument: bool = False

    def parameter(self) -> inspect.Parameter:
        import typer

        info = (typer.Argument(self.default, **self.kw) if self.argument
                else typer.Option(self.default, *self.decls, **self.kw))
        return inspect.Parameter(self.param, inspect.Parameter.KEYWORD_ONLY, annotation=self.annotation,
                                 default=info)


def model_options(model: Any, aliases: dict[str, tuple[str, ...]] | None = None, skip: tuple[str, ...] = SKIP,
                  flags: Sequence[Flag] = (), defaults: dict[str, Any] | None = None
                  ) -> tuple[list[inspect.Parameter], dict[str, str]]:
    """(typer parameters for every field of `model` not in `skip` and for each `Flag`, {field path: the flag text
    errors name}). `defaults`: the command's own defaults where they are not the model's (shown in --help)."""
    opts, texts = option_specs(model, aliases, skip, flags, defaults)
    return [o.parameter() for o in opts], texts


def option_specs(model: Any, aliases: dict[str, tuple[str, ...]] | None = None, skip: tuple[str, ...] = SKIP,
                 flags: Sequence[Flag] = (), defaults: dict[str, Any] | None = None
                 ) -> tuple[list[Opt], dict[str, str]]:
    """`model_options` without typer: the options as `Opt`s."""
    aliases = aliases or {}
    defaults = defaults or {}
    custom = {fl.path: fl for fl in flags}
    params, texts = [], {}
    from simulator.config.stepopts import ShardedStepOptions

    shared = set(ShardedStepOptions.model_fields)  # the step knobs every kind inherits: listed after the kind's own
    paths = [n for n in model.model_fields if n not in skip and (n in custom or not _is_model(
        model.model_fields[n].annotation))]
    paths += [p for p in custom if p not in paths]
    own = set(getattr(model, "__annotations__", {}))  # the kind's own fields first, then inherited, then step knobs
    for path in sorted(paths, key=lambda n: (n in shared, n.split(".")[0] not in own)):
        f = field_info(model, path)
        fl = custom.get(path, Flag(path))
        decls = fl.names + tuple(aliases.get(path, ()))
        texts[path] = path.upper() if fl.argument else "/".join(decls)
        if fl.default is not _UNSET:
            default = fl.default
        elif path in defaults:
            default = defaults[path]
        else:
            default = None if f.is_required() else f.get_default(call_default_factory=True)
        help_ = (fl.help or f.description or "") + (
            f"  [default: {_default_text(default)}]" if default is not None else "")
        kw: dict[str, Any] = {"help": help_, "show_default": False}
        ann: Any
        item = _list_item(f.annotation)
        allowed = _literal_values(f.annotation if item is None else item)
        if fl.annotation is not None:
            ann = fl.annotation
        elif allowed is not None:
            kw.update(parser=_choice_parser(texts[path], path, allowed),
                      metavar="[" + "|".join(map(str, allowed)) + "]")
            ann = Optional[str] if item is None else Optional[list[str]]
        elif item is not None:
            ann = Optional[list[_scalar(item)]]  # type: ignore[misc]
            kw["metavar"] = f"<{_scalar(item).__name__}>"  # repeatable: one value each time
        else:
            typ = _scalar(f.annotation)
            ann = Optional[typ]
            if typ is bool:
                decls = tuple(f"{d}/--no-{d[2:]}" if i == 0 else d for i, d in enumerate(decls))
        params.append(Opt(param_of(path), () if fl.argument else decls, ann, ... if fl.required else None, kw,
                          fl.argument))
    return params, texts


def command(body: Callable[..., None], model: Any, extra: list[Opt],
            aliases: dict[str, tuple[str, ...]] | None = None, doc: str = "", flags: Sequence[Flag] = (),
            defaults: dict[str, Any] | None = None, skip: tuple[str, ...] = SKIP) -> Callable[..., None]:
    """A function typer can register: keyword parameters = the model's generated options + `extra`; calling it
    calls `body(given, texts, **extra_values)` with `given` {field path: the value typed, converted by its `Flag`
    (None: not given)} and `texts` {field path: flag text}."""
    return signed(*command_parts(body, model, extra, aliases, doc, flags, defaults, skip))


def signed(run: Callable[..., None], opts: list[Opt]) -> Callable[..., None]:
    """`run` with the typer signature of its options (what `command` returns)."""
    run.__signature__ = inspect.Signature([o.parameter() for o in opts])  # type: ignore[attr-defined]
    return run


def command_parts(body: Callable[..., None], model: Any, extra: list[Opt],
                  aliases: dict[str, tuple[str, ...]] | None = None, doc: str = "", flags: Sequence[Flag] = (),
                  defaults: dict[str, Any] | None = None, skip: tuple[str, ...] = SKIP
                  ) -> tuple[Callable[..., None], list[Opt]]:
    """`command` without typer: (the function, called with every option's value by keyword; its options, the
    model's generated ones then `extra`)."""
    opts, texts = option_specs(model, aliases, skip, flags, defaults)
    paths = {param_of(p): p for p in texts}
    conv = {fl.path: fl.convert for fl in flags if fl.convert is not None}

    def run(**kw):
        given = {paths[k]: v for k, v in kw.items() if k in paths}
        given = {p: (conv[p](v) if p in conv and v is not None else v) for p, v in given.items()}
        rest = {k: v for k, v in kw.items() if k not in paths}
        return body(given, texts, **rest)

    run.__doc__ = doc or body.__doc__
    run.__name__ = body.__name__
    run.__module__ = body.__module__
    return run, opts + list(extra)


def fill(data: dict, given: dict[str, Any], flags: Sequence[Flag] = ()) -> dict:
    """`data` with each given value (not None) set at its dotted path (mappings on the way created or copied; the
    path of a `Flag` with `merge` takes a mapping merged into the field's own)."""
    merged = {fl.path for fl in flags if fl.merge}
    out = dict(data)
    for path, v in given.items():
        if v is None:
            continue
        node, parts = out, path.split(".")
        for p in parts[:-1]:
            node[p] = dict(node.get(p) or {})
            node = node[p]
        last = parts[-1]
        node[last] = {**dict(node.get(last) or {}), **v} if path in merged else v
    return out


def extra_option(name: str, annotation, default, *decls: str, help: str) -> Opt:
    """A command's own option (not a field of its scenario model), e.g. --json or --workload."""
    return Opt(name, decls, annotation, default, {"help": help})


__all__ = ["Flag", "Opt", "command", "command_parts", "extra_option", "field_info", "fill", "flag_of", "model_options",
           "option_specs", "signed", "Path"]
