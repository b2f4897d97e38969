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
- Slow commands are SHORTENED by flags this test appends (see SHORTEN): fewer host-noise replicates and memory
  budgets of the grid scenarios. Serving and capacity commands run as written (about 2 s and 25 s): their figures are checked.

The README's figures are checked against what the commands print (issue 22, item 2), so a stale figure fails:
- a command's notes (its trailing `# ...` comment and the comment-only lines right after it) that quote
  `"key": value` pairs are compared with the command's JSON output (`--json`); notes that quote output lines
  (`#   text`, three spaces) must appear in its output (whitespace collapsed); notes of a SHORTENED command
  are not compared (it printed something else), and the test lists them;
- figures in the prose are listed in PROSE: a pattern on the README text, the README command whose output
  holds them, and where in that output (the result.json it writes with --out: the numbers it prints);
- tolerance: half a unit of the last digit the README quotes (a figure quoted as 5.075 must be within
  0.0005 of the command's value), so a figure matches exactly when rounded as quoted.
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
    (r"^launchsim validate ", "--replicates 2"),
]
GPU_ONLY = re.compile(r"(^|&& )launchsim (calibrate|measure)\b")
SETUP = (re.compile(r"^python3 -m venv \.venv$"), re.compile(r"^\.venv/bin/pip install "))
TEST_CMD = re.compile(r"\.venv/bin/python -m pytest\b")


def readme_entries(text: str) -> list[tuple[str, list[str]]]:
    """(command line, its notes) of the fenced bash blocks, in order (backslash continuations joined, blank
    lines dropped): the notes are the command's trailing comment and the comment-only lines right after it."""
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```bash[^\n]*\n(.*?)^```", text, flags=re.S | re.M):
        first = True
        for line in block.replace("\\\n", " ").splitlines():
            if not line.strip():
                continue
            if line.lstrip().startswith("#"):
                if out and not first:
                    out[-1][1].append(line.strip())
                continue
            first = False
            cmd = line.strip()
            tail = cmd[len(_strip_comment(cmd)):].strip()
            out.append((cmd, [tail] if tail else []))
    return out


def readme_commands(text: str) -> list[str]:
    """The command lines of the fenced bash blocks, in order."""
    return [c for c, _ in readme_entries(text)]


# Figures quoted in the README's prose: (pattern with named groups, the README command whose output holds them,
# the file it wrote with --out or "stdout" (its JSON), {group: how to read the figure from that JSON}).
def _cfg(label: str, fusion: str = "fused"):
    return lambda d: next(c for c in d["configs"] if c["layout_label"] == label and c["fusion"] == fusion
                          and c["graph"] != "none")


def _opt(d):
    return [(rf"{d} (?P<opt>[\d.]+) vs (?P<vllm>[\d.]+) ms \((?P<gain>[−-]?[\d.]+)%\)",
             f"launchsim run scenarios/optimize_{d}.yaml --out out/opt_{d}", f"out/opt_{d}/result.json",
             {"opt": lambda r: r["best_step_ms"], "vllm": lambda r: r["presets"]["vllm"]["step_ms"],
              "gain": lambda r: -r["presets"]["vllm"]["gain_pct"]})]  # negative: the optimum's step is shorter


