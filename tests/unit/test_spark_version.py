"""The supported Spark range and what differs inside it (tiering.spark_version), and the two
start-ups that check it before anything runs: `tiering run` and jobs/tiering_job.py (exit 2)."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import pytest

from tiering import spark_version
from tiering.cli import EXIT_USAGE, main
from tiering.conf.loader import load_config
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


@pytest.mark.parametrize(("version", "expected"), [("4.0.0", False), ("4.1.4", False), ("4.2.0", True), ("4.3.0", True)])
def test_admission_control_from_spark_4_2(version, expected):
    assert spark_version.admission_control(version) is expected


def test_the_checkpoint_file_manager_moved_package_in_spark_4_1():
    assert spark_version.checkpoint_file_manager("4.0.5") == (
        "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager")
    for version in ("4.1.0", "4.3.0"):
        assert spark_version.checkpoint_file_manager(version) == (
            "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager")


def config(**overrides):
    return load_config(None, {}, {"job.name": "j", "job.checkpoint": "/tmp/c", "kvstore.url": "http://127.0.0.1:1",
                                  "zookeeper.hosts": "127.0.0.1:1", "lake.root": "/tmp/l", **overrides})


def test_without_admission_control_limits_are_refused_for_available_now_only(caplog):
    limited = {"limits.max_splits_per_trigger": 7, "limits.max_bytes_per_trigger": 1000}
    with pytest.raises(ConfigError) as refused:
        spark_version.check_config(config(**limited, **{"trigger.available_now": True}), "4.1.0")
    message = str(refused.value)
    assert "limits.max_splits_per_trigger = 7, limits.max_bytes_per_trigger = 1000 with trigger.available_now" in message
    assert "Spark 4.1.0 has no admission control" in message and "Spark >= 4.2" in message

    with caplog.at_level(logging.INFO, logger="tiering.spark_version"):
        spark_version.check_config(config(**limited), "4.0.0")  # the source applies them itself
        spark_version.check_config(config(**{"trigger.available_now": True}), "4.0.0")
    assert [r.getMessage().startswith("Spark 4.0.0: Python sources have no admission control") for r in caplog.records] == [True, True]
    spark_version.check_config(config(**limited, **{"trigger.available_now": True}), "4.2.0")


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
