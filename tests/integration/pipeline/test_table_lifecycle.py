"""Tables dropped upstream mid-round, re-created under the same name, and failing for rounds on
end, as `tiering status` and the checkpoint's health file report them.

Real store process, local Spark, real Delta tables. The drop happens inside the round: after
the round's tables were prepared (snapshots acquired under the lease, files resolved), right
before the executors read the files, which is where a production drop hurts most.
"""

from __future__ import annotations

import json
import subprocess

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.support.config import make_config, write_conf
from tests.support.drivers import tiering_cli
from tests.support.oracle import TableOracle, assert_lake_equals, lake_rows
from tiering.cli import EXIT_OK, EXIT_TABLES_FAILING
from tiering.context import TermContext
from tiering.job import TieringJob
from tiering.round.health import read_health
from tiering.round.outcome import RoundOutcome
from tiering.round.table_states import FailureCause
from tiering.writers.round_writer import RoundWriter

pytestmark = pytest.mark.integration


def status(conf, *flags: str) -> subprocess.CompletedProcess:
    return tiering_cli("status", "--conf", str(conf), *flags)


def test_dropped_mid_round_fails_alone_is_released_reported_and_a_recreated_table_starts_over(
    spark, kv_store, zk_server, unique_job, lake_writer, tmp_path, monkeypatch
):
    client = kv_store.client()
    keep, gone, bad = (TableOracle(client, name, num_buckets=2) for name in ("keep", "gone", "bad"))
    for t in (keep, gone, bad):
        t.upsert(range(40))
        client.take_snapshots(t.name)
    # "bad" fails every round: an incompatible Delta table already sits where it would land.
    write_deltalake(str(tmp_path / "lake" / "bad"), pa.table({"id": pa.array(["x"]), "other": pa.array([1])}))
    config = make_config(tmp_path, kv_store.url, zk_server.hosts, job=unique_job, **{"lake.writer": lake_writer})
    conf = write_conf(
        tmp_path / "tiering.toml",
        job=unique_job,
        checkpoint=config.job.checkpoint,
        lake_root=config.lake.root,
        store_url=kv_store.url,
        zk_hosts=zk_server.hosts,
        lake={"writer": lake_writer},
    )

    def run(epoch: int, on_round=lambda outcome: None):
        return TieringJob(spark, TermContext.begin(config, epoch), on_round=on_round).run()

    assert set(run(1).failed_tables) == {"bad"}
    gone_before = lake_rows(tmp_path / "lake", "gone")
    gone_version = DeltaTable(str(tmp_path / "lake" / "gone")).version()

    # Round 2: "gone" has new changes (log splits), "fresh" is new (a snapshot split, leased);
    # both are dropped after the round was prepared, before its files are read.
    keep.upsert(range(40, 60))
    gone.upsert(range(40, 60))
    fresh = TableOracle(client, "fresh", num_buckets=2)
    fresh.upsert(range(30))
    client.take_snapshots("fresh")
    dropped_ids = {gone.info.table_id, fresh.info.table_id}
    write_files = RoundWriter.write_files

    def drop_then_write(self, tasks):
        for name in ("gone", "fresh"):
            if name in {t.name for t in client.list_tables()}:
                client.drop_table(name)
        return write_files(self, tasks)

    held_after_round: list[set[int]] = []

    def lease_holdings(outcome: RoundOutcome) -> None:
        lease = client.list_leases()
        held_after_round.append({ref.table_id for lease in lease for ref in lease.snapshots})

    monkeypatch.setattr(RoundWriter, "write_files", drop_then_write)
    result = run(2, lease_holdings)
    monkeypatch.undo()

    # "gone" fails reading its dropped log files; "fresh"'s snapshot files outlive the drop, so its
    # commit lands and its report finds the table gone: committed and dropped, never failed.
    assert set(result.failed_tables) == {"gone", "bad"}, result.failed_tables
    assert result.failed_tables["gone"].cause is FailureCause.DROPPED
    assert_lake_equals(tmp_path / "lake", keep)
    assert not held_after_round[0] & dropped_ids, "the dropped tables' snapshots were released in the round"
    assert client.list_leases() == [], "a clean stop leaves no lease"
    assert lake_rows(tmp_path / "lake", "gone") == gone_before, "the lake table of a dropped table is kept"
    assert DeltaTable(str(tmp_path / "lake" / "gone")).version() == gone_version

    health = read_health(config.job.checkpoint)
    assert health["gone"].dropped and health["fresh"].dropped and not health["keep"].dropped
    failures = health["bad"].consecutive_failures  # availableNow re-plans a failed table a few rounds
    assert failures >= 2 and health["keep"].consecutive_failures == 0
    assert "table 'bad'" in health["bad"].last_failure

    report = status(conf, "--json", "--fail-after", str(failures))
    assert report.returncode == EXIT_TABLES_FAILING, report.stderr
    assert f"1 table(s) failed {failures} or more rounds in a row: bad" in report.stderr
    tables = {t["table"]: t for t in json.loads(report.stdout)["tables"]}
    assert {t: tables[t]["state"] for t in tables} == {
        "keep": "ok",
        "bad": "failing",
        "gone": "dropped",
        "fresh": "dropped",
    }
    assert (tables["gone"]["table_id"], tables["gone"]["lake_version"]) == (gone.info.table_id, gone_version)
    assert tables["bad"]["consecutive_failures"] == failures and "partitioned by" in tables["bad"]["last_failure"]
    assert (tables["bad"]["last_failure_cause"], tables["bad"]["last_failure_state"]) == ("schema", "acquired")
    assert (health["gone"].last_failure_cause, health["fresh"].last_failure_cause) == ("dropped", None)
    assert health["fresh"].last_commit_version == 0, "fresh's landed commit is recorded, not a failure"
    assert (tables["keep"]["lag"], tables["keep"]["freshness_s"], tables["keep"]["lake_commit_ms"] > 0) == (
        0,
        0.0,
        True,
    )
    assert status(conf, "--json", "--fail-after", str(failures + 1)).returncode == EXIT_OK

    # The name comes back as a new table (new table_id): bootstrapped again, nothing of the old id.
    again = TableOracle(client, "gone", num_buckets=2, seed=1)
    again.upsert(range(100, 130))
    client.take_snapshots("gone")
    assert again.info.table_id not in dropped_ids
    assert set(run(3).failed_tables) == {"bad"}
    assert_lake_equals(tmp_path / "lake", again)
    health = read_health(config.job.checkpoint)
    assert (health["gone"].table_id, health["gone"].dropped, health["gone"].consecutive_failures) == (
        again.info.table_id,
        False,
        0,
    )
    now_failing = read_health(config.job.checkpoint)["bad"].consecutive_failures
    assert now_failing > failures, "a new run does not reset the streak"
    table_view = status(conf, "--fail-after", str(now_failing))
    assert table_view.returncode == EXIT_TABLES_FAILING
    assert f"bad: failing, {now_failing} round(s) in a row" in table_view.stdout
