"""How a bucket's new files are encoded (dictionary columns, codec), and so how many rows a
file of the target holds: chosen from a sample of the first rows a rewrite writes."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tiering.writers.buckets.task import MIB

__all__ = ["SAMPLE_ROWS", "Encoding"]

#: The rows :class:`Encoding` samples (the first of a rewrite's), and at most their decoded bytes.
SAMPLE_ROWS = 8192
_SAMPLE_BYTES = 4 * MIB
#: A sampled column with a larger share of distinct values is written without a dictionary:
#: nearly unique. 8,192 rows drawn at random from k values are this share distinct at k = 39,000;
#: in a 78,000-row file a dictionary of that many values cost time, of 20,000 about broke even.
_UNIQUE_SHARE = 0.9


@dataclass(frozen=True)
class Encoding:
    """How a bucket's new files are encoded, and so how many rows a file of the target holds:
    chosen from the first rows it writes (:data:`SAMPLE_ROWS`), encoded once in memory with the
    files' codec (``lake.compression``: snappy takes about twice zstd's bytes a row).

    A dictionary pays only on a column whose values repeat; on a column of unique values (a
    key, ``__offset``, most floats) it is wasted work. pyarrow's default, a dictionary on every
    column, wrote the amplification benchmark's 78,000-row file in three times the time and
    1.8 times the bytes of dictionaries on its repeating columns only. So a column gets one
    when at most :data:`_UNIQUE_SHARE` of its sampled values are distinct.

    The rows per file come from the sample's encoded bytes per row, not the input files': those
    may be encoded otherwise (a snapshot the store wrote with pyarrow's defaults, which the
    bootstrap copies as it is), and the files a bucket's first rewrite splits it into would
    keep that error until compaction: a rewrite by file splits a file grown past the target but
    never fills one short of it. 8,192 of the amplification benchmark's rows estimated a
    115,000-row file's bytes per row within 1%; rows that compress far better (2.4 bytes a row)
    it overestimated by 40%, the footer and dictionaries weighing more on fewer rows: files
    land short of the target (80%), not past it.
    """

    dictionary: tuple[str, ...]
    compression: str
    #: None until :meth:`measured`: rows that fit one file decoded need no measure (a bucket of a
    #: few rows, most of a changed round's, would pay a second Parquet write for it)
    bytes_per_row: float | None = None

    @classmethod
    def of(cls, rows: pa.Table, compression: str) -> Encoding:
        """The dictionary columns, from ``rows``' sample; pages compressed with ``compression``."""
        sample = _sample(rows)
        return cls(
            tuple(name for name, column in zip(sample.column_names, sample.columns, strict=False) if _repeats(column)),
            compression,
        )

    def measured(self, rows: pa.Table) -> Encoding:
        """This encoding with its bytes per row: ``rows``' sample encoded in memory (once per bucket)."""
        if self.bytes_per_row is not None:
            return self
        sample = _sample(rows)
        sink = pa.BufferOutputStream()
        with self.writer(sink, sample.schema) as writer:
            writer.write_table(sample)
        return replace(self, bytes_per_row=sink.tell() / max(sample.num_rows, 1))

    def rows_per_file(self, target_bytes: int) -> int:
        assert self.bytes_per_row is not None, "measured() first"
        return max(1, int(target_bytes / self.bytes_per_row))

    def writer(self, sink: pa.NativeFile, schema: pa.Schema) -> pq.ParquetWriter:
        return pq.ParquetWriter(sink, schema, compression=self.compression, use_dictionary=list(self.dictionary))


def _sample(rows: pa.Table) -> pa.Table:
    """The first :data:`SAMPLE_ROWS` of ``rows``, or fewer when those would exceed :data:`_SAMPLE_BYTES`
    (their bytes only are counted: on rows spliced of many slices, all of them take a while)."""
    first = rows.slice(0, SAMPLE_ROWS)
    row_bytes = first.nbytes / max(first.num_rows, 1)
    return first.slice(0, max(1, int(_SAMPLE_BYTES / max(row_bytes, 1))))


def _repeats(column: pa.ChunkedArray) -> bool:
    """Whether at most :data:`_UNIQUE_SHARE` of the column's non-null values are distinct."""
    values = len(column) - column.null_count
    return pc.count_distinct(column).as_py() <= _UNIQUE_SHARE * values
