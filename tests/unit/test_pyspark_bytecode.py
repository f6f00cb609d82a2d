"""scripts/pyspark_bytecode.py on small zips laid out like pyspark.zip and py4j's: after it, a fresh
Python importing from the zip compiles nothing, and tracebacks still show the source lines."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pyspark_bytecode.py"

#: Imports ``pkg.mod`` from the zip in argv[1], counting calls of the builtin compile (what the zip
#: importer calls for a module without usable bytecode), then calls a function that raises.
IMPORTER = """
import builtins, sys, traceback
calls = []
real = builtins.compile
builtins.compile = lambda *a, **k: calls.append(a[1]) or real(*a, **k)
sys.path.insert(0, sys.argv[1])
import pkg.mod
builtins.compile = real
print("compiled", len(calls))
try:
    pkg.mod.fail()
except ValueError:
    print(traceback.format_exc())
"""


def _zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("pkg/__init__.py", "VALUE = 1\n")
        z.writestr("pkg/mod.py", "from pkg import VALUE\n\ndef fail():\n    raise ValueError('from the zip')\n")
        z.writestr("pkg/tests/test_x.py", "assert True\n")
        z.writestr("pkg/data.txt", "not python")
        z.writestr("pkg/newer.py", "match = lambda: (yield from)\n")  # syntax this Python refuses
    return path


def _import(archive: Path) -> str:
    return subprocess.run(
        [sys.executable, "-c", IMPORTER, str(archive)], capture_output=True, text=True, check=True
    ).stdout


def _compiles(archive: Path) -> int:
    return int(_import(archive).split("\n", 1)[0].removeprefix("compiled "))


def _run(*archives: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, archives)], capture_output=True, text=True)


def test_a_zip_with_bytecode_imports_without_compiling_and_keeps_its_tracebacks(tmp_path):
    archive = _zip(tmp_path / "pyspark.zip")
    assert _compiles(archive) == 4, "without bytecode each module is compiled twice (Python 3.11's zipimport)"

    done = _run(archive)
    assert done.returncode == 0, done.stderr
    assert "2 modules" in done.stdout and "pkg/newer.py left as source: invalid syntax" in done.stderr
    names = set(zipfile.ZipFile(archive).namelist())
    assert {"pkg/__init__.pyc", "pkg/mod.pyc", "pkg/data.txt", "pkg/tests/test_x.py"} <= names
    assert "pkg/tests/test_x.pyc" not in names, "pyspark's own tests are left as they are"
    assert "pkg/newer.pyc" not in names and "pkg/newer.py" in names

    out = _import(archive)
    assert out.startswith("compiled 0\n")
    assert f'{archive}/pkg/mod.py", line 4, in fail' in out and "raise ValueError('from the zip')" in out


def test_running_it_again_replaces_the_bytecode_instead_of_adding_more(tmp_path):
    archive = _zip(tmp_path / "pyspark.zip")
    assert _run(archive).returncode == 0 and _run(archive).returncode == 0

    names = zipfile.ZipFile(archive).namelist()
    assert sorted(names) == sorted(set(names)) and names.count("pkg/mod.pyc") == 1
    assert _compiles(archive) == 0


def test_bytecode_of_another_python_is_ignored_and_the_source_compiled(tmp_path):
    archive = _zip(tmp_path / "pyspark.zip")
    assert _run(archive).returncode == 0
    with zipfile.ZipFile(archive) as z:
        entries = [(i, z.read(i)) for i in z.infolist()]
    with zipfile.ZipFile(archive, "w") as z:
        for info, data in entries:
            z.writestr(info, b"\0\0\r\n" + data[4:] if info.filename.endswith(".pyc") else data)  # another magic

    assert _compiles(archive) == 4


def test_every_zip_given_gets_its_bytecode(tmp_path):
    pyspark, py4j = _zip(tmp_path / "pyspark.zip"), _zip(tmp_path / "py4j-0.10.9.9-src.zip")

    done = _run(pyspark, py4j)

    assert done.returncode == 0, done.stderr
    assert f"2 modules of {pyspark}" in done.stdout and f"2 modules of {py4j}" in done.stdout
    assert _compiles(pyspark) == 0 and _compiles(py4j) == 0


def test_a_path_that_is_no_zip_is_named_and_exits_non_zero_leaving_the_others(tmp_path):
    archive = _zip(tmp_path / "pyspark.zip")
    before = archive.read_bytes()

    done = _run(archive, tmp_path / "missing.zip")

    assert done.returncode == 2
    assert f"{tmp_path / 'missing.zip'} is not a file" in done.stderr
    assert archive.read_bytes() == before, "nothing is rewritten when a path is wrong"
