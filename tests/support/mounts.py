"""Filesystems that fail the way disks do: a small tmpfs that fills up, a read-only bind mount.

Failure mode these exist for: `chmod` does not stop root, so a "read-only" directory made with it
is writable in a test run as root and the test proves nothing. A read-only bind mount refuses
every writer (EROFS) and a full tmpfs refuses every write (ENOSPC), root included. Mounting needs
privileges: without them the test is skipped, saying why.
"""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _mount(*argv: str) -> None:
    done = subprocess.run(["mount", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"mount {' '.join(argv)} refused here: {done.stderr.strip()}")


@contextmanager
def small_tmpfs(path: Path, size_kib: int) -> Iterator[Path]:
    """A tmpfs of ``size_kib`` KiB mounted at ``path`` (created) for the block."""
    path.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(path))
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until its filesystem is full; returns the file (remove it to free the space)."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while f.write(bytes(4096)):
                pass
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    return filler


@contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` (a directory) read-only for the block, for root too: a read-only bind mount on itself."""
    _mount("--bind", str(path), str(path))
    try:
        done = subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"remounting {path} read-only refused here: {done.stderr.strip()}")
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)
