"""Scenario files: YAML loading with line numbers, the strict pydantic base, and error translation.

Every scenario model inherits `Strict` (unknown keys rejected, a description on every field). A
validation error becomes one `ConfigError` line: `FILE:LINE: field 'a.b[2]': message`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import UserError, read_text


class ConfigError(UserError):
    """A scenario file that cannot be read or validated."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _LineLoader(yaml.SafeLoader):
    pass


def _walk(node: yaml.Node, path: tuple, out: dict) -> None:
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value
            out[path + (key,)] = k.start_mark.line + 1
            _walk(v, path + (key,), out)
            out[path + (key,)] = k.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _walk(v, path + (i,), out)


def load_yaml(path: str | Path) -> tuple[Any, dict[tuple, int]]:
    """Parse a YAML file; return the data and a map from key path to 1-based line number."""
    p = Path(path)
    text = read_text(p, "scenario", ConfigError)
    try:
        node = yaml.compose(text, Loader=_LineLoader)
        data = yaml.load(text, Loader=_LineLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        msg = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{p}{line}: malformed YAML ({msg})") from None
    lines: dict[tuple, int] = {}
    if node is not None:
        _walk(node, (), lines)
    return data, lines


def format_loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top>"


_TYPE_TAGS = {"str", "int", "float", "bool", "dict", "list", "tuple", "none"}


def _clean(loc) -> tuple:
    """A pydantic error location without the union-branch and validator tags it inserts."""
    return tuple(x for x in loc if not (isinstance(x, str) and (
        x.startswith("function-") or "[" in x or x in _TYPE_TAGS)))


def validation_error(e: ValidationError, where: str, lines: dict[tuple, int], strip: tuple = ()) -> ConfigError:
    """The first pydantic error as one line naming file, line and the full field path."""
    errs = e.errors()
    # a value that fits no branch of a union (e.g. a preset name or a list of sizes) reports one error per
    # branch; the deepest one says what is actually wrong ("layout[0]: greater than 0", not "not a string")
    err = max(errs, key=lambda x: len(_clean(x["loc"])))
    loc = tuple(err["loc"])
    if strip and loc[: len(strip)] == strip:
        loc = loc[len(strip):]
    loc = _clean(loc)
    line = None
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            line = lines[loc[:n]]
            break
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "missing":
        msg = "required field missing"
    at = f"{where}:{line}" if line else where
    return ConfigError(f"{at}: field '{format_loc(loc)}': {msg}")
