"""Scenario files: one pydantic model per `kind`, joined in a discriminated union.

`load_scenario(path)` reads YAML, validates it and returns the model; errors name file, line and
field path. To add a kind: define its model (with `kind: Literal[...]`) and add it to KINDS.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Union

from pydantic import Field, TypeAdapter, ValidationError

from .base import ConfigError, load_yaml, validation_error
from .step import StepScenario, ToyScenario
from .serve import ServeScenario
from .capacity import CapacityScenario
from .sweep import SweepScenario
from .trace_workload import WorkloadScenario
from .buckets import BucketsScenario

KINDS: list[type] = [StepScenario, ToyScenario, SweepScenario, WorkloadScenario, ServeScenario, CapacityScenario,
                      BucketsScenario]


def _union():
    return Annotated[Union[tuple(KINDS)], Field(discriminator="kind")]


def _adapter() -> TypeAdapter:
    return TypeAdapter(_union())


def parse_scenario(data: object, where: str = "<scenario>", lines: dict | None = None):
    lines = lines or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a scenario must be a YAML mapping with a 'kind' key")
    kinds = [k.model_fields["kind"].annotation.__args__[0] for k in KINDS]
    kind = data.get("kind")
    if kind not in kinds:
        line = lines.get(("kind",), 1)
        raise ConfigError(f"{where}:{line}: field 'kind': must be one of {', '.join(kinds)}, got {kind!r}")
    try:
        return _adapter().validate_python(data)
    except ValidationError as e:
        raise validation_error(e, where, lines, strip=(kind,)) from None


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


def load_scenario(path: str | Path, check: bool = True):
    """Read, validate and (with `check`) resolve a scenario file: models, profiles and files it names must exist
    and fit (config/refs.py). Every problem is one ConfigError line `FILE:LINE: field 'path': message`."""
    data, lines = load_yaml(path)
    sc = parse_scenario(_rebase(data, Path(path).parent), str(path), lines)
    if check:
        from .refs import check_references

        check_references(sc, str(path), lines)
    return sc


def scenario_json_schema() -> str:
    return json.dumps(_adapter().json_schema(), indent=2)


__all__ = ["ConfigError", "KINDS", "load_scenario", "parse_scenario", "scenario_json_schema"]
