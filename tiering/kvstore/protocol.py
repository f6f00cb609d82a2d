"""The system columns and op codes as the reference store's files and HTTP protocol name them:
the seam's own (:mod:`tiering.kvstore.contract.columns`), which the store writes into its log and
snapshot files (see :mod:`tiering.kvstore.models`). Failure mode it prevents: the store and the
lake spelling a column or an op code two ways; there is one spelling, the seam's.
"""

from __future__ import annotations

from tiering.kvstore.contract import columns
from tiering.kvstore.contract.columns import *  # noqa: F403 - the seam's names, re-exported whole

__all__ = columns.__all__
