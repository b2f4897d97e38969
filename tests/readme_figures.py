"""The inventory of README.md's numbers: every number in the file and the check that covers it (issue 22, item 2).

A number is one of
- not a figure, recognised from where it stands: part of a name (`qwen3-0.6b`, `h200`, `b8`, `round_f.py`), inside
  inline code or a link target (flags, paths, inputs), or an argument of a README command (an input);
- a figure checked by tests/test_readme_commands.py against what a README command prints:
  a `"key": value` note of a command that runs unshortened (compared with its `--json` output), a quoted output
  line (`#   text`), a line of an output block (a plain fenced block the test maps to a command in OUTPUTS), or a
  group of a PROSE pattern (compared with the command's output, tolerance stated there);
- not a figure by a rule of NOT_FIGURES: a pattern around the number and the reason it is no figure (an input the
  prose names, a source's definition, a version, a target); every rule must match something, so none goes stale;
- or UNCOVERED: a number the README quotes that nothing checks. `tests/test_readme_commands.py` fails on one.

`python scripts/readme_figures.py` prints the inventory (`--uncovered`: only those).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# a number: optional sign, digits with optional thousands commas and decimals; not inside a word or a dotted
# version (580.159.04), not a digit run glued to letters (h200, 8b, 1e-9 stays a number: see _glued)
NUM = re.compile(r"(?<![\w.])[−+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w]|\.\d)|(?<![\w.])[−+-]?\d+(?:\.\d+)?(?![\w]|\.\d)")
_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)
_INLINE = re.compile(r"`[^`]*`")  # may span a line break
_LINK = re.compile(r"\]\([^)\s]*\)|https?://\S+")


@dataclass(frozen=True)
class Figure:
    start: int  # offset in the README text
    end: int
    text: str
    line: int


@dataclass(frozen=True)
class Entry:
    figure: Figure
    check: str | None  # what covers it; None: uncovered
    context: str  # the README line it stands on


def numbers(text: str) -> list[Figure]:
    out = []
    for m in NUM.finditer(text):
        s, e = m.span()
        if m.group()[0] in "−+-" and s > 0 and (text[s - 1].isalnum() or text[s - 1] in "_/"):
            s += 1  # qwen3-0.6b's "-0.6" is a name, handled by _glued; a dash after a word is not a sign
        out.append(Figure(s, e, text[s:e], text.count("\n", 0, s) + 1))
    return out


def _glued(text: str, f: Figure) -> bool:
    """Part of a name: glued to a letter, `_`, `/` or a dash after a word (qwen3-0.6b, llama3-8b, b8, x2)."""
    before = text[max(0, f.start - 1):f.start]
    after = text[f.end:f.end + 1]
    if after.isalpha() and after not in "×x" or after == "_" or after == "/" and text[f.end + 1:f.end + 2].isalpha():
        return True
    if before.isalpha() and before not in "×x" or before in "_\\" or before == "/" and text[f.start - 2:f.start - 1].isalpha():
        return True
    if before == "-" and f.start >= 2 and (text[f.start - 2].isalnum()):
        return True
    return False


def _spans(rx: re.Pattern, text: str) -> list[tuple[int, int]]:
    return [m.span() for m in rx.finditer(text)]


def _inside(spans, f: Figure) -> bool:
    return any(a <= f.start and f.end <= b for a, b in spans)


def blocks(text: str):
    """(language, body start offset, body) of every fenced block."""
    return [(m.group(1).strip(), m.start(2), m.group(2)) for m in _FENCE.finditer(text)]


def inventory(text: str, *, prose, outputs, not_figures, compared, strip_comment, pair_rx) -> list[Entry]:
    """Every number of `text` with the check that covers it.

    prose: [(pattern, command, source, {group: getter})]; outputs: [(first-line regex, command)];
    not_figures: [(pattern, reason)] (a number inside group `n`, or inside the whole match without it);
    compared(command) -> the reason its notes are compared, or None (shortened, GPU-only, the test command);
    strip_comment, pair_rx: the docs test's own helpers (so both read the notes the same way)."""
    figs = numbers(text)
    cover: dict[int, str] = {}
    fenced: list[tuple[int, int]] = []
    for lang, off, body in blocks(text):
        fenced.append((off, off + len(body)))
        if lang == "bash":
            _cover_bash(text, off, body, figs, cover, compared, strip_comment, pair_rx)
        else:
            first = body.splitlines()[0] if body.strip() else ""
            cmd = next((c for rx, c in outputs if re.search(rx, first)), None)
            for f in figs:
                if off <= f.start < off + len(body) and f.start not in cover:
                    cover[f.start] = f"output block of `{cmd}` (every line in its output)" if cmd else None
    prose_only = list(text)
    for a, b in fenced:  # inline code is paired outside the fenced blocks only
        prose_only[a:b] = " " * (b - a)
    prose_text = "".join(prose_only)
    code = _spans(_INLINE, prose_text) + _spans(_LINK, prose_text)
    for pat, cmd, src, where in prose:
        m = re.search(pat.replace(" ", r"\s+"), text)
        if m is None:
            continue
        for g in where:
            a, b = m.span(g)
            for f in figs:
                if a <= f.start and f.end <= b and f.start not in cover:
                    cover[f.start] = f"PROSE /{pat[:40]}.../ <- `{cmd}` ({src})"
    for pat, reason in not_figures:
        for m in re.finditer(pat.replace(" ", r"\s+"), text):
            a, b = m.span("n") if "n" in m.re.groupindex else m.span()
            for f in figs:
                if a <= f.start and f.end <= b and f.start not in cover:
                    cover[f.start] = f"not a figure: {reason}"
    out = []
    lines = text.split("\n")
    for f in figs:
        if f.start in cover:
            chk = cover[f.start]
        elif _inside(fenced, f):
            chk = None
        elif _inside(code, f):
            chk = "not a figure: inline code or link (a name, flag, path or input)"
        elif _glued(text, f):
            chk = "not a figure: part of a name"
        else:
            chk = None
        out.append(Entry(f, chk, lines[f.line - 1].strip()))
    return out


