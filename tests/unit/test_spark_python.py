"""The Python Spark starts for the source's planning on the driver (tiering.spark_python), and
`tiering run`, which checks it before anything starts (exit 2)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tiering import spark_python
from tiering.cli import EXIT_USAGE, main
from tiering.errors import ConfigError

pytestmark = pytest.mark.unit

PACKED = "./environment/bin/python"


def _interpreter(path: Path) -> Path:
    path.parent.mkdir(parents=True)
    path.symlink_to(sys.executable)
    return path


def test_a_relative_interpreter_is_found_from_the_driver_s_directory(tmp_path):
    _interpreter(tmp_path / "environment" / "bin" / "python")
    assert spark_python.check({"PYSPARK_PYTHON": PACKED}, cwd=tmp_path) == PACKED


def test_a_relative_interpreter_missing_from_the_driver_s_directory_is_refused_naming_both(tmp_path):
    with pytest.raises(ConfigError) as refused:
        spark_python.check({"PYSPARK_PYTHON": PACKED}, cwd=tmp_path)
    [problem] = refused.value.problems
    assert problem.startswith(f"PYSPARK_PYTHON='{PACKED}': no such interpreter in the driver's directory {tmp_path};")
    assert "--archives" in problem and "docs/deploying.md" in problem


def test_an_absolute_interpreter_is_checked_as_it_is(tmp_path):
    assert spark_python.check({"PYSPARK_PYTHON": sys.executable}, cwd=tmp_path) == sys.executable
    (tmp_path / "python").write_text("not executable")
    for absent in (tmp_path / "nowhere" / "python", tmp_path / "python", tmp_path):
        with pytest.raises(ConfigError):
            spark_python.check({"PYSPARK_PYTHON": str(absent)}, cwd=tmp_path)


def test_a_bare_name_is_looked_up_on_path_as_the_jvm_does(tmp_path):
    _interpreter(tmp_path / "bin" / "python3")
    assert spark_python.check({"PATH": str(tmp_path / "bin")}, cwd=tmp_path) == "python3"
    with pytest.raises(ConfigError) as refused:
        spark_python.check({"PYSPARK_PYTHON": "python3.99", "PATH": str(tmp_path / "bin")}, cwd=tmp_path)
    assert "no such interpreter on the driver's PATH" in str(refused.value)


def test_tiering_run_refuses_it_before_reading_its_config(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYSPARK_PYTHON", PACKED)
    assert main(["run", "--conf", str(tmp_path / "absent.toml")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"PYSPARK_PYTHON='{PACKED}': no such interpreter" in err and "absent.toml" not in err
