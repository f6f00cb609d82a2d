"""A reference store with a hard log retention cap, started through its Python API.

Why: ``tiering kv-store serve`` has no ``--log-retention`` flag yet, and only the cap lets the
store delete log segments the lake has not reached (it still keeps what no snapshot covers),
which is how a log gets truncated past the lake offset in production. Run as
``python -m tests.chaos.capped_store DATA_DIR PORT LOG_RETENTION_S NUM_RETAINED GC_INTERVAL_S``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from tiering.kvstore.server.process import StoreProcess, free_port


class CappedStoreProcess(StoreProcess):
    """:class:`StoreProcess` whose server deletes snapshot-covered segments older than the cap."""

    def __init__(self, data_dir: Path, *, log_retention_s: float, num_retained: int, gc_interval_s: float) -> None:
        super().__init__(data_dir, free_port(), num_retained=num_retained, gc_interval_s=gc_interval_s)
        self._args = [
            sys.executable, "-m", "tests.chaos.capped_store", str(self.data_dir), str(self.port),
            str(log_retention_s), str(num_retained), str(gc_interval_s),
        ]


def main(argv: list[str]) -> None:
    from tiering.kvstore.server import serve

    data_dir, port, retention, num_retained, gc_interval = argv
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve(Path(data_dir), int(port), num_retained=int(num_retained), gc_interval_s=float(gc_interval),
          log_retention_s=float(retention))


if __name__ == "__main__":
    main(sys.argv[1:])
