"""Where a `predict` process's imports go: `python -X importtime` of `launchsim predict --model qwen3-0.6b --json`
in fresh processes, each module's self time summed by group, medians over the runs; beside it the same for the
bare reference (`import numpy, pydantic, yaml`). One column per source tree (each run with the tree as working
directory, as ab_targets.py runs them), trees alternating.

Groups: launchsim's own modules (their self time is compiling and running them: PYTHONDONTWRITEBYTECODE=1 here);
modules the bare reference imports too; importlib.metadata with what it imports (pydantic's plugin lookup, on the
first validator); every other module bare does not import (pydantic's model machinery: pydantic.main, its
_internal modules, annotated_types, ...). importtime lists only imports made by `import` statements: a module loaded
with importlib.import_module (cli/__init__.py loads a command's module so) is not listed, and what it imports
appears at the top level.

    python benchmarks/importtime_groups.py [--runs 5] [--trees /tmp/base .]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

PREDICT = ["-m", "simulator.cli", "predict", "--model", "qwen3-0.6b", "--json"]
BARE = ["-c", "import numpy, pydantic, yaml"]
GROUPS = ("launchsim modules", "modules bare imports too", "pydantic machinery and others bare lacks",
          "importlib.metadata + its imports", "all imports", "bare: all imports")


def _rows(args: list[str], cwd: Path) -> list[tuple[str, int, int]]:
    """(module, self us, depth) of each import, in importtime's order (a module after the ones it imported)."""
    p = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=cwd, capture_output=True, text=True,
                       check=True)
    out = []
    for line in p.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            out.append((m.group(4), int(m.group(1)), len(m.group(3))))
    return out


def _subtree(rows, k: int) -> set[int]:
    d, j = rows[k][2], k - 1
    while j >= 0 and rows[j][2] > d:
        j -= 1
    return set(range(j + 1, k + 1))


def groups(tree: Path) -> dict[str, float]:
    """Self time in ms by group of one predict process and one bare process in `tree`."""
    bare = _rows(BARE, tree)
    bare_mods = {n for n, _, _ in bare}
    rows = _rows(PREDICT, tree)
    meta: set[int] = set()
    for k, (n, _, _) in enumerate(rows):
        if n == "importlib.metadata":
            meta |= _subtree(rows, k)
    g: dict[str, float] = collections.Counter()
    for k, (n, s, _) in enumerate(rows):
        if n == "simulator" or n.startswith("simulator."):
            g["launchsim modules"] += s / 1e3
        elif n in bare_mods:
            g["modules bare imports too"] += s / 1e3
        elif k in meta:
            g["importlib.metadata + its imports"] += s / 1e3
        else:
            g["pydantic machinery and others bare lacks"] += s / 1e3
        g["all imports"] += s / 1e3
    g["bare: all imports"] = sum(s for _, s, _ in bare) / 1e3
    return g


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--trees", nargs="+", type=Path, default=[Path(".")])
    a = ap.parse_args()
    trees = [t.resolve() for t in a.trees]
    runs: dict[Path, list[dict[str, float]]] = {t: [] for t in trees}
    for _ in range(a.runs):
        for t in trees:
            runs[t].append(groups(t))
    print(f"python -X importtime, self time in ms, medians of {a.runs} fresh processes per tree; load average "
          f"{os.getloadavg()[0]:.2f}")
    w = max(len(str(t)) for t in trees)
    print(f"{'group':<42} " + " ".join(f"{str(t):>{w}}" for t in trees))
    for name in GROUPS:
        print(f"{name:<42} " + " ".join(f"{statistics.median(r[name] for r in runs[t]):>{w}.1f}" for t in trees))


if __name__ == "__main__":
    main()
