"""Every kind of HTML report is sane (issue 14): well-formed page, plotly.js resolves (inline or plotly.min.js in
the same folder), every figure has data, tables sit in a sideways-scrolling wrapper. With Chromium installed
(Debian: apt-get install chromium), each report is also rendered headless by scripts/screenshots.py: every figure
drawn, nothing logged to the console, a PNG written; without it that test is skipped, saying why."""

from __future__ import annotations

import importlib.util
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from simulator.cli import main
from tests.paths import ROOT

_spec = importlib.util.spec_from_file_location("screenshots", ROOT / "scripts/screenshots.py")
shots = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shots)


def _cli(argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("reports")
    (d / "b.csv").write_text("batch,count\n1,5\n3,2\n8,4\n17,3\n")
    runs = {
        "toy": ["run", str(ROOT / "scenarios/s13_fusion_graphs.yaml")],
        "step": ["run", str(ROOT / "scenarios/qwen3_0p6b_decode.yaml"), "--set", "replicates=0",
                 "--set", "batch=[1,8]"],
        "optimize": ["optimize", "--distribution", str(d / "b.csv"), "--model", "qwen3-0.6b", "--max-graphs", "3"],
        "serve": ["serve", "--model", "qwen3-0.6b", "--rate", "5", "--duration", "5"],
    }
    out = {}
    for name, argv in runs.items():
        _cli([*argv, "--out", str(d / name)])
        out[name] = d / name / "report.html"
    out["validation"] = ROOT / "calibration/validation/validation.html"
    return out


class _Tags(HTMLParser):
    VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "embed", "source", "track", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.seen = [], [], set()

    def handle_starttag(self, tag, attrs):
        self.seen.add(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.stack[-1] if self.stack else 'nothing'}>")
            if tag in self.stack:
                while self.stack.pop() != tag:
                    pass
        else:
            self.stack.pop()


def _figures(text: str) -> list[tuple[str, list]]:
    """(div id, data list) of every plotly figure on the page."""
    out = []
    dec = json.JSONDecoder()
    for fid in re.findall(r'<div id="([^"]+)" class="plotly-graph-div"', text):
        m = re.search(r'Plotly\.newPlot\(\s*"' + re.escape(fid) + r'",\s*', text)
        assert m, f"figure {fid} is never drawn"
        data, _ = dec.raw_decode(text, m.end())
        out.append((fid, data))
    return out


@pytest.mark.parametrize("kind", ["toy", "step", "optimize", "serve", "validation"])
def test_report_is_sane(reports, kind):
    page = reports[kind]
    text = page.read_text()
    assert text.lstrip().lower().startswith("<!doctype html>")
    p = _Tags()
    p.feed(text)
    assert not p.errors and not p.stack, (p.errors[:3], p.stack[-3:])
    assert {"html", "head", "body", "title"} <= p.seen
    srcs = re.findall(r'<script src="([^"]+)"', text)
    if srcs:
        assert srcs == ["plotly.min.js"], srcs
        js = page.parent / srcs[0]
        assert js.is_file() and js.stat().st_size > 1_000_000
        assert "Plotly.newPlot" not in text.split("<body>")[0]
    else:  # inline: exactly one copy of plotly.js
        assert text.count("plotly.js v") >= 1 and len(text) > 1_000_000
    figs = _figures(text)
    assert figs, "no figures"
    for fid, data in figs:
        assert isinstance(data, list) and data, f"figure {fid} has no data"
    tables = text.count("<table>")
    assert text.count("<div class='table-wrap'><table>") == tables


def test_toy_report_has_its_fusion_table(reports):
    assert "fusion table, 11 -&gt; 4 kernels per layer" in reports["toy"].read_text()


@pytest.mark.skipif(shots.chromium() is None, reason="no Chromium on this machine (Debian: apt-get install "
                                                     "chromium; or set CHROMIUM): screenshots not taken")
def test_reports_render_in_headless_chromium(reports, tmp_path):
    for kind, page in reports.items():
        r = shots.check(shots.chromium(), page, tmp_path / f"{kind}.png")
        assert r["ok"], r
        assert r["drawn"] == r["figures"] >= 1
        assert (tmp_path / f"{kind}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
