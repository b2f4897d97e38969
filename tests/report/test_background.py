"""report/background.py: the background writer writes exactly what atomic_write_text writes, in order, and raises
a write's error where the caller waits for it."""

from __future__ import annotations

import pytest

from simulator.common.jsonfile import atomic_write_text
from simulator.report.background import BackgroundWriter, atomic_write_parts


def test_parts_and_text_write_the_same_bytes(tmp_path):
    text = "".join(f"line {i}: \u00e9\n" for i in range(5000))
    atomic_write_text(tmp_path / "a.txt", text)
    atomic_write_parts(tmp_path / "b.txt", (text[i:i + 777] for i in range(0, len(text), 777)))
    with BackgroundWriter() as bg:
        bg.write(tmp_path / "c.txt", text)
        bg.write(tmp_path / "d.txt", [text[:10], text[10:]])
    want = (tmp_path / "a.txt").read_bytes()
    for name in "bcd":
        assert (tmp_path / f"{name}.txt").read_bytes() == want
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt", "c.txt", "d.txt"]  # no temporary left


def test_a_failed_write_is_raised_on_leaving_the_block(tmp_path):
    def pieces():
        yield "partial"
        raise RuntimeError("the text could not be made")

    with pytest.raises(RuntimeError, match="could not be made"):
        with BackgroundWriter() as bg:
            bg.write(tmp_path / "x.txt", pieces())
    assert list(tmp_path.iterdir()) == []  # neither the file nor its temporary


def test_the_block_s_own_error_wins_and_queued_writes_finish(tmp_path):
    with pytest.raises(KeyError):
        with BackgroundWriter() as bg:
            bg.write(tmp_path / "y.txt", "done\n")
            raise KeyError("caller")
    assert (tmp_path / "y.txt").read_text() == "done\n"
