"""Arrow's memory allocator set up to give a round the pages the last round freed.

pyarrow allocates through mimalloc, which hands the pages of freed memory back to the kernel soon
after they are freed (it decommits them). A round reads its changes, keeps the newest per key and
rewrites the buckets in buffers it frees when it ends; seconds later the next round faults every
one of those pages in again, and the kernel zeroes each. Told to purge with ``MADV_FREE`` instead
(mimalloc's ``purge_decommits`` off), it leaves the pages mapped for the kernel to take back only
when it needs memory, and the next round writes into them where they are. The process's resident
size then stays near its peak while memory is plentiful.

mimalloc reads its options from the environment once, when pyarrow's library loads, and child
processes inherit the environment (Spark's JVM, its Python workers, the source's planning process):
:func:`keep_freed_pages` must run before the process's first ``import pyarrow``. An option the
environment already sets is kept.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

__all__ = ["ALLOCATOR_ENV", "keep_freed_pages"]

#: mimalloc's option, as the environment spells it: "0" purges with MADV_FREE, not by decommitting.
ALLOCATOR_ENV = {"MIMALLOC_PURGE_DECOMMITS": "0"}


def keep_freed_pages(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set mimalloc's options in ``environ`` (the process's own by default) where it sets none."""
    for name, value in ALLOCATOR_ENV.items():
        environ.setdefault(name, value)
