"""`launchsim serve`: one replica under a request stream; prints the serving metrics (or one JSON object). Its
flags are generated from the `serve` scenario kind (config/serve.py ServeScenario; cli/generated.py): every flag
has a YAML twin, the serving-engine limits under vLLM's names (--max-num-seqs, --max-num-batched-tokens,
--gpu-memory-utilization), length distributions as text (--prompt-len lognormal:512). `--scenario FILE` gives the
rest; flags override it. The study is studies/serve.py."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Optional

from . import app
from simulator.common.errors import UserError
from simulator.common.jsonfile import dumps
from .generated import Flag

LENGTH_HELP = ("{what} lengths: fixed:N, uniform:LOW:HIGH, lognormal:MEAN[:CV[:LOW:HIGH]] or csv:FILE[:COLUMN] "
               "(real lengths, resampled)")


def length_spec(flag: str, text: str) -> dict:
    """A length distribution flag as the YAML `prompt` / `output` mapping (the model validates the values)."""
    kind, _, rest = text.strip().partition(":")
    parts = rest.split(":") if rest else []
    keys = {"fixed": ["value"], "uniform": ["low", "high"], "lognormal": ["mean", "cv", "low", "high"],
            "csv": ["file", "column"]}
    if kind not in keys:
        raise UserError(f"{flag}: unknown length distribution {kind!r} in {text!r}: use fixed:N, uniform:LOW:HIGH, "
                        f"lognormal:MEAN[:CV[:LOW:HIGH]] or csv:FILE[:COLUMN]")
    if kind == "csv" and len(parts) > 2:  # a path with ':' in it: everything but a last column name
        parts = [":".join(parts[:-1]), parts[-1]]
    if len(parts) > len(keys[kind]) or (kind != "lognormal" and kind != "csv" and len(parts) != len(keys[kind])) \
            or not parts or any(p == "" for p in parts):
        raise UserError(f"{flag}: {text!r}: {kind} takes {':'.join(k.upper() for k in keys[kind])}")
    out: dict = {"kind": kind}
    for k, v in zip(keys[kind], parts):
        if k in ("file", "column"):
            out[k] = v
            continue
        try:
            out[k] = float(v) if k in ("mean", "cv") else int(v)
        except ValueError:
            raise UserError(f"{flag}: {text!r}: {k} must be a number, got {v!r}") from None
    return out


def length_text(m) -> str:
    """A `LengthModel` as the text its flag takes (the inverse of `length_spec`), e.g. lognormal:512:1:1:4096."""
    vals = {"fixed": [m.value], "uniform": [m.low, m.high], "lognormal": [m.mean, m.cv, m.low, m.high],
            "csv": [m.file] + ([m.column] if m.column else [])}[m.kind]
    return ":".join([m.kind] + [f"{v:g}" if isinstance(v, float) else str(v) for v in vals])


def _layout(spec: str):
    """A preset name stays a string; "1,2,4,8" becomes a list (bad items are reported by the layout parser)."""
    from simulator.layouts.buckets import LAYOUT_PRESETS, parse_layout

    from .checks import named

    with named("--layout"):
        sizes = parse_layout(spec)  # one-line error for anything that is neither, or for sizes <= 0
    return spec if spec.strip() in LAYOUT_PRESETS else sizes


def length_flags() -> list[Flag]:
    """--prompt-len / --output-len: the `prompt` / `output` length models as text (serve and capacity)."""
    from simulator.config.serve import default_output, default_prompt

    return [Flag(f, (flag,), convert=partial(length_spec, flag), annotation=Optional[str],
                 help=LENGTH_HELP.format(what=f), default=length_text(dflt()))
            for f, flag, dflt in (("prompt", "--prompt-len", default_prompt), ("output", "--output-len", default_output))]


def run_flags() -> list[Flag]:
    """The flags serve and capacity share beyond the plain fields: the engine limits under vLLM's names, lengths."""
    return [Flag("duration_s", ("--duration",)), Flag("engine.max_num_seqs"), Flag("engine.max_num_batched_tokens"),
            Flag("engine.gpu_memory_utilization"), *length_flags()]


# the engines' short forms beside their names (issue 22 item 5)
RUN_ALIASES = {"tensor_parallel_size": ("--tp", "--tp-size"), "engine.gpu_memory_utilization": ("--gpu-util",)}
FLAGS = run_flags() + [
    Flag("arrivals", ("--trace",), convert=lambda p: {"process": "trace", "trace": str(p)}, annotation=Optional[Path],
         help="CSV trace (timestamp,prompt_tokens,output_tokens): replay its arrivals and lengths", default=None,
         merge=True),
    Flag("layout", convert=_layout)]


def _serve(given: dict, texts: dict, scenario: Optional[Path] = None, out: Optional[Path] = None,
           inline_plotly: bool = False, as_json: bool = False) -> None:
    """Simulate one GPU replica serving requests (continuous batching); print throughput, TTFT/TPOT, busy shares.
    Every option but --scenario, --out, --inline-plotly and --json is a field of the `serve` kind."""
    from simulator.common import limits as L
    from simulator.common.outpaths import check_out_dir, out_lock
    from simulator.config.serve import ServeScenario
    from simulator.studies.serve import header, run_serve_record
    from .checks import number, seed as check_seed
    from .flags import command_scenario

    number("--rate", given["rate"], L.MAX_RATE, "a positive number of requests/s")
    number("--duration", given["duration_s"], L.MAX_SECONDS, "a positive number of seconds")
    check_seed("--seed", given["seed"])
    if out is not None:
        check_out_dir(out, "--out")
    if scenario is None and given["model"] is None:
        raise UserError("give --model (or --scenario FILE)")
    sc = command_scenario(ServeScenario, "serve", given, texts, scenario, {"name": "serve"}, FLAGS)
    if out is None:
        d = run_serve_record(sc)
    else:
        from simulator.report.html import plotly_inline

        with out_lock(out, "--out"), plotly_inline(inline_plotly):
            d = run_serve_record(sc, out)
    if as_json:
        print(dumps(d))
        return
    from .tables import print_rows, say

    a = d["assumptions"]
    say(header("serve", d["model"], d["profile"], sc.fusion, sc.graph))
    print_rows([{"assumption": k, "value": v} for k, v in a.items()], f"serve {sc.model}: assumptions",
               ["assumption", "value"], limit=100)
    print_rows([{"metric": k, "value": v} for k, v in d.items() if not isinstance(v, (list, dict))],
               f"serve {sc.model} at {a.get('rate', 'trace')}", ["metric", "value"], limit=100)
    if d.get("saturated"):
        say(f"SATURATED: {d['saturated_why']}")


def _register() -> None:
    from simulator.config.serve import ServeScenario
    from .generated import command, extra_option

    extra = [extra_option("scenario", Optional[Path], None, "--scenario",
                          help="a serve scenario file; flags override it"),
             extra_option("out", Optional[Path], None, "--out",
                          help="write result.json, metrics.csv, batch_log.csv, report.html"),
             extra_option("inline_plotly", bool, False, "--inline-plotly",
                          help="inline plotly.js into report.html instead of writing plotly.min.js beside it"),
             extra_option("as_json", bool, False, "--json", help="print one JSON object")]
    app.command(name="serve")(command(_serve, ServeScenario, extra, RUN_ALIASES, flags=FLAGS))


_register()
