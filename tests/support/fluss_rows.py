"""Writing to any Fluss table in a test, and the ORACLE of a primary-key table's current rows, both
through Fluss's Java client (fluss-client), never through the product's readers.

- :class:`FlussRows` creates, drops, re-creates and alters (adds a column to) tables of one
  database, upserts rows and deletes keys of any table, every type a primary-key table can hold;
- :meth:`FlussRows.current_rows` is the oracle: the table's rows as of each bucket's log end,
  replayed from the start of every bucket's changelog by the Java client's ``LogScanner`` (``+I``/
  ``+U`` upsert, ``-D`` deletes, ``-U`` is passed over), as dicts sorted by primary key with the
  values a Delta read gives (:func:`tests.support.lake.delta_rows`): ``Decimal``, ``bytes``,
  ``date``, a naive ``datetime`` for a TIMESTAMP, a UTC one for a TIMESTAMP_LTZ;
- :meth:`FlussRows.lookup` reads one key through the Java client's KV lookup, a second
  independent read the oracle's own tests check it against.

Why the Java client and not pyfluss: pyfluss 1.0 cannot write a TIMESTAMP or TIMESTAMP_LTZ before
1970 with a fraction of a second (it computes a negative nanosecond-of-millisecond and refuses the
row), and the product reads changelogs through pyfluss: an oracle sharing its reader would share its
bugs. Fluss 0.9.1 adds columns to a table (``Admin.alterTable`` with ``TableChange.addColumn``, at
the end, nullable); the rows written before read the new column as null.

The oracle fails loudly rather than guess: a changelog that no longer starts at offset 0 (trimmed by
retention) cannot be replayed, and a replay that does not reach a bucket's log end in time is an
error naming the bucket.
"""

from __future__ import annotations

import datetime as dt
import struct
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JError

from tests.support.fluss import client_jar
from tests.support.waiting import wait_until
from tiering.fluss.jvm import FlussJvm

Row = dict[str, Any]

_EPOCH_DAY = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICRO = dt.timedelta(microseconds=1)
#: how long a new table's buckets may take to be served, and how often to ask
_SERVED = {"timeout_s": 60.0, "interval_s": 0.1}
#: how long a replay may take to reach the log ends it was told of, and one poll's wait
_REPLAY_DEADLINE_S = 60.0
_POLL_S = 1


@dataclass(frozen=True)
class _Fields:
    """A row type's fields, asked of the JVM once per call, not once per row: every name, type,
    class and static method py4j is handed is a round trip of its own, more of them than a row's
    values take."""

    row_type: Any
    names: list[str]
    roots: list[str]
    types: list[Any]
    #: the ``DataType[]`` a ``CompactedRow`` is made with
    type_array: Any
    getters: list[Any]


