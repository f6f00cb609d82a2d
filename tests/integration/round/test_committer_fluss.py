"""The round committer over Apache Fluss (:class:`~tiering.fluss.store.FlussStore` behind the store
seam): real Fluss, real Spark, a real Delta lake. Fluss has no files a round may copy, so every
bucket is read through the store's reader, where it is written: a bootstrap (each bucket's KV
snapshot and the changelog after it, updates and deletes included) on the executors, then a
changelog round by the driver. Fluss takes no lake report: the round sends none and asks no store
which job holds a table. After each round the lake holds, row by row, what the oracle finds (every
bucket's changelog replayed by Fluss's Java client, tests/support/fluss_rows.py), and its positions
are the log ends the round was planned up to."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.fluss import client_jar
from tests.support.fluss_rows import FlussRows
from tests.support.lake import delta_rows
from tests.support.store_sides import SNAPSHOT_WAIT
from tests.support.waiting import wait_until
from tiering.conf.loader import load_config
from tiering.context import TermContext
from tiering.enumerator.splits import LogSplit, SnapshotSplit, Split
from tiering.lease.holds import SnapshotHolds
from tiering.lease.job_lease import JobLease
from tiering.round.committer import RoundCommitter
from tiering.round.outcome import RoundOutcome
from tiering.state.offset import TieringOffset
from tiering.writers.choice import make_round_writer

pytestmark = pytest.mark.integration

fluss = pytest.importorskip("fluss")

from tiering.fluss.store import FlussStore  # noqa: E402  (pyfluss present)

EPOCH = 3
LEASE = "fluss-round-test-0123456789abcdef"
COLUMNS = {"id": "BIGINT NOT NULL", "name": "STRING", "n": "INT"}


@pytest.fixture
def database() -> str:
    return f"round_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def rows(fluss_cluster, database) -> Iterator[FlussRows]:
    made = FlussRows(fluss_cluster.bootstrap_servers, database)
    yield made
    made.close()


@pytest.fixture
def store(fluss_cluster, database, rows) -> Iterator[FlussStore]:
    made = FlussStore(fluss_cluster.bootstrap_servers, database, client_jar())
    yield made
    made.close()


class Rounds:
    """A term's committer over ``store`` (the delta-rs writer), fed one batch at a time through the
    checkpoint's offsets log, as Spark hands it a batch."""

    def __init__(self, spark, store: FlussStore, tmp_path) -> None:
        self.checkpoint = tmp_path / "checkpoint"
        config = load_config(
            None,
            env={},
            overrides={
                "job.name": "fluss-round",
                "job.checkpoint": str(self.checkpoint),
                "kvstore.kind": "fluss",
                "kvstore.bootstrap_servers": store.bootstrap_servers,
                "kvstore.database": store.database,
                "zookeeper.hosts": "127.0.0.1:9",
                "lake.root": str(tmp_path / "lake"),
            },
        )
        self.context = TermContext(config=config, epoch=EPOCH, lease_id=LEASE)
        # The test holds the round's snapshots itself (below): the lease's own calls are another test's.
        lease = JobLease(store, LEASE, EPOCH, 60_000, enabled=False)
        self.outcomes: list[RoundOutcome] = []
        writer = make_round_writer(spark, config.lake, self.context.writer_id, self.context.lake)
        self.committer = RoundCommitter(
            writer, self.context, store, SnapshotHolds(lease), on_round=self.outcomes.append
        )

    def run(self, batch_id: int, splits: list[Split]) -> RoundOutcome:
        offset = TieringOffset(LEASE, EPOCH, batch_id + 1, tuple(splits))
        (self.checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
        (self.checkpoint / "offsets" / str(batch_id)).write_text('v1\n{"batchWatermarkMs":0}\n' + offset.to_json())
        self.committer(None, batch_id)
        return self.outcomes[-1]

    def lake_rows(self) -> list[dict]:
        table = delta_rows(self.context.lake.path("orders")).select(list(COLUMNS))
        return sorted(table.to_pylist(), key=lambda r: r["id"])


def log_ends(store: FlussStore) -> dict[int, int]:
    return {b: log.end for b, log in store.log_ends(["orders"])["orders"].buckets.items()}


def test_a_round_over_fluss_reads_through_the_reader_and_the_lake_is_the_oracle_row_by_row(
    spark, rows, store, tmp_path
):
    table_id = rows.create_table("orders", COLUMNS, ["id"], buckets=2)
    rows.upsert("orders", [{"id": k, "name": f"v{k}", "n": k} for k in range(60)])
    covered = log_ends(store)
    snapshots = wait_until(
        lambda: (
            (s := store.latest_snapshots("orders"))
            and all(s.get(b) and s[b].log_offset >= end for b, end in covered.items())
            and s
        ),
        f"snapshots of both buckets covering {covered}",
        **SNAPSHOT_WAIT,
    )
    store.create(LEASE, EPOCH, 120_000)
    assert store.acquire(LEASE, EPOCH, 120_000, list(snapshots.values())) == []
    rows.upsert("orders", [{"id": k, "name": f"u{k}", "n": -k} for k in range(0, 60, 4)])  # +U (and -U)
    rows.upsert("orders", [{"id": k, "name": f"v{k}", "n": k} for k in range(60, 70)])
    rows.delete("orders", [{"id": k} for k in (1, 2, 3, 8, 61)])
    ends = log_ends(store)
    bootstrap: list[Split] = [
        SnapshotSplit("orders", b, table_id, ref.snapshot_id, ref.log_offset) for b, ref in snapshots.items()
    ]
    bootstrap += [LogSplit("orders", b, table_id, snapshots[b].log_offset, ends[b]) for b in ends]
    r = Rounds(spark, store, tmp_path)
    try:
        first = r.run(0, bootstrap)
        assert r.lake_rows() == rows.current_rows("orders")

        rows.upsert("orders", [{"id": k, "name": f"w{k}", "n": 0} for k in (0, 5, 9, 70)])
        rows.delete("orders", [{"id": k} for k in (4, 6, 62)])
        later = log_ends(store)
        second = r.run(1, [LogSplit("orders", b, table_id, ends[b], later[b]) for b in later])
        assert r.lake_rows() == rows.current_rows("orders")
    finally:
        store.drop(LEASE, EPOCH)

    assert (first.failed, second.failed, first.unreported, second.unreported) == ({}, {}, set(), set())
    one, two = first.committed["orders"], second.committed["orders"]
    assert (one.written_by, sorted(one.bootstrap_buckets)) == ("executors", [0, 1])
    assert (dict(one.positions), two.written_by, dict(two.positions)) == (ends, "driver", later)
    assert first.lag == second.lag == {"orders": 0}, "each round reached the log ends it was planned up to"
    assert len(r.lake_rows()) == 70 - 8 + 1
