"""The machine a benchmark ran on, for its printed table: CPU model name from /proc/cpuinfo (else platform)."""

from __future__ import annotations

import platform


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
