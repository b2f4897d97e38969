"""The `launchsim` command line. Commands live in small modules that add themselves to `app`;
`main()` turns any `UserError` into one line on stderr and exit code 2."""

from __future__ import annotations

import sys

import typer

from ..errors import UserError

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    no_args_is_help=True,
    help="launchsim: simulate CPU kernel-launch overhead, fusion and CUDA graphs for LLM steps.",
)

from . import core  # noqa: E402,F401  (registers run, predict, schema)
from . import serve  # noqa: E402,F401  (registers serve)
from . import buckets  # noqa: E402,F401  (registers buckets, pad, graph-memory)
from . import trace  # noqa: E402,F401  (registers import-trace, export-trace)
from . import optimize  # noqa: E402,F401  (registers optimize)
from ..cli_calibration import register as _register_calibration; _register_calibration(app)  # noqa: E402,E702


def main(argv: list[str] | None = None) -> None:
    try:
        app(args=argv, standalone_mode=True)
    except UserError as e:
        print(f"launchsim: error: {e}", file=sys.stderr)
        sys.exit(2)
