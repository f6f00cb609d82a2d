"""The lake as the source, the writers, ``status`` and the demo read it: tables and positions.

Failure modes this guards against: a position read for the wrong incarnation of a table (a
re-created table has a new ``table_id``; the old one's offsets must never be continued), and
a round that reads a table's state several times and sees it change in between (one
:class:`LakeTable` is loaded per table per round and handed to whoever needs it).

Spark-free on purpose: the source's planning process and ``tiering status`` read the lake
without a JVM (delta-rs).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from deltalake import DeltaTable, QueryBuilder
from deltalake.exceptions import DeltaError, TableNotFoundError

from tiering.conf.defaults import DEFAULT_COMPRESSION
from tiering.delta_log.commits import LakeCommitInfo, newest_commit
from tiering.delta_log.foreign import ForeignCommit, first_foreign_change
from tiering.delta_log.layout import BUCKET_COLUMN, DELETION_VECTORS_FEATURE, app_id, lake_directory, txn_version
from tiering.enumerator.positions import LakePosition
from tiering.errors import LakeReadError, one_line
from tiering.objectstore.object_store import ObjectStore

if TYPE_CHECKING:  # a process that never reads a whole table, or a config, does not pay for importing it
    import pyarrow.dataset as ds

    from tiering.conf.model import LakeConfig

__all__ = [
    "Lake",
    "LakeFile",
    "LakeTable",
    "LakeTables",
    "has_deletion_vectors",
    "open_table",
    "table_dataset",
    "table_rows",
]


def has_deletion_vectors(dt: DeltaTable) -> bool:
    """Whether the table's files may carry deletion vectors (its protocol has the reader feature):
    the rows of such a file are its Parquet's minus the vector's, so no rewrite may read the
    Parquet alone."""
    return DELETION_VECTORS_FEATURE in (dt.protocol().reader_features or ())


def open_table(uri: str, storage_options: Mapping[str, str] | None = None) -> DeltaTable | None:
    """The Delta table at ``uri`` as it is now; None when none exists there yet."""
    try:
        return DeltaTable(uri, storage_options=dict(storage_options) if storage_options else None)
    except TableNotFoundError:
        return None


@dataclass(frozen=True)
class LakeFile:
    """One data file of a bucket, as the table's add action describes it.

    ``low``/``high`` bound the file's first primary-key column (its statistics' min and max):
    a key whose first column lies outside them is not in the file. None when the statistics
    do not say (a column of another type than an integer, a writer that wrote none): the file
    could hold any key. A composite key's first column alone is still a sound bound.
    """

    uri: str  #: absolute, to read it
    path: str  #: as the log names it, to remove it
    size: int
    rows: int
    low: int | None = None
    high: int | None = None

    @property
    def ranged(self) -> bool:
        return self.low is not None and self.high is not None


@dataclass(frozen=True)
class LakeTable:
    """One Delta table loaded at one version, with its newest tiering commit (None if none) and
    the first commit after it that another writer made and that changed rows (None if none:
    :mod:`tiering.delta_log.foreign`)."""

    name: str
    path: str
    dt: DeltaTable
    info: LakeCommitInfo | None
    store: ObjectStore
    foreign: ForeignCommit | None = None
    #: transaction versions known without reading the log, by (app id, Delta version): the
    #: process's own round commit carried them (:meth:`LakeTables.landed`). A version's txns never
    #: change, and delta-rs reads one by replaying every commit since the last checkpoint (up to
    #: ``maintenance.checkpoint_interval`` GETs on S3)
    known_txns: Mapping[tuple[str, int], int | None] = field(default_factory=dict, compare=False, repr=False)

    @property
    def version(self) -> int:
        return self.dt.version()

    def position(self, table_id: int | None = None) -> LakePosition | None:
        """The offsets the lake reached; with ``table_id``, only if reached for that id."""
        if self.info is None or (table_id is not None and not self.info.position.belongs_to(table_id)):
            return None
        return self.info.position

    def transaction_version(self, app: str) -> int | None:
        """``app``'s transaction version at the handle's version: known, or read from the log."""
        key = (app, self.dt.version())
        return self.known_txns[key] if key in self.known_txns else self.dt.transaction_version(app)

    def files_by_bucket(
        self, key: str | None = None, buckets: Collection[int] | None = None
    ) -> dict[int, list[LakeFile]]:
        """The table's current data files per ``__bucket``, with the bounds of column ``key``
        (the first primary-key column) where the statistics hold exact integer ones.

        ``buckets``: only those buckets' files (None: every bucket). A round reads the buckets it
        writes; a Python object per file of every other bucket is a cost per round that grows
        with the table, not with the round, so the add actions are filtered in Arrow first.
        """
        actions = pa.table(self.dt.get_add_actions(flatten=False))
        bucket_of = pc.struct_field(actions.column("partition"), BUCKET_COLUMN)
        if buckets is not None:
            wanted = pa.array(sorted(buckets), pa.int64()).cast(bucket_of.type)
            keep = pc.is_in(bucket_of, value_set=wanted)
            actions, bucket_of = actions.filter(keep), bucket_of.filter(keep)
        lows, highs = _bounds(actions, "min", key), _bounds(actions, "max", key)
        out: dict[int, list[LakeFile]] = {}
        rows = zip(
            actions.column("path").to_pylist(),
            actions.column("size_bytes").to_pylist(),
            actions.column("num_records").to_pylist(),
            bucket_of.to_pylist(),
            lows,
            highs,
            strict=False,
        )
        for rel, size, records, bucket, low, high in rows:
            uri = rel if rel.startswith("/") or "://" in rel else f"{self.path}/{rel}"
            out.setdefault(int(bucket), []).append(LakeFile(uri, rel, int(size), int(records or 0), low, high))
        return out

    def to_arrow(self) -> pa.Table:
        """Every row of the loaded version (:func:`table_rows`)."""
        return table_rows(self.dt, self.store, self.path)


def table_rows(dt: DeltaTable, store: ObjectStore, path: str) -> pa.Table:
    """Every row of the loaded version of ``dt`` (at ``path`` in ``store``), read through the
    store's pyarrow filesystem, local or S3: delta-rs's default hands Arrow's threads Python file
    objects, and a process that ends soon after such a read aborts at exit now and then
    (delta-rs#2184), which would turn a verified run into a failed one. A table with deletion
    vectors is scanned by delta-rs's DataFusion, which applies them (its pyarrow dataset refuses
    such a table)."""
    if has_deletion_vectors(dt):
        schema = pa.schema(dt.schema().to_arrow())  # DataFusion reads strings as views
        rows = pa.table(QueryBuilder().register("t", dt).execute("SELECT * FROM t").read_all())
        return rows.select(schema.names).cast(schema)
    return table_dataset(dt, store, path).to_table()


def table_dataset(dt: DeltaTable, store: ObjectStore, path: str) -> ds.Dataset:
    """The loaded version of ``dt`` (at ``path`` in ``store``, without deletion vectors) as a
    pyarrow dataset over the store's own filesystem (:func:`table_rows` says why not delta-rs's)."""
    return dt.to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(store.path(path), store.filesystem))


def _bounds(actions: pa.Table, stat: str, key: str | None) -> list[int | None]:
    """Per file, the ``stat`` ("min" or "max") of integer column ``key``; None where unknown."""
    if key is None or stat not in actions.column_names:
        return [None] * actions.num_rows
    column = actions.column(stat)
    if not pa.types.is_struct(column.type) or column.type.get_field_index(key) < 0:
        return [None] * actions.num_rows
    if not column.num_chunks:
        return []
    struct = column.combine_chunks()
    values = struct.flatten()[struct.type.get_field_index(key)]  # flatten: a file without stats reads null
    return values.to_pylist() if pa.types.is_integer(values.type) else [None] * actions.num_rows


@dataclass(frozen=True)
class Lake:
    """The lake in ``store``: table ``t`` is the Delta table at ``<root>/t``; the data files the
    job writes into it are Parquet compressed with ``compression`` (``lake.compression``: every
    writer of the lake's files, rounds and maintenance alike, reads it here)."""

    store: ObjectStore
    compression: str = DEFAULT_COMPRESSION

    @classmethod
    def of(cls, config: LakeConfig) -> Lake:
        """The configured lake; an unusable root is a :class:`ConfigError` on ``lake.root`` here,
        when the job is wired, not mid-round."""
        return cls.at(config.root, {k: v.get_secret_value() for k, v in config.storage.items()}, config.compression)

    @classmethod
    def at(cls, root: str, storage: Mapping[str, str] | None = None, compression: str = DEFAULT_COMPRESSION) -> Lake:
        return cls(ObjectStore.of(root, storage), compression)

    @property
    def root(self) -> str:
        return self.store.root

    def path(self, table: str) -> str:
        return self.store.uri(lake_directory(table))

    def load(self, table: str) -> LakeTable | None:
        """The table as it is now; None when no Delta table exists there yet."""
        path = self.path(table)
        dt = open_table(path, self.store.delta_options())
        if dt is None:
            return None
        info = newest_commit(dt, table)
        foreign = (
            first_foreign_change(self.store, path, range(info.delta_version + 1, dt.version() + 1)) if info else None
        )
        return LakeTable(table, path, dt, info, self.store, foreign)

    def position(self, table: str, table_id: int) -> LakePosition | None:
        """Where the lake is for ``table`` as incarnation ``table_id``; None when nothing of that
        id was tiered (never tiered, or the table was re-created since)."""
        loaded = self.load(table)
        return loaded.position(table_id) if loaded is not None else None


class LakeTables:
    """The lake's tables as this long-lived process last saw them, brought up to date each time.

    Failure mode: a cost per round that grows with the table's history. Opening a Delta table
    reads its log from the last checkpoint, and finding the newest tiering commit reads commit
    infos; the planner and the committer do both for every table every round. Here a table is
    opened once, then only its new log entries are read (``update_incremental``) and only the
    commits newer than the ones already looked at are searched for a tiering entry, and those
    newer than the newest tiering entry for another writer's change of data. The
    returned :class:`LakeTable` shares the process's ``DeltaTable``: one caller at a time per
    table (the planner and the committer each own their :class:`LakeTables`).
    """

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self._seen: dict[str, tuple[LakeTable, int]] = {}  # table -> (view, the version its info covers)

    def load(self, table: str) -> LakeTable | None:
        """The table as it is now; None when no Delta table exists there yet;
        :class:`LakeReadError` naming the table and its location when the object store fails the read."""
        try:
            return self._load(table)
        except (OSError, DeltaError) as e:
            raise LakeReadError(
                f"table {table!r}: its Delta log at {self.lake.path(table)} cannot be read: "
                f"{type(e).__name__}: {one_line(e)}",
                table=table,
            ) from e

    def _load(self, table: str) -> LakeTable | None:
        seen = self._seen.get(table)
        if seen is None:
            return self._first_load(table)
        view, covered = seen
        try:
            view.dt.update_incremental()
        except (TableNotFoundError, OSError):  # removed or replaced underneath: start over
            del self._seen[table]
            return self._first_load(table)
        version = view.dt.version()
        if version == covered:
            return view
        newer = newest_commit(view.dt, table, newer_than=covered)
        if newer is not None:  # a round commit: only what came after it can be another writer's
            foreign = first_foreign_change(view.store, view.path, range(newer.delta_version + 1, version + 1))
            view = LakeTable(table, view.path, view.dt, newer, view.store, foreign)
        elif view.info is not None and view.foreign is None:
            foreign = first_foreign_change(view.store, view.path, range(covered + 1, version + 1))
            view = replace(view, foreign=foreign)
        self._seen[table] = (view, version)
        return view

    def landed(self, table: str, info: LakeCommitInfo) -> None:
        """``info`` is this process's own round commit: when it is the newest version of
        ``table``'s loaded handle, or the one right after it (the commit was read back
        without updating the handle), the next :meth:`load` need not read it back from the
        history (a LIST and a GET on S3), nor the next round's replay check replay the log
        for the txn it wrote (the commit carried it). Nothing changes when the handle is at
        another version (a commit landed between, or a writer that commits through another
        handle) or the table is not held."""
        seen = self._seen.get(table)
        if seen is not None and seen[0].dt.version() in (info.delta_version, info.delta_version - 1):
            known = {(app_id(info.job, table), info.delta_version): txn_version(info.epoch, info.round_id)}
            self._seen[table] = (replace(seen[0], info=info, foreign=None, known_txns=known), info.delta_version)

    def _first_load(self, table: str) -> LakeTable | None:
        view = self.lake.load(table)
        if view is not None:
            self._seen[table] = (view, view.version)
        return view
