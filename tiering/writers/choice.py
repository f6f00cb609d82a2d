"""Choosing the lake writer named by ``[lake] writer`` (docs/DESIGN.md §6, §8).

Failure mode: a typo or an unavailable writer discovered mid-round, after leases were taken.
The choice is checked when the job is wired, with the valid names in the error; so is the
catalog the writer registers tables in (``lake.catalog_database``, :mod:`tiering.writers.catalog`).
"""

from __future__ import annotations

from tiering.conf.model import LakeConfig
from tiering.delta_log.lake import Lake
from tiering.errors import ConfigError
from tiering.writers.catalog import TableCatalog
from tiering.writers.delta_rs_writer import DeltaRsRoundWriter
from tiering.writers.delta_spark_writer import DeltaSparkRoundWriter
from tiering.writers.round_writer import RoundWriter

__all__ = ["WRITERS", "make_round_writer"]

WRITERS = ("delta-rs", "delta-spark")


def make_round_writer(spark, lake: LakeConfig, writer_id: str, at: Lake | None = None) -> RoundWriter:
    """The round writer ``lake.writer`` names, writing to ``at`` (the term's lake; else one built
    from ``lake``) and registering its tables in ``lake.catalog_database`` when set;
    :class:`ConfigError` for anything not available."""
    writer = _writer(spark, lake, writer_id, Lake.of(lake) if at is None else at)
    if lake.catalog_database is not None:
        writer.catalog = TableCatalog(spark, writer.lake, lake.catalog_database)
    return writer


def _writer(spark, lake: LakeConfig, writer_id: str, at: Lake) -> RoundWriter:
    if lake.writer == "delta-rs":
        return DeltaRsRoundWriter(
            spark,
            at,
            writer_id,
            driver_max_changes=lake.driver_max_changes,
            merge_max_rows=lake.merge_max_rows,
            change_data_feed=lake.change_data_feed,
            target_file_mb=lake.target_file_mb,
        )
    if lake.writer == "delta-spark":
        return DeltaSparkRoundWriter(
            spark, at, writer_id, write=lake.delta_spark_write, change_data_feed=lake.change_data_feed
        )
    raise ConfigError([f"lake.writer: unknown writer {lake.writer!r}; expected one of {', '.join(WRITERS)}"])
