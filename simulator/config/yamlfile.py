"""Reading a scenario YAML file: safe and bounded (size, nesting depth, alias expansion), duplicate keys refused,
and a map from every key path to its line number for the error messages of config/base.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .base import ConfigError

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


def _merge_conflicts(value: yaml.Node, where: str) -> None:
    """A merge key given a list of mappings (`<<: [*a, *b]`) that set the same key: YAML 1.1 says the first
    mapping wins, PyYAML takes the last, so the value would silently be the other one; refused."""
    if not isinstance(value, yaml.SequenceNode):
        return
    seen: dict = {}
    for sub in value.value:
        for k, _ in sub.value if isinstance(sub, yaml.MappingNode) else ():
            if isinstance(k, yaml.ScalarNode):
                kk = (k.tag, k.value)
                if kk in seen:
                    raise ConfigError(f"{where}:{value.start_mark.line + 1}: key '{k.value}' is set by two of the "
                                      f"mappings merged here (lines {seen[kk]} and {k.start_mark.line + 1}): which "
                                      "one wins differs between YAML readers; set it once")
                seen[kk] = k.start_mark.line + 1


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
                    _merge_conflicts(v, where)
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
