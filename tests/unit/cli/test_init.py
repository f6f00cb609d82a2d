"""What the package carries for a user without the checkout: the example config (`tiering init`),
the alert rules (`tiering alert-rules`), the Airflow DAG factory (`tiering airflow-dag`), the job
entry (`tiering submit`), and the extras a command names when it needs one."""

from __future__ import annotations

import ast
import re
import shlex
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import tiering
from tiering import extras, submit
from tiering.cli import EXIT_OK, EXIT_USAGE, main
from tiering.conf.loader import load_config

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]


def test_init_writes_the_example_config_which_loads(tmp_path, monkeypatch, capsys):
    """The written file is a valid config as it is: only the addresses are the user's to change."""
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == EXIT_OK
    written = tmp_path / "tiering.toml"
    assert "tiering check --conf tiering.toml" in capsys.readouterr().out
    assert written.read_text() == (REPO / "tiering" / "resources" / "tiering.toml").read_text()
    config = load_config(written, {})
    assert config.job.name == "kv-tiering-demo"


def test_the_checkout_s_example_is_the_package_s(tmp_path):
    """One source: conf/tiering.toml and the rules under deploy/ are links to the package data."""
    assert (REPO / "conf" / "tiering.toml").resolve() == REPO / "tiering" / "resources" / "tiering.toml"
    rules = REPO / "deploy" / "monitoring" / "rules" / "kv-tiering.yml"
    assert rules.resolve() == REPO / "tiering" / "resources" / "kv-tiering.yml"
    dag = REPO / "jobs" / "airflow" / "kv_tiering_dag.py"
    assert dag.resolve() == REPO / "tiering" / "resources" / "kv_tiering_dag.py"
    assert (REPO / "conf" / "log4j2.properties").resolve() == REPO / "tiering" / "resources" / "log4j2.properties"


def test_airflow_dag_writes_the_factory_set_to_this_install(tmp_path, capsys):
    """The written DAG names this install's command and job entry: an Airflow worker without the
    checkout finds both; the rest of the file is the package's."""
    target = tmp_path / "kv_tiering_dag.py"
    assert main(["airflow-dag", str(target)]) == EXIT_OK
    assert "KV_TIERING_CONF_DIR" in capsys.readouterr().out
    written = target.read_text()
    install_line = next(line for line in written.splitlines() if line.startswith("INSTALL = "))
    install = ast.literal_eval(install_line.removeprefix("INSTALL = "))
    assert install["application"] == str(submit.ENTRY) and submit.ENTRY.is_file()
    assert install["cli"] == str(Path(sys.executable).with_name("tiering"))
    shipped = (REPO / "tiering" / "resources" / "kv_tiering_dag.py").read_text()
    assert written.replace(install_line, "") == re.sub(r"^INSTALL = .*$", "", shipped, count=1, flags=re.M)
    compile(written, str(target), "exec")

    assert main(["airflow-dag", str(target)]) == EXIT_USAGE, "an existing DAG file is kept"
    assert target.read_text() == written


def test_init_keeps_an_existing_file_unless_forced(tmp_path, capsys):
    target = tmp_path / "mine.toml"
    target.write_text("# mine\n")
    assert main(["init", str(target)]) == EXIT_USAGE
    assert f"tiering: {target} exists; --force overwrites it" in capsys.readouterr().err
    assert target.read_text() == "# mine\n"
    assert main(["init", str(target), "--force"]) == EXIT_OK
    assert tomllib.loads(target.read_text())["job"]["name"] == "kv-tiering-demo"


def test_init_to_stdout(capsys):
    assert main(["init", "-"]) == EXIT_OK
    assert tomllib.loads(capsys.readouterr().out)["job"]["name"] == "kv-tiering-demo"


