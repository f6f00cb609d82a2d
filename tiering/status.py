"""What an operator asks before touching a job: how far behind is it, who leads, what is pinned.

Failure modes this guards against: acting on a guess. Lag is computed from the lake's own
commit metadata (the truth of what was tiered, DESIGN §4), not from the store's last lake
report, which a crash can leave behind. Dropping a lease while a leader runs would let the
store collect snapshots the leader is reading: ``drop_lease`` refuses unless no leader holds
the job (or the operator forces it). Everything here is read-only except ``drop_lease``, and
nothing here writes to the lake, the checkpoint or ZooKeeper.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from tiering.conf.model import TieringConfig
from tiering.context import store_client
from tiering.coord.leader import read_status
from tiering.enumerator.positions import LakePosition
from tiering.errors import LeaseNotFoundError, TieringError
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import Lease, TableInfo
from tiering.lakestate.lake import Lake
from tiering.state.lease_file import read_lease_id

__all__ = [
    "TableStatus", "JobStatus", "job_status", "table_statuses", "held_snapshots", "job_leases", "drop_lease",
    "render_status", "render_leases",
]

#: Store calls of ``status`` and ``leases`` give up sooner than the job's: an operator waits.
STATUS_TIMEOUT_S = 10.0
STATUS_RETRY_S = 5.0


@dataclass(frozen=True)
class TableStatus:
    """One store table as the job sees it; offsets are sums over the table's buckets.

    ``lake_offset`` is None when the lake holds no tiering commit for this ``table_id``
    (never tiered, or the table was re-created since).
    """

    table: str
    table_id: int
    buckets: int
    log_end: int
    lake_offset: int | None
    lag: int
    lake_version: int | None
    lake_epoch: int | None
    leased_snapshots: int


@dataclass(frozen=True)
class JobStatus:
    job: str
    epoch: int | None
    leader: str | None
    owner: dict | None
    contenders: int
    lease_id: str | None
    tables: list[TableStatus] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _operator_client(config: TieringConfig) -> KvStoreClient:
    return store_client(config.kvstore, timeout_s=STATUS_TIMEOUT_S, retry_deadline_s=STATUS_RETRY_S)


def job_status(config: TieringConfig) -> JobStatus:
    """Leader and epoch from ZooKeeper, per selected table: store log end, lake offset, lag, leases."""
    zk = read_status(config.zookeeper.hosts, config.job.name)
    client = _operator_client(config)
    lease_id = read_lease_id(config.job.checkpoint)
    infos = [info for info in client.list_tables() if config.tables.selects(info.name)]
    tables = table_statuses(client, Lake.of(config.lake), infos, held_snapshots(client, lease_id))
    return JobStatus(
        job=config.job.name,
        epoch=zk["epoch"],
        leader=zk["leader"],
        owner=zk["owner"],
        contenders=zk["contenders"],
        lease_id=lease_id,
        tables=tables,
    )


def held_snapshots(client: KvStoreClient, lease_id: str | None) -> Counter[int]:
    """Snapshots the lease holds now, per ``table_id`` (none when there is no such lease)."""
    if lease_id is None:
        return Counter()
    try:
        lease = client.get_lease(lease_id)
    except LeaseNotFoundError:
        return Counter()
    return Counter(ref.table_id for ref in lease.snapshots)


def table_statuses(client: KvStoreClient, lake: Lake, infos: list[TableInfo], held: Counter[int]) -> list[TableStatus]:
    """Each table's store log end against the lake's own commit metadata, by name."""
    return [_table_status(client, lake, info, held[info.table_id]) for info in sorted(infos, key=lambda t: t.name)]


def _table_status(client: KvStoreClient, lake: Lake, info: TableInfo, leased: int) -> TableStatus:
    logs = client.log_info(info.name).buckets
    loaded = lake.load(info.name)
    position = loaded.position(info.table_id) if loaded is not None else None
    commit = loaded.info if position is not None else None
    return TableStatus(
        table=info.name,
        table_id=info.table_id,
        buckets=len(logs),
        log_end=sum(b.log_end_offset for b in logs),
        lake_offset=None if position is None else sum(position.buckets.values()),
        lag=(position or LakePosition(info.table_id)).lag(logs),
        lake_version=None if commit is None else commit.delta_version,
        lake_epoch=None if commit is None else commit.epoch,
        leased_snapshots=leased,
    )


def job_leases(config: TieringConfig, *, every_job: bool = False) -> list[Lease]:
    """The store's leases of this job (ids start with ``<job>-``), or all of them."""
    prefix = f"{config.job.name}-"
    leases = _operator_client(config).list_leases()
    return sorted(
        (lease for lease in leases if every_job or lease.lease_id.startswith(prefix)), key=lambda lease: lease.lease_id
    )


