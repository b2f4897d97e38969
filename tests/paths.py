"""Paths the tests share: the repository root and the golden results folder."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
