"""What `tiering demo --store fluss` says before it starts anything, when the install cannot run it."""

from __future__ import annotations

from tiering import cli
from tiering.demo import fluss_run
from tiering.demo.fluss_run import missing_fluss


def test_without_the_fluss_jars_it_names_the_setup_command(tmp_path):
    assert missing_fluss(tmp_path) == f"no fluss-server jar in {tmp_path}: run scripts/setup_fluss.sh first"


def test_without_fluss_client_it_names_the_setup_command(tmp_path):
    (tmp_path / "fluss-server-0.9.1-incubating.jar").touch()
    assert missing_fluss(tmp_path) == f"no fluss-client jar in {tmp_path}: run scripts/setup_fluss.sh first"


def test_with_the_jars_and_pyfluss_nothing_is_missing(tmp_path):
    for jar in ("fluss-server", "fluss-client"):
        (tmp_path / f"{jar}-0.9.1-incubating.jar").touch()
    assert missing_fluss(tmp_path) is None


def test_the_command_without_the_jars_exits_2_in_one_line_and_starts_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fluss_run, "FLUSS_JARS", tmp_path)
    assert cli.main(["demo", "--store", "fluss"]) == cli.EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.err == (
        f"tiering: demo --store fluss: no fluss-server jar in {tmp_path}: run scripts/setup_fluss.sh first\n"
    )
    assert captured.out == ""
