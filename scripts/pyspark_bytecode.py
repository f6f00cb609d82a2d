"""Adds bytecode to Spark's ``pyspark.zip`` and py4j's zip, so the Python processes Spark starts stop
compiling pyspark and py4j.

Why: Spark puts the zips of ``$SPARK_HOME/python/lib`` (``pyspark.zip``, ``py4j-*-src.zip``) first
on the path of every Python process it starts: for the tiering job's streaming source four of
them one after another before its first batch (the source's lookup, its creation, the planning
process, the first batch's read plan), and every executor's Python worker. A zip holds no
bytecode and Python writes none for it, so each of those processes compiles every module it
imports from them, and Python 3.11's zip importer compiles a module twice (``get_filename``
compiles it again): most of such a process's start-up CPU (figures in docs/deploying.md).

The bytecode is unchecked hash-based (PEP 552): valid whatever the entries' timestamps, never
checked against the source. A Python of another version finds a bad magic number and compiles
the source as before, so a zip shared by several Pythons stays correct. Bytecode already in the
zip is replaced: run it again after upgrading pyspark; on a cluster, against every node's
``SPARK_HOME``. The zip is replaced atomically (a temporary file renamed over it).

    python scripts/pyspark_bytecode.py [ZIP ...]   (default: the zips of the pyspark installed)
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import warnings
import zipfile
from pathlib import Path

#: PEP 552 flags: hash-based, source not checked.
_UNCHECKED_HASH = (0b01).to_bytes(4, "little")


def installed_zips() -> list[Path]:
    """The zips Spark puts on its Python processes' path for the pyspark installed here."""
    from pyspark.find_spark_home import _find_spark_home

    return sorted((Path(os.environ.get("SPARK_HOME") or _find_spark_home()) / "python" / "lib").glob("*.zip"))


def bytecode(source: bytes, filename: str) -> bytes:
    """``source`` compiled as the zip importer would (its line endings normalised), as a ``.pyc``."""
    with warnings.catch_warnings():  # pyspark's own sources warn (an `is` with a literal): not ours to report
        warnings.simplefilter("ignore")
        code = compile(source.replace(b"\r\n", b"\n").replace(b"\r", b"\n"), filename, "exec", dont_inherit=True)
    return importlib.util.MAGIC_NUMBER + _UNCHECKED_HASH + importlib.util.source_hash(source) + marshal.dumps(code)


def add_bytecode(archive: Path) -> int:
    """Rewrite ``archive`` with a ``.pyc`` beside each ``.py`` but the tests (pyspark's are never
    imported by a job and a third of its modules); the number compiled."""
    with zipfile.ZipFile(archive) as source:
        entries = [(info, source.read(info)) for info in source.infolist() if not info.filename.endswith(".pyc")]
    partial = archive.with_name(archive.name + ".partial")
    compiled = 0
    with zipfile.ZipFile(partial, "w") as target:
        for info, data in entries:
            target.writestr(info, data)
            if info.filename.endswith(".py") and "/tests/" not in info.filename:
                try:
                    compiled_data = bytecode(data, f"{archive}{os.sep}{info.filename}")
                except SyntaxError as e:  # a module this Python cannot compile: left to fail where imported
                    print(f"pyspark_bytecode: {info.filename} left as source: {e}", file=sys.stderr)
                    continue
                pyc = zipfile.ZipInfo(info.filename + "c", info.date_time)
                pyc.compress_type = zipfile.ZIP_DEFLATED
                target.writestr(pyc, compiled_data)
                compiled += 1
    os.replace(partial, archive)
    return compiled


def main(argv: list[str]) -> int:
    archives = [Path(arg) for arg in argv] or installed_zips()
    missing = [str(archive) for archive in archives if not archive.is_file()]
    if missing or not archives:
        what = f"{', '.join(missing)} is not a file" if missing else "no zip found"
        print(f"pyspark_bytecode: {what} (expected Spark's python/lib/pyspark.zip and py4j-*-src.zip)", file=sys.stderr)
        return 2
    for archive in archives:
        print(
            f"pyspark_bytecode: {add_bytecode(archive)} modules of {archive} compiled "
            f"for Python {sys.version_info.major}.{sys.version_info.minor}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
