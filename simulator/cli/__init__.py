"""The `launchsim` command line. Commands live in small modules that add themselves to `app`;
`main()` turns any `UserError` into one line on stderr and exit code 2."""

from __future__ import annotations

import os
import sys

# launchsim calls no BLAS routine (no linalg, dot or matmul in simulator/ or calibration/): OpenBLAS's thread
# pool, started when numpy is imported, cost every process about 60 ms of CPU and wall time on a 2-core machine
# (python -c "import numpy, pydantic, yaml": 0.16 s -> 0.10 s of CPU) and made each sweep worker start its own
# threads. Set before numpy is first imported; a value the user set wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _entry_process() -> bool:
    """Whether this process is the launchsim entry point (the console script or `python -m simulator.cli`), not a
    program (or a test) that imports the CLI."""
    o = list(getattr(sys, "orig_argv", []))
    return os.path.basename(sys.argv[0] if sys.argv else "") == "launchsim" or any(
        o[i] == "-m" and o[i + 1] == "simulator.cli" for i in range(len(o) - 1))


# The garbage collector in a launchsim process (the entry point only: a program importing the CLI keeps its own
# settings). Start-up allocates ~200k long-lived objects (modules, classes, pydantic and typer schemas) and the
# default thresholds (700, 10, 10) ran ~90 young and ~8 middle collections over them in `predict --json`, and a
# full one in `optimize` and `run`: 15 ms of `predict`, 55-90 ms of `optimize` and ~120 ms of `run` on this
# 2-core machine (gc.callbacks). A young generation of 10,000 objects while the process runs, and everything
# alive once the command's module is loaded moved out of the collected generations (`gc.freeze`, in `_run`):
# cyclic garbage is still collected, the start-up objects are no longer traversed again and again.
# Until the command starts (imports, the option parsing) the collector is off: start-up makes almost no cyclic
# garbage, and the ~5 young collections of 10,000 objects it still ran while `predict --json` imported its modules
# cost ~2 ms each here (~3 % of the process). It is switched back on, after the freeze, just before the command
# runs (`_run`). Not in a worker process started by multiprocessing's spawn or forkserver, which imports this
# module with the parent's argv (multiprocessing is imported by then; the entry process has not imported it yet).
if _entry_process():
    import gc

    gc.set_threshold(10_000, 10, 10)
    if "multiprocessing" not in sys.modules:
        gc.disable()

from simulator.common.errors import Interrupted, UserError


def _make_app():
    """The typer app, its root callback and options. Built on first use (`app`, below): a plain `predict` or
    `optimize` runs without typer (cli/fast.py); help, errors and every other command go through it."""
    import typer

    app = typer.Typer(
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        no_args_is_help=True,
        help="launchsim: simulate CPU kernel-launch overhead, fusion and CUDA graphs for LLM steps.",
    )

    def _version(value: bool) -> None:
        if value:
            from importlib.metadata import PackageNotFoundError, version

            try:
                v = version("launchsim")
            except PackageNotFoundError:  # run from a source tree that was never installed
                v = "unknown (not installed)"
            print(f"launchsim {v}")
            raise typer.Exit(0)

    @app.callback()
    def _root(
        show_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                          help="print the version and exit"),
    ) -> None:
        """launchsim: simulate CPU kernel-launch overhead, fusion and CUDA graphs for LLM steps."""

    return app


def _get_app():
    """The typer app, built on first use; then an ordinary global of this module."""
    global app
    if "app" not in globals():
        app = _make_app()
    return app


def __getattr__(name: str):
    if name == "app":  # `from simulator.cli import app`, `cli.app` (PEP 562)
        return _get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


from .choices import BadChoice  # noqa: E402,F401
# the modules that register commands, in help order; `launchsim CMD` itself imports only CMD's module
_MODULES = ("core", "serve", "capacity", "buckets", "trace", "optimize", "startup", "calibration")
_COMMANDS = {"run": "core", "predict": "core", "schema": "core", "serve": "serve", "capacity": "capacity", "buckets": "buckets",
             "pad": "buckets", "graph-memory": "buckets", "import-trace": "trace", "export-trace": "trace",
             "optimize": "optimize", "startup": "startup", "combine-profiles": "calibration",
             "calibrate": "calibration", "measure": "calibration", "validate": "calibration",
             "profiles": "calibration"}
_loaded: set[str] = set()
# commands a plain command line of runs without typer (cli/fast.py): {command: (module, its parts function)}
_FAST = {"predict": ("core", "predict_parts"), "optimize": ("optimize", "optimize_parts")}


def _load(names) -> None:
    """Register the commands of cli modules `names` (a module registers at import, or by its `register(app)`)."""
    from importlib import import_module

    for n in names:
        if n not in _loaded:
            _loaded.add(n)
            m = import_module(f"simulator.cli.{n}")
            if hasattr(m, "register"):
                m.register(_get_app())


def _entry_command() -> str | None:
    """The command when this process is the launchsim entry point (the console script or `python -m
    simulator.cli`) and names a known command first; None otherwise (imported as a library, help, a flag)."""
    cmd = sys.argv[1] if _entry_process() and len(sys.argv) > 1 else None
    return cmd if cmd in _COMMANDS else None


if _entry_command() not in _FAST:  # a plain predict or optimize may need no typer at all (`_run`)
    _load([_COMMANDS[_entry_command()]] if _entry_command() else _MODULES)


