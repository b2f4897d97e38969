"""Scenario files: one pydantic model per `kind` (joined in a discriminated union for the JSON schema).

`load_scenario(path)` reads YAML, validates it and returns the model; errors name file, line and
field path. To add a kind: define its model (with `kind: Literal[...]`) and add it to _KIND_MODELS (KINDS follows).
(`simulator.config` re-exports these names lazily, so that importing one kind's module stays cheap.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Union

from pydantic import Field, TypeAdapter, ValidationError

from .base import ConfigError, validation_error
from .yamlfile import load_yaml

# kind -> (module, model) in the order errors list them. A scenario is validated by its kind's model alone, so a
# `run` imports that kind's module and builds that model's validator only (not every kind's, as the discriminated
# union of all of them needed: ~40 ms of a `launchsim run` of a step scenario); KINDS, the union and the JSON
# schema import them all on first use.
_KIND_MODELS = {"step": ("step", "StepScenario"), "toy": ("toy", "ToyScenario"), "sweep": ("sweep", "SweepScenario"),
                "workload": ("trace_workload", "WorkloadScenario"), "serve": ("serve", "ServeScenario"),
                "capacity": ("capacity", "CapacityScenario"), "buckets": ("buckets", "BucketsScenario"),
                "predict": ("predict", "PredictScenario"), "startup": ("capture", "StartupScenario"),
                "graph_memory": ("capture", "GraphMemoryScenario"),
                "import_trace": ("trace_files", "ImportTraceScenario"),
                "export_trace": ("trace_files", "ExportTraceScenario")}


KINDS: list[type]  # every kind's model, in _KIND_MODELS' order: made on first use (`__getattr__`)


def kind_model(kind: str) -> type:
    """The scenario model of `kind` (a key of _KIND_MODELS)."""
    from importlib import import_module

    module, name = _KIND_MODELS[kind]
    return getattr(import_module(f"{__package__}.{module}"), name)


def __getattr__(name: str):
    if name == "KINDS":  # every kind's model, in _KIND_MODELS' order
        kinds = globals()["KINDS"] = [kind_model(k) for k in _KIND_MODELS]
        return kinds
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _union():
    return Annotated[Union[tuple(globals().get("KINDS") or __getattr__("KINDS"))], Field(discriminator="kind")]


def _adapter() -> TypeAdapter:
    return TypeAdapter(_union())


def parse_scenario(data: object, where: str = "<scenario>", lines: dict | None = None):
    lines = lines or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a scenario must be a YAML mapping with a 'kind' key")
    kinds = list(_KIND_MODELS)
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in kinds:
        line = lines.get(("kind",), 1)
        raise ConfigError(f"{where}:{line}: field 'kind': must be one of {', '.join(kinds)}, got {kind!r}")
    try:
        return kind_model(kind).model_validate(data)
    except ValidationError as e:
        raise validation_error(e, where, lines) from None


FILE_SUFFIXES = (".csv", ".json", ".gz", ".jsonl", ".yaml", ".yml")


def _rebase(obj, base: Path):
    """Relative file paths in a scenario name files beside the scenario (when such a file exists there);
    otherwise they stay relative to the working directory."""
    if isinstance(obj, dict):
        return {k: _rebase(v, base) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rebase(v, base) for v in obj]
    if isinstance(obj, str) and obj.lower().endswith(FILE_SUFFIXES) and not Path(obj).is_absolute():
        cand = base / obj
        if cand.exists():
            return str(cand)
    return obj


def apply_overrides(data: dict, overrides: list[str] | None) -> dict:
    """Set fields from `FIELD=VALUE` strings (dotted paths into mappings, VALUE read as YAML), e.g.
    `replicates=2`, `search.max_runs=4`, `batch=[1, 8]`; used by `launchsim run --set`."""
    import yaml

    for item in overrides or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r}: expected FIELD=VALUE, e.g. replicates=2")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            raise ConfigError(f"override {item!r}: VALUE is not valid YAML") from None
        node, parts = data, key.strip().split(".")
        for p in parts[:-1]:
            nxt = node.get(p) if isinstance(node, dict) else None
            if nxt is None:
                nxt = node[p] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(f"override {item!r}: field '{p}' is not a mapping")
            node = nxt
        node[parts[-1]] = value
    return data


def load_scenario(path: str | Path, check: bool = True, overrides: list[str] | None = None):
    """Read, validate and (with `check`) resolve a scenario file: models, profiles and files it names must exist
    and fit (config/refs.py). Every problem is one ConfigError line `FILE:LINE: field 'path': message`.
    `overrides` (`FIELD=VALUE` strings) are applied before validation."""
    data, lines = load_yaml(path)
    data = _rebase(data, Path(path).parent)
    if overrides:
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: a scenario must be a YAML mapping with a 'kind' key")
        data = apply_overrides(data, overrides)
    try:
        sc = parse_scenario(data, str(path), lines)
        if check:
            from .refs import check_references

            check_references(sc, str(path), lines)
    except ConfigError as e:
        raise _name_override(e, str(path), overrides) from None
    return sc


def _name_override(e: ConfigError, path: str, overrides: list[str] | None) -> ConfigError:
    """An error on a field that `--set` filled names the --set item, not the file's line (which holds the value
    the override replaced, or nothing)."""
    import re

    m = re.match(r"^(.*?): field '([^']*)': (.*)$", str(e))
    if not overrides or m is None:
        return e
    fld = m.group(2)
    for item in overrides:
        key = item.partition("=")[0].strip()
        if fld == key or fld.startswith(key + ".") or fld.startswith(key + "[") or key.startswith(fld + "."):
            return ConfigError(f"override {item!r} ({path}): field '{fld}': {m.group(3)}")
    return e


def run_error(e: Exception, path: str | Path, overrides: list[str] | None = None) -> ConfigError:
    """An error a study raised while running a scenario file, as one line naming the file: a study speaks in fields
    (`field 'layout': ...`), and the field's line is read back from the file (the line of a `--set` item names it)."""
    import re

    msg = str(e)
    if msg.startswith(str(path)):
        return e if isinstance(e, ConfigError) else ConfigError(msg)
    m = re.match(r"^field '([^']*)': ", msg)
    if m is None:
        return ConfigError(f"{path}: {msg}")
    loc = tuple(int(x) if x.isdigit() else x for x in re.findall(r"[^.\[\]]+", m.group(1)))
    try:
        _, lines = load_yaml(path)
    except ConfigError:
        lines = {}
    line = next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), None)
    at = f"{path}:{line}" if line else str(path)
    return _name_override(ConfigError(f"{at}: {msg}"), str(path), overrides)


def scenario_json_schema() -> str:
    return json.dumps(_adapter().json_schema(), indent=2)


__all__ = ["ConfigError", "KINDS", "load_scenario", "parse_scenario", "scenario_json_schema"]
