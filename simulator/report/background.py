"""Output files written by one background thread while the caller builds the next one's text.

A sweep writes several large files (results.csv, results.json, result.json: hundreds of MB for 100k points);
most of a write's cost is the kernel copying the text into the page cache, which runs without the GIL. A
`BackgroundWriter` takes (path, text) pairs and writes each with `jsonfile.atomic_write_text` on its own thread,
in the order given, so the caller's next text (Python work) is built meanwhile. The files and their contents are
exactly those of writing them in line; leaving the `with` block waits for every write, and the first write error
is raised there (after the remaining writes are skipped), unless the block itself raised.
"""

from __future__ import annotations

import queue
import threading
from pathlib import Path
from typing import Iterable

from simulator.common.jsonfile import atomic_write_parts, atomic_write_text


class BackgroundWriter:
    def __init__(self) -> None:
        self._q: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="launchsim-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._q.get()
            if job is None:
                return
            if self._error is None:
                try:
                    path, text = job
                    if isinstance(text, str):
                        atomic_write_text(path, text)
                    else:
                        atomic_write_parts(path, text)
                except BaseException as e:  # re-raised by close() in the caller's thread
                    self._error = e

    def write(self, path: str | Path, text: str | Iterable[str]) -> None:
        """Queue `atomic_write_text(path, text)`, or `atomic_write_parts` for pieces (an iterable, consumed on the
        writer's thread); a write that failed already is raised here."""
        if self._error is not None:
            self.close()
        self._q.put((path, text))

    def close(self) -> None:
        """Wait for every queued write; raise the first write error."""
        if self._thread.is_alive():
            self._q.put(None)
            self._thread.join()
        if self._error is not None:
            e, self._error = self._error, None
            raise e

    def __enter__(self) -> "BackgroundWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        try:  # the block's own error wins; the queued writes still finish (no temporary file left behind)
            self.close()
        except BaseException:
            pass
