"""calibration/validate_inductor.py `splice`: the generated table replaces only its own block of inductor.md, and the
committed inductor.md holds exactly the table the committed measurements give."""

from __future__ import annotations

from pathlib import Path

from calibration.validate_inductor import TABLE_END, TABLE_START, markdown, rows, splice, summary

ROOT = Path(__file__).resolve().parents[2]


def test_splice_keeps_the_notes_around_the_table():
    doc = f"# notes\nbefore\n{TABLE_START} a |\n| old |\n{TABLE_END}: old.\nafter\n"
    new = f"{TABLE_START} a |\n| new |\n{TABLE_END}: new.\n"
    assert splice(doc, new) == f"# notes\nbefore\n{TABLE_START} a |\n| new |\n{TABLE_END}: new.\nafter\n"
    assert splice("", new) == new and splice("no table here\n", new) == new


def test_committed_table_is_regenerated():
    from simulator.model.profile import load_profile

    rs = rows(load_profile("h200"))
    md = markdown(rs, summary(rs))
    shipped = (ROOT / "calibration" / "validation" / "inductor.md").read_text()
    assert md.strip() in shipped
