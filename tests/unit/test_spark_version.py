"""The supported Spark range and what differs inside it (tiering.spark_version), and the two
start-ups that check it before anything runs: `tiering run` and jobs/tiering_job.py (exit 2)."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import pytest

from tiering import spark_version
from tiering.cli import EXIT_USAGE, main
from tiering.errors import ConfigError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("version", ["4.0.0", "4.0.5", "4.1.4", "4.2.1", "4.3.0", "4.3.1.dev0", " 4.1.0 "])
def test_versions_in_the_range_are_accepted(version):
    assert spark_version.check(version) == version


@pytest.mark.parametrize("version", ["3.5.6", "4.4.0", "5.0.0", "10.0.0", "4", "", "master"])
def test_versions_outside_the_range_are_refused_naming_the_version_and_the_range(version):
    with pytest.raises(ConfigError) as refused:
        spark_version.check(version)
    assert f"Spark {version!r} is not supported" in str(refused.value)
    assert ">=4.0,<4.4" in str(refused.value)


def test_the_range_is_the_one_pyproject_declares():
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert '"pyspark>=4.0,<4.4"' in pyproject
    assert spark_version.SUPPORTED == ((4, 0), (4, 4))


def test_the_running_pyspark_is_checked_by_default():
    import pyspark

    assert spark_version.running() == pyspark.__version__ == spark_version.check()


@pytest.mark.parametrize(
    ("version", "expected"), [("4.0.0", False), ("4.1.4", False), ("4.2.0", True), ("4.3.0", True)]
)
def test_admission_control_from_spark_4_2(version, expected):
    assert spark_version.admission_control(version) is expected


def test_the_checkpoint_file_manager_moved_package_in_spark_4_1():
    assert spark_version.checkpoint_file_manager("4.0.5") == (
        "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager"
    )
    for version in ("4.1.0", "4.3.0"):
        assert spark_version.checkpoint_file_manager(version) == (
            "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
        )


def test_a_spark_without_admission_control_is_accepted_with_a_log_line(caplog):
    with caplog.at_level(logging.INFO, logger="tiering.spark_version"):
        spark_version.check("4.1.0")
        spark_version.check("4.2.0")
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["Spark 4.1.0"]
    assert "no admission control (Spark >= 4.2)" in caplog.records[0].getMessage()


@pytest.fixture
def spark_3_5(monkeypatch):
    monkeypatch.setattr(spark_version, "running", lambda: "3.5.6")


def test_tiering_run_refuses_an_unsupported_spark_before_reading_its_config(spark_3_5, tmp_path, capsys):
    assert main(["run", "--conf", str(tmp_path / "absent.toml")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "Spark '3.5.6' is not supported" in err and "absent.toml" not in err


def test_the_job_script_refuses_an_unsupported_spark(spark_3_5, tmp_path, capsys):
    path = Path(__file__).parents[2] / "jobs" / "tiering_job.py"
    spec = importlib.util.spec_from_file_location("tiering_job", path)
    job = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(job)
    assert job.main(["--conf", str(tmp_path / "absent.toml")]) == EXIT_USAGE
    assert "tiering_job: invalid configuration:\n  Spark '3.5.6' is not supported" in capsys.readouterr().err
