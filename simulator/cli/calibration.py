"""Calibration commands: `calibrate`, `measure`, `validate`, `profiles`, `combine-profiles`.

`calibrate` and `measure` need a CUDA GPU and torch (`pip install 'launchsim[calibrate]'`); without
them they say so in one line and exit 2. Outputs are written atomically (temp file + os.replace).
Registered on the main app by one import line in simulator/cli/__init__.py.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Optional

import typer

from simulator.common.errors import UserError


def _need_gpu(what: str) -> None:
    from calibration.hygiene import require_gpu  # torch is imported there, inside the function

    require_gpu(what, UserError)


def _out_json(out: Path, inputs=()) -> Path:
    from simulator.common.outpaths import check_out_file

    return check_out_file(out, "--out", suffix=".json", inputs=inputs)


def _round(args: list[str], tmp: str) -> int:
    """Run a calibration round (calibration/round.py: counts and memory processes, then the clean timing
    process, then the depth sweep) in child processes; their progress goes to stderr."""
    import subprocess

    cmd = [sys.executable, "-m", "calibration.round", "--out", tmp, *args]
    return subprocess.call(cmd, stdout=sys.stderr)


def _canary_failed(tmp: str) -> None:
    import json

    t = json.loads((Path(tmp) / "timing.json").read_text()) if (Path(tmp) / "timing.json").exists() else {}
    c = t.get("canary", {})
    print(f"CANARY FAILED: host tiny-op cost {c.get('host_start_us', float('nan')):.2f} -> "
          f"{c.get('host_end_us', float('nan')):.2f} us (tolerance {c.get('tolerance', 0):.0%}); the host drifted "
          "during the run, nothing was written: run again on a quiet machine", file=sys.stderr)
    raise typer.Exit(3)


def calibrate(
    out: Optional[Path] = typer.Option(None, "--out", help="profile file to write, e.g. simulator/profiles/NAME.json "
                                       "(with --host-only: the canary's JSON record, optional)"),
    quick: bool = typer.Option(False, "--quick", help="smaller grids, 2-layer decoders (a pipeline check)"),
    host_only: bool = typer.Option(False, "--host-only", help="only measure this machine's host canary (a few "
                                   "seconds) and print the --host-canary-us figure that scales a profile's host lane"),
) -> None:
    """Calibrate this GPU: a whole round (kernel counts and graph memory in their own processes, then
    every timing in a process that never profiles, with a canary checked at both ends) -> a profile.
    With --host-only: time the host tiny-op canary only (calibration/hostprobe.py)."""
    if host_only:
        return _host_only(out, quick)
    if out is None:
        raise UserError("calibrate needs --out FILE (the profile to write), or --host-only")
    _out_json(out)
    _need_gpu("calibrate")
    import json

    from calibration.build_memory import memory_section
    from calibration.build_profile import build, with_decoder_figures, write_json_atomic
    from calibration.make_profiles import compiled_fit_row

    from simulator.model.profile import ProfileError, parse_profile

    with tempfile.TemporaryDirectory() as tmp:
        rc = _round(["--quick"] if quick else [], tmp)
        if rc == 3:
            _canary_failed(tmp)
        if rc != 0:
            raise UserError(f"calibrate: the calibration round failed (exit {rc}); its log is above")
        d = Path(tmp)
        timing = json.loads((d / "timing.json").read_text())
        counts = json.loads((d / "counts_eager.json").read_text())
        prof = build(timing, counts, name=out.stem)
        if (d / "depth.json").exists():
            prof, _ = with_decoder_figures(prof, json.loads((d / "depth.json").read_text()), compiled_fit_row(timing))
        prof["device"]["graph_memory"] = memory_section(d)
    try:
        parse_profile(prof, str(out))
    except ProfileError as e:
        raise UserError(str(e)) from None
    write_json_atomic(prof, out)
    print(f"wrote {out}")


def _host_only(out: Optional[Path], quick: bool) -> None:
    """`calibrate --host-only`: this machine's host canary, printed as the flag that uses it."""
    if quick:
        raise UserError("--quick does not apply to --host-only (the canary takes a few seconds already)")
    if out is not None:
        _out_json(out)
    _need_gpu("calibrate --host-only")
    from calibration.build_profile import write_json_atomic
    from calibration.hostprobe import probe

    res = probe()
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(res, out)
        print(f"wrote {out}")
    runs = ", ".join(f"{x:.2f}" for x in res["runs_p50_us"])
    print(f"host canary {res['host_canary_us']:.2f} us (median host time of a tiny eager op; runs {runs}) on "
          f"{res['environment']['gpu']}")
    print(f"--host-canary-us {res['host_canary_us']:.2f}")


