"""Scenario files: YAML loading with line numbers, the strict pydantic base, and error translation.

Every scenario model inherits `Strict` (unknown keys rejected, a description on every field). A
validation error becomes one `ConfigError` line: `FILE:LINE: field 'a.b[2]': message`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from simulator.common.errors import UserError


class ConfigError(UserError):
    """A scenario file that cannot be read or validated."""


from typing import Annotated  # noqa: E402

from pydantic import Field  # noqa: E402

from simulator.common import limits as L  # noqa: E402

Batch = Annotated[int, Field(gt=0, le=L.MAX_BATCH)]  # a batch size / capture size
Tokens = Annotated[int, Field(gt=0, le=L.MAX_CTX)]  # a context or length in tokens
Seed = Annotated[int, Field(ge=0, le=L.MAX_SEED)]
Micros = Annotated[float, Field(ge=0, le=L.MAX_US)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_YAML_BYTES = 4 << 20  # scenario files are a few kB; a megabyte-size inline histogram still fits
MAX_DEPTH = 64  # nesting levels (a scenario needs about 5)
MAX_NODES = 200_000  # nodes after expanding aliases (stops "billion laughs")


def _key(k: yaml.Node):
    return k.value if isinstance(k, yaml.ScalarNode) else f"<{k.tag.rsplit(':', 1)[-1]} key>"


def _precheck(text: str, where: str) -> None:
    """Nesting depth from the event stream (iterative, before anything recursive runs)."""
    depth = 0
    for ev in yaml.parse(text, Loader=_Loader):
        if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                line = ev.start_mark.line + 1
                raise ConfigError(f"{where}:{line}: YAML nested more than {MAX_DEPTH} levels deep")
        elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def _check_graph(root: yaml.Node, where: str) -> None:
    """Refuse recursive aliases, duplicate keys and documents that expand to more than MAX_NODES nodes."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            on_path.discard(nid)
            kids = [c for kv in node.value for c in kv] if isinstance(node, yaml.MappingNode) else node.value
            size[nid] = min(1 + sum(size[id(c)] for c in kids), MAX_NODES + 1)
            if size[nid] > MAX_NODES:
                raise ConfigError(f"{where}: the YAML expands to more than {MAX_NODES:,} values (aliases "
                                  "repeating aliases?); refusing it")
            continue
        if nid in size:
            continue
        if nid in on_path:
            raise ConfigError(f"{where}:{node.start_mark.line + 1}: recursive YAML alias (a value contains itself)")
        if isinstance(node, yaml.ScalarNode):
            size[nid] = 1
            continue
        on_path.add(nid)
        stack.append((node, True))
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value == "<<" and k.tag.endswith(":merge"):
                    pass
                elif isinstance(k, yaml.ScalarNode):
                    kk = (k.tag, k.value)
                    if kk in seen:
                        raise ConfigError(f"{where}:{k.start_mark.line + 1}: duplicate key '{k.value}' (first at "
                                          f"line {seen[kk]}); each key may appear once")
                    seen[kk] = k.start_mark.line + 1
                stack.extend(((k, False), (v, False)))
        else:
            stack.extend((c, False) for c in node.value)


def _walk(root: yaml.Node, out: dict) -> None:
    stack = [(root, ())]
    while stack:
        node, path = stack.pop()
        out.setdefault(path, node.start_mark.line + 1)
        if len(out) > MAX_NODES:
            return
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = _key(k)
                out[path + (key,)] = k.start_mark.line + 1
                stack.append((v, path + (key,)))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                stack.append((v, path + (i,)))


def _yaml_error(e: yaml.YAMLError, where) -> ConfigError:
    mark = getattr(e, "problem_mark", None)
    line = f":{mark.line + 1}" if mark else ""
    msg = getattr(e, "problem", None) or str(e).splitlines()[0]
    return ConfigError(f"{where}{line}: malformed YAML ({msg})")


def load_yaml(path: str | Path) -> tuple[Any, dict[tuple, int]]:
    """Parse a YAML file; return the data and a map from key path to 1-based line number.

    Safe and bounded: size, nesting depth and alias expansion are capped; recursive aliases and duplicate keys
    are refused (a duplicated `kind` would otherwise silently switch the scenario type)."""
    from simulator.common.jsonfile import read_text_file

    p = Path(path)
    text = read_text_file(p, "scenario", ConfigError, MAX_YAML_BYTES)
    loader = None
    try:
        _precheck(text, str(p))
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return None, {}
        _check_graph(node, str(p))
        data = loader.construct_document(node)
    except yaml.YAMLError as e:
        raise _yaml_error(e, p) from None
    except RecursionError:
        raise ConfigError(f"{p}: YAML nested too deep") from None
    finally:
        if loader is not None:
            loader.dispose()
    lines: dict[tuple, int] = {}
    _walk(node, lines)
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