def _cover_bash(text, off, body, figs, cover, compared, strip_comment, pair_rx) -> None:
    """Numbers of a bash block: command arguments (inputs), notes compared with the command's output."""
    pos, cmd, first = off, None, True
    for raw in body.splitlines(keepends=True):
        line_start, line = pos, raw.rstrip("\n")
        pos += len(raw)
        if not line.strip():
            continue
        stripped = line.strip()
        lead = line_start + (len(line) - len(line.lstrip()))
        if stripped.startswith("#"):
            if cmd is None or first:
                continue
            note_start, note = lead, stripped
        else:
            first = False
            cmd = strip_comment(stripped)
            for f in figs:
                if lead <= f.start < lead + len(cmd):
                    cover[f.start] = "not a figure: an argument of a README command (an input)"
            tail = stripped[len(cmd):]
            if not tail.strip():
                continue
            note_start, note = lead + len(cmd) + (len(tail) - len(tail.lstrip())), tail.strip()
        why = compared(cmd)
        spans = []
        if why:
            spans += [(note_start + m.start(2), note_start + m.end(2), f"JSON note of `{cmd}` ({why})")
                      for m in pair_rx.finditer(note) if "..." not in m.group(2)]
            if note.startswith("#   ") and not note[4:].lstrip().startswith("("):
                spans.append((note_start, note_start + len(note), f"output line of `{cmd}` ({why})"))
        for f in figs:
            if note_start <= f.start < note_start + len(note) and f.start not in cover:
                hit = next((w for a, b, w in spans if a <= f.start and f.end <= b), None)
                if hit:
                    cover[f.start] = hit


def report(entries: list[Entry], only_uncovered: bool = False) -> str:
    rows = []
    for e in entries:
        if only_uncovered and e.check:
            continue
        rows.append(f"{e.figure.line:4d}  {e.figure.text:>14}  {e.check or 'UNCOVERED'}  | {e.context[:90]}")
    n_fig = sum(1 for e in entries if e.check and not e.check.startswith("not a figure"))
    n_not = sum(1 for e in entries if e.check and e.check.startswith("not a figure"))
    n_unc = sum(1 for e in entries if not e.check)
    rows.append(f"{len(entries)} numbers: {n_fig} checked figures, {n_not} not figures, {n_unc} uncovered")
    return "\n".join(rows)
