"""Each store behind the seam as a contract test drives it: the seam's objects, and the store's own
write API (the seam reads; writing is each store's own business).

``ReferenceSide`` writes through the reference store's client and has it snapshot on demand;
``FlussSide`` writes through pyfluss and waits for Fluss's periodic snapshots (every 0.5 s in the
fixture's cluster) to cover the log. Both keep 2 snapshots per bucket.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow as pa

from tests.support.fluss import client_jar, connect
from tests.support.waiting import wait_until
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.contract import PlanningStore, SnapshotRef
from tiering.kvstore.models import TableSpec
from tiering.kvstore.reference import ReferenceStore

COLUMNS = (("id", "bigint", pa.int64()), ("note", "string", pa.string()), ("amount", "double", pa.float64()))
#: Fluss snapshots a changed bucket every 0.5 s (tests/fixtures/fluss.py): many of them on a busy machine
SNAPSHOT_WAIT = {"timeout_s": 90.0, "interval_s": 0.25}


class ReferenceSide:
    name = "reference"

    def __init__(self, client: KvStoreClient) -> None:
        self.client = client
        self.store: PlanningStore = ReferenceStore(client)
        self.reader = self.store.bucket_reader()

    def create_table(self, table: str, buckets: int) -> None:
        schema = [{"name": name, "type": spark} for name, spark, _ in COLUMNS]
        self.client.create_table(TableSpec(name=table, schema=schema, primary_key=["id"], num_buckets=buckets))

    def drop_table(self, table: str) -> None:
        self.client.drop_table(table)

    def write(self, table: str, upserts: list[dict[str, Any]], deletes: tuple[int, ...] = ()) -> None:
        if upserts:
            self.client.upsert(table, upserts)
        if deletes:
            self.client.delete(table, [{"id": key} for key in deletes])

    def fresh_snapshots(self, table: str) -> dict[int, SnapshotRef]:
        self.client.take_snapshots(table)
        return self.store.latest_snapshots(table)

    def close(self) -> None:
        pass


class FlussSide:
    name = "fluss"

    def __init__(self, cluster: Any, database: str) -> None:
        from tiering.fluss.store import FlussStore

        self.cluster = cluster
        self.database = database
        self.store = FlussStore(cluster.bootstrap_servers, database, client_jar())
        self.reader = self.store.bucket_reader()

    def _admin_call(self, call: Any) -> Any:
        async def scenario():
            connection = await connect(self.cluster)
            try:
                return await call(connection)
            finally:
                await connection.close()

        return asyncio.run(scenario())

    def create_table(self, table: str, buckets: int) -> None:
        import fluss

        schema = fluss.Schema(pa.schema([(name, arrow) for name, _, arrow in COLUMNS]), primary_keys=["id"])

        async def create(connection):
            admin = connection.get_admin()
            await admin.create_database(self.database, ignore_if_exists=True)
            await admin.create_table(
                fluss.TablePath(self.database, table), fluss.TableDescriptor(schema, bucket_count=buckets)
            )

        self._admin_call(create)

    def drop_table(self, table: str) -> None:
        import fluss

        self._admin_call(lambda connection: connection.get_admin().drop_table(fluss.TablePath(self.database, table)))

    def write(self, table: str, upserts: list[dict[str, Any]], deletes: tuple[int, ...] = ()) -> None:
        import fluss

        async def write(connection):
            writer = (await connection.get_table(fluss.TablePath(self.database, table))).new_upsert().create_writer()
            for row in upserts:
                writer.upsert(row)
            for key in deletes:
                writer.delete({"id": key})
            await writer.flush()

        self._admin_call(write)

    def fresh_snapshots(self, table: str) -> dict[int, SnapshotRef]:
        """Once every bucket with changes has a snapshot covering its log end."""
        ends = self.store.log_ends([table])[table].buckets

        def covering():
            latest = self.store.latest_snapshots(table)
            written = [b for b, log in ends.items() if log.end]
            return latest if all(b in latest and latest[b].log_offset >= ends[b].end for b in written) else None

        return wait_until(covering, f"snapshots of {table} covering {ends}", **SNAPSHOT_WAIT)

    def close(self) -> None:
        self.reader.close()
        self.store.close()