class FlussRows:
    """Writes and the oracle for the tables of one Fluss ``database``, in a JVM with fluss-client
    (the active SparkContext's when it has the jar, else a gateway JVM of its own)."""

    def __init__(self, bootstrap_servers: str, database: str) -> None:
        self.database = database
        self.java = FlussJvm.open(bootstrap_servers, client_jar())
        self.jvm = self.java.jvm
        row = self.jvm.org.apache.fluss.row
        self._row_writer = row.compacted.CompactedRowWriter
        self._compacted_row = row.compacted.CompactedRow
        self._data_type = self.jvm.org.apache.fluss.types.DataType
        self._field_getters = row.InternalRow.createFieldGetters
        self._string = row.BinaryString.fromString
        self._decimal = row.Decimal.fromBigDecimal
        self._big_decimal = self.jvm.java.math.BigDecimal
        self._timestamp_ntz = row.TimestampNtz.fromMicros
        self._timestamp_ltz = row.TimestampLtz.fromEpochMicros
        self._future = self.jvm.java.util.concurrent.CompletableFuture
        #: tables this object created, each with its bucket count, until a use finds them served
        self._unserved: dict[str, int] = {}
        self._call(
            self.java.admin.createDatabase(database, self.jvm.org.apache.fluss.metadata.DatabaseDescriptor.EMPTY, True)
        )

    def close(self) -> None:
        self.java.close()

    def _call(self, future: Any) -> Any:
        """The future's value; its failure as an AssertionError with Fluss's own words."""
        value, failure = self.java.outcome(future)
        if failure is not None:
            raise AssertionError(f"Fluss's Java client: {self.java.failure_kinds(failure)[1]}")
        return value

    def _path(self, table: str) -> Any:
        return self.java.path(self.database, table)

    def _strings(self, items: Sequence[str]) -> Any:
        array = self.java.gateway.new_array(self.jvm.java.lang.String, len(items))
        for i, item in enumerate(items):
            array[i] = item
        return array

    # tables

    def create_table(
        self, table: str, columns: Mapping[str, str], primary_key: Sequence[str] | None, buckets: int = 1
    ) -> int:
        """A table of ``columns`` (name -> Fluss type as Fluss spells it: ``"DECIMAL(38,10)"``,
        ``"TIMESTAMP_LTZ(3)"``, ``"INT NOT NULL"``), a log table when ``primary_key`` is None; its id."""
        metadata = self.jvm.org.apache.fluss.metadata
        builder = metadata.Schema.newBuilder()
        for name, type_name in columns.items():
            builder = builder.column(name, self.jvm.org.apache.fluss.types.DataTypeParser.parse(type_name))
        if primary_key:
            builder = builder.primaryKey(self._strings(primary_key))
        descriptor = (
            metadata.TableDescriptor.builder().schema(builder.build()).distributedBy(buckets, self._strings([]))
        )
        self._call(self.java.admin.createTable(self._path(table), descriptor.build(), False))
        self._unserved[table] = buckets
        return self.table_id(table)

    def _wait_served(self, table: str) -> None:
        """Before a new table's first write or read, until its buckets are served (a table only
        created, never used, is not waited for: Fluss may never serve one it cannot keep)."""
        buckets = self._unserved.pop(table, None)
        if buckets is not None:
            wait_until(
                lambda: self._served(table, buckets), f"Fluss table {table!r}'s {buckets} buckets served", **_SERVED
            )

    def _served(self, table: str, buckets: int) -> bool:
        """Whether every bucket answers its log end: Fluss acknowledges a new table before the
        tablet server leads its buckets, and a read meanwhile fails on an unknown bucket (in the
        future's answer) or a leader not found (thrown by the call itself)."""
        try:
            _, failure = self.java.outcome(self._offsets_future(table, list(range(buckets)), "LatestSpec"))
        except Py4JError:
            return False
        return failure is None

    def drop_table(self, table: str) -> None:
        self._call(self.java.admin.dropTable(self._path(table), False))

    def recreate_table(
        self, table: str, columns: Mapping[str, str], primary_key: Sequence[str] | None, buckets: int = 1
    ) -> int:
        """The table dropped and created again (empty, a new table id); the new id."""
        self.drop_table(table)
        return self.create_table(table, columns, primary_key, buckets)

    def add_column(self, table: str, name: str, type_name: str) -> None:
        """A nullable column ``name`` added at the end (Fluss 0.9.1 adds only there, only nullable)."""
        metadata = self.jvm.org.apache.fluss.metadata
        data_type = self.jvm.org.apache.fluss.types.DataTypeParser.parse(type_name)
        last = getattr(metadata, "TableChange$ColumnPosition").last()  # py4j names a nested class so
        added = metadata.TableChange.addColumn(name, data_type, None, last)
        changes = self.jvm.java.util.ArrayList()
        changes.add(added)
        self._call(self.java.admin.alterTable(self._path(table), changes, False))

    def table_id(self, table: str) -> int:
        return self._call(self.java.admin.getTableInfo(self._path(table))).getTableId()

    @contextmanager
    def _table(self, table: str) -> Iterator[Any]:
        self._wait_served(table)
        opened = self.java.connection.getTable(self._path(table))
        try:
            yield opened
        finally:
            opened.close()

    # writes

    def upsert(self, table: str, rows: Iterable[Row]) -> None:
        """``rows`` written (a column left out is null), flushed, every write acknowledged."""
        with self._table(table) as opened:
            writer = opened.newUpsert().createWriter()
            fields = self._fields(opened.getTableInfo().getRowType())
            self._all_acked([writer.upsert(self._row(fields, row)) for row in rows])

    def delete(self, table: str, keys: Iterable[Row]) -> None:
        """The rows of ``keys`` (dicts of the primary-key columns) deleted, every delete acknowledged."""
        with self._table(table) as opened:
            writer = opened.newUpsert().createWriter()
            fields = self._fields(opened.getTableInfo().getRowType())
            self._all_acked([writer.delete(self._row(fields, key)) for key in keys])

    def _all_acked(self, futures: list[Any]) -> None:
        array = self.java.gateway.new_array(self._future, len(futures))
        for i, future in enumerate(futures):
            array[i] = future
        self._call(self._future.allOf(array))

    def _fields(self, row_type: Any) -> _Fields:
        names = [str(name) for name in row_type.getFieldNames()]
        types = [row_type.getTypeAt(i) for i in range(len(names))]
        type_array = self.java.gateway.new_array(self._data_type, len(names))
        for i, data_type in enumerate(types):
            type_array[i] = data_type
        roots = [data_type.getTypeRoot().name() for data_type in types]
        getters = list(self._field_getters(row_type))
        return _Fields(row_type, names, roots, types, type_array, getters)

    def _row(self, fields: _Fields, values: Row) -> Any:
        """``values`` as a Fluss row of ``fields``, built inside the JVM by Fluss's own row writer:
        a boxed value would come back to Python as an int (py4j unboxes every ``Byte``, ``Short``,
        ``Long`` it returns), and Fluss's rows cast, not convert, what they hold."""
        unknown = set(values) - set(fields.names)
        if unknown:
            raise AssertionError(f"no column {sorted(unknown)} in {fields.names}")
        writer = self._row_writer(len(fields.names))
        for i, name in enumerate(fields.names):
            value = values.get(name)
            if value is None:
                writer.setNullAt(i)
            else:
                self._write(writer, fields.roots[i], fields.types[i], value)
        row = self._compacted_row(fields.type_array)
        row.pointTo(writer.segment(), 0, writer.position())
        return row

    def _write(self, writer: Any, root: str, data_type: Any, value: Any) -> None:
        """``value`` written as Fluss's internal data structure of ``data_type`` (of type root ``root``) holds it."""
        simple = {
            "BOOLEAN": "writeBoolean",
            "TINYINT": "writeByte",
            "SMALLINT": "writeShort",
            "INTEGER": "writeInt",
            "BIGINT": "writeLong",
            "FLOAT": "writeFloat",
            "DOUBLE": "writeDouble",
        }
        if root in simple:
            getattr(writer, simple[root])(value)
        elif root == "BYTES":
            writer.writeBytes(bytearray(value))
        elif root == "STRING":
            writer.writeString(self._string(value))
        elif root == "DATE":
            writer.writeInt((value - _EPOCH_DAY).days)
        elif root == "TIME_WITHOUT_TIME_ZONE":
            writer.writeInt(_millis_of_day(value))
        elif root == "CHAR":
            writer.writeChar(self._string(value), data_type.getLength())
        elif root == "BINARY":
            writer.writeBinary(bytearray(value), data_type.getLength())
        elif root == "DECIMAL":
            precision = data_type.getPrecision()
            exact = self._decimal(self._big_decimal(str(value)), precision, data_type.getScale())
            writer.writeDecimal(exact, precision)
        elif root == "TIMESTAMP_WITHOUT_TIME_ZONE":
            writer.writeTimestampNtz(self._timestamp_ntz((value - _EPOCH) // _MICRO), data_type.getPrecision())
        elif root == "TIMESTAMP_WITH_LOCAL_TIME_ZONE":
            writer.writeTimestampLtz(self._timestamp_ltz((value - _EPOCH_UTC) // _MICRO), data_type.getPrecision())
        else:
            raise AssertionError(f"no test writer for Fluss type {data_type.toString()}")

    # reads

    def lookup(self, table: str, keys: Iterable[Row]) -> list[Row | None]:
        """The rows of ``keys`` (dicts of the primary-key columns) by the Java client's KV lookup,
        None for a key the table does not hold."""
        with self._table(table) as opened:
            info = opened.getTableInfo()
            fields = self._fields(info.getRowType())
            key_fields = self._fields(fields.row_type.project(self._strings_list(info.getPrimaryKeys())))
            lookuper = opened.newLookup().createLookuper()
            futures = [lookuper.lookup(self._row(key_fields, key)) for key in keys]
            self._all_acked(futures)  # a failed lookup fails here, in Fluss's words
            found = [future.get().getSingletonRow() for future in futures]
            return [None if row is None else self._python_row(fields, row) for row in found]

    def current_rows(self, table: str) -> list[Row]:
        """The ORACLE: the table's rows, sorted by primary key; the table is not written meanwhile.

        The keys are replayed from each bucket's whole changelog up to its log end, the primary-key
        columns alone (a projected ``LogScanner``: ``+I``/``+U`` add a key, ``-D`` removes it), and
        each key's row is looked up in the KV store. Only keys come from the log: Fluss 0.9.1's
        Java client fails to read a TIMESTAMP(p>3) before 1970 with a fraction of a millisecond from
        a changelog (a negative nanosecond of the millisecond), a value its KV lookup reads."""
        with self._table(table) as opened:
            info = opened.getTableInfo()
            key_names = list(info.getPrimaryKeys())
            if not key_names:
                raise AssertionError(f"Fluss table {table!r} has no primary key: no current rows to replay")
            buckets = list(range(info.getNumBuckets()))
            starts, ends = self._offsets(table, buckets, "EarliestSpec"), self._offsets(table, buckets, "LatestSpec")
            trimmed = {b: s for b, s in starts.items() if s != 0}
            if trimmed:
                raise AssertionError(f"Fluss table {table!r}: changelog trimmed, buckets start at {trimmed}")
            projected = self._strings_list(key_names)
            key_fields = self._fields(info.getRowType().project(projected))
            scanner = opened.newScan().project(projected).createLogScanner()
            try:
                for bucket in buckets:
                    if ends[bucket]:
                        scanner.subscribeFromBeginning(bucket)
                keys = self._replay(table, scanner, key_fields, ends)
            finally:
                scanner.close()
        ordered = sorted(keys, key=_sort_key)
        rows = self.lookup(table, [dict(zip(key_names, key, strict=True)) for key in ordered])
        missing = [key for key, row in zip(ordered, rows, strict=True) if row is None]
        if missing:
            raise AssertionError(
                f"Fluss table {table!r}: keys {missing[:5]} live in the changelog, not in the KV store"
            )
        return [row for row in rows if row is not None]

    def _replay(self, table: str, scanner: Any, key_fields: _Fields, ends: dict[int, int]) -> set[tuple[Any, ...]]:
        """The keys live at the log ends: the changelog's records up to them, applied in order."""
        keys: set[tuple[Any, ...]] = set()
        reached = {b: 0 for b, end in ends.items() if end}
        deadline = time.monotonic() + _REPLAY_DEADLINE_S
        while any(reached[b] < ends[b] for b in reached):
            if time.monotonic() > deadline:
                raise AssertionError(f"Fluss table {table!r}: replay reached {reached} of the log ends {ends}")
            polled = scanner.poll(self.jvm.java.time.Duration.ofSeconds(_POLL_S))
            for table_bucket in polled.buckets():
                bucket = table_bucket.getBucket()
                for record in polled.records(table_bucket):
                    offset = record.logOffset()
                    if offset >= ends[bucket]:
                        continue
                    reached[bucket] = max(reached[bucket], offset + 1)
                    key = tuple(self._python_row(key_fields, record.getRow()).values())
                    kind = record.getChangeType().shortString()
                    if kind == "-D":
                        keys.discard(key)
                    elif kind in ("+I", "+U"):  # -U: the row a +U replaces, whose key the +U keeps
                        keys.add(key)
        return keys

    def _offsets(self, table: str, buckets: list[int], spec: str) -> dict[int, int]:
        answer = self._call(self._offsets_future(table, buckets, spec))
        return {b: answer.get(b) for b in buckets}

    def _offsets_future(self, table: str, buckets: list[int], spec: str) -> Any:
        chosen = self.jvm.java.util.ArrayList()
        for bucket in buckets:
            chosen.add(bucket)  # a small int crosses py4j as an Integer, as Collection<Integer> wants
        offset_spec = getattr(self.jvm.org.apache.fluss.client.admin.OffsetSpec, spec)()
        return self.java.admin.listOffsets(self._path(table), chosen, offset_spec).all()

    def _strings_list(self, items: Iterable[str]) -> Any:
        chosen = self.jvm.java.util.ArrayList()
        for item in items:
            chosen.add(item)
        return chosen

    def _python_row(self, fields: _Fields, row: Any) -> Row:
        return {
            name: _python(fields.roots[i], fields.getters[i].getFieldOrNull(row)) for i, name in enumerate(fields.names)
        }


def _python(root: str, value: Any) -> Any:
    """A Fluss field's value (as py4j hands it over) as a Delta read gives it."""
    if value is None or root in ("BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "DOUBLE"):
        return value
    if root == "FLOAT":  # py4j reads a Float through its shortest text: back to the float32 it is
        return struct.unpack("f", struct.pack("f", value))[0]
    if root in ("BINARY", "BYTES"):
        return bytes(value)
    if root == "DECIMAL":
        return value.toBigDecimal()  # py4j hands a java.math.BigDecimal over as a decimal.Decimal
    if root in ("CHAR", "STRING"):
        return value.toString()
    if root == "DATE":
        return _EPOCH_DAY + dt.timedelta(days=value)
    if root == "TIME_WITHOUT_TIME_ZONE":
        return (dt.datetime.combine(_EPOCH_DAY, dt.time()) + dt.timedelta(milliseconds=value)).time()
    if root == "TIMESTAMP_WITHOUT_TIME_ZONE":
        return _EPOCH + dt.timedelta(
            milliseconds=value.getMillisecond(), microseconds=value.getNanoOfMillisecond() // 1000
        )
    if root == "TIMESTAMP_WITH_LOCAL_TIME_ZONE":
        micros = value.getNanoOfMillisecond() // 1000
        return _EPOCH_UTC + dt.timedelta(milliseconds=value.getEpochMillisecond(), microseconds=micros)
    raise AssertionError(f"no oracle value for Fluss type {root}")


def _millis_of_day(value: dt.time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def _sort_key(key: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    return tuple((part is None, part) for part in key)
