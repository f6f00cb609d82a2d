"""What an operator asks before touching a job: how far behind is it, who leads, what is pinned.

Failure modes this guards against: acting on a guess. Lag is computed from the lake's own
commit metadata (the truth of what was tiered, docs/DESIGN.md §4), not from the store's last lake
report, which a crash can leave behind. A table whose Delta log cannot be read now is shown as
such; it does not fail the whole status. Read-only: the operator's writes are
:mod:`tiering.ops.writes`, the drawing :mod:`tiering.ops.status_view`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from deltalake.exceptions import DeltaError

from tiering.conf.model import TieringConfig
from tiering.context import store_client
from tiering.coord.group import read_group
from tiering.coord.leader import read_status
from tiering.delta_log.freshness import freshness_s, oldest_untiered_write_ms
from tiering.delta_log.lake import Lake, LakeTable
from tiering.delta_log.layout import SYSTEM_COLUMNS
from tiering.enumerator.positions import LakePosition
from tiering.errors import NotFoundError, StoreError, TieringError, one_line
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.contract import BucketLog, PlanningStore, StoreTable
from tiering.kvstore.models import Lease, TableInfo
from tiering.kvstore.reference import ReferenceStore, bucket_log, serves_leases
from tiering.round.health import TableHealth, read_health
from tiering.state.checkpoint_store import CheckpointStore, checkpoint_of
from tiering.state.lease_file import job_of_lease, read_lease_id

if TYPE_CHECKING:
    from tiering.fluss.store import FlussStore

__all__ = [
    "TableStatus",
    "JobStatus",
    "job_status",
    "selected_tables",
    "table_statuses",
    "held_snapshots",
    "job_leases",
    "checkpoint_lease_id",
    "expires_in_s",
    "operator_client",
]

#: The operator commands' store calls retry for this long at most (less when their timeout is
#: shorter): they give up sooner than the job's, since an operator waits.
STATUS_RETRY_S = 5.0


@dataclass(frozen=True)
class TableStatus:
    """One table as the job sees it; offsets are sums over the table's buckets.

    ``lake_offset`` is None when the lake holds no tiering commit for this ``table_id``
    (never tiered, or the table was re-created since). ``state`` is ``ok``, ``failing`` (its
    last round failed), ``dropped`` (gone from the store; the lake table is kept),
    ``re-created`` (the lake holds an earlier incarnation), ``not tiered`` or ``lake unreadable``
    (its Delta log cannot be read now: ``lake_error`` says why). Times are epoch
    ms; ``freshness_s`` is the age of the oldest store write the lake lacks (0: none).
    """

    table: str
    table_id: int
    state: str
    buckets: int
    log_end: int
    lake_offset: int | None
    lag: int
    freshness_s: float | None
    lake_version: int | None
    lake_epoch: int | None
    lake_commit_ms: int | None
    store_columns: int | None
    lake_columns: int | None
    #: the snapshots the job's lease holds of the table; None when the store lists no lease's holds (Fluss)
    leased_snapshots: int | None
    consecutive_failures: int = 0
    last_failure: str | None = None
    #: what the last failure failed on (``schema``, ``files``, ``store`` ...: tiering.round.table_states.FailureCause)
    last_failure_cause: str | None = None
    #: the step the table had reached when it failed (tiering.round.table_states.TableState)
    last_failure_state: str | None = None
    last_failure_ms: int | None = None
    #: why the table's Delta log could not be read now (state ``lake unreadable``), else None
    lake_error: str | None = None


@dataclass(frozen=True)
class JobStatus:
    job: str
    epoch: int | None
    leader: str | None
    owner: dict | None
    contenders: int
    lease_id: str | None
    tables: list[TableStatus] = field(default_factory=list)
    #: False when the store has no lease API: the job tiers without snapshot leases
    leases: bool = True
    #: in a tiering group: its live members and each selected table's owner and table epoch
    #: (:meth:`GroupView.as_dict`); None outside a group
    group: dict | None = None

    def as_dict(self) -> dict:
        shown = asdict(self)
        if self.group is None:
            del shown["group"]  # a job outside a group shows what it always showed
        return shown

    def failing(self, rounds: int) -> list[TableStatus]:
        """Tables whose last ``rounds`` rounds or more all failed (a dropped table is not failing)."""
        return [t for t in self.tables if t.state != "dropped" and t.consecutive_failures >= rounds]


def operator_client(config: TieringConfig, timeout_s: float) -> KvStoreClient:
    """The store's client for an operator command: it gives up within ``timeout_s`` and retries
    for :data:`STATUS_RETRY_S` at most."""
    return store_client(config.kvstore, timeout_s=timeout_s, retry_deadline_s=min(STATUS_RETRY_S, timeout_s))


def selected_tables(config: TieringConfig, *, timeout_s: float) -> list[str]:
    """The store's tables the job's ``[tables]`` selection picks, by name: a Fluss database's
    asked once, as `tiering check` asks it (the operator client is the reference store's)."""
    if config.kvstore.kind == "fluss":
        from tiering.ops.preflight import table_selection

        return list(table_selection(config, timeout_s).selected)
    infos = operator_client(config, timeout_s).list_tables()
    return sorted(info.name for info in infos if config.tables.selects(info.name))


def job_status(
    config: TieringConfig,
    *,
    timeout_s: float,
    lake: Lake | None = None,
    checkpoint: CheckpointStore | None = None,
    fluss: FlussStore | None = None,
) -> JobStatus:
    """Leader and epoch from ZooKeeper, per selected table: store log end, lake offset, lag, leases.
    ``lake``, ``checkpoint`` and a Fluss job's ``fluss`` store (:func:`tiering.ops.preflight.fluss_store`):
    the job's, when the caller built them once for many statuses (a watch: the caller closes the
    store); else built from ``config``."""
    zk = read_status(config.zookeeper.hosts, config.job.name, timeout_s=timeout_s)
    checkpoint = checkpoint or checkpoint_of(config)
    lease_id = read_lease_id(checkpoint)
    health = {t: h for t, h in read_health(checkpoint).items() if config.tables.selects(t)}
    lake = lake or Lake.of(config.lake)
    if config.kvstore.kind == "fluss":
        tables, leases = fluss_table_statuses(config, lake, health, timeout_s=timeout_s, store=fluss), True
    else:
        client = operator_client(config, timeout_s)
        infos = [info for info in client.list_tables() if config.tables.selects(info.name)]
        held = held_snapshots(client, lease_id)
        tables, leases = table_statuses(client, lake, infos, held or Counter(), health), held is not None
    group = config.job.group
    names = [t.table for t in tables if t.state != "dropped"]
    view = None if group is None else read_group(config.zookeeper.hosts, group, names, timeout_s=timeout_s)
    return JobStatus(
        job=config.job.name,
        epoch=zk.epoch,
        leader=zk.leader,
        owner=zk.owner,
        contenders=zk.contenders,
        lease_id=lease_id,
        tables=tables,
        leases=leases,
        group=None if view is None else view.as_dict(),
    )


def checkpoint_lease_id(config: TieringConfig) -> str | None:
    """The lease id in the job's checkpoint (the one its runs hold snapshots with); None before
    its first run."""
    return read_lease_id(checkpoint_of(config))


def held_snapshots(client: KvStoreClient, lease_id: str | None) -> Counter[int] | None:
    """Snapshots the lease holds now, per ``table_id`` (none when there is no such lease); None
    when the store has no lease API at all."""
    try:
        if lease_id is None:
            return Counter() if serves_leases(client) else None
        lease = client.get_lease(lease_id)
    except NotFoundError as e:
        if e.code == "LEASE_NOT_FOUND" or serves_leases(client):
            return Counter()
        return None
    return Counter(ref.table_id for ref in lease.snapshots)


def table_statuses(
    client: KvStoreClient,
    lake: Lake,
    infos: list[TableInfo],
    held: Counter[int],
    health: Mapping[str, TableHealth] | None = None,
) -> list[TableStatus]:
    """Each store table's log end against the lake's own commit metadata, with the health the
    job recorded; then the tables the job tiered that the store no longer has (dropped)."""
    health = health or {}
    store, now_ms = ReferenceStore(client), int(time.time() * 1000)
    out = [
        _table_status(
            store,
            lake,
            info,
            [bucket_log(b) for b in client.log_info(info.name).buckets],
            held[info.table_id],
            health.get(info.name),
            now_ms,
        )
        for info in infos
    ]
    return _with_dropped(out, lake, health)


def fluss_table_statuses(
    config: TieringConfig,
    lake: Lake,
    health: Mapping[str, TableHealth],
    *,
    timeout_s: float,
    store: FlussStore | None = None,
) -> list[TableStatus]:
    """:func:`table_statuses` of a job over a Fluss database, asked as `tiering check` asks it
    (no retries, within ``timeout_s``): every table's log ends in one call; the snapshots its lease
    holds unknown (None: Fluss lists no lease's holds). ``store``: the caller's, kept open (its
    connections and changelog reader serve every refresh of a watch); else one made and closed."""
    from tiering.ops.preflight import fluss_store

    own = store is None
    store, now_ms = store or fluss_store(config, timeout_s), int(time.time() * 1000)
    try:
        tables = [t for t in store.tables() if config.tables.selects(t.name)]
        logs = store.log_ends([t.name for t in tables])
        out = [
            _table_status(store, lake, t, list(logs[t.name].buckets.values()), None, health.get(t.name), now_ms)
            for t in tables
            if t.name in logs  # dropped meanwhile: shown from its health, if tiered
        ]
    finally:
        if own:
            store.close()
    return _with_dropped(out, lake, health)


def _with_dropped(out: list[TableStatus], lake: Lake, health: Mapping[str, TableHealth]) -> list[TableStatus]:
    """``out``, and the tables the job tiered that the store no longer has (dropped), by name."""
    present = {t.table for t in out}
    out = out + [
        _dropped_status(lake, h, h.table_id) for t, h in health.items() if t not in present and h.table_id is not None
    ]
    return sorted(out, key=lambda t: t.table)


def _table_status(
    store: PlanningStore,
    lake: Lake,
    info: TableInfo | StoreTable,
    logs: list[BucketLog],
    leased: int | None,
    health: TableHealth | None,
    now_ms: int,
) -> TableStatus:
    loaded, lake_error = _read_lake(lake, info.name)
    position, lake_fields = _lake_side(loaded, info.table_id)
    try:
        oldest = oldest_untiered_write_ms(store, info.name, position, logs)
        freshness: float | None = freshness_s(oldest, now_ms)
    except (OSError, StoreError):
        # the store's files out of this host's reach, or its segment lookup failing (as it may for
        # the very table whose rounds fail): unknown, not an error
        freshness = None
    if health is not None and health.table_id != info.table_id:
        health = None  # an earlier incarnation's history
    if lake_error is not None:
        state = "lake unreadable"
    elif health is not None and health.consecutive_failures:
        state = "failing"
    elif position is not None:
        state = "ok"
    else:
        state = "re-created" if loaded is not None and loaded.info is not None else "not tiered"
    return TableStatus(
        table=info.name,
        table_id=info.table_id,
        state=state,
        buckets=len(logs),
        log_end=sum(b.end for b in logs),
        lag=(position or LakePosition(info.table_id)).lag(logs),
        freshness_s=freshness,
        store_columns=len(info.columns),
        leased_snapshots=leased,
        **lake_fields,
        **_failure_fields(health),
        lake_error=lake_error,
    )


def _read_lake(lake: Lake, table: str) -> tuple[LakeTable | None, str | None]:
    """The table's lake side, or why its Delta log cannot be read now: one table whose log the
    object store refuses is shown as such, it does not fail the whole status."""
    try:
        return lake.load(table), None
    except (OSError, DeltaError) as e:
        return None, f"{type(e).__name__}: {one_line(e)}"


def _dropped_status(lake: Lake, health: TableHealth, table_id: int) -> TableStatus:
    """A table the job tiered (as ``table_id``) and the store no longer lists: its lake table is
    kept as it was."""
    loaded, lake_error = _read_lake(lake, health.table)
    position, lake_fields = _lake_side(loaded, table_id)
    return TableStatus(
        table=health.table,
        table_id=table_id,
        state="dropped",
        buckets=len(position.buckets) if position is not None else 0,
        log_end=0,
        lag=0,
        freshness_s=None,
        store_columns=None,
        leased_snapshots=0,
        **lake_fields,
        **_failure_fields(health),
        lake_error=lake_error,
    )


def _lake_side(loaded: LakeTable | None, table_id: int) -> tuple[LakePosition | None, dict]:
    """Where the lake is for incarnation ``table_id``, and the status fields of its newest commit."""
    position = loaded.position(table_id) if loaded is not None else None
    commit = loaded.info if loaded is not None and position is not None else None
    return position, {
        "lake_offset": None if position is None else sum(position.buckets.values()),
        "lake_version": None if commit is None else commit.delta_version,
        "lake_epoch": None if commit is None else commit.epoch,
        "lake_commit_ms": None if commit is None else commit.committed_ms,
        "lake_columns": _user_columns(loaded),
    }


def _failure_fields(health: TableHealth | None) -> dict:
    if health is None:
        return {}
    return {
        "consecutive_failures": health.consecutive_failures,
        "last_failure": health.last_failure,
        "last_failure_cause": None if health.last_failure_cause is None else str(health.last_failure_cause),
        "last_failure_state": None if health.last_failure_state is None else str(health.last_failure_state),
        "last_failure_ms": health.last_failure_ms,
    }


def _user_columns(loaded: LakeTable | None) -> int | None:
    """The Delta table's columns that come from the store (the system columns left out)."""
    if loaded is None:
        return None
    return sum(1 for f in loaded.dt.schema().fields if f.name not in SYSTEM_COLUMNS)


def job_leases(config: TieringConfig, *, every_job: bool = False, timeout_s: float) -> list[Lease]:
    """The store's leases of this job (the job its id was made for, read exactly: job ``orders``
    does not list job ``orders-eu``'s), or every job's."""
    try:
        leases = operator_client(config, timeout_s).list_leases()
    except NotFoundError as e:
        raise TieringError(f"the KV store at {config.kvstore.url} has no lease API: {e}") from None
    return sorted(
        (lease for lease in leases if every_job or job_of_lease(lease.lease_id) == config.job.name),
        key=lambda lease: lease.lease_id,
    )


def expires_in_s(lease: Lease, now_ms: int | None = None) -> float:
    """Seconds until ``lease`` lapses unless renewed (negative: it has)."""
    return (lease.expires_at_ms - (now_ms if now_ms is not None else int(time.time() * 1000))) / 1000.0
