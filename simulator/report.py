"""Report output: atomic JSON/CSV/HTML writes and self-contained offline HTML pages.

An HTML report embeds plotly.js once (no network needed to open it) followed by each figure and
any tables. Writes go to a temporary file in the same folder, then `os.replace`, so a crash never
leaves a half-written output.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Iterable


def atomic_write_text(path: str | Path, text: str) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return p


def finite(obj):
    """A copy of a JSON-bound value with NaN and infinities as None: JSON has no NaN (`json.dumps` would write
    the non-standard token NaN, which strict readers reject)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if hasattr(obj, "tolist") or hasattr(obj, "item") or hasattr(obj, "model_dump"):
        return finite(_default(obj))
    return obj


def dumps(obj, **kw) -> str:
    """json.dumps that never writes NaN or Infinity (they become null)."""
    return json.dumps(finite(obj), allow_nan=False, default=_default, **kw)


def write_json(path: str | Path, obj) -> Path:
    return atomic_write_text(path, dumps(obj, indent=2) + "\n")


def write_csv(path: str | Path, rows: list[dict]) -> Path:
    buf = io.StringIO()
    if rows:
        keys = list(rows[0].keys())
        for r in rows[1:]:
            keys += [k for k in r if k not in keys]
        w = csv.DictWriter(buf, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    return atomic_write_text(path, buf.getvalue())


def _default(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "model_dump"):
        return o.model_dump(mode="json")
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def table_html(rows: list[dict], caption: str = "", digits: int = 4) -> str:
    if not rows:
        return ""
    keys = list(rows[0].keys())

    def fmt(v):
        if isinstance(v, float):
            return f"{v:.{digits}g}"
        return html.escape(str(v))

    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
    body = "".join("<tr>" + "".join(f"<td>{fmt(r.get(k, ''))}</td>" for k in keys) + "</tr>" for r in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}
table{border-collapse:collapse;margin:1em 0;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
caption{text-align:left;font-weight:bold;margin-bottom:4px}
.note{color:#555}
"""


def html_page(title: str, figures: Iterable, sections: Iterable[str] = (), intro: str = "") -> str:
    """A self-contained page: plotly.js inlined once, then each figure, then extra HTML sections."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"]
    if intro:
        parts.append(f"<p class='note'>{html.escape(intro)}</p>")
    first = True
    for fig in figures:
        parts.append(fig.to_html(full_html=False, include_plotlyjs=True if first else False))
        first = False
    parts.extend(sections)
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(path: str | Path, title: str, figures: Iterable, sections: Iterable[str] = (), intro: str = "") -> Path:
    return atomic_write_text(path, html_page(title, list(figures), sections, intro))