def drop_lease(config: TieringConfig, lease_id: str | None = None, *, force: bool = False) -> Lease:
    """Drop ``lease_id`` (default: the one in the job's checkpoint) at the lease's own epoch.

    Refused while a driver leads the job, unless ``force``: that driver reads the snapshots the
    lease holds. Returns the lease as it was just before the drop.
    """
    lease_id = lease_id or read_lease_id(config.job.checkpoint)
    if lease_id is None:
        raise TieringError(
            f"job {config.job.name!r}: no lease id in checkpoint {config.job.checkpoint!r}; name the lease to drop"
        )
    if not force:
        leader = read_status(config.zookeeper.hosts, config.job.name)["leader"]
        if leader is not None:
            raise TieringError(
                f"job {config.job.name!r} is led by {leader} right now: stop it first, or pass --force "
                f"to drop lease {lease_id!r} under it",
                lease_id=lease_id,
            )
    client = _operator_client(config)
    try:
        lease = client.get_lease(lease_id)
        client.drop_lease(lease_id, lease.epoch)
    except LeaseNotFoundError:
        raise TieringError(f"lease {lease_id!r} does not exist in the store at {config.kvstore.url} "
                           "(already dropped or expired)", lease_id=lease_id) from None
    return lease


def expires_in_s(lease: Lease, now_ms: int | None = None) -> float:
    return (lease.expires_at_ms - (now_ms if now_ms is not None else int(time.time() * 1000))) / 1000.0


def render_status(status: JobStatus, console=None) -> None:
    """Print ``status`` as a header line and one table row per store table."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    leader = status.leader or "none"
    epoch = "never led" if status.epoch is None else str(status.epoch)
    console.print(f"job [bold]{status.job}[/]  leader {leader}  epoch {epoch}  "
                  f"contenders {status.contenders}  lease {status.lease_id or 'none'}")
    table = Table("table", "table_id", "buckets", "store log end", "lake offset", "lag",
                  "lake version", "lake epoch", "leased snapshots")
    for t in status.tables:
        table.add_row(
            t.table, str(t.table_id), str(t.buckets), str(t.log_end), _or_dash(t.lake_offset), str(t.lag),
            _or_dash(t.lake_version), _or_dash(t.lake_epoch), str(t.leased_snapshots),
        )
    console.print(table)


def render_leases(leases: list[Lease], config: TieringConfig, console=None) -> None:
    """Print one row per lease; the checkpoint's lease is marked with ``*``."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    mine = read_lease_id(config.job.checkpoint)
    table = Table("lease", "epoch", "expires in", "snapshots (by table_id)")
    for lease in leases:
        held = Counter(ref.table_id for ref in lease.snapshots)
        by_table = ", ".join(f"{t}: {n}" for t, n in sorted(held.items())) or "none"
        mark = " *" if lease.lease_id == mine else ""
        table.add_row(f"{lease.lease_id}{mark}", str(lease.epoch), f"{expires_in_s(lease):.0f}s", by_table)
    console.print(table)
    if not leases:
        console.print(f"no leases of job {config.job.name!r} in the store")


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)
