"""The `tiering` command's contract with scripts: --help everywhere, exit codes, config errors.

A bad config must stop the command before anything is written: these runs point the
checkpoint and the lake at directories that must stay absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiering.cli import EXIT_OK, EXIT_USAGE, main

pytestmark = pytest.mark.unit

COMMANDS = [
    [],
    ["run"],
    ["demo"],
    ["status"],
    ["group"],
    ["maintain"],
    ["resync"],
    ["leases"],
    ["leases", "list"],
    ["leases", "drop"],
    ["zk"],
    ["kv-store"],
    ["kv-store", "serve"],
    ["init"],
    ["alert-rules"],
    ["submit"],
]


@pytest.fixture(autouse=True)
def no_tiering_env(monkeypatch):
    import os

    for name in [n for n in os.environ if n.startswith("TIERING_")]:
        monkeypatch.delenv(name)


def conf_text(tmp_path: Path, extra: str = "", url: str | None = "http://127.0.0.1:9") -> str:
    kvstore = f'[kvstore]\nurl = "{url}"\n' if url is not None else "[kvstore]\n"
    return (
        f'[job]\nname = "cli-test"\ncheckpoint = "{tmp_path / "ckpt"}"\n'
        + kvstore
        + f'[zookeeper]\nhosts = "127.0.0.1:9"\n[lake]\nroot = "{tmp_path / "lake"}"\n'
        + extra
    )


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "tiering")
def test_every_command_has_help_and_exits_zero(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("usage: tiering" + (" " + " ".join(command) if command else ""))


@pytest.mark.parametrize(
    "argv, complaint",
    [
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["status"], "the following arguments are required: --conf"),
        (["demo", "--tables", "three"], "argument --tables: invalid int value: 'three'"),
        (["leases"], "the following arguments are required: COMMAND"),
        (["resync", "--conf", "x.toml"], "the following arguments are required: TABLE"),
    ],
)
def test_bad_usage_exits_2_naming_the_problem(argv, complaint, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == EXIT_USAGE
    assert complaint in capsys.readouterr().err


def test_demo_refuses_a_non_positive_duration(capsys):
    assert main(["demo", "--duration", "0"]) == EXIT_USAGE
    assert "--duration must be > 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, url, named",
    [
        ("[lake2]\nroot = 'x'\n", "http://127.0.0.1:9", "lake2"),
        ("[trigger]\ninterval_s = 'five'\n", "http://127.0.0.1:9", "trigger.interval_s"),
        ("[trigger]\navailable_now = true\nintervall_s = 1\n", "http://127.0.0.1:9", "trigger.intervall_s"),
        ("", None, "kvstore.url"),
    ],
    ids=["unknown section", "wrong type", "unknown key", "missing store url"],
)
@pytest.mark.parametrize(
    "command", [["run"], ["status"], ["leases", "list"], ["leases", "drop"], ["resync", "orders"]], ids=" ".join
)
def test_bad_config_exits_2_naming_the_key_and_writes_nothing(tmp_path, capsys, command, extra, url, named):
    conf = tmp_path / "tiering.toml"
    conf.write_text(conf_text(tmp_path, extra, url))

    assert main([*command, "--conf", str(conf)]) == EXIT_USAGE

    err = capsys.readouterr().err
    assert err.startswith("tiering: invalid configuration:")
    assert named in err
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "lake").exists()


def test_group_of_a_job_in_no_group_exits_2_as_json_too(tmp_path, capsys):
    conf = tmp_path / "tiering.toml"
    conf.write_text(conf_text(tmp_path))

    assert main(["group", "--conf", str(conf), "--json"]) == EXIT_USAGE

    captured = capsys.readouterr()
    assert "job 'cli-test' is in no tiering group" in captured.err
    assert json.loads(captured.out)["kind"] == "UsageError"


def test_a_missing_config_file_is_a_config_error(tmp_path, capsys):
    assert main(["run", "--conf", str(tmp_path / "nope.toml")]) == EXIT_USAGE
    assert "nope.toml: cannot read config file" in capsys.readouterr().err


def test_an_environment_typo_is_a_config_error(tmp_path, capsys, monkeypatch):
    conf = tmp_path / "tiering.toml"
    conf.write_text(conf_text(tmp_path))
    monkeypatch.setenv("TIERING_TRIGER_INTERVAL_S", "3")

    assert main(["status", "--conf", str(conf)]) == EXIT_USAGE
    assert "TIERING_TRIGER_INTERVAL_S" in capsys.readouterr().err
