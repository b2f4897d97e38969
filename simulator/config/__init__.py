"""Scenario files and the pydantic models of each scenario `kind` (config/scenario.py joins them; config/base.py
is the strict base and error translation; config/yamlfile.py reads YAML; config/refs.py resolves what a scenario
names). The names below are loaded on first use: a command that fills one kind's model from its flags imports
that kind's module alone, not PyYAML and every other kind."""

from __future__ import annotations

from .base import ConfigError

_LAZY = {"KINDS", "load_scenario", "parse_scenario", "scenario_json_schema", "apply_overrides"}


def __getattr__(name: str):
    if name in _LAZY:
        from . import scenario

        return getattr(scenario, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ConfigError", "KINDS", "load_scenario", "parse_scenario", "scenario_json_schema"]