_CAP = "launchsim run scenarios/capacity_{}.yaml --out out/cap_{}"
PROSE: list[tuple[str, str, str, dict]] = [
    *_opt("skewed"), *_opt("uniform"), *_opt("bimodal"),
    (r"qwen3-0\.6b fused (?P<vllm>[\d.]+) req/s both, (?P<og>[\d.]+) vs (?P<vg>[\d.]+) GiB of graphs",
     _CAP.format("qwen3_0p6b", "qwen3"), "out/cap_qwen3/result.json",
     {"vllm": lambda r: _cfg("vllm")(r)["best_rate"], "og": lambda r: _cfg("optimized")(r)["kv"]["graph_gib"],
      "vg": lambda r: _cfg("vllm")(r)["kv"]["graph_gib"]}),
    (r"qwen3-0\.6b fused (?P<opt>[\d.]+) req/s both",  # "both": the optimized layout's rate is the same figure
     _CAP.format("qwen3_0p6b", "qwen3"), "out/cap_qwen3/result.json",
     {"opt": lambda r: _cfg("optimized")(r)["best_rate"]}),
    (r"llama3-8b fused (?P<vllm>[\d.]+) both, (?P<og>[\d.]+)\s+vs (?P<vg>[\d.]+) GiB",
     _CAP.format("llama3_8b", "llama3_8b"), "out/cap_llama3_8b/result.json",
     {"vllm": lambda r: _cfg("vllm")(r)["best_rate"], "og": lambda r: _cfg("optimized")(r)["kv"]["graph_gib"],
      "vg": lambda r: _cfg("vllm")(r)["kv"]["graph_gib"]}),
    (r"llama3-8b fused (?P<opt>[\d.]+) both", _CAP.format("llama3_8b", "llama3_8b"), "out/cap_llama3_8b/result.json",
     {"opt": lambda r: _cfg("optimized")(r)["best_rate"]}),
    (r"optimized rounds reach (?P<best>[\d.]+) req/s against vllm's (?P<vllm>[\d.]+)",
     _CAP.format("llama3_8b", "llama3_8b"), "out/cap_llama3_8b/result.json",
     {"best": lambda r: max(x["best_rate"] for x in _cfg("optimized", "none")(r)["optimize"]["rounds"]
                            if x.get("best_rate")),
      "vllm": lambda r: _cfg("vllm", "none")(r)["best_rate"]}),
    (r"TPOT p50 (?P<g>[\d.]+) ms\s+with\s+`full_and_piecewise` graphs",
     "launchsim serve --model qwen3-0.6b --rate 40 --duration 120 --json", "stdout",
     {"g": lambda r: r["tpot_p50_ms"]}),
    (r"vs (?P<e>[\d.]+) ms eager \((?P<cpu>[\d.]+)% of eager steps CPU-bound",
     "launchsim serve --model qwen3-0.6b --rate 40 --duration 120 --graph none --json", "stdout",
     {"e": lambda r: r["tpot_p50_ms"], "cpu": lambda r: 100 * r["cpu_bound_step_share"]}),
]


def _decimals(q: str) -> int:
    q = q.lower().split("e")[0]
    return len(q.split(".")[1]) if "." in q else 0


def _num(q: str) -> float:
    return float(q.replace("−", "-").replace(",", ""))


def figure_matches(quoted: str, value) -> bool:
    """The quoted figure equals the value rounded as quoted: within half a unit of its last digit."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return abs(_num(quoted) - float(value)) <= 0.5 * 10.0 ** -_decimals(quoted) + 1e-12


_PAIR = re.compile(r'"(\w+)": ("[^"]*"|null|true|false|-?[\d.]+(?:e-?\d+)?|\[[^\]]*\])')


def json_pairs(notes: list[str]) -> list[tuple[str, str]]:
    return [(k, v) for n in notes for k, v in _PAIR.findall(n) if "..." not in v]


def check_json_notes(notes: list[str], stdout: str) -> list[str]:
    """Mismatches between the `"key": value` pairs quoted in `notes` and the command's JSON output."""
    pairs = json_pairs(notes)
    if not pairs:
        return []
    import json

    try:
        got = json.loads(stdout)
    except ValueError:
        return [f"quotes {pairs} but its output is not one JSON object"]
    bad = []
    for k, v in pairs:
        if k not in got:
            bad.append(f'"{k}" quoted, not in the output')
        elif v.startswith('"') or v in ("null", "true", "false") or v.startswith("["):
            if json.loads(v) != got[k]:
                bad.append(f'"{k}": {v} quoted, the command prints {json.dumps(got[k])}')
        elif not figure_matches(v, got[k]):
            bad.append(f'"{k}": {v} quoted, the command prints {got[k]}')
    return bad


