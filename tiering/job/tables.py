"""Which of the store's tables a job tiers, by its ``[tables]`` selection.

Failure mode this guards against: parts of one job disagreeing about its tables. The maintainer's
passes, a group member's balance and `tiering maintain` list them through this one function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiering.conf.model import TieringConfig

if TYPE_CHECKING:
    from tiering.kvstore.contract import StoreCatalog

__all__ = ["included_tables"]


def included_tables(config: TieringConfig, store: StoreCatalog) -> list[str]:
    """The store's tables the job tiers (``[tables]``), by name."""
    return sorted(t.name for t in store.tables() if config.tables.selects(t.name))
