"""The lake settings' defaults, in a module without the config models.

The writers take these defaults outside a config too (a bucket task, ``Lake.at``), and those
modules run in Spark's Python workers, which import what a task's pickle names: importing the
models there would cost every worker the pydantic schemas of the whole config for four numbers.
"""

from __future__ import annotations

__all__ = ["DEFAULT_COMPRESSION", "DEFAULT_DRIVER_MAX_CHANGES", "DEFAULT_MERGE_MAX_ROWS", "DEFAULT_TARGET_FILE_MB"]

#: ``lake.driver_max_changes`` when not configured (also the writers' default outside a config).
DEFAULT_DRIVER_MAX_CHANGES = 1_000_000
#: ``lake.merge_max_rows`` when not configured (also the writers' default outside a config).
DEFAULT_MERGE_MAX_ROWS = 1_000_000
#: ``lake.target_file_mb`` when not configured (also the writers' default outside a config).
DEFAULT_TARGET_FILE_MB = 32
#: ``lake.compression`` when not configured (also the writers' default outside a config).
DEFAULT_COMPRESSION = "zstd"
