"""A Fluss job's lease as an operator reaches it: `tiering leases list`, `leases drop` and what
`tiering take-over` lets go of, over Apache Fluss.

Failure mode this guards against: an operator acting on a listing Fluss cannot give. Fluss 0.9.1's
client has no call that lists leases or a lease's holds (``Admin.createKvSnapshotLease`` hands a
handle that acquires, renews, releases and drops; nothing reads one back), its leases have no
epoch and no expiry it tells, and it drops or releases what it does not hold without a word. So
:func:`kept_lease` shows what the job itself knows: the lease id its checkpoint keeps and the
snapshots its round in flight planned (the newest offsets entry Spark has not committed, as a new
term reads it), and says it is not Fluss's listing; another job's leases cannot be shown at all.
A drop and a release are by lease id, which Fluss takes without a listing, and cannot say how
many snapshots they freed. Every call is asked once, within the command's timeout
(:func:`tiering.ops.preflight.fluss_store`), and the store's connections are closed after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tiering.conf.model import TieringConfig
from tiering.enumerator.splits import SnapshotSplit
from tiering.errors import UsageError
from tiering.kvstore.contract import BucketId
from tiering.ops.preflight import fluss_store
from tiering.state.checkpoint_store import checkpoint_of
from tiering.state.lease_file import job_of_lease, read_lease_id
from tiering.state.offset_log import replayed_offset

if TYPE_CHECKING:
    from tiering.fluss.store import FlussStore

__all__ = ["KeptLease", "NO_LISTING", "kept_lease", "drop_fluss_lease", "release_fluss_holds"]

#: What `tiering leases list` says of a Fluss job's lease, every time: what it shows is not Fluss's.
NO_LISTING = "Fluss lists no lease and no lease's holds: shown is what the job's checkpoint knows"
#: A Fluss lease has no epoch; the store object fences by the highest epoch its own process saw,
#: and an operator command's process has seen none.
_OPERATOR_EPOCH = 0


@dataclass(frozen=True)
class KeptLease:
    """The lease a Fluss job's checkpoint keeps, and the snapshot splits its round in flight
    planned (held from the planner's acquire until that round's tables finish or fail; empty when
    Spark committed every planned round)."""

    lease_id: str
    in_flight: tuple[SnapshotSplit, ...]

    def as_dict(self) -> dict:
        """As `tiering leases list --json` prints a lease, with what Fluss cannot say as null."""
        planned = [
            {"table": s.table, "table_id": s.table_id, "bucket": s.bucket, "snapshot_id": s.snapshot_id}
            for s in self.in_flight
        ]
        return {
            "lease_id": self.lease_id,
            "job": job_of_lease(self.lease_id),
            "epoch": None,
            "expires_at_ms": None,
            "snapshots": None,
            "in_flight": planned,
        }


def kept_lease(config: TieringConfig, *, every_job: bool = False) -> KeptLease | None:
    """The lease id in the job's checkpoint (None before its first run) and its round in flight's
    snapshots; ``every_job``: a :class:`UsageError`, since Fluss cannot list other jobs' leases."""
    if every_job:
        raise UsageError(
            f"{config.kvstore.where}: Fluss lists no lease, so `tiering leases list --all` cannot show other jobs'; "
            "`tiering leases list` shows this job's, from its checkpoint"
        )
    checkpoint = checkpoint_of(config)
    lease_id = read_lease_id(checkpoint)
    if lease_id is None:
        return None
    replayed = replayed_offset(checkpoint)
    planned = () if replayed is None else tuple(s for s in replayed.splits if isinstance(s, SnapshotSplit))
    return KeptLease(lease_id, planned)


def drop_fluss_lease(config: TieringConfig, lease_id: str, *, timeout_s: float) -> None:
    """Drop ``lease_id`` in Fluss: every hold it has goes (Fluss takes a lease it does not have too)."""
    store = fluss_store(config, timeout_s)
    try:
        store.drop(lease_id, _OPERATOR_EPOCH)
    finally:
        store.close()


def release_fluss_holds(store: FlussStore, lease_id: str, buckets: Sequence[BucketId]) -> None:
    """Let go of ``lease_id``'s holds on ``buckets`` in Fluss (a bucket not held is no error)."""
    store.release(lease_id, _OPERATOR_EPOCH, buckets)
