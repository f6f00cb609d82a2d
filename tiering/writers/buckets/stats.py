"""Delta file statistics of the files a task writes or copies. Only integer columns get bounds:
exact, and enough to skip files on ``__offset`` and integer keys; a truncated string bound
could make readers skip a file that matches, so other types get none."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = ["FileStats"]


class FileStats:
    """Delta file statistics: ``numRecords``, and min/max/nullCount of integer columns (exact,
    and enough to skip files on ``__offset`` and integer keys; other types are left out rather
    than risk a truncated string bound that would make readers skip matching files)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.rows = 0
        self._columns = [f.name for f in schema if pa.types.is_integer(f.type)]
        self._min: dict[str, int] = {}
        self._max: dict[str, int] = {}
        self._nulls = dict.fromkeys(self._columns, 0)
        self._unknown: set[str] = set()

    def add(self, batch: pa.RecordBatch | pa.Table) -> None:
        self.rows += batch.num_rows
        for name in self._columns:
            column = batch.column(name)
            self._nulls[name] += column.null_count
            bounds = pc.min_max(column)
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            if low is not None:
                self._bound(name, low, high)

    def add_footer(self, meta: pq.FileMetaData) -> None:
        """A whole file's figures from its row groups' statistics (exact for integers); a
        column without them gets no bounds at all, never a guessed one."""
        self.rows += meta.num_rows
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        for name in self._columns:
            index = names.index(name)
            groups = [meta.row_group(g).column(index).statistics for g in range(meta.num_row_groups)]
            if any(s is None or not s.has_null_count for s in groups):
                self._unknown.add(name)
                continue
            self._nulls[name] += sum(s.null_count for s in groups)
            for s in groups:
                if s.has_min_max:
                    self._bound(name, s.min, s.max)
                elif s.num_values:
                    self._unknown.add(name)

    def _bound(self, name: str, low: int, high: int) -> None:
        self._min[name] = low if name not in self._min else min(self._min[name], low)
        self._max[name] = high if name not in self._max else max(self._max[name], high)

    def to_json(self) -> str:
        stats: dict = {"numRecords": self.rows}
        known = [c for c in self._columns if c not in self._unknown]
        if known:
            stats.update(
                minValues={c: self._min[c] for c in known if c in self._min},
                maxValues={c: self._max[c] for c in known if c in self._max},
                nullCount={c: self._nulls[c] for c in known},
            )
        return json.dumps(stats)
