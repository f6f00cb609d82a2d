"""Peak resident memory of a process, for the benchmarks' flat-memory figures (Linux /proc)."""

from __future__ import annotations

from pathlib import Path


def peak_rss_mb(pid: int) -> float | None:
    """``VmHWM`` of ``pid`` in MB; None when the process is gone or /proc is unreadable."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None
