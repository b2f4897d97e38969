"""Numbers as people read them in tables and chart labels (no scientific notation, 0 for float noise)."""

from __future__ import annotations

ZERO = 1e-9  # |x| below this prints as 0: float noise of sums and differences (a 5.8e-13 ms stall is none)


def human(v, digits: int = 4) -> str:
    """A number as people read it: yes/no for booleans, blank for None, 0 for 0 (and float noise below ZERO),
    no scientific notation: 10,290 (thousands separated, no decimals from 10,000 up), 5.075, 0.000123
    (`digits` significant digits, trailing zeros dropped)."""
    import math

    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return "–"
        if abs(v) < ZERO:
            return "0"
        if abs(v) >= 1e4:
            return f"{v:,.0f}"
        dec = max(0, digits - 1 - math.floor(math.log10(abs(v))))
        t = f"{v:.{dec}f}"
        return t.rstrip("0").rstrip(".") if "." in t else t
    return str(v)