def measure(
    out: Path = typer.Option(..., "--out", help="measured-rows file to write (.json)"),
    quick: bool = typer.Option(False, "--quick", help="2 batches x 1 context per model (smoke run)"),
) -> None:
    """Time decode steps of the reference decoder (isolated and pipelined, eager and graph) in a clean process."""
    _out_json(out)
    _need_gpu("measure")
    import json
    import subprocess

    from calibration.build_profile import write_json_atomic

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        rc = subprocess.call([sys.executable, "-m", "calibration.child_timing", "--out", tmp,
                              *(["--quick"] if quick else [])], stdout=sys.stderr)
        if rc == 3:
            _canary_failed(tmp)
        if rc != 0:
            raise UserError(f"measure: the timing process failed (exit {rc}); its log is above")
        res = json.loads((Path(tmp) / "timing.json").read_text())
    write_json_atomic(res, out)
    print(f"wrote {out} ({len(res['rows'])} rows)")


def validate(
    measured: Path = typer.Argument(..., help="measured file (launchsim measure, e.g. calibration/measured/h200-round-b/timing.json)"),
    profile: Optional[str] = typer.Option(None, "--profile", help="profile name or path (default h200)"),
    out: Path = typer.Option(Path("out/validation"), "--out", help="folder for validation.json/.html"),
    replicates: int = typer.Option(60, "--replicates", help="host-noise replicates for the eager p10-p90 band"),
) -> None:
    """Compare predictions with measured rows: table, JSON and an offline HTML plot."""
    from calibration.validate import ValidationError, load_measured, summary_table, validate as run_validate
    from calibration.validate import write_report

    from simulator.model.profile import ProfileError, load_profile

    from simulator.common.outpaths import check_out_dir

    if replicates < 1:
        raise UserError(f"--replicates must be >= 1, got {replicates}")
    if replicates > 1000:
        raise UserError(f"--replicates {replicates:,} is above the limit of 1,000")
    check_out_dir(out, "--out")
    from simulator.common.jsonfile import read_json

    if measured.exists():
        read_json(measured, "measured", UserError)  # a folder, binary, non-UTF-8 or malformed file: one line
    try:
        data = load_measured(measured)
        prof = load_profile(profile)
    except (ValidationError, ProfileError) as e:
        raise UserError(str(e)) from None
    from simulator.report.progress import task

    try:
        with task(f"validate: {len(data.get('rows', []))} measured rows x {replicates} replicates"):
            res = run_validate(data, prof, replicates=replicates)
    except ValueError as e:  # a row the model cannot run (unknown model, context beyond its limit)
        raise UserError(f"{measured}: {e}") from None
    if not res["rows"]:
        raise UserError(f"{measured}: no row has measurements to compare")
    cols = ["mode", "rows", "MAPE %", "median |err| %", "max |err| %", "target %", "within", "in band", "pass"]
    table = summary_table(res["summary"])
    widths = [max(len(c), *(len(str(r[c])) for r in table)) for c in cols]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    for r in table:
        print("  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths)))
    jp, hp = write_report(res, out)
    print(f"wrote {jp} and {hp} (profile {prof.name}; validation rows only in the table)")


def profiles() -> None:
    """List the shipped profiles: name, device, source, date (derived ones marked)."""
    from simulator.model.profile import DEFAULT_PROFILE, ProfileError, available_profiles, load_profile

    rows = []
    for p in available_profiles():
        try:
            pr = load_profile(str(p))
            src = pr.source + (f" (derived from {pr.derived_from})" if pr.source == "derived" else "")
            rows.append((pr.name + (" *" if pr.name == DEFAULT_PROFILE else ""), pr.device.gpu, src, pr.date))
        except ProfileError as e:
            rows.append((p.stem, "INVALID", str(e)[:60], ""))
    if not rows:
        raise UserError("no profiles found in simulator/profiles")
    hdr = ("name", "device", "source", "date")
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(hdr)]
    print("  ".join(h.ljust(x) for h, x in zip(hdr, w)))
    for r in rows:
        print("  ".join(v.ljust(x) for v, x in zip(r, w)))
    print(f"* default profile ({DEFAULT_PROFILE})")


def combine_profiles(
    host: str = typer.Argument(..., help="profile (name or path) whose host section to keep, e.g. your own calibration"),
    device: str = typer.Argument(..., help="profile (name or path) whose device section to keep, e.g. h200"),
    out: Path = typer.Option(..., "--out", help="profile file to write (.json)"),
) -> None:
    """Write a profile with one profile's host section and another's device section."""
    from simulator.model.profile import combine, load_profile, profile_path
    from simulator.common.jsonfile import write_json

    _out_json(out, inputs=(profile_path(host), profile_path(device)))
    p = combine(load_profile(host), load_profile(device))
    path = write_json(out, p.model_dump(mode="json"))
    print(f"wrote {path}: host from {host}, device from {device}")


def register(app: typer.Typer) -> None:
    app.command("combine-profiles")(combine_profiles)
    app.command()(calibrate)
    app.command()(measure)
    app.command()(validate)
    app.command()(profiles)

