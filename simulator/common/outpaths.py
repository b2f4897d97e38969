"""Output locations, checked before any work starts, and a lock so two runs never share one output folder.

`check_out_dir(path)`: a folder for several outputs (report.html, result.json, ...): it must be a folder or not
exist yet, sit under folders (not files) and be writable. `check_out_file(path)`: one output file: not a folder,
not a device such as /dev/null, its folder writable, and not one of the command's own input files (`inputs`: a
trace imported onto itself, a profile combined into one of its sources, would be destroyed). Both raise one
`UserError` line naming the flag and path.
`out_lock(path)` holds an exclusive lock file inside an output folder for a run's duration; a second run into the
same folder stops at once with one line instead of interleaving writes.
"""

from __future__ import annotations

import errno
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

from simulator.common.errors import UserError

LOCK_NAME = ".launchsim.lock"


class OutputError(UserError):
    """An output path that cannot be written."""


def _nearest_existing(p: Path) -> Path:
    q = p
    while not q.exists() and not q.is_symlink():
        if q.parent == q:
            break
        q = q.parent
    return q


def _writable_dir(d: Path, flag: str, target: Path) -> None:
    """Probe: create and remove a temporary file in `d` (os.access is wrong for root and read-only mounts)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".launchsim-probe.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise OutputError(f"{flag} {target}: cannot write in {d} ({e.strerror or e.__class__.__name__})") from None


def _check_parents(p: Path, flag: str, target: Path) -> Path:
    """The nearest existing ancestor of p; it must be a folder."""
    base = _nearest_existing(p)
    if not base.is_dir():
        raise OutputError(f"{flag} {target}: {base} is a file, not a folder")
    return base


def check_out_dir(path, flag: str = "out") -> Path:
    p = Path(path)
    if str(path) == "":
        raise OutputError(f"{flag}: empty path")
    if p.exists() or p.is_symlink():
        if not p.is_dir():
            raise OutputError(f"{flag} {p}: exists and is not a folder (give a folder for the outputs)")
        _writable_dir(p, flag, p)
        return p
    base = _check_parents(p.parent, flag, p)
    if base.is_dir():
        _writable_dir(base, flag, p)
    return p


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # either one missing or unreadable: not the same existing file
        return False


def check_out_file(path, flag: str = "out", suffix: str | None = None, inputs=()) -> Path:
    """`inputs`: the paths (str or Path; None skipped) of the files the command reads; the output may be none of
    them."""
    p = Path(path)
    if str(path) == "":
        raise OutputError(f"{flag}: empty path")
    if suffix and p.suffix != suffix:
        raise OutputError(f"{flag} must name a {suffix} file, got {p}")
    if p.is_dir():
        raise OutputError(f"{flag} {p}: is a folder (give a file name)")
    if p.exists() and not p.is_file():
        raise OutputError(f"{flag} {p}: not a regular file (outputs are written to a temporary file, then renamed)")
    for src in inputs:
        if src is not None and str(src) != "" and _same_file(p, Path(src)):
            raise OutputError(f"{flag} {p}: is an input of this command ({src}); writing it would destroy it: give "
                              "another file name")
    base = _check_parents(p.parent, flag, p)
    if base.is_dir():
        _writable_dir(base, flag, p)
    return p


@contextmanager
def out_lock(path, flag: str = "out"):
    """Hold OUT/.launchsim.lock (flock, exclusive, non-blocking) while the body runs. Creates OUT; if the run
    fails and OUT was created here and holds nothing else, removes it again."""
    import fcntl

    p = Path(path)
    created = not p.exists()
    p.mkdir(parents=True, exist_ok=True)
    lock = p / LOCK_NAME
    fd = None
    try:
        while True:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                fd = None
                if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise OutputError(f"{flag} {p}: another launchsim run is writing there (lock {lock}); wait for "
                                      "it to finish or give another folder") from None
                raise
            try:  # the holder before us may have removed the file after we opened it: retry on the new one
                same = os.path.samestat(os.fstat(fd), os.stat(lock))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
            fd = None
        ok = False
        try:
            yield p
            ok = True
        finally:
            try:
                os.unlink(lock)
            except OSError:
                pass
            os.close(fd)
            fd = None
            if not ok and created:
                try:
                    p.rmdir()  # only if empty
                except OSError:
                    pass
    finally:
        if fd is not None:
            os.close(fd)
