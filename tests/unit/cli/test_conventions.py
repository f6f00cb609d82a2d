"""The `tiering` command's conventions: --version, global options before or after the subcommand
(and through the spark-submit entry), bad values exit 2 in one line, --set, quiet library loggers,
and --json errors as a JSON object."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
from pathlib import Path

import pytest

from tests.support.config import write_conf
from tiering.cli import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    LIBRARY_LOGGERS,
    OPERATOR_TIMEOUT_S,
    _configure_logging,
    _parse,
    main,
)
from tiering.errors import CoordinationError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def no_tiering_env(monkeypatch):
    import os

    for name in [n for n in os.environ if n.startswith("TIERING_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    return write_conf(tmp_path / "tiering.toml", job="cli-test", store_url="http://127.0.0.1:9", zk_hosts="127.0.0.1:9")


def test_version_is_the_distribution_s(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == EXIT_OK
    assert capsys.readouterr().out == f"tiering {importlib.metadata.version('kv-tiering')}\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["--log-level", "debug", "--conf", "a.toml", "status"],
        ["status", "--log-level", "debug", "--conf", "a.toml"],
        ["--log-level", "debug", "status", "--conf", "a.toml"],
        ["--conf", "a.toml", "leases", "list", "--log-level", "DEBUG"],
        ["leases", "--log-level", "DEBUG", "list", "--conf", "a.toml"],
        ["--conf", "b.toml", "resync", "orders", "--conf", "a.toml", "--log-level", "Debug"],
    ],
    ids=" ".join,
)
def test_global_options_go_before_or_after_the_subcommand(argv):
    args = _parse(argv)
    assert (args.log_level, args.conf) == ("DEBUG", "a.toml")


def test_an_option_not_given_after_the_subcommand_keeps_its_default():
    assert _parse(["status", "--conf", "a.toml"]).log_level == "INFO"


def test_settings_before_and_after_the_subcommand_all_count(conf, capsys):
    argv = ["--set", "trigger.intervall_s=1", "status", "--conf", str(conf), "--set", "lease.duration=2"]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "trigger.intervall_s (--set): unknown key; did you mean 'trigger.interval_s'?" in err
    assert "lease.duration (--set): unknown key; did you mean 'lease.duration_s'?" in err


def test_a_bad_setting_value_is_a_config_error_naming_the_key(conf, capsys):
    assert main(["status", "--conf", str(conf), "--set", "zookeeper.session_timeout_s=soon"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("tiering: invalid configuration:")
    assert "zookeeper.session_timeout_s (--set): expected number > 0, got 'soon'" in err


def load_job_entry():
    spec = importlib.util.spec_from_file_location("tiering_job", REPO / "jobs" / "tiering_job.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_spark_submit_entry_takes_the_global_options(conf, capsys):
    """Its arguments follow ``run``: --log-level and --set there are the CLI's, not refused."""
    argv = ["--conf", str(conf), "--log-level", "WARNING", "--set", "trigger.interval_s=-1"]
    assert load_job_entry().main(argv) == EXIT_USAGE
    assert "trigger.interval_s (--set): expected number > 0, got -1.0" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, complaint",
    [
        (["--log-level", "FOO", "status", "--conf", "a.toml"], "argument --log-level: invalid choice: 'FOO'"),
        (["status", "--conf", "a.toml", "--log-level", "FOO"], "argument --log-level: invalid choice: 'FOO'"),
        (
            ["status", "--conf", "a.toml", "--set", "trigger"],
            "argument --set: expected SECTION.KEY=VALUE, got 'trigger'",
        ),
        (["run", "--conf", "a.toml", "--metrics-port", "70000"], "argument --metrics-port: expected a port 1-65535"),
        (["zk", "--data-dir", "d", "--port", "0"], "argument --port: expected a port 1-65535"),
        (["--conf", "a.toml", "demo"], "--conf and --set go with a command that reads a config, not 'demo'"),
        (["leases", "list"], "the following arguments are required: --conf"),
        (["check", "--conf", "a.toml", "--timeout", "0"], "argument --timeout: expected a number of seconds > 0"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_a_bad_value_exits_2_with_one_error_line(argv, complaint, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and complaint in errors[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "command, retries",
    [("status", logging.ERROR), ("leases", logging.ERROR), ("check", logging.ERROR), ("run", logging.NOTSET)],
)
def test_library_loggers_are_quiet_unless_debug(command, retries):
    """A command a person waits on also silences the reconnects and retries before its one line."""
    logging.getLogger("tiering.kvstore.retry").setLevel(logging.NOTSET)
    _configure_logging("INFO", command)
    assert {name: logging.getLogger(name).level for name in ("urllib3", "tenacity", "py4j")} == dict.fromkeys(
        ("urllib3", "tenacity", "py4j"), logging.WARNING
    )
    assert logging.getLogger("kazoo").level == max(retries, logging.WARNING)
    assert logging.getLogger("tiering.kvstore.retry").level == retries


def test_a_quieter_log_level_is_kept_for_the_libraries():
    _configure_logging("ERROR", "run")
    assert logging.getLogger("urllib3").level == logging.ERROR, "WARNING would let its warnings through"


def test_debug_leaves_the_libraries_alone():
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET)
    _configure_logging("DEBUG", "status")
    assert all(logging.getLogger(name).level == logging.NOTSET for name in LIBRARY_LOGGERS)


def test_json_config_error_is_a_json_object_on_stdout(conf, capsys):
    assert main(["status", "--conf", str(conf), "--json", "--set", "trigger.intervall_s=1"]) == EXIT_USAGE
    out, err = capsys.readouterr()
    error = json.loads(out)
    assert (error["kind"], error["exit_code"]) == ("ConfigError", EXIT_USAGE)
    assert error["problems"] == ["trigger.intervall_s (--set): unknown key; did you mean 'trigger.interval_s'?"]
    assert err.startswith("tiering: invalid configuration:"), "the line on stderr stays"


@pytest.mark.parametrize(
    "command", [["status"], ["group"], ["leases", "list"], ["leases", "drop"], ["take-over", "orders"], ["check"]]
)
def test_every_operator_command_takes_a_timeout(command, capsys):
    assert _parse([*command, "--conf", "a.toml"]).timeout == OPERATOR_TIMEOUT_S
    assert _parse([*command, "--conf", "a.toml", "--timeout", "2.5"]).timeout == 2.5
    with pytest.raises(SystemExit) as exit_:
        _parse([*command, "--conf", "a.toml", "--timeout", "0"])
    assert exit_.value.code == EXIT_USAGE
    assert "--timeout: expected a number of seconds > 0, got '0'" in capsys.readouterr().err


def test_json_runtime_error_is_a_json_object_on_stdout(conf, capsys, monkeypatch):
    def unreachable(config, *, timeout_s):
        raise CoordinationError("cannot connect to ZooKeeper at 127.0.0.1:9 within 10s")

    monkeypatch.setattr("tiering.ops.status.job_status", unreachable)
    assert main(["status", "--conf", str(conf), "--json"]) == EXIT_FAILURE
    out, err = capsys.readouterr()
    assert json.loads(out) == {
        "error": "cannot connect to ZooKeeper at 127.0.0.1:9 within 10s",
        "kind": "CoordinationError",
        "exit_code": EXIT_FAILURE,
    }
    assert err == "tiering: cannot connect to ZooKeeper at 127.0.0.1:9 within 10s\n"


def test_without_json_an_error_prints_nothing_on_stdout(conf, capsys, monkeypatch):
    def unreachable(config, *, timeout_s):
        raise CoordinationError("cannot connect to ZooKeeper at 127.0.0.1:9 within 10s")

    monkeypatch.setattr("tiering.ops.status.job_status", unreachable)
    assert main(["status", "--conf", str(conf)]) == EXIT_FAILURE
    assert capsys.readouterr().out == ""


def test_json_usage_error_is_a_json_object_on_stdout(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["status", "--conf", "a.toml", "--json", "--fail-after", "0"])
    assert exit_.value.code == EXIT_USAGE
    out, err = capsys.readouterr()
    assert json.loads(out) == {
        "error": "argument --fail-after: expected a whole number of rounds >= 1, got '0'",
        "kind": "UsageError",
        "exit_code": EXIT_USAGE,
    }
    assert (
        err.splitlines()[-1]
        == "tiering status: error: argument --fail-after: expected a whole number of rounds >= 1, got '0'"
    )
