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


# -- no hidden global state: every process-level memo is a registered `simulator.common.memo.Memo` -----------
_MUTABLE_CALLS = {"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "Counter", "bytearray"}
_MUTATORS = {"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault", "add",
             "discard", "sort", "reverse", "__setitem__", "__delitem__"}
_CACHE_DECORATORS = {"lru_cache", "cache"}  # functools' process-wide caches (cached_property is per instance)
# module-level mutable state that is not a memo, each with why it may stay (anything else fails below)
STATE_ALLOWLIST = {
    ("simulator.common.memo", "_REGISTRY"): "the memo registry itself: name -> Memo",
    ("simulator.cli", "_loaded"): "which command modules the lazy Typer app has registered (CLI wiring)",
    ("simulator.engine.batchbuild", "STATS"): "count of rows built from a trace (tests read it, no figure)",
    ("simulator.engine.batchbuild", "_ACTIVE"): "the trace in progress while batchbuild traces a build",
    ("simulator.model.workload", "TRACING"): "flag set while engine/batchbuild.py traces a build",
    ("simulator.report.progress", "_state"): "the console's quiet flag and live progress bar",
}


def _is_mutable_container(v: ast.expr) -> bool:
    if isinstance(v, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(v, ast.Call):
        f = v.func
        return (f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None) \
            in _MUTABLE_CALLS
    return False


def _is_empty(v: ast.expr) -> bool:
    return (isinstance(v, (ast.Dict, ast.List, ast.Set)) and not getattr(v, "keys", getattr(v, "elts", None))) \
        or (isinstance(v, ast.Call) and not v.args and not v.keywords)


def _containers() -> dict[tuple[str, str], tuple[Path, int, bool]]:
    """(module, name) -> (file, line, empty) of every module-level assignment of a mutable container."""
    out = {}
    for path in sorted(SIM.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            if _is_mutable_container(value):
                for t in targets:
                    if isinstance(t, ast.Name):
                        out[(_module(path), t.id)] = (path, node.lineno, _is_empty(value))
    return out


def _mutated_names() -> set[tuple[str | None, str]]:
    """(module or None, name) of every name mutated anywhere under simulator/: `x[k] = v`, `del x[k]`,
    `x[k] += v`, `x.update(...)` and other mutating methods; None where written `module.x` (any module)."""
    out: set[tuple[str | None, str]] = set()

    def target(e: ast.expr, mod: str) -> None:
        if isinstance(e, ast.Name):
            out.add((mod, e.id))
        elif isinstance(e, ast.Attribute):
            out.add((None, e.attr))

    for path in sorted(SIM.rglob("*.py")):
        mod = _module(path)
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                for t in (n.targets if isinstance(n, (ast.Assign, ast.Delete)) else [n.target]):
                    if isinstance(t, ast.Subscript):
                        target(t.value, mod)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _MUTATORS:
                target(n.func.value, mod)
    return out


def test_no_hidden_module_level_memos():
    """No module under simulator/ holds a module-level mutable container that starts empty (a memo) or that any
    code mutates, unless it is on STATE_ALLOWLIST (with its reason); memos are `common.memo.memo(...)` objects
    (named, owned, bounded, one registry). Constant tables (filled once, never mutated) are fine."""
    mutated = _mutated_names()
    bad = []
    for (mod, name), (path, line, empty) in _containers().items():
        if (mod, name) in STATE_ALLOWLIST or name == "__all__":
            continue
        if empty or (mod, name) in mutated or (None, name) in mutated:
            bad.append(f"{path.relative_to(ROOT)}:{line}: {name}")
    assert not bad, ("module-level mutable state outside simulator/common/memo.py's registry (make it a "
                     "`memo(...)`, move it onto the object that owns it, or allowlist it with a reason): "
                     + ", ".join(bad))


def test_no_functools_caches():
    """functools.lru_cache / cache are process-wide memos outside the registry: none under simulator/."""
    bad = []
    for path in sorted(SIM.rglob("*.py")):
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in n.decorator_list:
                    f = d.func if isinstance(d, ast.Call) else d
                    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                    if name in _CACHE_DECORATORS:
                        bad.append(f"{path.relative_to(ROOT)}:{n.lineno}: @{name} {n.name}")
    assert not bad, "functools caches (use common.memo or an owning object): " + ", ".join(bad)


def test_allowlist_entries_exist():
    """Every allowlisted name is still a module-level mutable container (no stale entries)."""
    have = _containers()
    assert not [k for k in STATE_ALLOWLIST if k not in have]


def test_memo_registry():
    """Registered memos have unique names, an owner text and a bound; `put` honours the bound; clear_all empties
    them all."""
    import importlib

    from simulator.common import memo as M

    for mod in ("simulator.model.inductor", "simulator.model.workload", "simulator.engine.setup",
                "simulator.engine.graph_memory", "simulator.sweep.grid", "simulator.serving.setup",
                "simulator.common.jsonfile"):
        importlib.import_module(mod)
    ms = M.registered()
    assert len({m.name for m in ms}) == len(ms) >= 12
    assert all(m.owner and m.bound >= 1 for m in ms)
    m = M.Memo("test", "a test memo", 2)
    m.put(1, "a"), m.put(2, "b"), m.put(3, "c")
    assert dict(m) == {3: "c"}
    with pytest.raises(ValueError):
        M.memo(ms[0].name, "again", 1)
    M.clear_all()
    assert all(len(x) == 0 for x in M.registered())
