"""Progress on stderr for work that can take more than a couple of seconds (a step grid, a capacity search, serving
runs, validation). Shown only when stderr is a terminal and nothing silenced it (`set_quiet`, which the CLI calls
under --json); a transient rich bar that disappears when the work ends. Nothing here changes a result.

    with task("capacity", total=3) as advance:
        ...
        note("qwen3-0.6b fused none: rate 120 req/s")   # updates the running task's line, if any
        advance()
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable

_state: dict = {"quiet": False, "progress": None, "task": None}


def set_quiet(quiet: bool = True) -> None:
    _state["quiet"] = quiet


def enabled() -> bool:
    return not _state["quiet"] and sys.stderr.isatty() and _state["progress"] is None


@contextmanager
def task(label: str, total: int | None = None):
    """Yield `advance(n=1)`; a spinner (total None) or a bar with elapsed time while the body runs."""
    if not enabled():
        yield lambda n=1: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    cols = [SpinnerColumn(), TextColumn("{task.description}", markup=False)]
    if total:
        cols += [BarColumn(), MofNCompleteColumn()]
    cols += [TimeElapsedColumn(), TextColumn("{task.fields[note]}", markup=False)]
    with Progress(*cols, console=Console(stderr=True), transient=True) as prog:
        t = prog.add_task(label, total=total, note="")
        _state["progress"], _state["task"] = prog, t
        try:
            yield lambda n=1: prog.update(t, advance=n)
        finally:
            _state["progress"], _state["task"] = None, None


def note(text: str) -> None:
    """Show `text` beside the running task (no-op when none runs, e.g. in a worker process)."""
    prog = _state["progress"]
    if prog is not None:
        prog.update(_state["task"], note=text)


Advance = Callable[..., None]
