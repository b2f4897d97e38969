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

from .errors import UserError


def _need_gpu(what: str) -> None:
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        raise UserError(f"{what} needs torch and a CUDA GPU: pip install 'launchsim[calibrate]' on a GPU machine") from None
    if not torch.cuda.is_available():
        raise UserError(f"{what} needs a CUDA GPU, and torch sees none on this machine")


def _out_json(out: Path) -> Path:
    from .outpaths import check_out_file

    return check_out_file(out, "--out", suffix=".json")


def calibrate(
    out: Path = typer.Option(..., "--out", help="profile file to write, e.g. calibration/profiles/NAME.json"),
    quick: bool = typer.Option(False, "--quick", help="smaller grids and fewer repetitions (smoke run)"),
) -> None:
    """Run the GPU microbenchmarks and write a measured profile (host and device sections)."""
    _out_json(out)
    _need_gpu("calibrate")
    from calibration.build_profile import build, write_json_atomic
    from calibration.measure import MEMORY_FIT_BATCHES, graph_memory
    from calibration.reference_decoder import make_weights
    from calibration.run_all import calibrate as run_calibrate

    from .models import PRESETS
    from .profile import ProfileError, parse_profile

    with tempfile.TemporaryDirectory() as tmp:
        mb = run_calibrate(tmp, quick, log=lambda s: print(s, file=sys.stderr))
    mem = {}
    for name in ("qwen3-0.6b",) if quick else ("qwen3-0.6b", "llama3-8b"):
        w = make_weights(PRESETS[name])
        mem[name] = graph_memory(name, w, (1, 16) if quick else MEMORY_FIT_BATCHES)
        del w
    prof = build(mb, {"graph_memory": mem}, name=out.stem)
    try:
        parse_profile(prof, str(out))
    except ProfileError as e:
        raise UserError(str(e)) from None
    write_json_atomic(prof, out)
    print(f"wrote {out}")


def measure(
    out: Path = typer.Option(..., "--out", help="measured-rows file to write (.json)"),
    quick: bool = typer.Option(False, "--quick", help="2 batches x 1 context per model (smoke run)"),
) -> None:
    """Run the reference decoder on the GPU (both presets, fusion none/packed/compiled, graph none/full)."""
    _out_json(out)
    _need_gpu("measure")
    import os
    import shutil

    from calibration.build_profile import write_json_atomic
    from calibration.measure import run

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        res = run(tmp, quick, log=lambda s: print(s, file=sys.stderr))
        trace = Path(tmp) / "trace.json.gz"
        if trace.exists():  # the Chrome trace of a few eager steps, beside the rows
            dst = out.with_name(out.stem + ".trace.json.gz")
            part = dst.with_name("." + dst.name + ".tmp")
            shutil.copyfile(trace, part)
            os.replace(part, dst)
    write_json_atomic(res, out)
    print(f"wrote {out} ({len(res['rows'])} rows)")


def validate(
    measured: Path = typer.Argument(..., help="measured file (launchsim measure)"),
    profile: Optional[str] = typer.Option(None, "--profile", help="profile name or path (default h200)"),
    out: Path = typer.Option(Path("calibration/validation"), "--out", help="folder for validation.json/.html"),
    replicates: int = typer.Option(60, "--replicates", help="host-noise replicates for the eager p10-p90 band"),
) -> None:
    """Compare predictions with measured rows: table, JSON and an offline HTML plot."""
    from calibration.validate import ValidationError, load_measured, summary_table, validate as run_validate
    from calibration.validate import write_report

    from .profile import ProfileError, load_profile

    from .outpaths import check_out_dir

    if replicates < 1:
        raise UserError(f"--replicates must be >= 1, got {replicates}")
    if replicates > 1000:
        raise UserError(f"--replicates {replicates:,} is above the limit of 1,000")
    check_out_dir(out)
    from .jsonfile import read_json

    if measured.exists():
        read_json(measured, "measured", UserError)  # a folder, binary, non-UTF-8 or malformed file: one line
    try:
        data = load_measured(measured)
        prof = load_profile(profile)
    except (ValidationError, ProfileError) as e:
        raise UserError(str(e)) from None
    try:
        res = run_validate(data, prof, replicates=replicates)
    except ValueError as e:  # a row the model cannot run (unknown model, context beyond its limit)
        raise UserError(f"{measured}: {e}") from None
    if not res["rows"]:
        raise UserError(f"{measured}: no row has measurements to compare")
    cols = ["mode", "rows", "MAPE %", "max |err| %", "target %", "within", "in band", "pass"]
    table = summary_table(res["summary"])
    widths = [max(len(c), *(len(str(r[c])) for r in table)) for c in cols]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    for r in table:
        print("  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths)))
    jp, hp = write_report(res, out)
    print(f"wrote {jp} and {hp} (profile {prof.name}; validation rows only in the table)")


def profiles() -> None:
    """List the shipped profiles: name, device, source, date (derived ones marked)."""
    from .profile import DEFAULT_PROFILE, ProfileError, available_profiles, load_profile

    rows = []
    for p in available_profiles():
        try:
            pr = load_profile(str(p))
            src = pr.source + (f" (derived from {pr.derived_from})" if pr.source == "derived" else "")
            rows.append((pr.name + (" *" if pr.name == DEFAULT_PROFILE else ""), pr.device.gpu, src, pr.date))
        except ProfileError as e:
            rows.append((p.stem, "INVALID", str(e)[:60], ""))
    if not rows:
        raise UserError("no profiles found in calibration/profiles")
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
    from .profile import combine, load_profile
    from .report import write_json

    _out_json(out)
    p = combine(load_profile(host), load_profile(device))
    path = write_json(out, p.model_dump(mode="json"))
    print(f"wrote {path}: host from {host}, device from {device}")


def register(app: typer.Typer) -> None:
    app.command("combine-profiles")(combine_profiles)
    app.command()(calibrate)
    app.command()(measure)
    app.command()(validate)
    app.command()(profiles)

