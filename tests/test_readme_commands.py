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
- Slow commands are SHORTENED by flags this test appends (see SHORTEN): fewer memory budgets and graph modes of the
  grid sweeps. Everything else runs as written (serving and capacity about 2 s and 25 s): its figures are checked.

The README's figures are checked against what the commands print (issue 22, item 2), so a stale figure fails:
- a command's notes (its trailing `# ...` comment and the comment-only lines right after it) that quote
  `"key": value` pairs are compared with the command's JSON output (`--json`); notes that quote output lines
  (`#   text`, three spaces) must appear in its output (whitespace collapsed); notes of a SHORTENED command
  are not compared (it printed something else), and the test lists them;
- an output block (a plain fenced block) mapped in OUTPUTS to a README command: every line of it must be in that
  command's output (whitespace collapsed);
- figures in the prose and tables are listed in PROSE: a pattern on the README text, the README command(s) whose
  output holds them (None: the shipped profile, which no command prints, read directly), what to read ("stdout":
  its JSON, "stdout:text", or a file it wrote), and per named group how to get the figure from it;
- tolerance: half a unit of the last digit the README quotes (a figure quoted as 5.075 must be within
  0.0005 of the command's value), so a figure matches exactly when rounded as quoted; "sig": an integer quoted
  rounded (~1,600) to its last non-zero digit; "bound": the quoted figure bounds the value ("within ±5 %");
- every other number of the README must be named no figure by NOT_FIGURES (inputs, parameters, names, formulas,
  with the reason): test_every_readme_number_is_checked_or_named fails on a number nothing covers
  (`python scripts/readme_figures.py` lists the inventory).
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


def rx(pattern: str, group: int | str = 1, scale: float = 1.0):
    """A getter for a text output: the number `pattern`'s group matches in it (a space in the pattern matches any
    run of whitespace; `^` a line start; `(?s)` to let `.` cross lines), or None when the output does not print it."""
    def get(out: str):
        m = re.search(pattern.replace(" +", " ").replace(" ", r"\s+"), out, flags=re.M)
        return None if m is None else _num(m.group(group)) * scale
    return get


def rx_all(pattern: str, reduce, group: int = 1):
    """A getter: `reduce` (min, max, len, ...) of the numbers `pattern`'s group matches on every line it matches."""
    def get(out: str):
        vals = [_num(m.group(group)) for m in re.finditer(pattern.replace(" +", " ").replace(" ", r"[ \t]+"), out, flags=re.M)]
        return reduce(vals) if vals else None
    return get


def _runs(sizes: list[int]) -> list[tuple[int, int, int]]:
    """(first, last, step) of the maximal arithmetic runs of a sorted size list (how the README writes SGLang's)."""
    out, i = [], 0
    while i < len(sizes):
        j = i + 1
        step = sizes[j] - sizes[i] if j < len(sizes) else 0
        while j + 1 < len(sizes) and sizes[j + 1] - sizes[j] == step:
            j += 1
        out.append((sizes[i], sizes[min(j, len(sizes) - 1)], step))
        i = j + 1
    return out


# --- the rest of the README's figures (issue 22 item 2: every figure checked) ---
_PRED = "launchsim predict --model qwen3-0.6b --batch 1 --ctx 511 --fusion none --graph none --replicates 100 --json"
_FIRST = ("python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/python -m compileall -q simulator && "
          ".venv/bin/launchsim run "
          "scenarios/qwen3_0p6b_decode.yaml --out out/qwen3_0p6b_decode")
_VR = "python -m calibration.validation_report --out out/validation"
_VRJ = "out/validation/validation.json"
_HF = "python -m calibration.validate_hf --out out/validation"
_MEM = "python -m calibration.validate_memory --out out/validation"
_ENG = "python3 -m calibration.validate_engine --out out/validation"
_ENGJ = "out/validation/engine_loop_validation.json"
_SPEC = "python -m calibration.validate_spec --out out/validation"
_ST = "python -m calibration.validate_startup"
_STC = "python -m calibration.validate_startup calibration/measured/h200-round-c/engine_loop.json"
_MOE = "python -m calibration.validate_moe_fp8"
_KL = "launchsim run scenarios/qwen3_0p6b_decode.yaml --set model=llama3-8b --set batch=[1] --out out/kernels_llama3_8b"
_KHF = ("for m in qwen3-0.6b llama3-8b; do for c in static dynamic; do launchsim run scenarios/qwen3_0p6b_decode.yaml "
        "--set model=$m --set impl=hf --set kv_cache=$c --set fusion=[none] --set batch=[1] "
        "--out out/kernels_${m}_hf_$c; done; done")
_GM = "launchsim graph-memory --model qwen3-0.6b --layout vllm --memory-budget 256MiB"
_PROFILE = "simulator/profiles/h200.json"  # the shipped profile: read directly (no command prints its figures)
_SPEC_B1 = "launchsim predict --model llama3-8b --layout vllm --spec-tokens 3 --acceptance 0.7 --batch 1 --ctx 1024 --json"
_SPEC_B64 = "launchsim predict --model llama3-8b --layout vllm --spec-tokens 3 --acceptance 0.7 --batch 64 --ctx 1024 --json"
_SPEC_GM = "launchsim graph-memory --model llama3-8b --spec-tokens 3 --draft eagle --json"
_SERVE_SPEC = "launchsim serve --model qwen3-0.6b --rate 2 --duration 30 --spec-tokens 3 --acceptance 0.8 --json"
_SERVE_PLAIN = "launchsim serve --model qwen3-0.6b --rate 2 --duration 30 --json"
_GIB = 2 ** 30


def _vrow(d, source, graph, regime, key="measured_ms"):
    """validation.json's row of qwen3-0.6b, fusion none, batch 1, ctx 512 ("One step"'s measured figures)."""
    return next(r[key] for r in d["rows"] if r["model"] == "qwen3-0.6b" and r["fusion"] == "none" and r["batch"] == 1
                and r["ctx"] == 512 and r["source"] == source and r["graph"] == graph and r["regime"] == regime)


def _vsum(run, mode, key):
    return lambda d: d["runs"][run]["summary"][mode][key]


def _vtable(label: str, mode: str, *, round_a: bool = True, extra: str = ""):
    """One row of the README's validation table: target, round b's rows and MAPE (and round a's)."""
    pat = rf"\| {label} \| ≤ (?P<t>\d+) % \| (?P<n>\d+), (?P<m>[\d.]+) %{extra}"
    where = {"t": _vsum("round b", mode, "target_pct"), "n": _vsum("round b", mode, "rows"),
             "m": _vsum("round b", mode, "mape_pct")}
    if "(?P<md>" in extra:
        where["md"] = _vsum("round b", mode, "median_abs_error_pct")
    if round_a:
        pat += r"[^|]* \| (?P<na>\d+), (?P<ma>[\d.]+) % \|"
        where |= {"na": _vsum("round a (other machine)", mode, "rows"),
                  "ma": _vsum("round a (other machine)", mode, "mape_pct")}
    return (pat, _VR, _VRJ, where)


def _kernel_rows(d, dynamic):
    rows = [r for r in d["kernels"] if r["dynamic"] is dynamic]
    return rows


def _hf_row(batch: int, col: int):
    """A number of validate_hf's table row for `batch` (col 1: eager predicted, 2: eager measured p50, 3: eager
    error, 4: full predicted, 5: full measured, 6: full error)."""
    return rx(rf"^\| {batch} \| ([\d.]+) \| ([\d.]+) \([^)]*\) \| ([-+][\d.]+)% \w+ \| ([\d.]+) \| ([\d.]+) \| "
              rf"([-+][\d.]+)% \w+ \|", col)


def _mem_shared_table_worst(out: str):
    """validate_memory: the largest |total error| of a shared pool (keep or drop) predicted from measured pools."""
    vals = [abs(_num(m.group(1))) for m in re.finditer(
        r"^\| [^|]+ \| [^|]+ \| [^|]+ \| shared_(?:keep|drop) \| table \| [^|]+ \| \d+ \| [\d.]+ \| [-+][\d.]+ \| "
        r"([-+][\d.]+) \|", out, flags=re.M)]
    return max(vals) if vals else None


def _loops(d, rounds, graph):
    return [x for r in d["rounds"] if r["name"] in rounds for x in r["loop"] if x["graph"] == graph]


def _within(rows, d):
    return sum(abs(x["error_pct"]) <= d["target_pct"] for x in rows)


def _hf_gen(d, rnd, batch, cache):
    return next(h for r in d["rounds"] if r["name"] == rnd for h in r["hf_generate"]
                if h["batch"] == batch and h["cache"] == cache)["error_pct"]


_ROUNDS = ("h200-engine", "h200-round-c", "h200-round-e")
_CE = ("h200-round-c", "h200-round-e")


def _signed_extreme(vals, pick):
    """The value of `vals` with the smallest (pick=min) or largest (pick=max) magnitude, sign kept."""
    return pick(vals, key=abs) if vals else None


def _cap_errors(out: str, roles: str = "validation|derived"):
    return [_num(m.group(1)) for m in re.finditer(rf"^capture +\S+ +b\d+ order \d+ +[\d.]+ ms +[\d.]+ ms +"
                                                  rf"([-+][\d.]+)% +(?:{roles})", out, flags=re.M)]


def _startup_row(kind: str, model: str, layers: int, col: int):
    """validate_startup's row `kind` (e.g. "compile static cold") of `model` cut to `layers` (col 1: nodes,
    2: measured s, 3: modelled s, 4: error %)."""
    return rx(rf"^{kind} +{re.escape(model)} +{layers} layers, (\d+) nodes +([\d.]+) s +([\d.]+) s +([-+][\d.]+)%", col)


def _startup_nodes(kind: str, role: str, reduce):
    return rx_all(rf"^{kind} +\S+ +\d+ layers, (\d+) nodes .*% +{role}", reduce)


def _moe_row(batch: int, col: int):
    """validate_moe_fp8's transformers Qwen3-MoE table row (col 3: graph error %, 10/11: kernels per layer measured /
    predicted, 12/13: MoE block µs per layer measured / predicted)."""
    return rx(rf"^\| {batch} \| ([\d.]+) \| ([\d.]+) \| ([-+][\d.]+)% \| ([\d.]+) \| ([\d.]+) \| ([-+][\d.]+)% \| "
              rf"(\d+) \| (\d+) \| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|", col)


def _spec_worst(d, impl, graph):
    """|error| of the worst scored verify row (k 1-4; eager: round g's rows) of `impl` under `graph`."""
    e = [r["err_pct"] for r in d["verify"] if r["impl"] == impl and r["graph"] == graph and 1 <= r["k"] <= 4
         and (graph == "full" or str(r.get("source", "")).startswith("round g"))]
    return max(abs(x) for x in e)




def _fg(d, toggles: str, batch: int = 1):
    """s13_fusion_graphs' result row of `toggles` at `batch`."""
    return next(r for r in d["rows"] if r["toggles"] == toggles and r["batch"] == batch)

PROSE += [
    # the opening and "One step"
    (r"launching ~(?P<k>1,600) kernels", _PRED, "stdout", {"k": (lambda d: d["kernels"], "sig")}),
    (r"\((?P<k>\d+) kernels from (?P<l>\d+) launches: cuBLAS", _PRED, "stdout",
     {"k": lambda d: d["kernels"], "l": lambda d: d["launches"]}),
    (r"timeline of the first (?P<n>\d+) launches", _FIRST, "out/qwen3_0p6b_decode/result.json",
     {"n": lambda d: d["scenario"]["timeline"]["launches"]}),
    (r"graph replay (?P<gi>[\d.]+) ms isolated \(p50\), (?P<gp>[\d.]+) ms pipelined, (?P<gd>[\d.]+) ms of device time "
     r"\(prediction (?P<e>[−-][\d.]+) %\); eager (?P<ei>[\d.]+) ms isolated \(p10–p90 (?P<e10>[\d.]+)–(?P<e90>[\d.]+)\), "
     r"(?P<ea>[\d.]+) ms on another machine", _VR, _VRJ,
     {"gi": lambda d: _vrow(d, "round b", "full", "isolated"), "gp": lambda d: _vrow(d, "round b", "full", "pipelined"),
      "gd": lambda d: _vrow(d, "round b", "full", "isolated", "measured_device_ms"),
      "e": lambda d: _vrow(d, "round b", "full", "isolated", "error_pct"),
      "ei": lambda d: _vrow(d, "round b", "none", "isolated"),
      "e10": lambda d: _vrow(d, "round b", "none", "isolated", "measured_p10_ms"),
      "e90": lambda d: _vrow(d, "round b", "none", "isolated", "measured_p90_ms"),
      "ea": lambda d: _vrow(d, "round a (other machine)", "none", "isolated")}),
    # kernels per decoder layer
    (r"\| qwen3-0\.6b \| (?P<none>\d+) \| (?P<packed>\d+) \| (?P<compiled>\d+)[^|]*\| \d+ \| \d+ \| "
     r"(?P<fused>\d+) \|", _FIRST, "out/qwen3_0p6b_decode/result.json",
     {k: (lambda k: lambda d: d["kernels_per_layer"][k])(k) for k in ("none", "packed", "compiled", "fused")}),
    (r"\| qwen3-0\.6b \| \d+ \| \d+ \| \d+[^|]*\| (?P<hfs>\d+) \| (?P<hfd>\d+) \|", (_KHF, _KHF),
     ("out/kernels_qwen3-0.6b_hf_static/result.json", "out/kernels_qwen3-0.6b_hf_dynamic/result.json"),
     {"hfs": lambda d: d[0]["kernels_per_layer"]["none"], "hfd": lambda d: d[1]["kernels_per_layer"]["none"]}),
    (r"\| llama3-8b \| (?P<none>\d+) \| (?P<packed>\d+) \| (?P<compiled>\d+)[^|]*\| \d+ \| \d+ \| (?P<fused>\d+) \|",
     _KL, "out/kernels_llama3_8b/result.json",
     {k: (lambda k: lambda d: d["kernels_per_layer"][k])(k) for k in ("none", "packed", "compiled", "fused")}),
    (r"\| llama3-8b \| \d+ \| \d+ \| \d+[^|]*\| (?P<hfs>\d+) \| (?P<hfd>\d+) \|", (_KHF, _KHF),
     ("out/kernels_llama3-8b_hf_static/result.json", "out/kernels_llama3-8b_hf_dynamic/result.json"),
     {"hfs": lambda d: d[0]["kernels_per_layer"]["none"], "hfd": lambda d: d[1]["kernels_per_layer"]["none"]}),
    (r"silu_and_mul, down\) is (?P<f>\d+),", _FIRST, "out/qwen3_0p6b_decode/result.json",
     {"f": lambda d: d["kernels_per_layer"]["fused"]}),
    (r"bounded launch queue \(default (?P<q>\d+)\)", None, _PROFILE, {"q": lambda d: d["device"]["launch_queue_depth"]}),
    # the seed's scenarios
    (r"\((?P<L>\d+) layers × (?P<k>\d+) kernels = (?P<n>\d+) launches × (?P<us>\d+) µs = (?P<cpu>[\d.]+) ms of host "
     r"time, GPU busy (?P<gpu>[\d.]+) ms, CPU-bound, GPU utilisation (?P<g2>[\d.]+)/(?P<st>[\d.]+) = (?P<u>[\d.]+)%; "
     r"(?P<k11>\d+) kernels per layer: (?P<n11>\d+) × (?P<us2>\d+) µs = (?P<cpu11>[\d.]+) ms\)",
     "launchsim run scenarios/s13_launch_bound.yaml --out out/s13_launch_bound", "out/s13_launch_bound/result.json",
     {"L": lambda d: d["rows"][0]["layers"], "k": lambda d: d["rows"][0]["kernels_per_layer"],
      "n": lambda d: d["rows"][0]["launches"], "us": lambda d: d["rows"][0]["launch_us"],
      "cpu": lambda d: d["rows"][0]["cpu_ms"], "gpu": lambda d: d["rows"][0]["gpu_ms"], "g2": lambda d: d["rows"][0]["gpu_ms"],
      "st": lambda d: d["rows"][0]["step_ms"], "u": lambda d: 100 * d["rows"][0]["gpu_utilization"],
      "k11": lambda d: d["rows"][1]["kernels_per_layer"], "n11": lambda d: d["rows"][1]["launches"],
      "us2": lambda d: d["rows"][1]["launch_us"], "cpu11": lambda d: d["rows"][1]["cpu_ms"]}),
    (r"seed's (?P<a>\d+) → (?P<b>\d+) kernels-per-layer fusion table \(batch (?P<bt>\d+): (?P<un>[\d.]+) ms "
     r"unoptimised, (?P<t>[\d.]+) ms with either toggle, (?P<x>[\d.]+)×\)",
     "launchsim run scenarios/s13_fusion_graphs.yaml --out out/s13_fusion_graphs", "out/s13_fusion_graphs/result.json",
     {"a": lambda d: _fg(d, "unoptimised")["kernels_per_layer"], "b": lambda d: _fg(d, "fusion")["kernels_per_layer"],
      "bt": lambda d: _fg(d, "unoptimised")["batch"], "un": lambda d: _fg(d, "unoptimised")["step_ms"],
      "t": lambda d: max(_fg(d, "graph")["step_ms"], _fg(d, "fusion")["step_ms"]),
      "x": lambda d: min(_fg(d, "graph")["speedup_vs_unoptimised"], _fg(d, "fusion")["speedup_vs_unoptimised"])}),
    # key figures: the shipped profile
    (r"host per eager op (?P<el>[\d.]+) µs \(elementwise\) to (?P<sd>[\d.]+) µs \(SDPA\), view (?P<v>[\d.]+) µs "
     r"\(isolated microbenchmark × the measured mixed-block factor (?P<f>[\d.]+)\); compiled call (?P<ce>[\d.]+) µs \+ "
     r"(?P<tr>[\d.]+) µs per Triton launch \+ (?P<ex>[\d.]+) µs per extern GEMM/attention call \+ (?P<w>[\d.]+) µs",
     None, _PROFILE,
     {"el": lambda d: d["host"]["launch_us"]["eager_elementwise"]["p50"],
      "sd": lambda d: d["host"]["launch_us"]["eager_attention"]["p50"],
      "v": lambda d: d["host"]["launch_us"]["eager_view"]["p50"],
      "f": lambda d: rx(r"mixed-block context factor ([\d.]+)")(d["notes"]),
      "ce": lambda d: d["host"]["compiled_entry_us"], "tr": lambda d: d["host"]["launch_us"]["compiled"]["p50"],
      "ex": lambda d: d["host"]["launch_us"]["compiled_extern"]["p50"], "w": lambda d: d["host"]["compiled_wrapper_us"]}),
    (r"graph replay (?P<gr>[\d.]+) µs of host time, (?P<lat>[\d.]+) µs of device launch latency, (?P<node>[\d.]+) µs "
     r"per node between real decoder kernels \(from (?P<l1>\d)–(?P<l4>\d) layer decoders\); eager in-stream cost "
     r"(?P<gap>[\d.]+) µs per kernel; copy (?P<cp>[\d.]+) TB/s; bf16 GEMM (?P<gm>\d+) TFLOP/s", None, _PROFILE,
     {"gr": lambda d: d["host"]["graph_launch_fixed_us"], "lat": lambda d: d["device"]["graph_launch_latency_us"],
      "node": lambda d: d["device"]["graph_node_us"], "l1": lambda d: rx(r"\((\d)-(\d) layer decoders")(d["device"]["source"]),
      "l4": lambda d: rx(r"\((\d)-(\d) layer decoders", 2)(d["device"]["source"]),
      "gap": lambda d: d["device"]["eager_gap_us"], "cp": lambda d: rx(r"copy ([\d.]+) TB/s")(d["device"]["source"]),
      "gm": lambda d: rx(r"bf16 GEMM ([\d.]+) TFLOP/s")(d["device"]["source"])}),
    # the validation table
    _vtable("graph replay, fusion none/packed, isolated", "graph replay [isolated]"),
    _vtable("graph replay, pipelined", "graph replay [pipelined]"),
    _vtable(r"compiled \(dynamic shapes\) \+ graph", "compiled + graph [isolated]", round_a=False),
    _vtable(r"compiled \(dynamic shapes\), no graph", "compiled, no graph [isolated]", round_a=False),
    _vtable("eager none/packed, isolated", "eager [isolated]", extra=r" \(median (?P<md>[\d.]+) %\)"),
    _vtable("compiled with dynamic=False \\+ graph", "compiled static + graph [isolated]", round_a=False),
    (r"\| kernels per step \(none/packed; compiled dynamic and static\) \| ± (?P<t>\d+) % \| (?P<n>\d+) rows (?P<m>[\d.]+) %; "
     r"(?P<n2>\d+) rows (?P<m2>[\d.]+) % \|", _VR, _VRJ,
     {"t": lambda d: d["summary"]["kernels"]["target_pct"], "n": lambda d: len(_kernel_rows(d, None)),
      "m": lambda d: max(abs(r["kernels_error_pct"]) for r in _kernel_rows(d, None)),
      "n2": lambda d: len(_kernel_rows(d, True) + _kernel_rows(d, False)),
      "m2": lambda d: max(abs(r["kernels_error_pct"]) for r in _kernel_rows(d, True) + _kernel_rows(d, False))}),
    (r"\| HF transformers Qwen3, full-graph what-if from its trace \| ± (?P<t>\d+) % \| (?P<b1>[−+-][\d.]+) % \(b1\), "
     r"(?P<b8>[−+-][\d.]+) % \(b8\)", _HF, "stdout:text",
     {"t": rx(r"full graph ±(\d+)%"), "b1": _hf_row(1, 6), "b8": _hf_row(8, 6)}),
    (r"\| HF transformers Qwen3, eager from its trace \| ± (?P<t>\d+) % \| (?P<b1>[−+-][\d.]+) % \(b1\), "
     r"(?P<b8>[−+-][\d.]+) % \(b8\)", _HF, "stdout:text",
     {"t": rx(r"eager ±(\d+)%"), "b1": _hf_row(1, 3), "b8": _hf_row(8, 3)}),
    (r"at (?P<i>[\d.]+) ms isolated and (?P<p>[\d.]+) ms pipelined, and HF's at (?P<h1>[\d.]+) ms \(batch 1\) and "
     r"(?P<h8>[\d.]+) ms \(batch 8\)", (_VR, _HF), (_VRJ, "stdout:text"),
     {"i": lambda d: _vrow(d[0], "round b", "none", "isolated"), "p": lambda d: _vrow(d[0], "round b", "none", "pipelined"),
      "h1": lambda d: _hf_row(1, 2)(d[1]), "h8": lambda d: _hf_row(8, 2)(d[1])}),
    (r"predicts round a's machine within (?P<m>[\d.]+) %", _VR, _VRJ,
     {"m": _vsum("round a (other machine)", "eager [isolated]", "mape_pct")}),
    (r"plus the capture stream's (?P<w>\d+) MiB cuBLAS workspace plus what", _GM, "stdout:text",
     {"w": rx(r"capture_workspace +([\d.]+) MiB")}),
    (r"every shared total within ±(?P<b>\d+) % with measured pools", _MEM, "stdout:text",
     {"b": (_mem_shared_table_worst, "bound")}),
    # graph modes
    (r"would cost (?P<x>[\d.]+) % more for (?P<b>\d+) sequences padded to (?P<p>\d+) at context \d+ \(qwen3-0\.6b, "
     r"fused, full graph: (?P<hi>[\d.]+) ms for (?P<b2>\d+) sequences against (?P<lo>[\d.]+) ms padded\)",
     ("launchsim predict --model qwen3-0.6b --fusion fused --graph full --ctx 4096 --batch 257 --layout vllm --json",
      "launchsim predict --model qwen3-0.6b --fusion fused --graph full --ctx 4096 --batch 272 --json"),
     ("stdout", "stdout"),
     {"x": lambda d: 100 * (d[1]["step_ms"] / d[0]["step_ms"] - 1), "b": lambda d: d[0]["batch"],
      "p": lambda d: d[0]["padded"], "hi": lambda d: d[1]["step_ms"], "b2": lambda d: d[1]["batch"],
      "lo": lambda d: d[0]["step_ms"]}),
    (r"for `--piecewise-cuda-graph-max-tokens 8192` \((?P<a0>\d+)\.\.(?P<a1>\d+) step (?P<as>\d+), (?P<b0>\d+)\.\.(?P<b1>\d+) "
     r"step (?P<bs>\d+), (?P<c0>\d+)\.\.(?P<c1>\d+) step (?P<cs>\d+), (?P<d0>\d+)\.\.(?P<d1>\d+) step (?P<ds>\d+), "
     r"(?P<e0>\d+)\.\.(?P<e1>\d+) step (?P<es>\d+), (?P<f0>\d+)\.\.(?P<f1>\d+) step (?P<fs>\d+)\)",
     "launchsim graph-memory --model qwen3-0.6b --graph full_and_piecewise --layout sglang --prefill-layout sglang_pcg --json",
     "stdout", {f"{run}{part}": (lambda i, j: lambda d: _runs(d["prefill_sizes"])[i][j])(i, j)
                for i, run in enumerate("abcdef") for j, part in enumerate(("0", "1", "s"))}),
    (r"runs eager \(`\"graph\": \"none\"`, (?P<l>\d+) launches, (?P<ms>[\d.]+) ms\)",
     "launchsim predict --model qwen3-0.6b --fusion none --batch 4 --prefill-seqs 1 --prefill-len 64 --graph full --json",
     "stdout", {"l": lambda d: d["launches"], "ms": lambda d: d["step_ms"]}),
    (r"overflows the vLLM sizes \(max (?P<mx>\d+)\) and runs eager \((?P<ms>[\d.]+) ms:",
     ("launchsim buckets vllm --json", "launchsim predict --model qwen3-0.6b --fusion none --batch 4 --prefill-seqs 1 "
      "--prefill-len 600 --graph full_and_piecewise --layout vllm --json"), ("stdout", "stdout"),
     {"mx": lambda d: d[0]["sizes"][-1], "ms": lambda d: d[1]["step_ms"]}),
    (r"`startup` without `--prefill-layout`: (?P<g>\d+) graphs, (?P<s>[\d.]+) s; `graph-memory --prefill-layout "
     r"sglang_pcg` adds (?P<p>[\d.]+) GiB \(`prefill_graphs`, formula\) to the sglang layout's (?P<t>[\d.]+) GiB",
     ("launchsim startup --model qwen3-0.6b --graph full_and_piecewise --layout sglang --json",
      "launchsim graph-memory --model qwen3-0.6b --graph full_and_piecewise --layout sglang --prefill-layout sglang_pcg --json",
      "launchsim graph-memory --model qwen3-0.6b --graph full_and_piecewise --layout sglang --json"),
     ("stdout", "stdout", "stdout"),
     {"g": lambda d: d[0]["graphs"], "s": lambda d: d[0]["total_s"],
      "p": lambda d: d[1]["parts"]["prefill_graphs"]["bytes"] / _GIB, "t": lambda d: d[2]["total_bytes"] / _GIB}),
    (r'"sizes": \[(?P<a>\d+), (?P<b>\d+), (?P<c>\d+), (?P<d>\d+), (?P<e>\d+), \.\.\., (?P<y>\d+), (?P<z>\d+)\]\} +'
     r"\((?P<n>\d+) sizes\)", "launchsim buckets vllm --json", "stdout",
     {**{g: (lambda i: lambda d: d["sizes"][i])(i) for g, i in zip("abcdeyz", (0, 1, 2, 3, 4, -2, -1))},
      "n": lambda d: len(d["sizes"])}),
    (r"capture\s+stream's (?P<w>\d+) MiB cuBLAS workspace, plus what", _GM, "stdout:text",
     {"w": rx(r"capture_workspace +([\d.]+) MiB")}),
    # start-up
    (r"warm-up = `--warmups` \(default (?P<w>\d+), as measured", _ST, "stdout:text", {"w": rx(r": (\d+) warm-ups,")}),
    (r"Static: fitted on qwen3-0\.6b cut to (?P<q>\d+) layers and llama3-8b cut to (?P<l1>\d+) and (?P<l2>\d+) "
     r"\((?P<lo>\d+)–(?P<hi>\d+) nodes\)", _ST, "stdout:text",
     {"q": rx(r"^compile static cold +qwen3-0\.6b +(\d+) layers, \d+ nodes .*derived"),
      "l1": rx(r"^compile static cold +llama3-8b +(\d+) layers, \d+ nodes .*derived"),
      "l2": rx(r"(?s)^compile static cold +llama3-8b +\d+ layers.*?^compile static cold +llama3-8b +(\d+) layers, \d+ "
               r"nodes [^\n]*derived"),
      "lo": _startup_nodes("compile static cold", "derived", min), "hi": _startup_nodes("compile static cold", "derived", max)}),
    (r"\(qwen3-0\.6b (?P<q>\d+) layers, llama3-8b (?P<l>\d+) layers: (?P<qn>[\d,]+) and (?P<ln>[\d,]+) nodes\)",
     _ST, "stdout:text",
     {"q": rx(r"^compile static cold +qwen3-0\.6b +(\d+) layers, \d+ nodes .*validation"),
      "l": rx(r"^compile static cold +llama3-8b +(\d+) layers, \d+ nodes .*validation"),
      "qn": rx(r"^compile static cold +qwen3-0\.6b +\d+ layers, (\d+) nodes .*validation"),
      "ln": rx(r"^compile static cold +llama3-8b +\d+ layers, (\d+) nodes .*validation")}),
    (r"measured on qwen3-0\.6b at (?P<a>\d+) and (?P<b>\d+) layers, both rows make the line", _ST, "stdout:text",
     {"a": rx_all(r"^compile dynamic cold +qwen3-0\.6b +(\d+) layers", min),
      "b": rx_all(r"^compile dynamic cold +qwen3-0\.6b +(\d+) layers", max)}),
    (r"\(e\.g\. llama3-70b, (?P<n>[\d,]+) nodes:", "launchsim startup --model llama3-70b --fusion compiled --json",
     "stdout", {"n": lambda d: rx(r"x (\d+) nodes")(d["notes"][0])}),
    (r"by a hair \(worst row (?P<w>[−-][\d.]+) %\)", _ST, "stdout:text",
     {"w": lambda o: _signed_extreme(_cap_errors(o, "validation"), max)}),
    (r"the captures were (?P<lo>\d+)–(?P<hi>\d+) % above the model", _STC, "stdout:text",
     {"lo": lambda o: min(abs(e) for e in _cap_errors(o)), "hi": lambda o: max(abs(e) for e in _cap_errors(o))}),
    (r"llama3-8b at (?P<l>\d+) layers compiled in (?P<ls>[\d.]+) s, qwen3-0\.6b at (?P<q>\d+) layers in (?P<qs>[\d.]+) s\), "
     r"so the cold line's fit rows scatter \((?P<hi>[+][\d.]+) % / (?P<lo>[−-][\d.]+) %\) while the held-out full "
     r"models land at (?P<v1>[+][\d.]+) % and (?P<v2>[+][\d.]+) %", _ST, "stdout:text",
     {"l": rx(r"^compile static cold +llama3-8b +(\d+) layers"), "ls": _startup_row("compile static cold", "llama3-8b", 2, 2),
      "q": rx(r"^compile static cold +qwen3-0\.6b +(\d+) layers"),
      "qs": _startup_row("compile static cold", "qwen3-0.6b", 2, 2),
      "hi": _startup_row("compile static cold", "llama3-8b", 2, 4),
      "lo": _startup_row("compile static cold", "qwen3-0.6b", 2, 4),
      "v1": _startup_row("compile static cold", "qwen3-0.6b", 28, 4),
      "v2": _startup_row("compile static cold", "llama3-8b", 32, 4)}),
    (r"shape \((?P<a>\d+)–(?P<b>\d+) ms per size on llama3-8b\)", _ST, "stdout:text",
     {"a": rx(r"first runs of a new shape, (\d+)-(\d+) ms"), "b": rx(r"first runs of a new shape, (\d+)-(\d+) ms", 2)}),
    # tensor parallelism: the assumed NCCL latency the profile carries
    (r"small-message latency \((?P<a>\d+)/(?P<b>\d+)/(?P<c>\d+) µs at 2/4/8 GPUs\)", None, _PROFILE,
     {g: (lambda n: lambda d: d["device"]["collective"]["nccl_latency_us"][n])(n) for g, n in zip("abc", "248")}),
    # FP8 and MoE
    (r"fp8 GEMM table vs (?P<h>\d+) held-out M points it never saw: MAPE (?P<m>[\d.]+)%, (?P<w>\d+)/(?P<n0>\d+) within (?P<t>\d+)%, worst "
     r"(?P<x>[-−][\d.]+)% \(n (?P<n>\d+), k (?P<k>\d+), M (?P<M>\d+):", _MOE, "stdout:text",
     {"h": rx(r"(\d+) held-out points"),
      **{g: rx(r"MAPE ([\d.]+)%, (\d+)/(\d+) within (\d+)%, worst ([-+][\d.]+)% \(n (\d+), k (\d+), M (\d+):", i)
         for g, i in zip(("m", "w", "n0", "t", "x", "n", "k", "M"), range(1, 9))}}),
    (r"seeded routed decode batches: MAPE (?P<m>[\d.]+)%, worst (?P<x>[-−][\d.]+)%", _MOE, "stdout:text",
     {"m": rx(r"(?s)## Grouped GEMM.*?MAPE ([\d.]+)%, worst ([-+][\d.]+)%", 1),
      "x": rx(r"(?s)## Grouped GEMM.*?MAPE ([\d.]+)%, worst ([-+][\d.]+)%", 2)}),
    (r"Qwen3-MoE cut to (?P<L>\d+) layers \(ctx (?P<c>\d+)\)", _MOE, "stdout:text",
     {"L": rx(r"Qwen3-MoE, (\d+) layers, ctx (\d+)"), "c": rx(r"Qwen3-MoE, (\d+) layers, ctx (\d+)", 2)}),
    (r"the sparse block per layer (?P<p1>[\d.]+) / (?P<p8>[\d.]+) / (?P<p64>[\d.]+) µs predicted vs (?P<m1>[\d.]+) / "
     r"(?P<m8>[\d.]+) / (?P<m64>[\d.]+) µs of CUPTI kernel time", _MOE, "stdout:text",
     {**{f"p{b}": _moe_row(b, 12) for b in (1, 8, 64)}, **{f"m{b}": _moe_row(b, 11) for b in (1, 8, 64)}}),
    (r"blocks inside the measured step: (?P<e1>[+-][\d.]+)% / (?P<e8>[+-][\d.]+)% / (?P<e64>[+-][\d.]+)% against "
     r"graph_ms", _MOE, "stdout:text",
     {f"e{b}": rx(rf"b{b} [\d.]+ ms vs [\d.]+ ms \(([-+][\d.]+)%\)") for b in (1, 8, 64)}),
    (r"builder misses by (?P<e1>[-−][\d.]+)% / (?P<e8>[-−][\d.]+)% / (?P<e64>[-−][\d.]+)%", _MOE, "stdout:text",
     {f"e{b}": _moe_row(b, 3) for b in (1, 8, 64)}),
    (r"kernels per layer (?P<p>\d+) predicted vs (?P<m>\d+) measured", _MOE, "stdout:text",
     {"p": _moe_row(1, 10), "m": _moe_row(1, 9)}),
    # the engine loop
    (r"canary (?P<a>[\d.]+) → (?P<b>[\d.]+) µs\): a vLLM-style decode loop", _ENG, "stdout:text",
     {"a": rx(r"## h200-engine \(canary ([\d.]+) -> ([\d.]+) µs"), "b": rx(r"## h200-engine \(canary ([\d.]+) -> ([\d.]+) µs", 2)}),
    (r"\| loop \(three H200 machines: h200-engine canary OK; rounds c and e canary FAILED\) \| runs \| within ±(?P<t>\d+) % \|",
     _ENG, _ENGJ, {"t": lambda d: d["target_pct"]}),
    (r"\| full graph \(batch 1/8/64, greedy/top-p, sync/async\) \| (?P<n>\d+) \| (?P<w>\d+) \| (?P<lo>[−+-][\d.]+) % to "
     r"(?P<hi>[−+-][\d.]+) % \|", _ENG, _ENGJ,
     {"n": lambda d: len(_loops(d, _ROUNDS, "full")), "w": lambda d: _within(_loops(d, _ROUNDS, "full"), d),
      "lo": lambda d: min(x["error_pct"] for x in _loops(d, _ROUNDS, "full")),
      "hi": lambda d: max(x["error_pct"] for x in _loops(d, _ROUNDS, "full"))}),
    (r"\| eager, h200-engine \(batch 1/8/64, greedy, sync/async\) \| (?P<n>\d+) \| (?P<w>\d+) \| (?P<lo>[−+-][\d.]+) % to "
     r"(?P<hi>[−+-][\d.]+) %", _ENG, _ENGJ,
     {"n": lambda d: len(_loops(d, ("h200-engine",), "none")), "w": lambda d: _within(_loops(d, ("h200-engine",), "none"), d),
      "lo": lambda d: _signed_extreme([x["error_pct"] for x in _loops(d, ("h200-engine",), "none")], min),
      "hi": lambda d: _signed_extreme([x["error_pct"] for x in _loops(d, ("h200-engine",), "none")], max)}),
    (r"\| eager, rounds c and e \| (?P<n>\d+) \| (?P<w>\d+) \| (?P<lo>[−+-][\d.]+) % to (?P<hi>[−+-][\d.]+) %", _ENG, _ENGJ,
     {"n": lambda d: len(_loops(d, _CE, "none")), "w": lambda d: _within(_loops(d, _CE, "none"), d),
      "lo": lambda d: _signed_extreme([x["error_pct"] for x in _loops(d, _CE, "none")], min),
      "hi": lambda d: _signed_extreme([x["error_pct"] for x in _loops(d, _CE, "none")], max)}),
    (r"StaticCache, greedy, no compile \(b1, b8; h200-engine and round c\) \| (?P<n>\d+) \| (?P<w>\d+) \| "
     r"(?P<a1>[−+-][\d.]+) %, (?P<a8>[−+-][\d.]+) % \(round a traces\); (?P<c1>[−+-][\d.]+) %, (?P<c8>[−+-][\d.]+) %",
     _ENG, _ENGJ,
     {"n": lambda d: sum(h["cache"] == "static" and "error_pct" in h for r in d["rounds"] for h in r["hf_generate"]),
      "w": lambda d: sum(h["cache"] == "static" and abs(h.get("error_pct", 1e9)) <= d["target_pct"]
                         for r in d["rounds"] for h in r["hf_generate"]),
      "a1": lambda d: _hf_gen(d, "h200-engine", 1, "static"), "a8": lambda d: _hf_gen(d, "h200-engine", 8, "static"),
      "c1": lambda d: _hf_gen(d, "h200-round-c", 1, "static"), "c8": lambda d: _hf_gen(d, "h200-round-c", 8, "static")}),
    (r"DynamicCache \(b1, b8, same-machine traces\) \| (?P<n>\d+) \| (?P<w>\d+) \| (?P<c1>[−+-][\d.]+) %, "
     r"(?P<c8>[−+-][\d.]+) %", _ENG, _ENGJ,
     {"n": lambda d: sum(h["cache"] == "dynamic" and "error_pct" in h for r in d["rounds"] for h in r["hf_generate"]),
      "w": lambda d: sum(h["cache"] == "dynamic" and abs(h.get("error_pct", 1e9)) <= d["target_pct"]
                         for r in d["rounds"] for h in r["hf_generate"]),
      "c1": lambda d: _hf_gen(d, "h200-round-c", 1, "dynamic"), "c8": lambda d: _hf_gen(d, "h200-round-c", 8, "dynamic")}),
    (r"\(so those (?P<n>\d+) rows share inputs", _ENG, _ENGJ,
     {"n": lambda d: sum(x["engine_inputs_from_this_row"] for r in d["rounds"] for x in r["loop"])}),
    (r"the same eager step runs at ~(?P<f>\d+) ms or ~(?P<a>\d+)–(?P<b>\d+) ms, and `generate\(\)`'s per-token time "
     r"varies between repeats of the same call by (?P<c>\d+)–(?P<d>\d+) %", _ENG, "stdout:text",
     {"f": rx(r"runs at ~(\d+) ms or ~(\d+)-(\d+) ms"), "a": rx(r"runs at ~(\d+) ms or ~(\d+)-(\d+) ms", 2),
      "b": rx(r"runs at ~(\d+) ms or ~(\d+)-(\d+) ms", 3), "c": rx(r"by (\d+)-(\d+)% \(the range column\)"),
      "d": rx(r"by (\d+)-(\d+)% \(the range column\)", 2)}),
    (r"so the (?P<t>\d+) % target is below this host's", _ENG, _ENGJ, {"t": lambda d: d["target_pct"]}),
    (r"(?P<w>\d+) of the (?P<n>\d+) same-machine HF predictions lie inside the measured per-token range", _ENG, _ENGJ,
     {"w": lambda d: sum(bool(h.get("within_measured_range")) for r in d["rounds"] if r["name"] != "h200-engine"
                         for h in r["hf_generate"]),
      "n": lambda d: sum("predicted_ms" in h for r in d["rounds"] if r["name"] != "h200-engine" for h in r["hf_generate"])}),
    # speculative decoding: the prose repeats the notes of the commands above it
    (r"above, (?P<t>[\d.]+) tokens per step emitted against the closed form's (?P<c>[\d.]+), and a TPOT p50 of "
     r"(?P<s>[\d.]+) ms against (?P<p>[\d.]+) ms without speculation", (_SERVE_SPEC, _SERVE_PLAIN), ("stdout", "stdout"),
     {"t": lambda d: d[0]["tokens_per_step"], "c": lambda d: d[0]["tokens_per_step_closed_form"],
      "s": lambda d: d[0]["tpot_p50_ms"], "p": lambda d: d[1]["tpot_p50_ms"]}),
    (r"at batch 1 a step emits (?P<t>[\d.]+) tokens for (?P<v>[\d.]+) ms of verify and (?P<dr>[\d.]+) ms of draft, "
     r"(?P<m>[\d.]+) ms per token against (?P<p>[\d.]+) ms for plain decode, and pays off for any acceptance above "
     r"(?P<b>[\d.]+);", _SPEC_B1, "stdout",
     {"t": lambda d: d["tokens_per_step"], "v": lambda d: d["verify_ms"], "dr": lambda d: d["draft_ms"],
      "m": lambda d: d["ms_per_token"], "p": lambda d: d["decode_ms_per_token"], "b": lambda d: d["breakeven_acceptance"]}),
    (r"it costs (?P<m>[\d.]+) ms per token against (?P<p>[\d.]+) and needs an acceptance of at least (?P<b>[\d.]+)\.",
     _SPEC_B64, "stdout",
     {"m": lambda d: d["ms_per_token"], "p": lambda d: d["decode_ms_per_token"], "b": lambda d: d["breakeven_acceptance"]}),
    (r"The draft adds (?P<g>\d+) piecewise graphs of (?P<gb>[\d.]+) bytes \(its own pool: an upper bound\) and "
     r"(?P<wb>\d+) bytes of weights, and the KV cache holds (?P<kv>\d+) tokens instead of the (?P<kv0>\d+) that",
     (_SPEC_GM, "launchsim graph-memory --model llama3-8b --json"), ("stdout", "stdout"),
     {"g": lambda d: d[0]["draft_graphs"], "gb": lambda d: d[0]["draft_total_bytes"],
      "wb": lambda d: d[0]["draft_weights_bytes"], "kv": lambda d: d[0]["kv_tokens"], "kv0": lambda d: d[1]["kv_tokens"]}),
    (r"draft loop MAPE (?P<d>[\d.]+) % \(target (?P<dt>\d+) %: met\), reference verify steps under full graphs\s+"
     r"(?P<r>[\d.]+) % \(target (?P<rt>\d+) %: met by MAPE; worst row (?P<rw>-[\d.]+) %, llama3-8b at batch 8\), "
     r"transformers' Qwen3 verify (?P<h>[\d.]+) % \(met\),\s+reference eager (?P<e>[\d.]+) % \(target (?P<et>\d+) %: "
     r"met by MAPE, worst row (?P<ew>-[\d.]+) %\), transformers' Qwen3 eager (?P<he>[\d.]+) % \(met by MAPE,\s+"
     r"worst row (?P<hw>-[\d.]+) %", _SPEC, "out/validation/spec_decode.json",
     {"d": lambda d: d["summary"]["draft_loop"]["all"]["mape"], "dt": lambda d: d["summary"]["draft_loop"]["target_pct"],
      "r": lambda d: d["summary"]["reference full (round f)"]["k1-4"]["mape"],
      "rt": lambda d: d["summary"]["reference full (round f)"]["target_pct"],
      "rw": lambda d: -_spec_worst(d, "reference", "full"),
      "h": lambda d: d["summary"]["hf full (round f)"]["k1-4"]["mape"],
      "e": lambda d: d["summary"]["reference none (round g)"]["k1-4"]["mape"],
      "et": lambda d: d["summary"]["reference none (round g)"]["target_pct"],
      "ew": lambda d: -_spec_worst(d, "reference", "none"),
      "he": lambda d: d["summary"]["hf none (round g)"]["k1-4"]["mape"],
      "hw": lambda d: -_spec_worst(d, "hf", "none")}),
    # traces
    (r"mul (?P<mul>\d+), add (?P<add>\d+), to (?P<to>\d+), linear (?P<linear>\d+), mean (?P<mean>\d+), pow (?P<pow>\d+), "
     r"rsqrt (?P<rsqrt>\d+), \.\.\.",
     "launchsim import-trace calibration/measured/h200-round-a/hf_qwen3-0.6b_eager_b1.trace.json.gz --out out/hf_b1.json",
     "stdout:text", {op: rx(rf"launches by aten op, per step .*?\b{op} (\d+)") for op in
                     ("mul", "add", "to", "linear", "mean", "pow", "rsqrt")}),
]

# Numbers that are no figure, by a pattern around them (group `n`, else the whole match) and the reason.
NOT_FIGURES: list[tuple[str, str]] = [
    (r"Python ≥ (?P<n>3\.10)", "a requirement (pyproject.toml requires-python)"),
    (r"exit(?: code)? (?P<n>\d)\b", "an exit code (the CLI's contract; a README command's `exit code N` is checked "
                                    "as it runs)"),
    (r"\b(?:batch|ctx|context|q_len) (?P<n>\d+)\b", "a step shape (an input)"),
    (r"\bbatch (?P<n>1 / 8 / 64|1/8/64)", "the measured batch sizes (inputs)"),
    (r"\bissues? (?P<n>\d+)", "an issue number"),
    (r"\"ctx (?P<n>512)\" row", "a row's name (an input)"),
    (r"RMSNorm as (?P<n>8)\s+kernels", "the reference decoder's structure (tests/model/test_workload.py counts it)"),
    (r"transformers (?P<n>5\.17)'s", "a version"),
    (r'"about (?P<n>4–7) kernels per layer"', "the issue's requested range (a quote)"),
    (r"and (?P<n>4–7) needs GEMM-epilogue", "the issue's requested range (a quote)"),
    (r"launches about (?P<n>11) kernels \(Llama\)", "vLLM's kernels read from its source (calibration/validation/"
                                                     "vllm_source_kernels.md), not a launchsim output"),
    (r"kernels \(Llama\) and (?P<n>12) \(Qwen3\)", "vLLM's kernels read from its source (calibration/validation/"
                                                     "vllm_source_kernels.md), not a launchsim output"),
    (r"to (?P<n>1e-9) relative", "a test tolerance (tests/engine: DES == fast path)"),
    (r"CUDA 13\.0, 16-core", "the calibration machine (names and versions)"),
    (r"a drift over (?P<n>20) %", "the canary tolerance (a parameter of calibration/hygiene.py)"),
    (r"`seq_len` (?P<n>0)", "vLLM's value for padded slots (its source)"),
    (r"FlashAttention (?P<n>3)", "a name"),
    (r"×(?P<n>2) graphs", "a definition (two captures per size)"),
    (r"engines do (?P<n>1–2)\)", "the engines' settings (their sources)"),
    (r"the (?P<n>604)-token step", "the step's tokens (the command's inputs)"),
    (r"same (?P<n>68)-token step", "the step's tokens (the command's inputs)"),
    (r"\((?P<n>2)% tolerance\)", "a default of the capacity search (a parameter)"),
    (r"throughput within (?P<n>5) % of the arrivals", "a stability default (a parameter)"),
    (r"at most (?P<n>2) % of its arrivals", "a stability default (a parameter)"),
    (r"more than (?P<n>5) % of the rate", "a stability default (a parameter)"),
    (r"at most (?P<n>0\.1) % of requests", "a stability default (a parameter)"),
    (r"above (?P<n>1\.25) x the replica's", "the search's bound (a parameter)"),
    (r"to (?P<n>10) requests/s", "a default (a parameter)"),
    (r"fused at (?P<n>40) req/s", "the command's rate (an input)"),
    (r"captures up to (?P<n>512) at N", "SGLang's preset rule (its server_args; simulator/layouts/buckets.py)"),
    (r"N [≥>] (?P<n>\d)", "a tensor-parallel size (an input)"),
    (r"take (?P<n>1) byte", "fp8's size (a definition)"),
    (r"\((?P<n>34) kernels\)", "the recipe's kernel count (tests/model/test_moe_fp8.py asserts it)"),
    (r"at `fused` \((?P<n>7)\)", "the recipe's kernel count (tests/model/test_moe_fp8.py asserts it)"),
    (r"E \(1 - \(1 - k/E\)\^B\)", "a formula"),
    (r"1\s?\+\s?k\b|\bk\s?\+\s?1\b|n\+1|\(1 − a\^\(k\+1\)\)/\(1 − a\)|accepted tokens \+ 1", "a formula's constant"),
    (r"its (?P<n>4) steps", "the command's --steps (an input)"),
    (r"within (?P<n>3)% of the simulated loop", "a tested bound (tests/engine/test_steploop.py: rel=0.03)"),
    (r"measured in place at q_len 2 to (?P<n>8)", "the measured q_len grid (round g's inputs)"),
    (r"sweeps batch 1–64, k = 1\s+and 3 and acceptance 0\.5/0\.7/0\.9", "the scenario's axes (inputs)"),
    (r"k = 3, a = 0\.7", "the example's inputs"),
    (r"median of (?P<n>3)", "the benchmark's method (runs per target)"),
    (r"µs at (?P<n>2/4/8) GPUs", "tensor-parallel sizes (inputs)"),
]


# calibration/README.md (the main README links it for "every figure's source and the full tables"): its two result
# tables and the figures beside them are compared with the same README commands' outputs (the rest of that file is
# the method and a dated snapshot of the measurements: it says so at its top).
CALIB_README = ROOT / "calibration" / "README.md"


def _vboth(mode: str, key: str = "mape_pct", run: str = "round b"):
    """(isolated, pipelined) getters of a validation summary figure."""
    return (_vsum(run, f"{mode} [isolated]", key), _vsum(run, f"{mode} [pipelined]", key))


def _eager_b(d):
    return [r["error_pct"] for r in d["rows"] if r["source"] == "round b" and r["mode"] == "eager"
            and r["regime"] == "isolated" and r["split"] == "validation"]


_GR, _GRP = _vboth("graph replay")
_GRA, _GRAP = _vboth("graph replay", run="round a (other machine)")
_CG, _CGP = _vboth("compiled + graph")
_CN, _CNP = _vboth("compiled, no graph")
_EG, _EGP = _vboth("eager")
_EGA, _EGAP = _vboth("eager", run="round a (other machine)")
CALIB_PROSE: list[tuple[str, str, str, dict]] = [
    (r"\| graph replay, none/packed \(isolated / pipelined\) \| (?P<n>\d+) \| (?P<i>[\d.]+) % / (?P<p>[\d.]+) % \| "
     r"(?P<na>\d+) \| (?P<ia>[\d.]+) % / (?P<pa>[\d.]+) % \| ≤ (?P<t>\d+) % \|", _VR, _VRJ,
     {"n": _vsum("round b", "graph replay [isolated]", "rows"), "i": _GR, "p": _GRP,
      "na": _vsum("round a (other machine)", "graph replay [isolated]", "rows"), "ia": _GRA, "pa": _GRAP,
      "t": _vsum("round b", "graph replay [isolated]", "target_pct")}),
    (r"\| compiled \(dynamic\) \+ graph \| (?P<n>\d+) \| (?P<i>[\d.]+) % / (?P<p>[\d.]+) % \| – \| – \| ≤ (?P<t>\d+) % \|",
     _VR, _VRJ, {"n": _vsum("round b", "compiled + graph [isolated]", "rows"), "i": _CG, "p": _CGP,
                 "t": _vsum("round b", "compiled + graph [isolated]", "target_pct")}),
    (r"\| compiled \(dynamic\), no graph \| (?P<n>\d+) \| (?P<i>[\d.]+) % / (?P<p>[\d.]+) % \| – \| – \| ≤ (?P<t>\d+) %(?: \(miss\))? \|",
     _VR, _VRJ, {"n": _vsum("round b", "compiled, no graph [isolated]", "rows"), "i": _CN, "p": _CNP,
                 "t": _vsum("round b", "compiled, no graph [isolated]", "target_pct")}),
    (r"\| eager none/packed \(isolated / pipelined\) \| (?P<n>\d+) \| (?P<i>[\d.]+) % / (?P<p>[\d.]+) % \(median "
     r"(?P<md>[\d.]+) %\) \| (?P<na>\d+) \| (?P<ia>[\d.]+) % / (?P<pa>[\d.]+) % \| ≤ (?P<t>\d+) % \|", _VR, _VRJ,
     {"n": _vsum("round b", "eager [isolated]", "rows"), "i": _EG, "p": _EGP,
      "md": _vsum("round b", "eager [isolated]", "median_abs_error_pct"),
      "na": _vsum("round a (other machine)", "eager [isolated]", "rows"), "ia": _EGA, "pa": _EGAP,
      "t": _vsum("round b", "eager [isolated]", "target_pct")}),
    (r"\| compiled static \(dynamic=False\) \+ graph \| (?P<n>\d+) \| (?P<m>[\d.]+) % \| – \| – \| ≤ (?P<t>\d+) %", _VR, _VRJ,
     {"n": _vsum("round b", "compiled static + graph [isolated]", "rows"),
      "m": _vsum("round b", "compiled static + graph [isolated]", "mape_pct"),
      "t": _vsum("round b", "compiled static + graph [isolated]", "target_pct")}),
    (r"\| kernels per step \(none, packed; ctx 512\) \| (?P<n>\d+) \| (?P<m>[\d.]+) % \| \| \| ≤ (?P<t>\d+) % \|", _VR, _VRJ,
     {"n": lambda d: len(_kernel_rows(d, None)),
      "m": lambda d: max(abs(r["kernels_error_pct"]) for r in _kernel_rows(d, None)),
      "t": lambda d: d["summary"]["kernels"]["target_pct"]}),
    (r"\| kernels per step, compiled dynamic / static \| (?P<nd>\d+) / (?P<ns>\d+) \| (?P<md>[\d.]+) % / (?P<ms>[\d.]+) % \|",
     _VR, _VRJ,
     {"nd": lambda d: len(_kernel_rows(d, True)), "ns": lambda d: len(_kernel_rows(d, False)),
      "md": lambda d: sum(abs(r["kernels_error_pct"]) for r in _kernel_rows(d, True)) / len(_kernel_rows(d, True)),
      "ms": lambda d: sum(abs(r["kernels_error_pct"]) for r in _kernel_rows(d, False)) / len(_kernel_rows(d, False))}),
    (r"with (?P<n>\d+) rows at (?P<hi>[−-]\d+) to (?P<lo>[−-]\d+) %", _VR, _VRJ,
     {"n": lambda d: sum(e < -35 for e in _eager_b(d)), "hi": lambda d: max(e for e in _eager_b(d) if e < -35),
      "lo": lambda d: min(_eager_b(d))}),
    (r"predicts round a's\s+machine within (?P<m>[\d.]+) % \((?P<w>\d+)/(?P<n>\d+) rows within (?P<t>\d+) %\)", _VR, _VRJ,
     {"m": _vsum("round a (other machine)", "eager [isolated]", "mape_pct"),
      "w": _vsum("round a (other machine)", "eager [isolated]", "within_target"),
      "n": _vsum("round a (other machine)", "eager [isolated]", "rows"),
      "t": _vsum("round a (other machine)", "eager [isolated]", "target_pct")}),
    (r"(?P<b>\d+) of\s+(?P<n>\d+) round-b medians lie inside the predicted p10–p90 band", _VR, _VRJ,
     {"b": _vsum("round b", "eager [isolated]", "in_band"), "n": _vsum("round b", "eager [isolated]", "rows")}),
    (r"\((?P<k>\d+) kernels per qwen3-0\.6b\s+step at batch 1; both variants' kernel counts "
     r"matched within (?P<e>[\d.]+) %\)", _VR, _VRJ,
     {"k": lambda d: [r for r in _kernel_rows(d, True) if r["batch"] == 1][0]["kernels_predicted"],
      "e": lambda d: max(abs(r["kernels_error_pct"]) for r in _kernel_rows(d, True) + _kernel_rows(d, False))}),
    (r"`dynamic=False` Inductor fuses one more pair per layer \((?P<k>\d+) kernels\)", _VR, _VRJ,
     {"k": lambda d: min(r["kernels_measured"] for r in _kernel_rows(d, False))}),
    (r"llama3-8b at batch 512, ctx 128 \((?P<w>[−-][\d.]+) %\); the median error is (?P<m>[\d.]+) %", _VR, _VRJ,
     {"w": lambda d: rx(r"([-+][\d.]+)%$")(d["runs"]["round b"]["summary"]["graph replay [isolated]"]["worst"]),
      "m": _vsum("round b", "graph replay [isolated]", "median_abs_error_pct")}),
    (r"\| 1 \| (?P<ep>[\d.]+) / (?P<em>[\d.]+) ms \| (?P<ee>[−+-][\d.]+) % \| (?P<gp>[\d.]+) / (?P<gm>[\d.]+) ms \| "
     r"(?P<ge>[−+-][\d.]+) % \|", _HF, "stdout:text",
     {"ep": _hf_row(1, 1), "em": _hf_row(1, 2), "ee": _hf_row(1, 3), "gp": _hf_row(1, 4), "gm": _hf_row(1, 5),
      "ge": _hf_row(1, 6)}),
    (r"\| 8 \| (?P<ep>[\d.]+) / (?P<em>[\d.]+) ms \| (?P<ee>[−+-][\d.]+) % \| (?P<gp>[\d.]+) / (?P<gm>[\d.]+) ms \| "
     r"(?P<ge>[−+-][\d.]+) % \|", _HF, "stdout:text",
     {"ep": _hf_row(8, 1), "em": _hf_row(8, 2), "ee": _hf_row(8, 3), "gp": _hf_row(8, 4), "gm": _hf_row(8, 5),
      "ge": _hf_row(8, 6)}),
    (r"the same Python ran (?P<a>[\d.]+) ms at batch 1 and (?P<b>[\d.]+) ms at batch 8", _HF, "stdout:text",
     {"a": _hf_row(1, 2), "b": _hf_row(8, 2)}),
    (r"HF's step has (?P<h>[\d,]+) kernels at\s+batch 1 against launchsim's (?P<l>[\d,]+) for its own `none` level",
     _HF, "stdout:text",
     {"h": rx(r"## Batch 1(?s:.*?)Kernels per step: trace (\d+)"),
      "l": rx(r"## Batch 1(?s:.*?)launchsim builder \(fusion none\) (\d+)")}),
]


# Output blocks (plain fenced blocks) the README says a command prints: (regex on the block's first line, the
# README command); every line of the block must be in that command's output (whitespace collapsed).
OUTPUTS: list[tuple[str, str]] = [
    (r"^┏", "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/python -m compileall -q simulator && "
            ".venv/bin/launchsim run "
            "scenarios/qwen3_0p6b_decode.yaml --out out/qwen3_0p6b_decode"),
    (r"^qwen3-0\.6b on h200, fused/.*layout vllm: 51 sizes",
     "launchsim graph-memory --model qwen3-0.6b --layout vllm --memory-budget 256MiB"),
    (r"^qwen3-0\.6b on h200, compiled/full_and_piecewise",
     "launchsim startup --model qwen3-0.6b --layout vllm --fusion compiled --graph full_and_piecewise"),
    (r"^start-up model vs measurement", "python -m calibration.validate_startup"),
]



def _decimals(q: str) -> int:
    q = q.lower().split("e")[0]
    return len(q.split(".")[1]) if "." in q else 0


def _num(q: str) -> float:
    return float(q.replace("−", "-").replace(",", ""))


def _sig_unit(q: str) -> float:
    """The unit of the last significant digit of an integer quoted as rounded ("~1,600": 100)."""
    digits = q.replace(",", "").lstrip("−+-").split(".")[0]
    return 10.0 ** (len(digits) - len(digits.rstrip("0"))) if "." not in q else 10.0 ** -_decimals(q)


def figure_matches(quoted: str, value, tol: str = "digits") -> bool:
    """The quoted figure equals the value rounded as quoted: within half a unit of its last digit (tol "digits");
    tol "sig": an integer quoted rounded ("~1,600") within half a unit of its last non-zero digit; tol "bound":
    the quoted figure is an upper bound of the value ("within ±5 %": the value's magnitude at most 5)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if tol == "bound":
        return abs(float(value)) <= abs(_num(quoted)) + 1e-12
    unit = _sig_unit(quoted) if tol == "sig" else 10.0 ** -_decimals(quoted)
    return abs(_num(quoted) - float(value)) <= 0.5 * unit + 1e-12


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


def check_prose(text: str, repo: Path, ran: dict[str, str], prose=None) -> list[str]:
    """Mismatches between PROSE's figures and the outputs of the commands (`ran`: unshortened command -> stdout)."""
    bad = []
    for pat, cmd, src, where in PROSE if prose is None else prose:
        m = re.search(pat.replace(" ", r"\s+"), text)  # a space in a pattern matches a line break too
        if m is None:
            bad.append(f"README no longer quotes /{pat}/: update PROSE")
            continue
        cmds = cmd if isinstance(cmd, tuple) else (cmd,)
        missing = [c for c in cmds if c is not None and c not in ran]
        if missing:
            bad.append(f"{missing[0]!r} (holds the figures of /{pat}/) is not a README command the test ran unshortened")
            continue
        srcs = src if isinstance(src, tuple) else (src,)
        data = [_source(sr, ran.get(c, ""), repo) for c, sr in zip(cmds, srcs)]
        data = data if isinstance(cmd, tuple) else data[0]
        for g, get in where.items():
            fn, tol = get if isinstance(get, tuple) else (get, "digits")
            v = fn(data)
            if v is None:
                bad.append(f"{cmd} ({src}) no longer prints the figure {g} of {' '.join(m.group(0).split())!r}")
            elif not figure_matches(m.group(g), v, tol):
                bad.append(f"README says {m.group(g)} ({g} in {' '.join(m.group(0).split())!r}); {cmd} gives {v:.6g}")
    return bad


def _source(src: str, stdout: str, repo: Path):
    """What a PROSE entry reads: "stdout" (its JSON), "stdout:text", or a file the command wrote (JSON or text)."""
    import json

    if src in ("stdout", "stdout:text"):
        return json.loads(stdout) if src == "stdout" else stdout
    text = (repo / src).read_text()
    return json.loads(text) if src.endswith(".json") else text


def check_outputs(text: str, ran: dict[str, str]) -> list[str]:
    """Lines of the output blocks OUTPUTS maps to a command that its output does not contain (whitespace collapsed)."""
    from tests.readme_figures import blocks

    bad = []
    for lang, _, body in blocks(text):
        first = body.splitlines()[0] if body.strip() else ""
        cmd = next((c for pat, c in OUTPUTS if re.search(pat, first)), None)
        if lang or cmd is None:
            continue
        if cmd not in ran:
            bad.append(f"{cmd!r} (prints the block {first[:40]!r}) is not a README command the test ran unshortened")
            continue
        flat = " ".join(ran[cmd].split())
        bad += [f"{cmd}: printed block line {' '.join(x.split())!r} not in its output" for x in body.splitlines()
                if x.strip() and " ".join(x.split()) not in flat]
    return bad


def notes_compared(cmd: str) -> str | None:
    """Why a README command's notes are compared with its output (None: they are not: the test command, a
    command that needs a GPU, a shortened one)."""
    body = _strip_comment(cmd)
    if TEST_CMD.search(body) or GPU_ONLY.search(body):
        return None
    parts = [p.strip() for p in body.split("&&") if not any(s.search(p.strip()) for s in SETUP)]
    run = " && ".join(parts)
    return "run unshortened" if parts and shorten(run) == run else None


def readme_inventory(text: str):
    from tests.readme_figures import inventory

    return inventory(text, prose=PROSE, outputs=OUTPUTS, not_figures=NOT_FIGURES, compared=notes_compared,
                     strip_comment=_strip_comment, pair_rx=_PAIR)


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


def _fresh_copy(dst: Path) -> list[str]:
    try:
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                               capture_output=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs git to list the repository's files")
    copied = []
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)
            copied.append(f)
    return copied


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
    import hashlib

    files = {f: hashlib.sha256((repo / f).read_bytes()).digest() for f in _fresh_copy(repo)}  # as copied
    if (bin_dir.parent / "pyvenv.cfg").exists():  # a venv: link it whole, so `python` in it finds its packages
        (repo / ".venv").symlink_to(bin_dir.parent, target_is_directory=True)
    else:
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
        if run == " && ".join(parts):  # not shortened (set-up commands aside): its figures are compared
            unshortened[body] = p.stdout
            stale += [f"{body}: {b}" for b in check_json_notes(quoted, p.stdout) + check_line_notes(quoted, p.stdout)]
        elif json_pairs(quoted):
            notes.append(f"figures not compared (shortened): {body}")
        ran += 1
        notes.append(f"{time.perf_counter() - t0:6.2f} s  {run}")
    assert ran >= 10, f"only {ran} README commands ran"
    rewritten = [f for f, h in files.items()
                 if not (repo / f).is_file() or hashlib.sha256((repo / f).read_bytes()).digest() != h]
    assert not rewritten, f"README commands rewrote files of the repository (issue 22 item 7): {rewritten[:10]}"
    stale += check_prose(text, repo, unshortened) + check_outputs(text, unshortened)
    stale += [f"calibration/README.md: {b}" for b in check_prose(CALIB_README.read_text(), repo, unshortened, CALIB_PROSE)]
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
    assert figure_matches("1,600", 1615, "sig") and not figure_matches("1,600", 1651, "sig")
    assert figure_matches("5", -4.9, "bound") and not figure_matches("5", 5.2, "bound")
    assert rx(r"MAPE ([\d.]+)%")("x MAPE  2.6% y") == 2.6 and rx(r"MAPE ([\d.]+)%")("none") is None
    assert rx_all(r"^row (\d+)", max)("row 3\nrow 12\nrow 5") == 12
    assert _runs([4, 8, 12, 16, 32, 48, 64, 96]) == [(4, 16, 4), (32, 64, 16), (96, 96, 0)]
    commands = [_strip_comment(c) for c in readme_commands(README.read_text())]
    for pat, cmd, _, _ in PROSE:  # every prose figure is read from a README command (None: the shipped profile)
        for c in cmd if isinstance(cmd, tuple) else (cmd,):
            assert c is None or c in commands, c
        assert re.search(pat.replace(" ", r"\s+"), README.read_text()), pat
    for _, cmd in OUTPUTS:
        assert cmd in commands, cmd
    for pat, cmd, _, _ in CALIB_PROSE:  # calibration/README.md's checked figures, from the main README's commands
        assert cmd in commands and re.search(pat.replace(" ", r"\s+"), CALIB_README.read_text()), pat


