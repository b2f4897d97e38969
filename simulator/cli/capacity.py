"""`launchsim capacity`: the highest arrival rate one replica sustains under latency SLOs (and stays stable), and
the replicas a target rate needs. Its flags are generated from the `capacity` scenario kind (config/capacity.py;
cli/generated.py), so each has a YAML twin (repeat --model, --profile, --fusion, --graph for several);
`--scenario FILE` gives the rest and flags override it. The study is studies/capacity.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from . import app
from simulator.common import vocab as V
from simulator.common.errors import UserError
from simulator.common.jsonfile import dumps
from .generated import Flag
from .serve import RUN_ALIASES, _layout, run_flags

# the command compares one configuration by default, under the one set of defaults (the YAML kind's graph default
# compares none with full_and_piecewise)
DEFAULTS = {"fusion": [V.DEFAULT_FUSION.value], "graph": [V.DEFAULT_GRAPH.value]}


def _layouts(text: str) -> list[dict]:
    return [{"label": text if "," not in text else "given", "sizes": _layout(text)}]


FLAGS = run_flags() + [
    Flag("models", ("--model",), help="model preset or config.json path (repeat for several)"),
    Flag("profiles", ("--profile",), help="profile name or path (repeat for several)", default="h200"),
    Flag("layouts", ("--layout",), convert=_layouts, annotation=Optional[str], default="vllm",
         help="capture sizes: a preset or 1,2,4,... (ignored under graph none)"),
    Flag("slo.percentile", ("--slo-percentile",)), Flag("slo.tpot_ms", ("--slo-tpot-ms",)),
    Flag("slo.ttft_s", ("--slo-ttft-s",)), Flag("search.rate_min"), Flag("search.rate_max"),
    Flag("search.tolerance"), Flag("search.max_runs")]


def _capacity(given: dict, texts: dict, scenario: Optional[Path] = None, out: Optional[Path] = None,
              as_json: bool = False) -> None:
    """Highest SLO-meeting (and stable) arrival rate per configuration, and replicas for a target rate. Every
    option but --scenario, --out and --json is a field of the `capacity` kind."""
    from contextlib import nullcontext

    from simulator.common.outpaths import check_out_dir, out_lock
    from simulator.config.capacity import CapacityScenario
    from simulator.studies.capacity import run_capacity_scenario
    from simulator.studies.serve import header
    from .flags import command_scenario
    from .tables import print_rows, say

    if out is not None:
        check_out_dir(out, "--out")
    if scenario is None and not given["models"]:
        raise UserError("give --model (or --scenario FILE)")
    if scenario is None and given["slo.tpot_ms"] is None and given["slo.ttft_s"] is None:
        raise UserError("give --slo-tpot-ms and/or --slo-ttft-s (the SLO a rate must meet)")
    sc = command_scenario(CapacityScenario, "capacity", given, texts, scenario, {"name": "capacity", **DEFAULTS},
                          FLAGS)
    t0 = time.perf_counter()
    with out_lock(out, "--out") if out is not None else nullcontext():
        result = run_capacity_scenario(sc, out)
    if as_json:
        print(dumps({"slo": result["slo"], "target_rate": result["target_rate"], "summary": result["summary"],
                     "assumptions": result.get("assumptions", {})}))
        return
    profiles = ", ".join(dict.fromkeys(f["profile_name"] for f in result["configs"]))
    say(f"{header('capacity', ', '.join(sc.models), profiles, ', '.join(sc.fusion), ', '.join(sc.graph))}; "
        f"SLO {result['slo']}")
    print_rows(result["summary"], f"{sc.name} (capacity)", result["summary_columns"])
    for f in result["configs"]:
        say(f"{f['config']}: {f['message']}")
    if out is not None:
        say(f"wrote {out / 'result.json'} and {out / 'report.html'} in {time.perf_counter() - t0:.2f} s")


def _register() -> None:
    from simulator.config.capacity import CapacityScenario
    from .generated import command, extra_option

    extra = [extra_option("scenario", Optional[Path], None, "--scenario",
                          help="a capacity scenario file; flags override it"),
             extra_option("out", Optional[Path], None, "--out",
                          help="write result.json, capacity.csv, curves.csv, report.html"),
             extra_option("as_json", bool, False, "--json", help="print the summary rows as one JSON object")]
    app.command(name="capacity")(command(_capacity, CapacityScenario, extra, RUN_ALIASES, flags=FLAGS,
                                         defaults=DEFAULTS))


_register()