def _one_line(msg: str) -> str:
    return "; ".join(x.strip() for x in str(msg).splitlines() if x.strip())


def _fail(msg: str, code: int = 2) -> None:
    print(f"launchsim: error: {_one_line(msg)}", file=sys.stderr)
    sys.exit(code)


def _exit_now(code: int) -> None:
    """End an interrupted process once it has unwound (workers stopped, locks released, files closed): without the
    interpreter's exit hooks, of which concurrent.futures' wakes a process pool's management thread through a pipe
    the interruption may already have closed, printing an "Exception ignored ... Traceback" after the one line
    (seen under SIGTERM: tests/cli/test_hardening.py). launchsim registers no exit hook of its own."""
    import os

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _on_signal(signum, frame):  # noqa: ARG001
    import signal

    if signum == signal.SIGTERM:
        raise Interrupted("terminated", 143)
    raise Interrupted("interrupted", 130)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI. Bad input of any kind (a flag, a file, a field) is one stderr line and exit code 2."""
    import signal
    import warnings

    warnings.simplefilter("ignore", RuntimeWarning)  # numpy overflow notes must not precede the error line
    old = None
    if threading_main():
        old = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
        # unwind (workers stop, locks released, a sweep says how to resume) instead of dying mid-write; raised as
        # Interrupted, not KeyboardInterrupt, which typer would turn into a silent exit code
        signal.signal(signal.SIGTERM, _on_signal)
        signal.signal(signal.SIGINT, _on_signal)
    try:
        _run(argv)
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old[0])
            signal.signal(signal.SIGINT, old[1])


def _run(argv) -> None:
    import os

    from simulator.report.progress import set_quiet

    set_quiet("--json" in (sys.argv[1:] if argv is None else argv))  # --json: stdout and stderr stay machine-clean

    args = sys.argv[1:] if argv is None else argv
    fast = None
    if args and args[0] in _FAST:
        from .fast import plain_call

        fast = plain_call(*_FAST[args[0]], list(args[1:]))  # None: not a plain command line, typer parses it
    if fast is None:
        if args and args[0] in _FAST and _entry_command() == args[0]:
            _load([_COMMANDS[args[0]]])  # what the import would have registered
        if not (args and _COMMANDS.get(args[0]) in _loaded):
            _load(_MODULES)  # help, a flag, an unknown command or one not registered yet: every command, as always
    if argv is None and _entry_process():  # the command's modules are loaded: never traversed again, and the
        import gc  # collector back on for the command (see the top)

        gc.freeze()
        gc.enable()
    try:
        rv = fast() if fast is not None else _get_app()(args=argv, prog_name="launchsim", standalone_mode=False)
    except UserError as e:
        _fail(str(e))
    except BadChoice as e:  # a choice flag's value (simulator/cli/choices.py)
        _fail(str(e))
    except Interrupted as e:
        print(f"launchsim: {_one_line(str(e))}", file=sys.stderr)
        if argv is None:  # the command's own process (not main() called from Python)
            _exit_now(e.code)
        sys.exit(e.code)
    except KeyboardInterrupt as e:
        msg = str(e) if str(e) and str(e) != "terminated" else "interrupted"
        print(f"launchsim: {_one_line(msg)}", file=sys.stderr)
        sys.exit(130)
    except Exception as e:  # click's own exceptions (typer may vendor click: matched by class name)
        names = {c.__name__ for c in type(e).__mro__}
        ctx = getattr(e, "ctx", None)
        if "NoArgsIsHelpError" in names:  # bare `launchsim` or a bare group: the help text, as before
            print(ctx.get_help() if ctx is not None else str(e))
            sys.exit(2)
        if "UsageError" in names:
            _fail(f"{ctx.command_path + ': ' if ctx is not None else ''}{e.format_message()}")
        cause = e.__cause__ or e.__context__
        if "Abort" in names or isinstance(cause, KeyboardInterrupt):  # click/typer wrap Ctrl-C and SIGTERM
            msg = str(cause) if isinstance(cause, KeyboardInterrupt) else ""
            print(f"launchsim: {_one_line(msg) if msg and msg != 'terminated' else 'interrupted'}", file=sys.stderr)
            sys.exit(130)
        if "Exit" in names:
            sys.exit(getattr(e, "exit_code", 0))
        if "ClickException" in names:
            _fail(e.format_message())
        import errno

        if (isinstance(e, MemoryError) or (isinstance(e, OSError) and e.errno == errno.ENOSPC)) \
                and not os.environ.get("LAUNCHSIM_DEBUG"):
            # the machine ran out (memory, disk) on what may be a valid input: exit 1, not 2 (bad input)
            what = "out of memory" if isinstance(e, MemoryError) else f"{getattr(e, 'filename', None) or 'disk'}: " \
                                                                      f"no space left on the device"
            print(f"launchsim: error: {what} (a smaller run, or more memory/disk; LAUNCHSIM_DEBUG=1 for a "
                  f"traceback)", file=sys.stderr)
            sys.exit(1)
        if isinstance(e, (OSError, MemoryError, RecursionError)) and not os.environ.get("LAUNCHSIM_DEBUG"):
            what = getattr(e, "filename", None)
            why = getattr(e, "strerror", None) or e.__class__.__name__
            _fail(f"{what}: {why}" if what else f"{why} (set LAUNCHSIM_DEBUG=1 for a traceback)")
        raise
    sys.exit(rv if isinstance(rv, int) else 0)


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
