"""Generated bad (and some good) inputs for tests/cli/test_fuzz_inputs.py.

Each case is a `Case`: an argv with placeholders ({d}: the session's fixture folder, {out}: a fresh output path
that must not exist afterwards), the expected exit code (2, or 0 for valid input) and what the one error line must
name (`needles`: substrings such as the file or flag; `field`: a regex such as `\\.yaml:\\d+: field '`). Fixture
files are written by `make_fixtures(folder)`; the cases are built at collection time without touching disk except
to read the shipped scenarios and profiles.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from tests.paths import ROOT

SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
PROFILE = ROOT / "simulator" / "profiles" / "h200.json"
BIG = "1" + "0" * 30
FIELD = r":\d+: field '"


@dataclass
class Case:
    id: str
    argv: list[str]
    expect: int = 2
    needles: tuple[str, ...] = ()
    field_re: str | None = None
    files: dict[str, object] = field(default_factory=dict)  # name -> text/bytes/obj written before the run
    outputs: tuple[str, ...] = ()  # for expect 0: files that must exist under {out}


# -- fixtures ------------------------------------------------------------------------------------------
CONFIG = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024, "num_hidden_layers": 4,
          "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3072,
          "vocab_size": 151936, "max_position_embeddings": 40960, "tie_word_embeddings": True}


def trace_events(kernel_dur=5.0, launches=True, n=12):
    ev, corr, t = [], 0, 0.0
    for i in range(n):
        corr += 1
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": t, "dur": 10,
                   "args": {"External id": corr, "Input Dims": [[1, 1024], [1024]], "Input type": ["float", "float"]}})
        if launches:
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                       "ts": t + 2, "dur": 4, "args": {"correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": "void elementwise_kernel<mul>", "pid": 0, "tid": 7,
                   "ts": t + 8, "dur": kernel_dur, "args": {"correlation": corr, "stream": 7}})
        t += 20
    return ev


def trace_doc(**kw):
    return {"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H200"}], "traceEvents": trace_events(**kw)}


def make_fixtures(d: Path) -> None:
    """Valid inputs every case can point at (bad variants are written per case)."""
    import shutil

    shutil.copytree(ROOT / "scenarios", d / "scenarios")
    (d / "config.json").write_text(json.dumps(CONFIG))
    (d / "profile.json").write_text(PROFILE.read_text())
    (d / "dist.csv").write_text("batch,count\n1,5\n4,3\n16,2\n")
    (d / "requests.csv").write_text("timestamp,prompt_tokens,output_tokens\n0,16,8\n0.5,32,8\n1.0,8,4\n")
    (d / "trace.json").write_text(json.dumps(trace_doc()))
    (d / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (d / "latin1.txt").write_bytes("caf\xe9: 1\n".encode("latin-1"))
    (d / "a_file").write_text("x")
    (d / "folder").mkdir()
    from simulator.traces.workload import workload_from_trace
    from simulator.model.workload_file import save_workload

    wl, _ = workload_from_trace(d / "trace.json", "auto", 1)
    save_workload(d / "workload.json", wl)


# -- scenario mutations ------------------------------------------------------------------------------
ENUM_KEYS = {"kind", "fusion", "graph", "engine", "objective", "process", "executor", "percentile", "presets"}
FILE_KEYS = {"model", "models", "profile", "profiles", "csv", "trace", "workload"}
FREE_TEXT = {"name", "description", "label", "note"}


def _leaves(x, loc=()):
    if isinstance(x, dict):
        yield loc, x
        for k, v in x.items():
            yield from _leaves(v, loc + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x[:2]):  # the first two items stand for the rest
            yield from _leaves(v, loc + (i,))
    else:
        yield loc, x


def _set(data, loc, value):
    d = copy.deepcopy(data)
    cur = d
    for k in loc[:-1]:
        cur = cur[k]
    cur[loc[-1]] = value
    return d


def _key_of(loc) -> str:
    return next((k for k in reversed(loc) if isinstance(k, str)), "")


def _loc_text(loc) -> str:
    out = ""
    for p in loc:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def scenario_cases() -> list[Case]:
    cases = []
    for path in SCENARIOS:
        data = yaml.safe_load(path.read_text())
        stem = path.stem
        for loc, v in _leaves(data):
            tag = _loc_text(loc) or "top"
            key = _key_of(loc)
            muts = []
            if isinstance(v, dict):
                muts.append(("unknown-key", {**v, "zz_unknown": 1}))
            else:
                if key != "histogram" and not isinstance(v, str) or key in ENUM_KEYS or key in FILE_KEYS:
                    muts.append(("mapping", {"zz": 1}))
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    muts += [("neg", -1e308), ("inf", float("inf")), ("nan", float("nan"))]
                    if not any(k == "histogram" for k in loc):
                        muts.append(("huge", 10**30))
                if isinstance(v, str) and key in ENUM_KEYS:
                    muts.append(("enum", "zz-bad"))
                if isinstance(v, str) and key in FILE_KEYS:
                    muts += [("missing", "{d}/nope.json"), ("folder", "{d}/folder"), ("binary", "{d}/binary.bin")]
                    if key in ("csv", "trace"):
                        muts.append(("badcsv", "{d}/latin1.txt"))
            for name, new in muts:
                mutated = _set(data, loc, new) if loc else new
                fname = f"scenarios/{stem}__{tag}__{name}.yaml".replace("[", "_").replace("]", "_")
                top = str(loc[0]) if loc else ""
                cases.append(Case(f"scenario:{stem}:{tag}:{name}", ["run", "{d}/" + fname, "--out", "{out}"],
                                  needles=(fname,), field_re=re.escape(fname) + FIELD + re.escape(top),
                                  files={fname: mutated}))
        # duplicate keys (text level): the last one would silently win
        text = path.read_text()
        first = next(ln for ln in text.splitlines() if re.match(r"^[a-z_]+:", ln))
        fname = f"scenarios/{stem}__dupkey.yaml"
        cases.append(Case(f"scenario:{stem}:duplicate-key", ["run", "{d}/" + fname, "--out", "{out}"],
                          needles=(fname, "duplicate key"), files={fname: text + "\n" + first + "\n"}))
        fname = f"scenarios/{stem}__dupkind.yaml"
        cases.append(Case(f"scenario:{stem}:duplicate-kind", ["run", "{d}/" + fname, "--out", "{out}"],
                          needles=(fname, "duplicate key 'kind'"), files={fname: text + "\nkind: toy\n"}))
    return cases


def yaml_structure_cases() -> list[Case]:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    million = "a: &a [" + ", ".join(["1"] * 1000) + "]\nb: [" + ", ".join(["*a"] * 1000) + "]\n"
    deep_list = "kind: toy\nx: " + "[" * 5000 + "]" * 5000 + "\n"
    deep_map = "kind: toy\nx: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n"
    texts = {
        "billion-laughs": (laughs, "expands"), "million-leaves": (million, "expands"),
        "deep-list": (deep_list, "nest"), "deep-map": (deep_map, "nest"),
        "recursive-alias": ("kind: toy\nname: &a [1, *a]\n", "recursive"),
        "recursive-map": ("kind: toy\nname: &a {x: *a}\n", "recursive"),
        "malformed": ("kind: toy\n  name: [\n", "malformed YAML"),
        "tabs": ("kind:\ttoy\n\tname: x\n", ""), "empty": ("", ""), "comment-only": ("# nothing\n", ""),
        "list-top": ("- kind: toy\n", ""), "scalar-top": ("42\n", ""), "two-docs": ("kind: toy\n---\nkind: toy\n", ""),
        "unknown-kind": ("kind: warp\nname: x\n", "field 'kind'"), "no-kind": ("name: x\n", ""),
        "bad-key": ("kind: toy\n? [1, 2]\n: x\n", ""), "huge-int-key": ("kind: toy\nname: x\ncases: {1e999: 1}\n", ""),
        "python-tag": ("kind: !!python/object:os.system x\n", ""),
        "big-file": ("kind: toy\nname: x\ndescription: '" + "y" * (5 << 20) + "'\n", "too large"),
        "nul-bytes": ("kind: toy\x00\n", ""),
    }
    cases = []
    for name, (text, needle) in texts.items():
        fname = f"yaml_{name}.yaml"
        cases.append(Case(f"yaml:{name}", ["run", "{d}/" + fname, "--out", "{out}"],
                          needles=(fname,) + ((needle,) if needle else ()), files={fname: text}))
    for name, target in (("binary", "{d}/binary.bin"), ("latin1", "{d}/latin1.txt"), ("folder", "{d}/folder"),
                         ("missing", "{d}/nope.yaml"), ("dev-null", "/dev/null")):
        cases.append(Case(f"yaml:{name}", ["run", target, "--out", "{out}"], needles=(target.split("/")[-1],)))
    return cases


# -- command-line flags -------------------------------------------------------------------------------
BAD_INTS = ["-1", BIG, "x", "1.5", ""]
BAD_FLOATS = ["-1", "0", "nan", "inf", "1e999", "x"]
COMMANDS = {
    "predict": (["predict", "--model", "qwen3-0.6b"],
                {"--batch": BAD_INTS + ["0"], "--ctx": BAD_INTS + ["0", "1000000"], "--replicates": BAD_INTS,
                 "--seed": BAD_INTS, "--prefill-seqs": BAD_INTS, "--prefill-len": BAD_INTS,
                 "--fusion": ["max", ""], "--graph": ["sometimes"], "--engine": ["warp"],
                 "--profile": ["tpu-v9", "{d}/folder", "{d}/binary.bin", "{d}/latin1.txt", "", "{d}/nope.json"],
                 "--model": ["nope", "", "{d}/folder", "{d}/binary.bin", "/tmp", "{d}/nope.json"],
                 "--dtype": ["fp4", ""], "--kv-dtype": ["int8"], "--attention-backend": ["fa9", ""],
                 "--prefill-layout": ["x", "0,4", "sglang_pcg:0"], "--tp": ["3", "0", "x"]}),
    "predict-workload": (["predict", "--workload", "{d}/workload.json"],
                         {"--batch": BAD_INTS, "--ctx": BAD_INTS, "--replicates": BAD_INTS, "--seed": BAD_INTS,
                          "--fusion": ["fused"], "--workload": ["{d}/folder", "{d}/binary.bin", "{d}/nope.json",
                                                                "{d}/trace.json", "{d}/config.json"]}),
    "serve": (["serve", "--model", "qwen3-0.6b", "--rate", "2", "--duration", "1"],
              {"--rate": BAD_FLOATS, "--duration": BAD_FLOATS, "--seed": BAD_INTS,
               "--fusion": ["max"], "--graph": ["x"], "--layout": ["0,1", "x", "1,99999999", "", "1,,-2"],
               "--profile": ["nope", "{d}/folder"], "--model": ["nope", "{d}/folder", ""],
               "--trace": ["{d}/nope.csv", "{d}/folder", "{d}/binary.bin", "{d}/latin1.txt", "{d}/dist.csv"],
               "--scenario": ["{d}/nope.yaml", "{d}/folder", "{d}/scenarios/s13_launch_bound.yaml"],
               "--dtype": ["fp4"], "--kv-dtype": ["x"], "--attention-backend": ["x"], "--prefill-layout": ["x", "0"]}),
    "buckets": (["buckets", "vllm"], {"--max-size": BAD_INTS + ["0", "1000000000"],
                                      "--max-num-seqs": BAD_INTS + ["0", "1000000000"]}),
    "pad": (["pad", "3"], {"--layout": ["x", "0", "1,99999999", ""], "--max-size": BAD_INTS + ["1000000000"],
                           "--max-num-seqs": BAD_INTS}),
    "graph-memory": (["graph-memory", "--model", "qwen3-0.6b"],
                     {"--memory-budget": ["1e999", "-1", "x", "0", "1e999GiB", "nan", "inf", BIG + "GiB"],
                      "--workspace": ["1e999", "-1", "x", "nan"], "--gpu-util": ["nan", "inf", "0", "2", "-1"],
                      "--layout": ["x", "0"], "--max-size": BAD_INTS + ["1000000000"], "--fusion": ["x"],
                      "--graph": ["x"], "--model": ["{d}/folder", ""], "--profile": ["{d}/binary.bin"],
                      "--dtype": ["fp4"], "--prefill-layout": ["x"]}),
    "startup": (["startup", "--model", "qwen3-0.6b", "--layout", "1,8", "--fusion", "compiled"],
                {"--compile": ["jit", ""], "--compile-cache": ["hot"], "--dtype": ["fp4"], "--prefill-layout": ["x"],
                 "--warmups": ["-1", "x"], "--ctx": BAD_INTS + ["0"]}),
    "optimize": (["optimize", "--dist", "{d}/dist.csv", "--model", "qwen3-8b"],
                 {"--max-size": BAD_INTS + ["0", "10000000"], "--max-graphs": BAD_INTS + ["0"],
                  "--ctx": BAD_INTS + ["0", "999999999"], "--capture-budget": BAD_FLOATS,
                  "--memory-budget": ["1e999", "x", "-5", "0", "nan", "1e999GiB"], "--objective": ["fast"],
                  "--graph": ["none", "x"], "--model": ["nope", "{d}/folder"], "--profile": ["{d}/latin1.txt"],
                  "--dist": ["{d}/nope.csv", "{d}/folder", "{d}/binary.bin", "{d}/requests.csv"],
                  "--dtype": ["fp4"], "--kv-dtype": ["x"]}),
    "import-trace": (["import-trace", "{d}/trace.json", "--out", "{out}/w.json"],
                     {"--steps": ["0", "-1", "x", BIG, "5"], "--batch": BAD_INTS + ["0"]}),
    "export-trace": (["export-trace", "--out", "{out}/t.json", "--model", "qwen3-0.6b"],
                     {"--batch": BAD_INTS, "--ctx": BAD_INTS, "--fusion": ["x"], "--graph": ["x"],
                      "--model": ["nope", "{d}/folder"]}),
    "combine-profiles": (["combine-profiles", "h200", "h200", "--out", "{out}/p.json"], {}),
}


def flag_cases() -> list[Case]:
    cases = []
    for cmd, (base, opts) in COMMANDS.items():
        for flag, values in opts.items():
            for v in values:
                argv = [a for a in base]
                if flag in argv:
                    i = argv.index(flag)
                    argv[i + 1] = v
                else:
                    argv += [flag, v]
                needle = v.replace("{d}/", "") if v.startswith("{d}/") and cmd != "serve" else flag
                cases.append(Case(f"flag:{cmd}:{flag}={v[:20]}", argv, needles=(needle,) if needle else ()))
    cases += [
        Case("flag:combine-profiles:host", ["combine-profiles", "{d}/binary.bin", "h200", "--out", "{out}/p.json"],
             needles=("binary.bin",)),
        Case("flag:combine-profiles:device", ["combine-profiles", "h200", "nope", "--out", "{out}/p.json"],
             needles=("nope",)),
        Case("flag:pad:batch0", ["pad", "0"], needles=("batch",)),
        Case("flag:pad:batch-huge", ["pad", BIG], needles=("batch",)),
        Case("flag:buckets:preset", ["buckets", "nope"], needles=("nope",)),
        Case("flag:unknown-command", ["warp"], needles=("warp",)),
        Case("flag:unknown-option", ["predict", "--warp", "1"], needles=("--warp",)),
        Case("flag:missing-arg", ["pad"], needles=("launchsim pad", "batch")),
        Case("flag:optimize:scenario-kind", ["optimize", "--scenario", "{d}/scenarios/s13_launch_bound.yaml"],
             needles=("s13_launch_bound.yaml",)),
        Case("flag:optimize:scenario-missing", ["optimize", "--scenario", "{d}/nope.yaml"], needles=("nope.yaml",)),
        Case("flag:optimize:scenario-and-dist", ["optimize", "--scenario", "{d}/scenarios/optimize_skewed.yaml",
                                                 "--dist", "{d}/dist.csv"], needles=("--dist",)),
        Case("flag:export-trace:both", ["export-trace", "--out", "{out}/t.json", "--model", "qwen3-0.6b",
                                        "--workload", "{d}/workload.json"], needles=("--workload",)),
        Case("flag:predict-both", ["predict", "--model", "qwen3-0.6b", "--workload", "{d}/workload.json"]),
        Case("flag:export-neither", ["export-trace", "--out", "{out}/t.json"]),
        Case("flag:optimize-neither", ["optimize"]),
        Case("flag:validate:replicates", ["validate", "{d}/nope.json", "--replicates", "100000000"],
             needles=("--replicates",)),
        Case("flag:validate:missing", ["validate", "{d}/nope.json", "--out", "{out}"], needles=("nope.json",)),
        Case("flag:validate:binary", ["validate", "{d}/binary.bin", "--out", "{out}"], needles=("binary.bin",)),
        Case("flag:calibrate:suffix", ["calibrate", "--out", "{out}/x.txt"], needles=("--out",)),
        Case("flag:measure:folder", ["measure", "--out", "{d}/folder"], needles=("--out",)),
    ]
    return cases


# -- output locations -------------------------------------------------------------------------------
FOLDER_OUT = {
    "run": ["run", "{d}/scenarios/s13_launch_bound.yaml", "--out"],
    "serve": ["serve", "--model", "qwen3-0.6b", "--rate", "2", "--duration", "1", "--out"],
    "optimize": ["optimize", "--dist", "{d}/dist.csv", "--model", "qwen3-8b", "--out"],
    "validate": ["validate", str(ROOT / "calibration/measured/h200-decode.json"), "--replicates", "1", "--out"],
}
FILE_OUT = {
    "import-trace": ["import-trace", "{d}/trace.json", "--out"],
    "export-trace": ["export-trace", "--model", "qwen3-0.6b", "--out"],
    "combine-profiles": ["combine-profiles", "h200", "h200", "--out"],
    "calibrate": ["calibrate", "--out"],
}


def out_cases() -> list[Case]:
    cases = []
    for cmd, base in FOLDER_OUT.items():
        for name, target in (("a-file", "{d}/a_file"), ("under-a-file", "{d}/a_file/sub"), ("dev-null", "/dev/null"),
                             ("unwritable", "/proc/launchsim_out")):
            cases.append(Case(f"out:{cmd}:{name}", base + [target], needles=("--out",)))
    for cmd, base in FILE_OUT.items():
        for name, target in (("a-folder", "{d}/folder"), ("under-a-file", "{d}/a_file/x.json"),
                             ("dev-null", "/dev/null"), ("unwritable", "/proc/launchsim/x.json"), ("empty", "")):
            cases.append(Case(f"out:{cmd}:{name}", base + [target], needles=("--out",)))
    return cases


# -- input files ------------------------------------------------------------------------------------
def _json_leaves(x, loc=()):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _json_leaves(v, loc + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _json_leaves(v, loc + (i,))
    else:
        yield loc, x


def _del(data, loc):
    d = copy.deepcopy(data)
    cur = d
    for k in loc[:-1]:
        cur = cur[k]
    del cur[loc[-1]]
    return d


def profile_text(doc) -> str:
    """A (mutated) profile document as the bad file's text: NaN and 1e999 written as JSON-invalid literals."""
    return json.dumps(doc, indent=1).replace('"NaN!"', "NaN").replace('"1e999!"', "1e999")


