#!/usr/bin/env python3
"""Screenshots of launchsim's HTML reports with headless Chromium (Debian: `apt-get install chromium`), and a
sanity check of each: the page renders its figures and logs nothing to the browser console.

    python scripts/screenshots.py OUT                  # builds one report of each kind (shortened runs) into
                                                       # OUT/reports/, then writes OUT/<name>.png for each
    python scripts/screenshots.py OUT --from DIR ...   # screenshots every *.html under the given folders

Exit 0 when every report rendered all its figures without console messages, 1 otherwise, 3 when no Chromium is
found (set CHROMIUM to its path). Also prints one line per report: name, figures drawn / expected, PNG path.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAUNCHSIM = [sys.executable, "-m", "simulator.cli"]

# (name, launchsim arguments): one report per kind, shortened so the whole set takes a minute or two
REPORTS: list[tuple[str, list[str]]] = [
    ("toy", ["run", "scenarios/s13_fusion_graphs.yaml"]),
    ("step", ["run", "scenarios/qwen3_0p6b_decode.yaml", "--set", "replicates=2"]),
    ("sweep", ["run", "scenarios/sweep_layouts_qwen3_0p6b.yaml", "--set", "budgets=[1GiB]",
               "--set", "graph=[none,full]"]),
    ("optimize", ["run", "scenarios/optimize_skewed.yaml"]),
    ("serve", ["run", "scenarios/serve_qwen3_0p6b.yaml", "--set", "duration_s=10", "--set", "replications=1"]),
    ("capacity", ["run", "scenarios/capacity_qwen3_0p6b.yaml", "--set", "duration_s=10", "--set", "replications=1",
                  "--set", "search.max_runs=4", "--set", "curve_fractions=[0.5]"]),
    # the engine-loop report of an eager, launch-heavy loop: ~6,000 kernels on the GPU lane ({folder}: the
    # report's folder; such entries name their own output instead of getting --out)
    ("engine_loop", ["predict", "--model", "qwen3-0.6b", "--batch", "64", "--graph", "none", "--steps", "4",
                     "--scheduling", "async", "--report", "{folder}/report.html"]),
    ("engine_loop_gpu", ["predict", "--model", "llama3-8b", "--batch", "64", "--graph", "full", "--steps", "4",
                         "--scheduling", "async", "--report", "{folder}/report.html"]),
]
SHIPPED = [("validation", ROOT / "calibration/validation/validation.html")]


def chromium() -> str | None:
    for c in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if c and shutil.which(c):
            return shutil.which(c)
    return None


def _browser(exe: str, page: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr",
           "--v=0", "--virtual-time-budget=8000", "--window-size=1280,2000", *args, page.resolve().as_uri()]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def expected_figures(text: str) -> int:
    return len(re.findall(r'class="plotly-graph-div"', text))


def check(exe: str, page: Path, png: Path) -> dict:
    """Render `page`: figures drawn (from the DOM after scripts ran), console messages, and a PNG."""
    want = expected_figures(page.read_text(errors="replace"))
    dom = _browser(exe, page, "--dump-dom")
    drawn = len(re.findall(r'class="[^"]*\bsvg-container\b', dom.stdout))
    shot = _browser(exe, page, f"--screenshot={png.resolve()}")
    console = [ln.split("CONSOLE", 1)[1] for ln in (dom.stderr + shot.stderr).splitlines() if ":CONSOLE" in ln]
    ok = png.is_file() and png.stat().st_size > 0 and drawn >= want and not console
    return {"page": str(page), "png": str(png), "figures": want, "drawn": drawn, "console": console, "ok": ok}


def build_reports(out: Path) -> list[tuple[str, Path]]:
    pages = []
    for name, args in REPORTS:
        folder = out / "reports" / name
        if folder.exists():
            shutil.rmtree(folder)
        own = any("{folder}" in a for a in args)
        folder.mkdir(parents=True, exist_ok=True)
        argv = [a.replace("{folder}", str(folder)) for a in args] + ([] if own else ["--out", str(folder)])
        r = subprocess.run([*LAUNCHSIM, *argv], cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"launchsim {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
        pages.append((name, folder / "report.html"))
    return pages + [(n, p) for n, p in SHIPPED if p.is_file()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="folder for the PNGs (and the built reports)")
    ap.add_argument("--from", dest="dirs", type=Path, nargs="+", help="screenshot the *.html under these folders")
    a = ap.parse_args(argv)
    exe = chromium()
    if exe is None:
        print("no Chromium found (apt-get install chromium, or set CHROMIUM)", file=sys.stderr)
        return 3
    a.out.mkdir(parents=True, exist_ok=True)
    if a.dirs:
        pages = [(str(p.relative_to(d)).replace("/", "_").removesuffix(".html"), p)
                 for d in a.dirs for p in sorted(d.rglob("*.html"))]
    else:
        pages = build_reports(a.out)
    bad = 0
    for name, page in pages:
        r = check(exe, page, a.out / f"{name}.png")
        bad += not r["ok"]
        print(f"{'ok ' if r['ok'] else 'BAD'} {name}: {r['drawn']}/{r['figures']} figures drawn, "
              f"{len(r['console'])} console message(s) -> {r['png']}")
        for c in r["console"][:5]:
            print(f"    console{c}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
