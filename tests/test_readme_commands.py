"""Docs test: every command in README.md's fenced ```bash blocks runs verbatim, in order, on a fresh copy of the
repository (the tracked and untracked-but-not-ignored files, as a fresh clone has them).

How each line is treated:
- Commands run one by one with `bash -c` in the copy. `launchsim` is on PATH only after the README's
  `source .venv/bin/activate` line (that line puts the copy's .venv/bin first on PATH, which is what it does).
- The set-up commands (`python3 -m venv .venv`, `.venv/bin/pip install ...`) are NOT run: installing takes about a
  minute, so the copy's `.venv` is a link to the environment running this test, which was installed the same way.
  The rest of such a line (e.g. `&& .venv/bin/launchsim run ...`) runs.
- The README's test command (`... -m pytest ...`) is not run here (it is this suite); instead the test checks that
  `.ci/run` calls exactly that command.
- A line whose comment says `exit code N` must exit with N; every other command must exit 0.
- Commands that need a CUDA GPU (`launchsim calibrate`, `launchsim measure`) are skipped, with a note.
- Slow commands are SHORTENED by flags this test appends (see SHORTEN): fewer host-noise replicates, shorter
  serving simulations, fewer bisection runs. The README's figures come from the unshortened commands.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.paths import ROOT

README = ROOT / "README.md"

# (regex on the command, flags appended): the shortenings, applied to every matching command
SHORTEN: list[tuple[str, str]] = [
    (r"^(\.venv/bin/)?launchsim run scenarios/qwen3_0p6b_decode\.yaml", "--set replicates=2"),
    (r"^launchsim run scenarios/sweep_layouts_", "--set budgets=[1GiB] --set graph=[none,full]"),
    (r"^launchsim run scenarios/capacity_", "--set duration_s=20 --set replications=1 --set search.max_runs=6 "
                                            "--set curve_fractions=[0.5]"),
    (r"^launchsim predict .*--replicates", "--replicates 10"),
    (r"^launchsim validate ", "--replicates 2"),
    (r"^launchsim serve .*--duration", "--duration 30"),
]
GPU_ONLY = re.compile(r"(^|&& )launchsim (calibrate|measure)\b")
SETUP = (re.compile(r"^python3 -m venv \.venv$"), re.compile(r"^\.venv/bin/pip install "))
TEST_CMD = re.compile(r"\.venv/bin/python -m pytest\b")


def readme_commands(text: str) -> list[str]:
    """The command lines of the fenced bash blocks, in order (backslash continuations joined, blank and
    comment-only lines dropped)."""
    cmds: list[str] = []
    for block in re.findall(r"^```bash[^\n]*\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                cmds.append(line.strip())
    return cmds


def expected_code(cmd: str) -> int:
    m = re.search(r"#.*\bexit code (\d+)", cmd)
    return int(m.group(1)) if m else 0


def _strip_comment(cmd: str) -> str:
    """The command without its trailing `# comment` (quotes respected)."""
    i = cmd.find(" #")
    while i >= 0:
        head = cmd[:i]
        if head.count("'") % 2 == 0 and head.count('"') % 2 == 0:
            return head.rstrip()
        i = cmd.find(" #", i + 1)
    return cmd


def shorten(cmd: str) -> str:
    body = _strip_comment(cmd)
    parts = [p.strip() for p in body.split("&&")]
    for i, part in enumerate(parts):
        for pat, flags in SHORTEN:
            if re.search(pat, part):
                parts[i] = f"{part} {flags}"
    return " && ".join(parts)


def _fresh_copy(dst: Path) -> None:
    try:
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                               capture_output=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs git to list the repository's files")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)


def _venv_bin() -> Path:
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "launchsim").exists():
        pytest.skip(f"no launchsim entry point beside {sys.executable}: install with pip install -e '.[test]'")
    return bin_dir


def _path_without_launchsim() -> str:
    return os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and not (Path(p) / "launchsim").exists())


def test_readme_has_commands_in_bash_blocks():
    cmds = readme_commands(README.read_text())
    assert any(c.startswith("launchsim ") for c in cmds)
    assert sum(bool(TEST_CMD.search(c)) for c in cmds) == 1, "the README shows exactly one test command"


def test_ci_runs_the_readme_test_command():
    test_cmd = next(c for c in readme_commands(README.read_text()) if TEST_CMD.search(c))
    assert "ray" not in test_cmd, "contributors' test command must not need Ray"
    lines = [x.strip() for x in (ROOT / ".ci" / "run").read_text().splitlines() if x.strip() and
             not x.lstrip().startswith("#")]
    assert lines[-1] == _strip_comment(test_cmd), (lines[-1], test_cmd)
    assert any("[ray]" in x for x in lines[:-1]), ".ci/run installs the Ray extra so the Ray tests run"


def test_every_readme_command_runs_verbatim(tmp_path):
    bin_dir = _venv_bin()
    repo = tmp_path / "clone"
    repo.mkdir()
    _fresh_copy(repo)
    (repo / ".venv").mkdir()
    (repo / ".venv" / "bin").symlink_to(bin_dir, target_is_directory=True)
    env = {**os.environ, "PATH": _path_without_launchsim(), "COLUMNS": "100", "LAUNCHSIM_DEBUG": ""}
    env.pop("VIRTUAL_ENV", None)
    ran, notes = 0, []
    for cmd in readme_commands(README.read_text()):
        body = _strip_comment(cmd)
        if TEST_CMD.search(body):
            notes.append(f"not run (this suite; .ci/run checked): {body}")
            continue
        if body in ("source .venv/bin/activate", ". .venv/bin/activate"):
            env["PATH"] = f"{repo / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"
            env["VIRTUAL_ENV"] = str(repo / ".venv")
            continue
        parts = [p.strip() for p in body.split("&&")]
        parts = [p for p in parts if not any(s.search(p) for s in SETUP)]
        if not parts:
            continue
        run = shorten(" && ".join(parts))
        if GPU_ONLY.search(run):
            notes.append(f"skipped (needs a CUDA GPU): {body}")
            continue
        t0 = time.perf_counter()
        p = subprocess.run(["bash", "-c", run], cwd=repo, env=env, capture_output=True, text=True, timeout=300)
        want = expected_code(cmd)
        assert p.returncode == want, (f"README command exited {p.returncode}, expected {want}:\n  {cmd}\n"
                                      f"(ran: {run})\nstdout: {p.stdout[-2000:]}\nstderr: {p.stderr[-2000:]}")
        assert "Traceback" not in p.stderr, p.stderr
        ran += 1
        notes.append(f"{time.perf_counter() - t0:6.2f} s  {run}")
    assert ran >= 10, f"only {ran} README commands ran"
    print("\n".join(notes))
