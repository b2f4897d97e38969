"""Report output: atomic CSV/HTML writes (JSON: simulator/common/jsonfile.py) and offline HTML pages.

An HTML report loads plotly.js from plotly.min.js written once beside it (no network needed to open it; the
folder's reports share the one copy), or inlines it on request (`--inline-plotly`), followed by each figure and
any tables. Writes go to a temporary file in the same folder, then `os.replace`, so a crash never
leaves a half-written output.
"""

from __future__ import annotations

import csv
import html
import io
from pathlib import Path
from typing import Iterable

from simulator.common.jsonfile import atomic_write_text


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
    # the wrapper scrolls sideways when a table is wider than the page (cells do not wrap: labels stay one line)
    return f"<div class='table-wrap'><table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}
.table-wrap{max-width:100%;overflow-x:auto;margin:1em 0}
table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;white-space:nowrap}
td:first-child,th:first-child{text-align:left}
caption{text-align:left;font-weight:bold;margin-bottom:4px;white-space:normal}
.note{color:#555}
"""


PLOTLY_JS = "plotly.min.js"
_inline = {"on": False}


def set_inline_plotly(on: bool = True) -> None:
    """Inline plotly.js into each report (one self-contained file) instead of one plotly.min.js per folder."""
    _inline["on"] = on


def inline_plotly() -> bool:
    import os

    return _inline["on"] or os.environ.get("LAUNCHSIM_INLINE_PLOTLY") == "1"


def ensure_plotly_js(folder: str | Path) -> Path:
    """Write plotly.min.js into `folder` once (kept when it already holds this plotly version's copy)."""
    from plotly.offline import get_plotlyjs

    path = Path(folder) / PLOTLY_JS
    js = get_plotlyjs()
    if not path.is_file() or path.stat().st_size != len(js.encode()):
        atomic_write_text(path, js)
    return path


def html_page(title: str, figures: Iterable, sections: Iterable[str] = (), intro: str = "",
              plotly_src: str | None = None) -> str:
    """A page: plotly.js inlined once (plotly_src None) or loaded from `plotly_src` beside the page, then each
    figure, then extra HTML sections."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_STYLE}</style>"]
    if plotly_src is not None:
        parts.append(f"<script src=\"{html.escape(plotly_src)}\" charset=\"utf-8\"></script>")
    parts.append(f"</head><body><h1>{html.escape(title)}</h1>")
    if intro:
        parts.append(f"<p class='note'>{html.escape(intro)}</p>")
    first = plotly_src is None
    for fig in figures:
        _colours(fig)
        parts.append(fig.to_html(full_html=False, include_plotlyjs=True if first else False))
        first = False
    parts.extend(sections)
    parts.append("</body></html>")
    return "\n".join(parts)


def _colours(fig) -> None:
    """Enough distinct colours for every trace (plotly's default cycle repeats after 10)."""
    from simulator.report.charts import palette

    if getattr(fig.layout, "colorway", None) is None and len(fig.data) > 10:
        fig.update_layout(colorway=palette(len(fig.data)))


def write_html(path: str | Path, title: str, figures: Iterable, sections: Iterable[str] = (), intro: str = "") -> Path:
    """Write a report; plotly.js goes once into the report's folder as plotly.min.js (opens offline as long as
    the folder stays together), or inline when asked (`set_inline_plotly`, LAUNCHSIM_INLINE_PLOTLY=1)."""
    figures = list(figures)
    src = None
    if figures and not inline_plotly():
        ensure_plotly_js(Path(path).parent)
        src = PLOTLY_JS
    return atomic_write_text(path, html_page(title, figures, sections, intro, src))
