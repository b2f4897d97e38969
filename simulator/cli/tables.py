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


# -- plain output without rich --------------------------------------------------------------------------------
# A table printed to a pipe or a file (no terminal, no colour, the fixed width 160 `_console` gives such a stream)
# whose every cell, title and caption is one run of printable ASCII, and whose cells fit without wrapping, is
# drawn here, character for character as rich draws it (box.HEAVY_HEAD, padding 1; title and caption
# left-justified, wrapped at spaces to the table's width and padded to it; tests/cli/test_tables_plain.py compares
# the two on random tables): importing rich and laying the table out cost ~80 ms of a `launchsim run` (40 ms
# import, 40 ms for its 80-row table). Anything else (a terminal, FORCE_COLOR/TTY_COMPATIBLE/TTY_INTERACTIVE/
# COLUMNS set, a non-UTF-8 stream, cells to wrap, other characters) goes through rich as before.
PLAIN_WIDTH = 160
_RICH_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "JUPYTER_COLUMNS")


def _plain_stdout() -> bool:
    """Whether stdout is a stream rich would write plain text to at width PLAIN_WIDTH (see above)."""
    import builtins

    f = sys.stdout
    try:
        if f is None or f.isatty():
            return False
    except (AttributeError, ValueError):
        return False
    if os.name != "posix" or any(k in os.environ for k in _RICH_ENV) or hasattr(builtins, "get_ipython"):
        return False
    if getattr(sys.stdin, "__module__", "").startswith("idlelib"):
        return False
    return (getattr(f, "encoding", None) or "utf-8").lower().startswith("utf")


def _simple(s: str) -> bool:
    """One line of printable ASCII, no leading, trailing or doubled spaces (what rich prints unchanged)."""
    return s.isascii() and s.isprintable() and s == s.strip() and "  " not in s


def plain_table(title: str, columns: list[tuple[str, bool, list[str]]], caption: str = "",
                width: int = PLAIN_WIDTH) -> str | None:
    """rich's rendering of `Table(title=Text(title), title_justify="left")` with `columns` (header, right-justified,
    cells) and a left-justified caption on a plain console `width` wide; None where rich would wrap or transform
    any text (the caller then prints through rich)."""
    texts = [title, caption] + [h for h, _, _ in columns] + [c for _, _, cells in columns for c in cells]
    if not columns or not all(t == "" or _simple(t) for t in texts) or not all(h for h, _, _ in columns):
        return None
    widths = [max(len(h), *(len(c) for c in cells)) if cells else len(h) for h, _, cells in columns]
    total = sum(widths) + 3 * len(widths) + 1
    head, foot = _wrapped(title, total), _wrapped(caption, total)
    if total > width or head is None or foot is None:
        return None

    def row(cells: list[str], bar: str) -> str:
        return bar + bar.join(f" {c.rjust(w) if right else c.ljust(w)} "
                              for c, w, (_, right, _) in zip(cells, widths, columns)) + bar

    out = head
    out.append("\u250f" + "\u2533".join("\u2501" * (w + 2) for w in widths) + "\u2513")
    out.append(row([h for h, _, _ in columns], "\u2503"))
    out.append("\u2521" + "\u2547".join("\u2501" * (w + 2) for w in widths) + "\u2529")
    out += [row([cells[i] for _, _, cells in columns], "\u2502") for i in range(len(columns[0][2]))]
    out.append("\u2514" + "\u2534".join("\u2500" * (w + 2) for w in widths) + "\u2518")
    out += foot
    return "\n".join(out) + "\n"


def _wrapped(text: str, width: int) -> list[str] | None:
    """rich's left-justified rendering of a `_simple` text `width` wide: words wrapped greedily onto lines of at
    most `width`, each padded to `width`; None if a word is longer than a line (rich folds it)."""
    lines: list[str] = []
    cur = ""
    for w in text.split(" ") if text else ():
        if len(w) > width:
            return None
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    if cur:
        lines.append(cur)
    return [x.ljust(width) for x in lines]


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()  # as rich's print does


def print_rows(rows: list[dict], title: str, columns: list[str] | None = None, limit: int | None = 60,
               where: str | None = None, more: str | None = None, out: Console | None = None) -> None:
    """A table of `rows` (first `limit`; None or 0: all). `where` names the file holding every row and column;
    `more` says how to print every row (e.g. "--rows 0")."""
    if not rows:
        return
    plain = out is None and _plain_stdout()
    width = PLAIN_WIDTH if plain else (out or _out()).width
    cols = columns or [k for k in rows[0] if not isinstance(rows[0][k], (list, dict))]
    shown = rows if not limit else rows[:limit]
    table = {c: [cell(r.get(c)) for r in shown] for c in cols}
    numeric = {c: all(_is_num(r.get(c)) for r in shown) for c in cols}
    kept, dropped, constant = fit_columns(cols, table, width, numeric)
    notes = []
    if len(rows) > len(shown):
        notes.append(f"first {len(shown)} of {len(rows)} rows" + (f" ({more} prints all)" if more else ""))
    if constant:
        notes.append("same in every row: " + ", ".join(f"{c} {v}" for c, v in constant.items()))
    rest = [c for c in dropped if c not in constant]
    if rest:
        notes.append(f"left out to fit {width} columns: {', '.join(rest)}")
    if notes and where:
        notes.append(f"everything: {where}")
    if plain:
        text = plain_table(title, [(c, numeric[c], table[c]) for c in kept], "; ".join(notes))
        if text is not None:
            _write(text)
            return
    from rich.table import Table
    from rich.text import Text

    out = out or _out()
    t = Table(title=Text(title), title_justify="left")
    for c in kept:
        t.add_column(Text(c), justify="right" if numeric[c] else "left", overflow="fold", no_wrap=numeric[c])
    for i in range(len(shown)):
        t.add_row(*[Text(table[c][i]) for c in kept])
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
    """A plain line on stdout, through the console (no markup; soft-wrapped only by the terminal). One run of
    printable ASCII to a plain stream (see `plain_table`) is written as rich writes it: the line and a line break."""
    if msg.isascii() and msg.isprintable() and _plain_stdout():
        _write(msg + "\n")
        return
    from rich.text import Text

    _out().print(Text(msg), soft_wrap=True)