def test_every_readme_number_is_checked_or_named():
    """The inventory (scripts/readme_figures.py): every number in README.md is a figure a check compares with a
    command's output, or is named no figure with a reason; a new README number without either fails here."""
    text = README.read_text()
    uncovered = [e for e in readme_inventory(text) if e.check is None]
    assert not uncovered, (f"{len(uncovered)} README numbers nothing checks (add a PROSE/OUTPUTS check in "
                           "tests/test_readme_commands.py, or a NOT_FIGURES rule with its reason):\n  "
                           + "\n  ".join(f"line {e.figure.line}: {e.figure.text} | {e.context[:100]}" for e in uncovered))
    for pat, reason in NOT_FIGURES:  # no stale rule
        assert re.search(pat.replace(" ", r"\s+"), text), f"NOT_FIGURES rule /{pat}/ ({reason}) matches nothing"


def test_inventory_names_what_covers_each_number():
    """The inventory on a small README: command arguments and names are no figures; a compared note, an output
    block line and a PROSE group are checked; a number nothing covers is reported (and a NOT_FIGURES rule names one)."""
    from tests.readme_figures import inventory

    text = ("Intro: qwen3-0.6b's q_len-4 step runs 4.17 ms here, and 12 things.\n\n```bash\nlaunchsim predict --batch 8 --json"
            "   # \"step_ms\": 4.172\nlaunchsim validate x.json   # \"mape\": 3.1\n```\n\n```\nrow 1615 kernels\n```\n"
            "Built with `--ctx 511` and issue 7.\n")
    prose = [(r"runs (?P<ms>[\d.]+) ms", "launchsim predict --batch 8 --json", "stdout", {"ms": lambda d: d["step_ms"]})]
    entries = inventory(text, prose=prose, outputs=[(r"^row", "launchsim predict --batch 8 --json")],
                        not_figures=[(r"issue (?P<n>\d+)", "an issue number")],
                        compared=lambda c: None if c.startswith("launchsim validate") else "run unshortened",
                        strip_comment=_strip_comment, pair_rx=_PAIR)
    got = {e.figure.text: e.check or "UNCOVERED" for e in entries}
    assert "0.6" not in got and got["4"].startswith("not a figure: part of a name")  # no number inside a word
    assert got["4.17"].startswith("PROSE")
    assert got["12"] == "UNCOVERED" and got["8"].startswith("not a figure: an argument")
    assert got["4.172"].startswith("JSON note") and got["3.1"] == "UNCOVERED"  # a shortened command's note: unchecked
    assert got["1615"].startswith("output block") and got["511"].startswith("not a figure: inline code")
    assert got["7"] == "not a figure: an issue number"
