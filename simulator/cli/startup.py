"""`launchsim startup`: an engine's start-up cost (torch.compile, warm-up runs, CUDA-graph capture) for a model
and capture layout, from the measured start-up model (simulator/engine/startup.py)."""

from __future__ import annotations

from typing import Optional

from . import app
from simulator.common.jsonfile import dumps


def _startup(given: dict, flags: dict, as_json: bool = False) -> None:
    """Start-up seconds of an engine: torch.compile + warm-up runs + graph capture over a capture layout. Every
    option but --json is a field of the `startup` scenario kind (`launchsim schema`)."""
    from simulator.config.capture import StartupScenario
    from simulator.studies.capture import run_startup
    from .flags import run_with_flags

    d = run_with_flags(StartupScenario, "startup", given, flags, run_startup)
    if as_json:
        print(dumps(d))
        return
    print(f"{d['model']} on {d['profile']}, {d['fusion']}/{d['graph']} ({d['impl']}), layout {d['layout']}: "
          f"{len(d['sizes'])} sizes, {d['graphs']} capture passes, {d['warmup_runs']} warm-up run(s) each")
    for k, label in (("compile_s", "compile"), ("warmup_s", "warm-up"), ("capture_s", "capture"),
                     ("total_s", "total")):
        print(f"  {label:<11} {d[k]:9.2f} s")
    if d.get("spec_tokens"):
        print(f"  spec k={d['spec_tokens']} ({d['spec_engine']}): target sizes in tokens; draft '{d['draft']}' "
              f"({d['draft_graph_mode']} graphs): {d['draft_graphs']} capture passes, compile {d['draft_compile_s']:.2f} "
              f"s, warm-up {d['draft_warmup_s']:.2f} s, capture {d['draft_capture_s']:.2f} s")
        print(f"  total+draft {d['total_with_draft_s']:9.2f} s")
    from simulator.common import vocab as V

    print(f"  ({V.defaults_note(d['fusion'], d['graph'])})")
    for n in d["notes"]:
        print(f"  note: {n}")
    print(f"  source: {d['source']}")


def _register() -> None:
    from simulator.config.capture import StartupScenario
    from .generated import command, extra_option

    extra = [extra_option("as_json", bool, False, "--json", help='print {"compile_s", "warmup_s", "capture_s", '
                                                                  '"total_s", "graphs", ...}')]
    app.command(name="startup")(command(_startup, StartupScenario, extra, aliases={
        "tensor_parallel_size": ("--tp",), "compile_cache": ("--cache",)}))


_register()


def _runs(prof, warmups: Optional[int]) -> int:
    from simulator.engine.startup import figures

    return figures(prof)[0].warmup_runs if warmups is None else warmups
