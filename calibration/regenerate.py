"""Rebuild the shipped profiles and every committed validation table from calibration/measured/, in order.

    python -m calibration.regenerate [--only NAME ...] [--list]

CPU only (no torch). Each step is one of the commands named in calibration/README.md, run as its own process; the
first that fails stops the run (its exit status is returned). After a new round lands under measured/, this is the
one command that makes the profiles and every `validation/*.md` say what the measurements now say; `git diff` then
shows which figures moved.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("profiles", ("calibration.make_profiles",)),
    ("gemm_fallback", ("calibration.gemm_fallback",)),
    ("validation", ("calibration.validation_report", "--write-shipped")),
    ("memory", ("calibration.validate_memory", "--write-shipped")),
    ("hf", ("calibration.validate_hf", "--write-shipped")),
    ("impl_hf", ("calibration.validate_impl",)),
    ("lofo", ("calibration.validate_impl", "--lofo")),
    ("independent", ("calibration.validate_independent", "--write-shipped")),
    ("inductor", ("calibration.validate_inductor", "--write-shipped")),
    ("compiled_host", ("calibration.validate_compiled_host", "--write-shipped")),
    ("engine", ("calibration.validate_engine", "--write-shipped")),
    ("moe_fp8", ("calibration.validate_moe_fp8", "--write-shipped")),
    ("spec", ("calibration.validate_spec", "--out", "calibration/validation")),
    ("retarget", ("calibration.validate_retarget",)),
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these steps (names from --list)")
    ap.add_argument("--list", action="store_true", help="print the steps and their commands")
    a = ap.parse_args(argv)
    names = [n for n, _ in STEPS]
    if a.list:
        for n, cmd in STEPS:
            print(f"{n:14s} python -m {' '.join(cmd)}")
        return 0
    unknown = sorted(set(a.only or ()) - set(names))
    if unknown:
        print(f"regenerate: unknown step(s) {', '.join(unknown)}: use one of {', '.join(names)}", file=sys.stderr)
        return 2
    for n, cmd in STEPS:
        if a.only and n not in a.only:
            continue
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", *cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        tail = (r.stdout.strip().splitlines() or [""])[-1]
        print(f"[{n}] rc {r.returncode} in {time.perf_counter() - t0:.1f} s: {tail[:160]}")
        if r.returncode != 0:
            print(r.stdout[-4000:], file=sys.stderr)
            return r.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
