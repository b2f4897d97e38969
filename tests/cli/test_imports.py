"""Import structure: what a command's process loads (start-up time is most of `predict`), and the tables that
make it lazy (the CLI's command -> module map, the runner's scenario kind -> study map) staying complete."""

import json
import subprocess
import sys

import simulator.cli as cli
from simulator.config import KINDS
from simulator.studies.runner import RUNNERS


def _modules_after(*argv: str) -> set[str]:
    code = ("import sys, json, runpy\n"
            f"sys.argv = ['launchsim', *{list(argv)!r}]\n"
            "try:\n    runpy.run_module('simulator.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write(json.dumps(sorted(sys.modules)))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return set(json.loads(r.stderr.strip().splitlines()[-1]))


def test_every_registered_command_is_in_the_command_map():
    cli._load(cli._MODULES)
    for c in cli.app.registered_commands:
        name = c.name or c.callback.__name__.replace("_", "-")
        assert cli._COMMANDS.get(name) == c.callback.__module__.rsplit(".", 1)[-1], name


def test_every_scenario_kind_has_a_runner():
    kinds = {k.model_fields["kind"].annotation.__args__[0] for k in KINDS}
    assert kinds == set(RUNNERS)
    from importlib import import_module

    for module, fn in RUNNERS.values():
        assert callable(getattr(import_module(module), fn))


def test_predict_process_loads_only_what_it_needs():
    mods = _modules_after("predict", "--model", "qwen3-0.6b", "--batch", "2", "--json")
    assert "simulator.cli.core" in mods and "simulator.engine.fastpath" in mods
    assert "simulator.config.predict" in mods  # predict's flags are generated from the predict kind's model
    for m in ("simulator.cli.serve", "simulator.cli.buckets", "simulator.cli.calibration", "simulator.config.serve",
              "simulator.config.sweep", "simulator.config.capacity", "simulator.config.buckets",
              "simulator.serving.replica", "simulator.sweep.grid", "simpy", "plotly", "yaml",
              "simulator.model.recipes_hf", "simulator.layouts.buckets"):  # hf recipe; layouts: no --layout given
        assert m not in mods, m


def test_help_and_unknown_commands_still_load_every_command():
    mods = _modules_after("--help")
    assert {f"simulator.cli.{m}" for m in cli._MODULES} <= mods


def test_scenario_kind_table_lists_every_kind_in_order():
    from simulator.config.scenario import _KIND_MODELS

    assert [k.model_fields["kind"].annotation.__args__[0] for k in KINDS] == list(_KIND_MODELS)


def test_run_of_a_step_scenario_loads_only_its_kind(tmp_path):
    import os

    code = ("import sys, json, runpy\n"
            f"sys.argv = ['launchsim', 'run', 'scenarios/qwen3_0p6b_decode.yaml', '--out', {str(tmp_path)!r}, "
            "'--set', 'batch=[1]', '--set', 'fusion=[fused]']\n"
            "try:\n    runpy.run_module('simulator.cli', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write(json.dumps(sorted(sys.modules)))\n")
    # a plain stream at the default width (the test process may carry a COLUMNS of its own): drawn without rich
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    mods = set(json.loads(r.stderr.strip().splitlines()[-1]))
    assert "simulator.config.step" in mods and "fused" in r.stdout
    # plotly: report.html's figures are JSON dicts written without it (report/figjson.py)
    for m in ("simulator.config.serve", "simulator.config.sweep", "simulator.config.capacity", "rich", "plotly"):
        assert m not in mods, m
