"""The floor plan holds: simulator's packages import only packages below them (no upward imports, so no
import loops between packages), and no module imports itself back through others (no loops between
modules), counting imports inside functions too (they are how loops used to hide)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from tests.paths import ROOT

SIM = ROOT / "simulator"
# lowest first; a package may import its own modules and those of strictly lower layers (plus the
# `simulator` root, which holds only the version)
LAYERS = [{"common"}, {"model", "layouts"}, {"engine"}, {"report"}, {"sweep", "optimizer", "serving", "traces"},
          {"config"}, {"studies"}, {"cli"}]
LEVEL = {p: i for i, layer in enumerate(LAYERS) for p in layer}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every simulator module this file imports, at any depth of its code."""
    mod = _module(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.Import):
            out.update(a.name for a in n.names if a.name.startswith("simulator"))
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                base = pkg.split(".")[: len(pkg.split(".")) - (n.level - 1)]
                name = ".".join(base + ([n.module] if n.module else []))
            else:
                name = n.module or ""
            if name.startswith("simulator"):
                out.add(name)
                out.update(f"{name}.{a.name}" for a in n.names)  # `from pkg import module`
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in SIM.rglob("*.py")}
    g = defaultdict(set)
    for mod, path in files.items():
        for target in _imports(path):
            if target in files and target != mod:
                g[mod].add(target)
    return g


def _package(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_package_has_a_layer():
    pkgs = {p.name for p in SIM.iterdir() if p.is_dir() and (p / "__init__.py").exists()} - {"profiles"}
    assert pkgs == set(LEVEL), "add the new package to LAYERS"


def test_no_upward_imports():
    bad = []
    for mod, targets in _graph().items():
        src = _package(mod)
        for t in targets:
            dst = _package(t)
            if dst in ("", src) or src == "":
                continue
            if LEVEL[dst] >= LEVEL[src]:
                bad.append(f"{mod} -> {t}")
    assert not bad, "imports that run up or sideways:\n" + "\n".join(sorted(bad))


def test_no_import_loops_between_modules():
    g = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):  # depth-first search; a grey node met again closes a loop
        state[m] = 1
        stack.append(m)
        for t in sorted(g.get(m, ())):
            if state.get(t) == 1:
                loop = stack[stack.index(t):] + [t]
                pytest.fail("import loop: " + " -> ".join(loop))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)


def test_torch_only_inside_calibration_and_lazily():
    """torch is imported only inside calibration/, and there only inside functions (the one-off GPU scripts in
    calibration/scripts/, run on the GPU machine and never imported, may import it at the top)."""
    for p in SIM.rglob("*.py"):
        tree = ast.parse(p.read_text())
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "torch" not in names, p
    for p in (ROOT / "calibration").rglob("*.py"):
        if "scripts" in p.relative_to(ROOT / "calibration").parts:
            continue
        tree = ast.parse(p.read_text())
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        for n in top:
            mods = [a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]
            assert not any(m.split(".")[0] == "torch" for m in mods), f"{p}: torch at module level"


def _external_imports(path: Path) -> set[str]:
    """Top-level names of the third-party packages a file imports, at any depth of its code."""
    out = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.Import):
            out.update(a.name.split(".")[0] for a in n.names)
        elif isinstance(n, ast.ImportFrom) and not n.level and n.module:
            out.add(n.module.split(".")[0])
    return out


def test_nothing_below_cli_imports_typer_or_click():
    """The command line is a thin layer: studies, config and the engine never import the CLI's framework."""
    bad = [str(p.relative_to(ROOT)) for p in SIM.rglob("*.py") if "cli" not in p.relative_to(SIM).parts[:1]
           and _external_imports(p) & {"typer", "click"}]
    assert not bad, bad


# flags of the serving engines themselves (vLLM, SGLang), which launchsim's layout parsers read and print
ENGINE_FLAGS = {"--cuda-graph-bs", "--cuda-graph-bs-decode", "--cuda-graph-max-bs", "--cuda-graph-max-bs-decode",
                "--compilation-config", "--piecewise-cuda-graph-tokens", "--piecewise-cuda-graph-max-tokens",
                "--async-scheduling"}


def test_nothing_below_cli_names_a_launchsim_flag():
    """Layers below cli/ speak in scenario fields (`max_graphs must be >= 1`); the commands name their flags
    (cli/flags.py, cli/checks.as_flags). Docstrings may describe a command; strings a user can see may not name
    its flags. The engines' own flags (ENGINE_FLAGS) are data, not launchsim's."""
    import re

    tok = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")
    bad = []
    for p in sorted(SIM.rglob("*.py")):
        if p.relative_to(SIM).parts[0] == "cli":
            continue
        tree = ast.parse(p.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
                bad += [f"{p.relative_to(ROOT)}:{n.lineno}: {t}" for t in tok.findall(n.value) if t not in ENGINE_FLAGS]
    assert not bad, bad
