"""cli/tables.py's plain tables and lines (a pipe or a file, no rich) are rich's output character for character:
random tables (headers, cells of printable ASCII, numeric and text columns, titles and captions of any length)
rendered by `plain_table` and by rich's Table on a plain console of the same width; where `plain_table` declines
(text rich would wrap or change), the command prints through rich, so only the tables it draws are compared."""

from __future__ import annotations

import io

from hypothesis import given, settings, strategies as st
from rich.console import Console
from rich.table import Table
from rich.text import Text

from simulator.cli import tables as T

_WORD = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)
_TEXT = st.lists(_WORD, min_size=0, max_size=6).map(" ".join)
_ANY = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x2500), max_size=20)


def _rich(title: str, columns, caption: str, width: int) -> str:
    buf = io.StringIO()
    con = Console(file=buf, width=width, highlight=False, markup=False, emoji=False)
    t = Table(title=Text(title), title_justify="left")
    for h, right, _ in columns:
        t.add_column(Text(h), justify="right" if right else "left", overflow="fold", no_wrap=right)
    for i in range(len(columns[0][2])):
        t.add_row(*[Text(cells[i]) for _, _, cells in columns])
    if caption:
        t.caption = Text(caption)
        t.caption_justify = "left"
    con.print(t)
    return buf.getvalue()


@st.composite
def _tables(draw, cell=_TEXT):
    n_rows = draw(st.integers(1, 6))
    cols = [(draw(_WORD), draw(st.booleans()), [draw(cell) for _ in range(n_rows)])
            for _ in range(draw(st.integers(1, 7)))]
    return draw(_TEXT), cols, draw(st.one_of(st.just(""), _TEXT)), draw(st.sampled_from([40, 80, 160]))


@settings(max_examples=400, deadline=None)
@given(_tables())
def test_plain_table_is_richs(case):
    title, cols, caption, width = case
    text = T.plain_table(title, cols, caption, width)
    if text is not None:
        assert text == _rich(title, cols, caption, width)


@settings(max_examples=200, deadline=None)
@given(_tables(cell=_ANY))
def test_plain_table_declines_or_matches_on_any_text(case):
    title, cols, caption, width = case
    text = T.plain_table(title, cols, caption, width)
    if text is not None:
        assert text == _rich(title, cols, caption, width)


def test_plain_table_draws_a_run_summary():
    cols = [("fusion", False, ["none", "fused"]), ("batch", True, ["1", "512"]), ("step_ms", True, ["18.63", "4.1"])]
    text = T.plain_table("qwen3_0p6b_decode (step)", cols, "first 2 of 80 rows (--rows 0 prints all)")
    assert text is not None and text == _rich("qwen3_0p6b_decode (step)", cols,
                                               "first 2 of 80 rows (--rows 0 prints all)", T.PLAIN_WIDTH)


@settings(max_examples=200, deadline=None)
@given(st.one_of(_TEXT, _ANY))
def test_say_is_richs_line(msg):
    buf = io.StringIO()
    Console(file=buf, width=T.PLAIN_WIDTH, highlight=False, markup=False, emoji=False).print(Text(msg), soft_wrap=True)
    if msg.isascii() and msg.isprintable():  # what say() writes itself to a plain stream
        assert buf.getvalue() == msg + "\n"


def test_print_rows_to_a_pipe_is_richs(monkeypatch, capsys):
    rows = [{"fusion": f, "graph": g, "batch": b, "step_ms": 1.5 * b, "bound": "gpu"}
            for f in ("none", "fused") for g in ("none", "full") for b in (1, 2, 512)]
    monkeypatch.setattr(T, "_plain_stdout", lambda: True)
    T.print_rows(rows, "t (step)", limit=5, where="out/result.json", more="--rows 0")
    T.say("wrote out/result.json in 0.12 s")
    plain = capsys.readouterr().out
    monkeypatch.setattr(T, "_plain_stdout", lambda: False)
    buf = io.StringIO()
    con = Console(file=buf, width=T.PLAIN_WIDTH, highlight=False, markup=False, emoji=False)
    T.print_rows(rows, "t (step)", limit=5, where="out/result.json", more="--rows 0", out=con)
    con.print(Text("wrote out/result.json in 0.12 s"), soft_wrap=True)
    assert plain == buf.getvalue()
    assert "first 5 of 12 rows" in plain


def test_long_title_and_caption_wrap_as_richs():
    cols = [("step_ms", True, ["1", "22"]), ("fusion", False, ["x y", "z"])]  # 21 columns wide
    for title, caption in [("a title much longer than the table is wide", "first 2 of 9 rows (--rows 0 prints all); "
                            "everything: out/x/result.json"), ("t", "exactly twelve"), ("", "a b c d e f g h i j")]:
        text = T.plain_table(title, cols, caption, 80)
        assert text is not None and text == _rich(title, cols, caption, 80)
    assert T.plain_table("t", cols, "a-word-longer-than-the-table", 80) is None  # rich folds it: not drawn here
