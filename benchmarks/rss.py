"""Resident memory of a process, for the benchmarks' flat-memory figures (Linux /proc).

Peak (``VmHWM``) answers "how much did one run need"; current (``VmRSS``) answers what a soak
asks, "is the process still growing after many rounds", which a peak cannot tell apart from
one early spike. :func:`reset_peak` starts a new peak, so one process can measure several runs.
"""

from __future__ import annotations

from pathlib import Path


def peak_rss_mb(pid: int) -> float | None:
    """``VmHWM`` of ``pid`` in MB; None when the process is gone or /proc is unreadable."""
    return _status_mb(pid, "VmHWM:")


def rss_mb(pid: int) -> float | None:
    """``VmRSS`` of ``pid`` in MB now; None when the process is gone or /proc is unreadable."""
    return _status_mb(pid, "VmRSS:")


def reset_peak(pid: int) -> None:
    """Reset ``VmHWM`` to the current RSS (Linux: ``5`` into clear_refs), so the next peak is a run's own."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        pass


def _status_mb(pid: int, key: str) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None
