"""Report output: atomic CSV/HTML writes (JSON: simulator/common/jsonfile.py) and offline HTML pages.

An HTML report loads plotly.js from plotly.min.js written once beside it (no network needed to open it; the
folder's reports share the one copy), or inlines it on request (`--inline-plotly`), followed by each figure and
any tables. A figure is a dict (report/figjson.py) or a plotly figure; each is written as plotly's
`to_html(full_html=False)` writes it, without importing plotly. Writes go to a temporary file in the same folder, then `os.replace`, so a crash never
leaves a half-written output.
"""

from __future__ import annotations

import csv
import html
import io
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Iterable, Iterator

from simulator.common.jsonfile import atomic_write_text
from simulator.report.figjson import default_template, figure_json, plotly_dir, to_dict, update_layout


def write_csv(path: str | Path, rows: list[dict]) -> Path:
    return atomic_write_text(path, csv_text(rows))


def csv_text(rows: list[dict]) -> str:
    """The CSV text `write_csv` writes: a header of every key (first-seen order), one line per row."""
    buf = io.StringIO()
    if rows:
        keys = list(rows[0].keys())
        seen = set(keys)
        for r in rows[1:]:
            if len(r) != len(seen) or not seen.issuperset(r):  # linear in rows: a set, not a list scan
                new = [k for k in r if k not in seen]
                keys += new
                seen.update(new)
        w = csv.DictWriter(buf, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


from simulator.report.numbers import ZERO, human  # noqa: F401  (numbers for people; tables use them)


def table_html(rows: list[dict], caption: str = "", digits: int = 4, limit: int | None = None,
               rest: str = "") -> str:
    """An HTML table of `rows` (columns: every key, in first-seen order). With `limit`, only the first `limit`
    rows, and the caption says how many there are and where the rest is (`rest`, e.g. "results.csv"): a page of
    100k rows takes a browser minutes and nobody reads it."""
    if not rows:
        return ""
    if limit is not None and len(rows) > limit:
        caption = (f"{caption} (the first {limit:,} of {len(rows):,} rows" + (f"; all of them in {rest}" if rest
                                                                               else "") + ")")
        rows = rows[:limit]
    keys = list(rows[0].keys())
    seen = set(keys)
    for r in rows[1:]:
        new = [k for k in r if k not in seen]
        keys += new
        seen.update(new)

    def fmt(v):
        return html.escape(human(v, digits))

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
_INLINE: ContextVar[bool] = ContextVar("launchsim_inline_plotly", default=False)


@contextmanager
def plotly_inline(on: bool = True) -> Iterator[None]:
    """Within the block, reports inline plotly.js (one self-contained file each) instead of one plotly.min.js per
    folder; the choice is the block's (a context variable, reset when it ends), not a process-wide switch."""
    token = _INLINE.set(on)
    try:
        yield
    finally:
        _INLINE.reset(token)


def inline_plotly() -> bool:
    import os

    return _INLINE.get() or os.environ.get("LAUNCHSIM_INLINE_PLOTLY") == "1"


def _plotlyjs_file() -> Path:
    return plotly_dir() / "package_data" / "plotly.min.js"


def plotlyjs() -> str:
    """plotly.js as plotly's `get_plotlyjs` returns it (its package data), read without importing plotly."""
    return _plotlyjs_file().read_bytes().decode("utf-8")


def ensure_plotly_js(folder: str | Path) -> Path:
    """Write plotly.min.js into `folder` once (kept when it already holds this plotly version's copy: as many
    bytes as plotly's file, which is `plotlyjs()` in UTF-8)."""
    path = Path(folder) / PLOTLY_JS
    if not path.is_file() or path.stat().st_size != _plotlyjs_file().stat().st_size:
        atomic_write_text(path, plotlyjs())
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
    template = None
    for fig in figures:
        if isinstance(fig, dict) and template is None:
            template = default_template()  # read once a page
        d = to_dict(fig, template)
        _colours(d)
        _titles(d)
        parts.append(figure_div(d, include_plotlyjs=first))
        first = False
    parts.extend(sections)
    parts.append("</body></html>")
    return "\n".join(parts)


TITLE_CHARS = 95  # a figure title longer than this wraps (plotly cuts a long title at the figure's edge)


def wrap_title(text: str, width: int = TITLE_CHARS) -> str:
    """`text` with <br> between words so no line is longer than `width` characters (existing <br> kept)."""
    out = []
    for para in text.split("<br>"):
        line = ""
        for w in para.split(" "):
            if line and len(line) + 1 + len(w) > width:
                out.append(line)
                line = w
            else:
                line = f"{line} {w}" if line else w
        out.append(line)
    return "<br>".join(out)


def _titles(fig: dict) -> None:
    """Wrap long figure titles and make room for their lines (`fig`: a figure dict, `figjson.to_dict`'s)."""
    t = (fig["layout"].get("title") or {}).get("text")
    if t and len(t) > TITLE_CHARS and "<br>" not in t:
        wrapped = wrap_title(t)
        lines = wrapped.count("<br>") + 1
        # anchored at the top of the figure, with room for every line above the plot (and its subplot titles)
        update_layout(fig, title=dict(text=wrapped, y=1, yref="container", yanchor="top", pad=dict(t=14)),
                      margin=dict(t=50 + 24 * lines))


def _colours(fig: dict) -> None:
    """Enough distinct colours for every trace (plotly's default cycle repeats after 10)."""
    from simulator.report.charts import palette

    if fig["layout"].get("colorway") is None and len(fig["data"]) > 10:
        fig["layout"]["colorway"] = palette(len(fig["data"]))


# plotly's `to_html(fig, full_html=False)` page fragment, character for character (plotly/io/_html.py): the
# figure's div and the script that draws it, after plotly.js itself when it is inlined
_WINDOW_CONFIG = """\
<script>\
window.PlotlyConfig = {MathJaxConfig: 'local'};\
</script>"""

_SCRIPT = """\
                if (document.getElementById("{id}")) {{\
                    Plotly.newPlot(\
                        "{id}",\
                        {data},\
                        {layout},\
                        {config}\
                    ){then_addframes}{then_animate}{then_post_script}\
                }}"""

_INLINE_JS = """\
        {win_config}
        <script>{plotlyjs}</script>\
    """

_DIV = """\
<div style="height:{height}; width:{width};">\
        {mathjax_script}\
        {load_plotlyjs}\
            <div id="{id}" class="plotly-graph-div" \
style="height:100%; width:100%;"></div>\
            <script>\
                window.PLOTLYENV=window.PLOTLYENV || {{}};\
                {script};\
            </script>\
        </div>"""


def _size(v) -> str:
    try:
        float(v)
    except (ValueError, TypeError):
        return v
    return str(v) + "px"


def figure_div(fig: dict, include_plotlyjs: bool = False) -> str:
    """The HTML plotly's `to_html(full_html=False, include_plotlyjs=...)` writes for the figure dict `fig`
    (`figjson.to_dict`'s): a div of the figure's height (its layout's, else its template's, else 100%), drawn
    by Plotly.newPlot with {"responsive": true}; plotly.js inlined before it with `include_plotlyjs`."""
    import json
    import uuid

    div_id = str(uuid.uuid4())
    lay = fig.get("layout", {})
    tpl = lay.get("template", {}).get("layout", {})
    script = _SCRIPT.format(id=div_id, data=figure_json(fig.get("data", [])), layout=figure_json(lay),
                            config=json.dumps({"responsive": True}), then_addframes="", then_animate="",
                            then_post_script="")
    load = _INLINE_JS.format(win_config=_WINDOW_CONFIG, plotlyjs=plotlyjs()) if include_plotlyjs else ""
    return _DIV.format(mathjax_script="", load_plotlyjs=load, id=div_id,
                       width=_size(lay.get("width", tpl.get("width", "100%"))),
                       height=_size(lay.get("height", tpl.get("height", "100%"))), script=script).strip()


def write_html(path: str | Path, title: str, figures: Iterable, sections: Iterable[str] = (), intro: str = "") -> Path:
    """Write a report; plotly.js goes once into the report's folder as plotly.min.js (opens offline as long as
    the folder stays together), or inline when asked (`plotly_inline`, LAUNCHSIM_INLINE_PLOTLY=1)."""
    return atomic_write_text(path, report_text(path, title, figures, sections, intro))


def report_text(path: str | Path, title: str, figures: Iterable, sections: Iterable[str] = (), intro: str = "") -> str:
    """The page `write_html` writes at `path` (plotly.min.js written beside it first, as `write_html` does)."""
    figures = list(figures)
    src = None
    if figures and not inline_plotly():
        ensure_plotly_js(Path(path).parent)
        src = PLOTLY_JS
    return html_page(title, figures, sections, intro, src)