def test_alert_rules_prints_the_prometheus_rules(capsys):
    assert main(["alert-rules"]) == EXIT_OK
    rules = yaml.safe_load(capsys.readouterr().out)
    alerts = [rule["alert"] for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
    assert "KvTieringDriverDown" in alerts


def test_submit_builds_the_spark_submit_command_of_this_install(capsys, monkeypatch):
    """spark-submit's options before the entry, tiering run's after it; --set and --log-level
    from before or after the subcommand reach the job."""
    monkeypatch.delenv("SPARK_HOME", raising=False)
    argv = [
        "--set",
        "trigger.interval_s=1",
        "submit",
        "--conf",
        "t.toml",
        "--available-now",
        "--metrics-port",
        "9108",
        "--log-level",
        "WARNING",
        "--dry-run",
        "--",
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
    ]
    assert main(argv) == EXIT_OK
    command = shlex.split(capsys.readouterr().out)
    assert command == [
        str(Path(sys.executable).with_name("spark-submit")),
        "--driver-java-options",
        f"-Dlog4j2.configurationFile={submit.LOG4J2}",
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        str(submit.ENTRY),
        "--conf",
        "t.toml",
        "--set=trigger.interval_s=1",
        "--log-level",
        "WARNING",
        "--available-now",
        "--metrics-port",
        "9108",
    ]
    assert submit.ENTRY.is_file() and submit.ENTRY.parent.name == "jobs"


def test_submit_s_driver_logs_warnings_with_the_package_s_log4j2_unless_told_otherwise(capsys):
    """spark-submit's default for an application is Spark's INFO (hundreds of lines a run); the
    file ships in the package, so an install without the checkout has it too."""
    assert submit.LOG4J2.is_file() and submit.LOG4J2.is_relative_to(Path(submit.__file__).parent)
    assert "rootLogger.level = warn" in submit.LOG4J2.read_text()
    for own in (
        ["--driver-java-options", "-Dx=1"],
        ["--conf", "spark.driver.extraJavaOptions=-Dx=1"],
        ["--deploy-mode", "cluster"],  # the driver runs elsewhere, where this path may not exist
    ):
        assert main(["submit", "--conf", "t.toml", "--dry-run", "--", *own]) == EXIT_OK
        assert "log4j2.configurationFile" not in capsys.readouterr().out, own


def test_submit_takes_spark_home_s_spark_submit_and_an_explicit_one(capsys, monkeypatch):
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert main(["submit", "--conf", "t.toml", "--dry-run"]) == EXIT_OK
    assert shlex.split(capsys.readouterr().out)[0] == "/opt/spark/bin/spark-submit"
    assert main(["submit", "--conf", "t.toml", "--dry-run", "--spark-submit", "/x/spark-submit"]) == EXIT_OK
    assert shlex.split(capsys.readouterr().out)[0] == "/x/spark-submit"


def test_submit_refuses_spark_options_not_after_the_separator(capsys):
    """A stray word would become spark-submit's application, in front of the entry."""
    assert main(["submit", "--conf", "t.toml", "app.py"]) == EXIT_USAGE
    assert "spark-submit options go after '--', got 'app.py'" in capsys.readouterr().err


def test_submit_returns_spark_submit_s_exit_code(tmp_path, capsys):
    fake = tmp_path / "spark-submit"
    fake.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\nexit 2\n')
    fake.chmod(0o755)
    assert main(["submit", "--conf", "t.toml", "--spark-submit", str(fake), "--", "--master", "local"]) == 2
    assert (tmp_path / "args").read_text().split() == [
        "--driver-java-options",
        f"-Dlog4j2.configurationFile={submit.LOG4J2}",
        "--master",
        "local",
        str(submit.ENTRY),
        "--conf",
        "t.toml",
        "--log-level",
        "INFO",
    ]


def test_a_command_needing_a_missing_extra_names_it(monkeypatch, capsys):
    real = extras.importlib.util.find_spec
    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name: None if name == "uvicorn" else real(name))
    assert main(["demo"]) == EXIT_USAGE
    assert main(["kv-store", "serve", "--data-dir", "/nonexistent", "--port", "1"]) == EXIT_USAGE
    err = capsys.readouterr().err.splitlines()
    wheel = f"kv_tiering-{tiering.__version__}-py3-none-any.whl"
    assert err == [
        "tiering: tiering demo needs the 'demo' extra (missing: uvicorn): pip install '.[demo]' in the checkout, "
        f"or pip install '{wheel}[demo]' beside the wheel (kv-tiering is on no package index)",
        "tiering: the reference KV store needs the 'store' extra (missing: uvicorn): pip install '.[store]' in the "
        f"checkout, or pip install '{wheel}[store]' beside the wheel (kv-tiering is on no package index)",
    ]
