"""``tiering check`` without services: a verdict for every dependency even when the first fails,
short reasons, and nothing left behind in the lake or the checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.config import make_config, write_conf
from tiering.cli import EXIT_FAILURE, main
from tiering.ops.preflight import CHECKS, Verdict, preflight
from tiering.ports import free_port

pytestmark = pytest.mark.unit


@pytest.fixture
def nothing_running(tmp_path: Path):
    return make_config(tmp_path, f"http://127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}")


def by_name(verdicts):
    return {v.name: v for v in verdicts}


def test_every_dependency_gets_a_verdict_in_order(nothing_running, tmp_path):
    verdicts = preflight(nothing_running, timeout_s=1.0)

    assert [v.name for v in verdicts] == list(CHECKS)
    found = by_name(verdicts)
    assert not found["zookeeper"].ok and "cannot connect to ZooKeeper" in found["zookeeper"].detail
    assert not found["kvstore"].ok
    assert found["kvstore"].detail.endswith("unreachable: ConnectionError: [Errno 111] Connection refused"), (
        "the reason, not urllib3's repr"
    )
    assert found["lake"].ok and "not created yet" in found["lake"].detail
    assert found["checkpoint"].ok and "not created yet" in found["checkpoint"].detail
    assert not (tmp_path / "lake").exists() and not (tmp_path / "ckpt").exists(), "a check creates nothing"


def test_an_existing_lake_root_takes_the_two_commit_probe_and_keeps_nothing(nothing_running, tmp_path):
    (tmp_path / "lake").mkdir()

    lake = by_name(preflight(nothing_running, timeout_s=1.0))["lake"]

    assert lake.ok and "second commit of one Delta version is refused" in lake.detail
    assert list((tmp_path / "lake").iterdir()) == [], "the probe table is removed"


def test_a_lake_root_that_is_a_file_fails(nothing_running, tmp_path):
    (tmp_path / "lake").write_text("not a directory")

    lake = by_name(preflight(nothing_running, timeout_s=1.0))["lake"]

    assert not lake.ok and "is a file, not a directory" in lake.detail


def test_a_damaged_checkpoint_fails_naming_the_path(nothing_running, tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "offsets").write_text("")

    checkpoint = by_name(preflight(nothing_running, timeout_s=1.0))["checkpoint"]

    assert not checkpoint.ok and str(tmp_path / "ckpt" / "offsets") in checkpoint.detail


def test_the_command_prints_each_verdict_and_exits_1_naming_the_first_failure(nothing_running, tmp_path, capsys):
    conf = write_conf(
        tmp_path / "tiering.toml",
        job=nothing_running.job.name,
        store_url=nothing_running.kvstore.url,
        zk_hosts=nothing_running.zookeeper.hosts,
    )

    assert main(["check", "--conf", str(conf), "--timeout", "1"]) == EXIT_FAILURE
    out, err = capsys.readouterr()
    assert [line.split()[:2] for line in out.splitlines()] == [
        ["FAILED", "zookeeper"],
        ["FAILED", "kvstore"],
        ["ok", "lake"],
        ["ok", "checkpoint"],
    ]
    assert err.startswith("tiering: check failed: zookeeper: cannot connect to ZooKeeper")

    assert main(["check", "--conf", str(conf), "--timeout", "1", "--json"]) == EXIT_FAILURE
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert [(c["name"], c["ok"]) for c in report["checks"]] == [
        ("zookeeper", False),
        ("kvstore", False),
        ("lake", True),
        ("checkpoint", True),
    ]


def test_a_warning_verdict_passes_and_says_so():
    """A Fluss server without the lease API: the run goes on, the line says WARN."""
    verdict = Verdict("kvstore", True, "snapshot lease API: none", warning=True)

    assert verdict.line().split()[:2] == ["WARN", "kvstore"]
    assert verdict.as_dict() == {"name": "kvstore", "ok": True, "detail": "snapshot lease API: none", "warning": True}