def mutated_profile_text(loc: tuple, value) -> str:
    """`profile_text` of the shipped profile with the value at `loc` replaced (a "profile-mutation" file)."""
    doc = json.loads(PROFILE.read_text())
    cur = doc
    for k in loc[:-1]:
        cur = cur[k]
    cur[loc[-1]] = value
    return profile_text(doc)


def profile_cases() -> list[Case]:
    prof = json.loads(PROFILE.read_text())
    nums = [(loc, v) for loc, v in _json_leaves(prof) if isinstance(v, (int, float)) and not isinstance(v, bool)
            and loc[0] != "environment"]
    muts = []
    for loc, v in nums[::37]:  # a spread of numbers across host, device, tables and graph memory
        # written when the case runs (test_fuzz_inputs._write): ~1,500 copies of the 250 kB profile made and dumped at
        # collection cost ~110 s in every process that collects the suite (each pytest-xdist worker)
        muts += [(f"{_loc_text(loc)}=-1", ("profile-mutation", loc, -1.0)),
                 (f"{_loc_text(loc)}=NaN", ("profile-mutation", loc, "NaN!"))]
    g = prof["device"]["tables"]["gemm"][0]
    a = prof["device"]["tables"]["attention"][0]
    e = prof["device"]["tables"]["elementwise"]
    launch = next(iter(prof["host"]["launch_us"]))
    muts += [
        ("gemm-unsorted", _set(prof, ("device", "tables", "gemm", 0, "m"), list(reversed(g["m"])))),
        ("gemm-zero-axis", _set(prof, ("device", "tables", "gemm", 0, "m"), [0] + g["m"][1:])),
        ("gemm-short-us", _set(prof, ("device", "tables", "gemm", 0, "us"), g["us"][:-1])),
        ("attn-short-row", _set(prof, ("device", "tables", "attention", 0, "us", 0), a["us"][0][:-1])),
        ("attn-rows", _set(prof, ("device", "tables", "attention", 0, "us"), a["us"][:-1])),
        ("curve-dup-axis", _set(prof, ("device", "tables", "elementwise", "bytes"), [e["bytes"][0]] + e["bytes"][:-1])),
        ("p10>p90", _set(prof, ("host", "launch_us", launch, "p10"), 1e6)),
        ("step-factor-zero", _set(prof, ("host", "step_factor", "p50"), 0.0)),
        ("no-tables", _del(prof, ("device", "tables"))),
        ("no-gemm", _del(prof, ("device", "tables", "gemm"))),
        ("schema-2", _set(prof, ("schema_version",), 2)), ("schema-true", _set(prof, ("schema_version",), True)),
        ("source-x", _set(prof, ("source",), "guessed")), ("host-list", _set(prof, ("host",), [])),
        ("huge-number", _set(prof, ("device", "memory_gib"), "1e999!")),
        ("top-list", [prof]),
    ]
    cases = []
    for name, doc in muts:
        text = doc if isinstance(doc, tuple) else profile_text(doc)
        cases.append(Case(f"profile:{name}", ["predict", "--model", "qwen3-0.6b", "--profile", "{d}/p_bad.json"],
                          needles=("p_bad.json",), field_re=None if name == "top-list" else r"p_bad\.json" + FIELD,
                          files={"p_bad.json": text}))
    raw = PROFILE.read_text()
    for name, content in (("truncated", raw[: len(raw) // 2]), ("empty", ""), ("deep", "[" * 100000 + "]" * 100000),
                          ("latin1", raw.encode("utf-8").replace(b"H200", b"H\xe900")), ("nul", b"\x00" * 64),
                          ("infinity", raw.replace('"memory_gib": ', '"memory_gib": Infinity, "x": ', 1))):
        cases.append(Case(f"profile:{name}", ["predict", "--model", "qwen3-0.6b", "--profile", "{d}/p_bad.json"],
                          needles=("p_bad.json",), files={"p_bad.json": content}))
    return cases


def config_cases() -> list[Case]:
    muts = []
    for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
              "num_key_value_heads", "head_dim", "max_position_embeddings"):
        for v in (True, "lots", -1, 0, 1.5, 10**30, [4]):
            muts.append((f"{k}={v!r}"[:40], {**CONFIG, k: v}, k))
    for k in ("hidden_size", "num_hidden_layers", "vocab_size"):
        muts.append((f"missing-{k}", {kk: vv for kk, vv in CONFIG.items() if kk != k}, k))
    muts += [("architectures=7", {**CONFIG, "architectures": 7}, "architectures"),
             ("architectures=[7]", {**CONFIG, "architectures": [7]}, "architectures"),
             ("model_type=[]", {**CONFIG, "model_type": []}, "model_type"),
             ("heads7-kv3", {**CONFIG, "num_attention_heads": 7, "num_key_value_heads": 3}, "num_key_value_heads"),
             ("layers=1e6", {**CONFIG, "num_hidden_layers": 10**6}, "num_hidden_layers"),
             ("tie=maybe", {**CONFIG, "tie_word_embeddings": "maybe"}, "tie_word_embeddings"),
             ("heads>hidden", {**CONFIG, "num_attention_heads": 2048, "num_key_value_heads": 1, "head_dim": None},
              "num_attention_heads")]
    cases = [Case(f"config:{n}", ["predict", "--model", "{d}/cfg/config.json"], needles=("config.json", k),
                  field_re=r"config\.json" + FIELD + re.escape(k), files={"cfg/config.json": json.dumps(doc, indent=1)})
             for n, doc, k in muts]
    for name, content in (("binary", bytes(range(256))), ("latin1", '{"hidden_size": "\xe9"}'.encode("latin-1")),
                          ("deep", "[" * 100000 + "]" * 100000), ("list", "[1, 2]"), ("nan", '{"hidden_size": NaN}'),
                          ("empty", "")):
        cases.append(Case(f"config:{name}", ["predict", "--model", "{d}/cfg/config.json"], needles=("config.json",),
                          files={"cfg/config.json": content}))
    cases.append(Case("config:in-scenario-folder", ["graph-memory", "--model", "{d}/folder"], needles=("folder",)))
    return cases


def trace_cases() -> list[Case]:
    def with_event(i, **kv):
        doc = trace_doc()
        doc["traceEvents"][i].update(kv)
        return json.dumps(doc)

    docs = {
        "kernel-neg-dur": (with_event(2, dur=-5), "dur"), "kernel-nan-dur": (with_event(2, dur="nan"), "dur"),
        "kernel-NaN-literal": (json.dumps(trace_doc()).replace('"dur": 5.0', '"dur": NaN', 1), "NaN"),
        "launch-inf-ts": (with_event(1, ts="inf"), "ts"), "op-neg-dur": (with_event(0, dur=-1), "dur"),
        "gpu-only": (json.dumps(trace_doc(launches=False)), "launch"),
        "cpu-only": (json.dumps({"traceEvents": [e for e in trace_events() if e["cat"] != "kernel"]}), "kernels"),
        "deep": ("[" * 100000 + "]" * 100000, ""), "deep-events": ('{"traceEvents": [' + "[" * 50000 + "]" * 50000 + "]}", ""),
        "empty": ("", ""), "number": ("42", ""), "no-ph": (json.dumps({"traceEvents": [{"name": "x"}]}), ""),
        "truncated": (json.dumps(trace_doc())[:500], ""), "not-list": ('{"traceEvents": 5}', ""),
    }
    cases = [Case(f"trace:{n}", ["import-trace", "{d}/t_bad.json", "--out", "{out}/w.json"],
                  needles=("t_bad.json",) + ((nd,) if nd else ()), files={"t_bad.json": t}) for n, (t, nd) in docs.items()]
    for name, content, fname in (("binary", bytes(range(256)), "t_bad.json"), ("gzip-junk", b"\x1f\x8b" + b"junk" * 10,
                                 "t_bad.json.gz"), ("gz-not-gzip", b"{}", "t_bad.json.gz"),
                                 ("gzip-bad-inside", gzip.compress(b"\xff\xfe"), "t_bad.json")):
        cases.append(Case(f"trace:{name}", ["import-trace", "{d}/" + fname, "--out", "{out}/w.json"],
                          needles=(fname,), files={fname: content}))
    cases.append(Case("trace:folder", ["import-trace", "{d}/folder", "--out", "{out}/w.json"], needles=("folder",)))
    return cases


def workload_cases() -> list[Case]:
    muts = {
        "gpu_us=-1": (("kernels", 0, "gpu_us"), -1), "gpu_us=str": (("kernels", 0, "gpu_us"), "x"),
        "host_us=NaN": (("kernels", 0, "host_us"), "NaN!"), "gpu_us=1e999": (("kernels", 0, "gpu_us"), "1e999!"),
        "kernels=[]": (("kernels",), []), "format=2": (("format_version",), 2), "kind": (("kind",), "trace"),
        "op_class": (("kernels", 0, "op_class"), "warp"), "batch=0": (("batch",), 0), "batch=huge": (("batch",), 10**30),
        "extra": (("zz",), 1), "tail=-1": (("host_tail_us",), -1), "steps=null": (("steps",), None),
    }
    cases = []
    for name, (loc, v) in muts.items():
        cases.append(Case(f"workload:{name}", ["predict", "--workload", "{d}/w_bad.json"], needles=("w_bad.json",),
                          field_re=r"w_bad\.json" + FIELD, files={"w_bad.json": ("wl-mutation", loc, v)}))
    for name, content in (("binary", bytes(range(256))), ("empty", ""), ("list", "[]"), ("deep", "[" * 100000)):
        cases.append(Case(f"workload:{name}", ["predict", "--workload", "{d}/w_bad.json"], needles=("w_bad.json",),
                          files={"w_bad.json": content}))
    return cases


def csv_cases() -> list[Case]:
    dist = {"inf": "batch\ninf\n", "nan": "batch\nnan\n", "huge": "batch\n1000000000000000000\n", "neg": "batch\n-1\n",
            "word": "batch\nx\n", "no-header": "1\n2\n", "empty": "", "only-header": "batch\n",
            "count-inf": "batch,count\n1,inf\n", "count-neg": "batch,count\n1,-1\n", "count-nan": "batch,count\n1,nan\n",
            "count-huge": "batch,count\n1,1e308\n2,1e308\n", "count-zero": "batch,count\n1,0\n",
            "frac": "batch\n1.5\n", "ten-million": "batch\n10000000\n", "short-row": "batch,count\n1\n",
            "binary": bytes(range(256)), "latin1": "batch\n\xe9\n".encode("latin-1")}
    cases = [Case(f"csv-dist:{n}", ["optimize", "--dist", "{d}/bad.csv", "--model", "qwen3-8b"], needles=("bad.csv",), files={"bad.csv": t})
             for n, t in dist.items() if n != "count-huge"]
    # counts near the float limit once overflowed to a ZeroDivisionError; they are valid input
    cases.append(Case("csv-dist:count-huge", ["optimize", "--dist", "{d}/huge.csv", "--model", "qwen3-8b", "--json"], 0,
                      files={"huge.csv": dist["count-huge"]}))
    req = {"nan-ts": "timestamp,prompt_tokens,output_tokens\nnan,1,1\n",
           "inf-ts": "timestamp,prompt_tokens,output_tokens\ninf,1,1\n",
           "neg-ts": "timestamp,prompt_tokens,output_tokens\n-1,1,1\n",
           "decreasing": "timestamp,prompt_tokens,output_tokens\n2,1,1\n1,1,1\n",
           "zero-tokens": "timestamp,prompt_tokens,output_tokens\n0,0,1\n",
           "huge-tokens": "timestamp,prompt_tokens,output_tokens\n0,1000000000000000000000,1\n",
           "float-tokens": "timestamp,prompt_tokens,output_tokens\n0,1.5,1\n",
           "missing-col": "timestamp,prompt_tokens\n0,1\n", "short-row": "timestamp,prompt_tokens,output_tokens\n0,1\n",
           "header-only": "timestamp,prompt_tokens,output_tokens\n", "binary": bytes(range(256))}
    cases += [Case(f"csv-trace:{n}", ["serve", "--model", "qwen3-0.6b", "--trace", "{d}/req.csv", "--duration", "1"],
                   needles=("req.csv",), files={"req.csv": t}) for n, t in req.items()]
    return cases


def valid_cases() -> list[Case]:
    return [
        Case("ok:predict", ["predict", "--model", "qwen3-0.6b", "--json"], 0),
        Case("ok:predict-config", ["predict", "--model", "{d}/config.json", "--json", "--replicates", "3"], 0),
        Case("ok:predict-profile", ["predict", "--model", "qwen3-0.6b", "--profile", "{d}/profile.json"], 0),
        Case("ok:predict-workload", ["predict", "--workload", "{d}/workload.json", "--json"], 0),
        Case("ok:buckets", ["buckets", "all", "--max-size", "16384"], 0),
        Case("ok:pad", ["pad", "3", "--layout", "1,2,4"], 0),
        Case("ok:graph-memory", ["graph-memory", "--model", "qwen3-0.6b", "--budget", "64GiB", "--json"], 0),
        Case("ok:run-toy", ["run", "{d}/scenarios/s13_launch_bound.yaml", "--out", "{out}"], 0,
             outputs=("result.json", "report.html")),
        Case("ok:import-trace", ["import-trace", "{d}/trace.json", "--out", "{out}/w.json"], 0, outputs=("w.json",)),
        Case("ok:export-trace", ["export-trace", "--model", "qwen3-0.6b", "--out", "{out}/t.json"], 0,
             outputs=("t.json",)),
        Case("ok:optimize", ["optimize", "--dist", "{d}/dist.csv", "--model", "qwen3-0.6b", "--out", "{out}"], 0,
             outputs=("report.html", "result.json", "frontier.csv")),
        Case("ok:serve", ["serve", "--model", "qwen3-0.6b", "--rate", "2", "--duration", "2", "--json"], 0),
        Case("ok:serve-trace", ["serve", "--model", "qwen3-0.6b", "--trace", "{d}/requests.csv", "--duration", "2",
                                "--out", "{out}"], 0, outputs=("result.json", "batch_log.csv")),
        Case("ok:combine", ["combine-profiles", "h200", "datasheet-h200", "--out", "{out}/p.json"], 0,
             outputs=("p.json",)),
        Case("ok:seed-big", ["predict", "--model", "qwen3-0.6b", "--replicates", "2", "--seed", str(2**63 - 1)], 0),
    ]


# -- issue 22 (helper "answers"): item 8's inputs that are not models/moe/traces, and this session's new surfaces --
def issue22_cases() -> list[Case]:
    prof = json.loads(PROFILE.read_text())
    zero = copy.deepcopy(prof)
    zero["device"]["tables"]["elementwise"]["us"][2] = 0.0
    typo = copy.deepcopy(prof)
    typo["host"]["launch_us"]["eager_gemmm"] = typo["host"]["launch_us"].pop("eager_gemm")
    huge = {**CONFIG, "hidden_size": 65536, "intermediate_size": 262144, "num_attention_heads": 128,
            "num_hidden_layers": 512, "head_dim": 512}
    step = {"kind": "step", "name": "x", "model": "qwen3-0.6b"}
    serve = {"kind": "serve", "name": "x", "model": "qwen3-0.6b", "rate": 1, "duration_s": 1}
    sglang = ["--cuda-graph-bs 1 2 x", "--cuda-graph-bs 1,2", "1 2 --cuda-graph-bs 4", "--cuda-graph-bs 1 -2",
              "--cuda-graph-bs 1 --cuda-graph-bs 2", "--cuda-graph-max-bs 2 --cuda-graph-bs 1 2 4",
              "--cuda-graph-bs 4 --nope 3", "--cuda-graph-max-bs x --cuda-graph-bs 1"]
    cases = [
        Case("i22:dist-dup-header", ["optimize", "--dist", "{d}/dup.csv", "--model", "qwen3-0.6b"],
             needles=("dup.csv:3", "header row repeats"), files={"dup.csv": "batch,count\n1,3\nbatch,count\n4,2\n"}),
        Case("i22:yaml-batch-true", ["run", "{d}/bt.yaml", "--out", "{out}"], needles=("bt.yaml", "true/false"),
             field_re=FIELD, files={"bt.yaml": {**step, "batch": [1, True]}}),
        Case("i22:yaml-ctx-true", ["run", "{d}/ct.yaml", "--out", "{out}"], needles=("ct.yaml", "true/false"),
             field_re=FIELD, files={"ct.yaml": {**step, "ctx": True}}),
        Case("i22:yaml-tp-true", ["run", "{d}/tp.yaml", "--out", "{out}"], needles=("tp.yaml", "true/false"),
             field_re=FIELD, files={"tp.yaml": {**serve, "tensor_parallel_size": True}}),
        Case("i22:yaml-max-num-seqs-true", ["run", "{d}/ms.yaml", "--out", "{out}"], needles=("ms.yaml",),
             field_re=FIELD, files={"ms.yaml": {**serve, "engine": {"max_num_seqs": True}}}),
        Case("i22:predict-scheduling-no-steps", ["predict", "--model", "qwen3-0.6b", "--scheduling", "async"],
             needles=("--scheduling", "--steps")),
        Case("i22:predict-sampling-no-steps", ["predict", "--model", "qwen3-0.6b", "--sampling", "top_p"],
             needles=("--sampling", "--steps")),
        Case("i22:startup-compile-not-compiled", ["startup", "--model", "qwen3-0.6b", "--compile", "dynamic"],
             needles=("--compile", "fusion")),  # the rule names the field fusion (its flag was not given)
        Case("i22:profile-elementwise-0us", ["predict", "--model", "qwen3-0.6b", "--profile", "{d}/p0.json"],
             needles=("p0.json", "elementwise"), files={"p0.json": json.dumps(zero, indent=1)}),
        Case("i22:profile-launch-path-typo", ["predict", "--model", "qwen3-0.6b", "--profile", "{d}/pt.json"],
             needles=("pt.json", "launch_us", "eager_gemmm"), files={"pt.json": json.dumps(typo, indent=1)}),
        Case("i22:startup-huge-model", ["startup", "--model", "{d}/huge.json"], needles=("do not fit",),
             files={"huge.json": json.dumps(huge)}),
        Case("i22:optimize-huge-model", ["optimize", "--dist", "{d}/dist.csv", "--model", "{d}/huge.json"],
             needles=("do not fit",), files={"huge.json": json.dumps(huge)}),
        Case("i22:predict-des-10000-steps", ["predict", "--model", "qwen3-0.6b", "--steps", "10000", "--engine", "des"],
             needles=("--steps", "--engine des")),
        Case("i22:report-under-a-file", ["predict", "--model", "qwen3-0.6b", "--steps", "2", "--report",
                                         "{d}/afile/x.html"], needles=("--report",), files={"afile": "x"}),
        Case("i22:set-unknown-field", ["run", "{d}/scenarios/s13_launch_bound.yaml", "--set", "nosuch=3", "--out",
                                       "{out}"], needles=("--set 'nosuch=3'",)),
        Case("i22:set-bad-value", ["run", "{d}/scenarios/s13_launch_bound.yaml", "--set", "kernel_us=-1", "--out",
                                   "{out}"], needles=("--set",)),
        Case("i22:serve-gpu-util-2", ["serve", "--model", "qwen3-0.6b", "--gpu-util", "2"],
             needles=("--gpu-memory-utilization",)),
        Case("i22:serve-max-num-seqs-0", ["serve", "--model", "qwen3-0.6b", "--max-num-seqs", "0"],
             needles=("--max-num-seqs",)),
        Case("i22:serve-prompt-len-bad", ["serve", "--model", "qwen3-0.6b", "--prompt-len", "gauss:3"],
             needles=("--prompt-len",)),
        Case("i22:serve-lengths-dup-header", ["serve", "--model", "qwen3-0.6b", "--duration", "1", "--prompt-len",
                                              "csv:{d}/lens.csv"], needles=("--prompt-len", "lens.csv:3"),
             files={"lens.csv": "len\n5\nlen\n6\n"}),
        Case("i22:capacity-no-slo", ["capacity", "--model", "qwen3-0.6b"], needles=("--slo-tpot-ms",)),
        Case("i22:capacity-bad-tolerance", ["capacity", "--model", "qwen3-0.6b", "--slo-tpot-ms", "5", "--tolerance",
                                            "3"], needles=("--tolerance",)),
    ]
    cases += [Case(f"i22:sglang-layout:{i}", ["pad", "3", "--layout", s], needles=("--layout",))
              for i, s in enumerate(sglang)]
    return cases


def all_cases() -> list[Case]:
    cases = (scenario_cases() + yaml_structure_cases() + flag_cases() + out_cases() + profile_cases() + config_cases()
             + trace_cases() + workload_cases() + csv_cases() + valid_cases() + issue22_cases() + spec_cases())
    seen = {}
    for c in cases:  # unique ids
        n = seen.get(c.id, 0)
        seen[c.id] = n + 1
        if n:
            c.id = f"{c.id}#{n}"
    return cases


# -- speculative decoding (issue 21): --spec-tokens / --draft on buckets, graph-memory, startup -------------------
def spec_cases() -> list[Case]:
    cases = []
    for v in BAD_INTS + ["-1", "65"]:
        cases.append(Case(f"spec:buckets:--spec-tokens={v[:20]}", ["buckets", "vllm", "--spec-tokens", v],
                          needles=("--spec-tokens",)))
        cases.append(Case(f"spec:startup:--spec-tokens={v[:20]}",
                          ["startup", "--model", "qwen3-0.6b", "--layout", "vllm", "--spec-tokens", v],
                          needles=("--spec-tokens",)))
    gm = ["graph-memory", "--model", "qwen3-0.6b", "--layout", "vllm", "--spec-tokens", "2"]
    cases += [
        Case("spec:buckets:not-an-engine", ["buckets", "seed", "--spec-tokens", "2"], needles=("--spec-tokens",)),
        Case("spec:buckets:layout", ["buckets", "--layout", "1,2", "--spec-tokens", "2"], needles=("--spec-tokens",)),
        Case("spec:buckets:nothing-left", ["buckets", "vllm", "--spec-tokens", "4", "--max-size", "4"],
             needles=("--spec-tokens",)),
        Case("spec:graph-memory:layout", gm[:4] + ["1,2"] + gm[5:], needles=("--layout",)),
        Case("spec:graph-memory:draft-missing", gm + ["--draft", "nope"], needles=("--draft",)),
        Case("spec:graph-memory:draft-folder", gm + ["--draft", "{d}/folder"], needles=("--draft",)),
        Case("spec:graph-memory:draft-vocab", gm + ["--draft", "llama3-8b"], needles=("--draft", "vocab")),
        Case("spec:graph-memory:draft-empty", gm + ["--draft", ""], needles=("--draft",)),
        Case("spec:startup:draft", ["startup", "--model", "qwen3-0.6b", "--layout", "sglang", "--spec-tokens", "2",
                                    "--draft", "{d}/binary.bin"], needles=("--draft",)),
        Case("ok:buckets-spec", ["buckets", "sglang", "--spec-tokens", "3", "--json"], 0),
        Case("ok:graph-memory-spec", gm + ["--json"], 0),
        Case("ok:startup-spec", ["startup", "--model", "qwen3-0.6b", "--layout", "trtllm", "--spec-tokens", "1",
                                 "--draft", "mtp", "--json"], 0),
    ]
    return cases


# ==== traces helper block (issue 22 item 8: trace inputs; issue 20 item 4: retarget flags) ====================
# Appended by the "traces" session; everything it adds is below this line.
def trace_input_cases() -> list[Case]:
    def doc_with(mut):
        d = trace_doc()
        mut(d["traceEvents"])
        return json.dumps(d)

    def drop_dur(ev):
        ev[2].pop("dur")

    def drop_corr(ev):
        for e in ev:
            e.get("args", {}).pop("correlation", None)

    def str_corr(ev):
        ev[2]["args"]["correlation"] = "1"

    def before_launch(ev):
        ev[2]["ts"] = ev[1]["ts"] - 50

    def fifo(ev):  # the second kernel on stream 7 starts before the first
        ev[5]["ts"] = ev[2]["ts"] - 5

    digits = "1" + "0" * 400
    docs = {
        "kernel-no-dur": (doc_with(drop_dur), "dur"),
        "no-correlation": (doc_with(drop_corr), "correlation"),
        "string-correlation": (doc_with(str_corr), "correlation"),
        "kernel-before-launch": (doc_with(before_launch), "out of time order"),
        "stream-out-of-order": (doc_with(fifo), "out of time order"),
        "ts-400-digits": (json.dumps(trace_doc()).replace('"ts": 8.0', f'"ts": {digits}', 1), "ts"),
        "dur-400-digits": (json.dumps(trace_doc()).replace('"dur": 5.0', f'"dur": {digits}', 1), "dur"),
        "dur-1e300": (json.dumps(trace_doc()).replace('"dur": 5.0', '"dur": 1e300', 1), "dur"),
        "ts-1e300": (json.dumps(trace_doc()).replace('"ts": 8.0', '"ts": 1e300', 1), "ts"),
    }
    cases = [Case(f"trace-input:{n}", ["import-trace", "{d}/t_in.json", "--out", "{out}/w.json"],
                  needles=("t_in.json", nd), files={"t_in.json": t}) for n, (t, nd) in docs.items()]
    cases += [
        Case("trace-input:ctx-0", ["import-trace", "{d}/trace.json", "--out", "{out}/w.json", "--ctx", "0"],
             needles=("--ctx",)),
        Case("trace-input:model-missing", ["import-trace", "{d}/trace.json", "--out", "{out}/w.json", "--model",
                                           "{d}/nope.json"], needles=("nope.json",)),
        Case("ok:trace-input:retarget", ["predict", "--workload", "{d}/workload.json", "--batch", "8", "--json"], 0),
        Case("trace-input:retarget-refused", ["predict", "--workload", "{d}/w_in.json", "--batch", "8"],
             needles=("cannot be re-priced", "aten::mul"),  # one kernel without a recorded shape, no model
             files={"w_in.json": ("wl-mutation", ("kernels", 0, "dims"), None)}),
        Case("ok:trace-input:model", ["import-trace", "{d}/trace.json", "--out", "{out}/w.json", "--model",
                                      "{d}/config.json", "--ctx", "512"], 0, outputs=("w.json",)),
        Case("trace-input:calibrate-host-only-quick", ["calibrate", "--host-only", "--quick"], needles=("--quick",)),
    ]
    return cases


_all_cases_before_traces = all_cases


def all_cases() -> list[Case]:  # noqa: F811  (extends the list above with the traces block)
    return _all_cases_before_traces() + trace_input_cases()


# ==== audit block (adversarial audit of bad input and silently ignored options) =================================
# Appended by the "audit" session; everything it adds is below this line.
def audit_cases() -> list[Case]:
    cases = [
        # an output onto one of the command's own inputs: the input was destroyed (exit 0)
        Case("audit:out-is-input:import-trace", ["import-trace", "{d}/t_self.json", "--out", "{d}/t_self.json"],
             needles=("--out", "t_self.json", "is an input"), files={"t_self.json": json.dumps(trace_doc())}),
        Case("audit:out-is-input:export-trace-workload", ["export-trace", "--workload", "{d}/workload.json", "--out",
                                                          "{d}/workload.json"], needles=("--out", "is an input")),
        Case("audit:out-is-input:export-trace-config", ["export-trace", "--model", "{d}/config.json", "--out",
                                                        "{d}/config.json"], needles=("--out", "is an input")),
        Case("audit:out-is-input:export-trace-profile", ["export-trace", "--model", "qwen3-0.6b", "--profile",
                                                         "{d}/profile.json", "--out", "{d}/profile.json"],
             needles=("--out", "is an input")),
        Case("audit:out-is-input:combine-profiles", ["combine-profiles", "{d}/profile.json", "h200", "--out",
                                                     "{d}/profile.json"], needles=("--out", "is an input")),
        Case("audit:out-is-input:combine-profiles-shipped", ["combine-profiles", "h200", "h200", "--out",
                                                             str(PROFILE)], needles=("--out", "is an input")),
    ]
    # YAML merge keys: `<<: [*a, *b]` with a key in both: YAML 1.1 takes the first, PyYAML the last (batch 5 ran)
    merge = "kind: predict\nname: m\nmodel: qwen3-0.6b\n<<: [{batch: 4}, {batch: 5}]\n"
    cases.append(Case("audit:yaml:merge-list-conflict", ["run", "{d}/merge.yaml", "--out", "{out}"],
                      needles=("merge.yaml:4", "'batch'", "merged"), files={"merge.yaml": merge}))
    ok = "kind: predict\nname: m\nmodel: qwen3-0.6b\n<<: [{batch: 4}, {ctx: 64}]\nbatch: 8\n"
    cases.append(Case("ok:audit:yaml:merge", ["run", "{d}/merge_ok.yaml", "--out", "{out}"], 0,
                      files={"merge_ok.yaml": ok}, outputs=("result.json",)))
    # an engine's layout text whose keys launchsim would drop or pick one of silently
    for name, text in (("json-dup", '{"cudagraph_capture_sizes": [1, 8], "cudagraph_capture_sizes": [4]}'),
                       ("json-unread-key", '{"cudagraph_capture_sizes": [1, 8], "cudagraph_mode": "NONE"}'),
                       ("json-outer-key", '{"compilation_config": {"cudagraph_capture_sizes": [1, 8]}, "level": 3}'),
                       ("trtllm-dup", "cuda_graph_config: {batch_sizes: [1, 8], batch_sizes: [4]}")):
        cases.append(Case(f"audit:layout:{name}", ["pad", "3", "--layout", text], needles=("--layout",)))
    step = {"kind": "predict", "name": "x", "model": "qwen3-0.6b"}
    serve = {"kind": "serve", "name": "x", "model": "qwen3-0.6b", "rate": 1, "duration_s": 1}
    # errors found after validation or by a rule across fields: FILE:LINE: field 'F' (was FILE: or field '<top>')
    for name, doc, fld in (("predict-layout-bad", {**step, "layout": "nope"}, "layout"),
                           ("predict-layout-json-dup", {**step, "layout": '{"cudagraph_capture_sizes": [1], '
                                                                          '"cudagraph_capture_sizes": [2]}'}, "layout"),
                           ("startup-layout-bad", {**step, "kind": "startup", "layout": "nope"}, "layout"),
                           ("graph-memory-layout-bad", {**step, "kind": "graph_memory", "layout": "{bad"}, "layout"),
                           ("predict-scheduling-no-steps", {**step, "scheduling": "async"}, "scheduling"),
                           ("predict-prefill-len-alone", {**step, "prefill_len": 8}, "prefill_len")):
        fname = f"audit_{name}.yaml"
        cases.append(Case(f"audit:located:{name}", ["run", "{d}/" + fname, "--out", "{out}"], needles=(fname,),
                          field_re=re.escape(fname) + FIELD + fld + "'", files={fname: doc}))
    # capture sizes with graph none: nothing is captured, so they were ignored (serve did not even read them)
    for name, doc in (("predict-layout", {**step, "graph": "none", "layout": [1, 2]}),
                      ("predict-prefill-layout", {**step, "graph": "none", "prefill_seqs": 1, "prefill_len": 8,
                                                  "prefill_layout": [8]}),
                      ("predict-attention-backend", {**step, "graph": "none", "attention_backend": "fa3"}),
                      ("serve-layout-bad", {**serve, "graph": "none", "layout": "nope"}),
                      ("serve-layout", {**serve, "graph": "none", "layout": "sglang"}),
                      ("startup-layout", {**step, "kind": "startup", "graph": "none", "layout": "1,2"}),
                      ("graph-memory-layout", {**step, "kind": "graph_memory", "graph": "none", "layout": "vllm"})):
        fname = f"audit_graph_none_{name}.yaml"
        fld = next(k for k in ("prefill_layout", "attention_backend", "layout") if k in doc)
        cases.append(Case(f"audit:graph-none:{name}", ["run", "{d}/" + fname, "--out", "{out}"],
                          needles=(fname, "graph none"), field_re=re.escape(fname) + FIELD + fld + "'",
                          files={fname: doc}))
    cases += [
        Case("audit:graph-none:flags-predict", ["predict", "--model", "qwen3-0.6b", "--graph", "none", "--layout",
                                                "1,2"], needles=("--layout", "--graph none")),
        Case("audit:graph-none:flags-graph-memory", ["graph-memory", "--model", "qwen3-0.6b", "--graph", "none",
                                                     "--layout", "1,2"], needles=("--layout", "--graph none")),
        Case("audit:graph-none:flags-serve-scenario", ["serve", "--scenario", "{d}/scenarios/serve_qwen3_0p6b.yaml",
                                                       "--graph", "none", "--layout", "1,2"], needles=("--layout",)),
        # --graph none over a file's graph mode takes the file's layout with it (a what-if, still valid)
        Case("ok:audit:graph-none:serve-scenario-override", ["serve", "--scenario",
                                                             "{d}/scenarios/serve_qwen3_0p6b.yaml", "--graph", "none",
                                                             "--duration", "1", "--json"], 0),
        Case("ok:audit:graph-none:spec-layout", ["predict", "--model", "qwen3-0.6b", "--graph", "none", "--layout",
                                                 "vllm", "--spec-tokens", "2", "--acceptance", "0.7", "--json"], 0),
    ]
    # options given explicitly that nothing reads: the seed without replicates, draft / kv_cache at their defaults
    for name, argv, needles in (
            ("predict-seed", ["predict", "--model", "qwen3-0.6b", "--seed", "3"], ("--seed", "replicates > 0")),
            ("workload-seed", ["predict", "--workload", "{d}/workload.json", "--seed", "3"], ("--seed",)),
            ("predict-draft-default", ["predict", "--model", "qwen3-0.6b", "--draft", "eagle"], ("--draft",)),
            ("graph-memory-draft-default", ["graph-memory", "--model", "qwen3-0.6b", "--draft", "eagle"], ("--draft",)),
            ("predict-kv-cache-default", ["predict", "--model", "qwen3-0.6b", "--kv-cache", "static"],
             ("--kv-cache", "impl hf"))):
        cases.append(Case(f"audit:unread:{name}", argv, needles=needles))
    for name, doc in (("predict-seed", {**step, "seed": 1}), ("step-seed", {**step, "kind": "step", "seed": 7}),
                      ("serve-draft", {**serve, "draft": "eagle"})):
        fname = f"audit_unread_{name}.yaml"
        fld = "draft" if "draft" in doc else "seed"
        cases.append(Case(f"audit:unread:yaml-{name}", ["run", "{d}/" + fname, "--out", "{out}"], needles=(fname,),
                          field_re=re.escape(fname) + FIELD + fld + "'", files={fname: doc}))
    # the backend and prefill sizes of a decode-only predict step: they route mixed steps only (printed, unread)
    cases += [Case("audit:unread:predict-prefill-layout-decode", ["predict", "--model", "qwen3-0.6b", "--graph",
                                                                  "full_and_piecewise", "--prefill-layout",
                                                                  "sglang_pcg"], needles=("--prefill-layout",
                                                                                          "decodes only")),
              Case("audit:unread:predict-prefill-layout-spec", ["predict", "--model", "llama3-8b", "--layout", "vllm",
                                                                "--spec-tokens", "3", "--acceptance", "0.7", "--graph",
                                                                "full_and_piecewise", "--prefill-layout",
                                                                "sglang_pcg"], needles=("--prefill-layout",
                                                                                        "decodes only")),
              Case("audit:unread:predict-backend-decode", ["predict", "--model", "qwen3-0.6b", "--graph", "full",
                                                           "--attention-backend", "fa3"],
                   needles=("--attention-backend", "decodes only"))]
    fname = "audit_unread_predict_backend.yaml"
    cases.append(Case("audit:unread:yaml-predict-backend", ["run", "{d}/" + fname, "--out", "{out}"],
                      needles=(fname, "decodes only"), field_re=re.escape(fname) + FIELD + "attention_backend'",
                      files={fname: {**step, "graph": "full", "attention_backend": "fa3"}}))
    cases += [Case("ok:audit:predict-backend-mixed", ["predict", "--model", "qwen3-0.6b", "--graph", "full",
                                                      "--attention-backend", "fa3", "--prefill-seqs", "1",
                                                      "--prefill-len", "16", "--json"], 0)]
    cases += [Case("ok:audit:seed-with-replicates", ["predict", "--model", "qwen3-0.6b", "--seed", "3", "--replicates",
                                                     "2", "--json"], 0),
              Case("ok:audit:seed-0-no-replicates", ["run", "{d}/scenarios/qwen3_0p6b_decode.yaml", "--set",
                                                     "replicates=0", "--set", "batch=[1]", "--out", "{out}"], 0),
              Case("ok:audit:kv-cache-hf", ["predict", "--model", "qwen3-0.6b", "--fusion", "none", "--impl", "hf",
                                            "--kv-cache", "static", "--json"], 0)]
    return cases


_all_cases_before_audit = all_cases


def all_cases() -> list[Case]:  # noqa: F811  (extends the list above with the audit block)
    return _all_cases_before_audit() + audit_cases()