def check_line_notes(notes: list[str], stdout: str) -> list[str]:
    """Quoted output lines (`#   text`) that the command's output does not contain."""
    flat = " ".join(stdout.split())
    bad = []
    for n in notes:
        if n.startswith("#   ") and not n[4:].lstrip().startswith("("):
            want = " ".join(n[1:].split())
            if want not in flat:
                bad.append(f"quoted line {want!r} not in its output")
    return bad


def check_prose(text: str, repo: Path, ran: dict[str, str]) -> list[str]:
    """Mismatches between PROSE's figures and the outputs of the commands (`ran`: unshortened command -> stdout)."""
    import json

    bad = []
    for pat, cmd, src, where in PROSE:
        m = re.search(pat.replace(" ", r"\s+"), text)  # a space in a pattern matches a line break too
        if m is None:
            bad.append(f"README no longer quotes /{pat}/: update PROSE")
            continue
        if cmd not in ran:
            bad.append(f"{cmd!r} (holds the figures of /{pat}/) is not a README command the test ran unshortened")
            continue
        data = json.loads(ran[cmd] if src == "stdout" else (repo / src).read_text())
        for g, fn in where.items():
            v = fn(data)
            if not figure_matches(m.group(g), v):
                bad.append(f"README says {m.group(g)} ({g} in {' '.join(m.group(0).split())!r}); {cmd} gives {v:.6g}")
    return bad


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
    text = README.read_text()
    stale, unshortened = [], {}
    for cmd, quoted in readme_entries(text):
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
        if run == body:
            unshortened[body] = p.stdout
            stale += [f"{body}: {b}" for b in check_json_notes(quoted, p.stdout) + check_line_notes(quoted, p.stdout)]
        elif json_pairs(quoted):
            notes.append(f"figures not compared (shortened): {body}")
        ran += 1
        notes.append(f"{time.perf_counter() - t0:6.2f} s  {run}")
    assert ran >= 10, f"only {ran} README commands ran"
    stale += check_prose(text, repo, unshortened)
    assert not stale, "README figures that the commands no longer print:\n  " + "\n  ".join(stale)
    print("\n".join(notes))


def test_figure_checks_catch_a_stale_figure():
    """The comparison the docs test applies (fast: no command runs)."""
    assert figure_matches("5.075", 5.07549) and not figure_matches("5.075", 5.0756)
    assert figure_matches("−0.14", -0.135) and not figure_matches("-0.89", -0.135)
    assert figure_matches("1615", 1615) and not figure_matches("1615", 1616)
    out = '{"step_ms": 4.1724, "bound": "gpu", "padded": null}'
    assert check_json_notes(['# {"step_ms": 4.172, "bound": "gpu", "padded": null, ...}'], out) == []
    assert check_json_notes(['# "step_ms": 4.18'], out) == ['"step_ms": 4.18 quoted, the command prints 4.1724']
    assert check_json_notes(['# "bound": "cpu"'], out) == ['"bound": "cpu" quoted, the command prints "gpu"']
    assert check_line_notes(["#   KV cache  1.0 MiB", "#   (not output)"], "x\n  KV cache   1.0 MiB = 3\n") == []
    assert check_line_notes(["#   KV cache  2.0 MiB"], "  KV cache   1.0 MiB\n")
    text = "```bash\nlaunchsim a --json   # \"k\": 1\n# \"j\": 2\nlaunchsim b\n```\n"
    assert readme_entries(text) == [('launchsim a --json   # "k": 1', ['# "k": 1', '# "j": 2']), ("launchsim b", [])]
    for pat, cmd, _, _ in PROSE:  # every prose figure is read from a README command
        assert cmd in [_strip_comment(c) for c in readme_commands(README.read_text())], cmd
        assert re.search(pat.replace(" ", r"\s+"), README.read_text()), pat
