"""Prometheus metrics of the reference store, in a registry of its own.

A private registry (not the process-global default) so several stores in one process (tests,
benchmarks) never collide on metric names.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest


class StoreMetrics:
    def __init__(self, leases_held: Callable[[], float]) -> None:
        self.registry = CollectorRegistry()
        self.rows_written = Counter(
            "kvstore_rows_written", "Changelog records written", ["table"], registry=self.registry
        )
        self.snapshots_taken = Counter(
            "kvstore_snapshots_taken", "Bucket snapshots taken", ["table"], registry=self.registry
        )
        self.gc_deleted = Counter("kvstore_gc_deleted", "Objects deleted by GC", ["kind"], registry=self.registry)
        self.gc_runs = Counter("kvstore_gc_runs", "Completed GC passes", registry=self.registry)
        self.leases_held = Gauge("kvstore_leases_held", "Unexpired leases", registry=self.registry)
        self.leases_held.set_function(leases_held)

    def render(self) -> bytes:
        return generate_latest(self.registry)
