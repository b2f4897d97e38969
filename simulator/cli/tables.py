"""Terminal output of the CLI: tables that fit the terminal, key/value records, and raw paste-ready lines.

- Every cell, title and caption is plain text (`rich.text.Text`), never rich markup: a layout label such as
  `[vllm]` prints as itself.
- A table wider than the terminal first drops low-value columns (LOW_VALUE, then from the right; never the
  first column) and says which; text that still does not fit wraps (folds), never ends in an ellipsis.
- A table cut at `limit` rows says how many rows are left out and where they are.
- `raw_lines` prints engine configuration lines with plain `print`: one per line, never wrapped or styled.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # rich is imported on the first table or line printed (`--json` output never imports it)
    from rich.console import Console


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    tty = stream.isatty()
    # not a terminal (a pipe, a file): wide enough not to wrap, no colour codes; COLUMNS still wins
    width = None if tty or os.environ.get("COLUMNS") else 160
    return Console(stderr=stderr, width=width, highlight=False, markup=False, emoji=False)


def __getattr__(name: str):
    """`console` (stdout) is made on first use, so that importing this module does not import rich."""
    if name == "console":
        c = globals()["console"] = _console()
        return c
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _out() -> Console:
    return __getattr__("console") if "console" not in globals() else globals()["console"]

# dropped first when a table is too wide for the terminal (columns not listed go next, from the right)
LOW_VALUE = ["runs", "graphs", "capture_s", "graph_gib", "kv_gib", "budgets", "graph_MiB", "host_calls",
             "cpu_stall_ms", "gpu_gap_ms", "gpu_bubble_ms", "gpu_idle_frac", "unscaled_kernels", "sync_ms",
             "throughput_tok_s", "ttft_p99_s", "padding_waste", "gpu_busy_frac", "padded_rows", "memory_MiB",
             "engine", "label", "speedup", "waste", "cpu_ms", "gpu_ms", "launches", "kernels"]
# dropped last: the answer a table exists for
HIGH_VALUE = ["step_ms", "best_rate", "tpot_p99_ms", "objective", "gain_%", "feasible", "value", "status"]


def cell(v) -> str:
    if isinstance(v, float) and 1e4 <= abs(v) < 1e15:
        return f"{v:.0f}"
    from simulator.report.html import human  # 0 for float noise, no scientific notation, yes/no, blank None

    return human(v)


def _need(col: str, cells: list[str], numeric: bool) -> int:
    """Terminal columns a column needs, box padding and separator included: numbers on one line, text wrapped
    at spaces down to its longest word."""
    if numeric:
        parts = [col, *cells]
    else:
        parts = [w for x in [col, *cells] for w in x.split()] or [""]
    return max(len(x) for x in parts) + 3


def fit_columns(cols: list[str], table: dict[str, list[str]], width: int,
                numeric: dict[str, bool] | None = None) -> tuple[list[str], list[str], dict[str, str]]:
    """(kept, dropped, constant): columns with one value in every row go first (reported with that value), then
    low-value ones, then from the right, until the table fits `width` (the first column only when constant; never below two)."""
    numeric = numeric or {}
    kept = list(cols)
    fits = lambda: sum(_need(c, table[c], numeric.get(c, False)) for c in kept) + 1 <= width  # noqa: E731
    same = {c: table[c][0] for c in kept if len(table[c]) > 1 and len(set(table[c])) == 1}
    rest = [c for c in reversed(kept[1:]) if c not in same and c not in LOW_VALUE]
    order = ([c for c in kept if c in same] + [c for c in LOW_VALUE if c in kept[1:] and c not in same]
             + [c for c in rest if c not in HIGH_VALUE] + [c for c in rest if c in HIGH_VALUE])
    dropped = []
    while not fits() and len(kept) > 2 and order:
        c = order.pop(0)
        kept.remove(c)
        dropped.append(c)
    return kept, dropped, {c: same[c] for c in dropped if c in same}


def _is_num(v) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))


def print_rows(rows: list[dict], title: str, columns: list[str] | None = None, limit: int | None = 60,
               where: str | None = None, more: str | None = None, out: Console | None = None) -> None:
    """A table of `rows` (first `limit`; None or 0: all). `where` names the file holding every row and column;
    `more` says how to print every row (e.g. "--rows 0")."""
    if not rows:
        return
    from rich.table import Table
    from rich.text import Text

    out = out or _out()
    cols = columns or [k for k in rows[0] if not isinstance(rows[0][k], (list, dict))]
    shown = rows if not limit else rows[:limit]
    table = {c: [cell(r.get(c)) for r in shown] for c in cols}
    numeric = {c: all(_is_num(r.get(c)) for r in shown) for c in cols}
    kept, dropped, constant = fit_columns(cols, table, out.width, numeric)
    t = Table(title=Text(title), title_justify="left")
    for c in kept:
        t.add_column(Text(c), justify="right" if numeric[c] else "left", overflow="fold", no_wrap=numeric[c])
    for i in range(len(shown)):
        t.add_row(*[Text(table[c][i]) for c in kept])
    notes = []
    if len(rows) > len(shown):
        notes.append(f"first {len(shown)} of {len(rows)} rows" + (f" ({more} prints all)" if more else ""))
    if constant:
        notes.append("same in every row: " + ", ".join(f"{c} {v}" for c, v in constant.items()))
    rest = [c for c in dropped if c not in constant]
    if rest:
        notes.append(f"left out to fit {out.width} columns: {', '.join(rest)}")
    if notes and where:
        notes.append(f"everything: {where}")
    if notes:
        t.caption = Text("; ".join(notes))
        t.caption_justify = "left"
    out.print(t)


def print_record(d: dict, title: str, keys: list[str] | None = None, out: Console | None = None) -> None:
    """One result as a two-column key/value table (every field visible at any terminal width)."""
    from rich.table import Table
    from rich.text import Text

    out = out or _out()
    t = Table(title=Text(title), title_justify="left", show_header=False)
    t.add_column("field", no_wrap=True)
    t.add_column("value", overflow="fold")
    for k in keys or [k for k, v in d.items() if not isinstance(v, (list, dict))]:
        if k in d:
            t.add_row(Text(k), Text(cell(d[k])))
    out.print(t)


def raw_lines(lines) -> None:
    """Paste-ready lines (engine flags, JSON snippets): plain print, one per line, never wrapped."""
    for line in lines:
        print(line)
    sys.stdout.flush()


def say(msg: str) -> None:
    """A plain line on stdout, through the console (no markup; soft-wrapped only by the terminal)."""
    from rich.text import Text

    _out().print(Text(msg), soft_wrap=True)
