"""Choosing the lake writer named by ``[lake] writer`` (DESIGN §6, §8).

Failure mode: a typo or an unavailable writer discovered mid-round, after leases were taken.
The choice is checked when the job is wired, with the valid names in the error.
"""

from __future__ import annotations

from tiering.conf.model import DEFAULT_MERGE_MAX_CHANGES
from tiering.errors import ConfigError
from tiering.lake.delta_spark_writer import DeltaSparkRoundWriter
from tiering.lake.round_protocol import RoundWriter
from tiering.lake.round_writer import DeltaRsRoundWriter

__all__ = ["WRITERS", "make_round_writer"]

WRITERS = ("delta-rs", "delta-spark")


def make_round_writer(
    spark, lake_root: str, job: str, writer: str = "delta-rs", *, merge_max_changes: int = DEFAULT_MERGE_MAX_CHANGES
) -> RoundWriter:
    """The round writer for ``writer``; :class:`ConfigError` for anything not available."""
    if writer == "delta-rs":
        return DeltaRsRoundWriter(spark, lake_root, job, merge_max_changes=merge_max_changes)
    if writer == "delta-spark":
        return DeltaSparkRoundWriter(spark, lake_root, job)
    raise ConfigError([f"lake.writer: unknown writer {writer!r}; expected one of {', '.join(WRITERS)}"])
