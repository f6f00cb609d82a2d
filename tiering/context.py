"""What one leadership term runs with: the validated config, the epoch and the lease id.

Failure mode this guards against: parts of one driver disagreeing about the term they act
for. Built once by the leader loop after ZooKeeper granted the epoch and the lease id was read
from (or created in) the checkpoint; every part of the term takes its values from here,
including the Spark source's planning process, which receives it as one JSON option and
rebuilds it with the same pydantic models (no second parser, no second set of defaults).

The clients it builds are imported when built, so a process that only reads a context pays for
none of them. Only the source's planning process parses the option into a context
(``tiering.source``): the other Python processes Spark starts for the source never import this
module, nor pydantic with it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tiering.conf.fields import WITH_SECRETS
from tiering.conf.model import KvStoreConfig, TieringConfig
from tiering.epochs import JobEpoch, TableEpoch
from tiering.errors import ConfigError, UsageError, one_line

if TYPE_CHECKING:
    from tiering.coord.ownership import OwnedTables
    from tiering.coord.write_authority import WriteAuthority
    from tiering.delta_log.lake import Lake
    from tiering.kvstore.client import KvStoreClient
    from tiering.kvstore.contract import PlanningStore
    from tiering.lease.job_lease import JobLease
    from tiering.state.checkpoint_store import CheckpointStore

__all__ = ["TermContext", "store_client", "planning_store", "fluss_client_jar", "stderr_log_level"]

log = logging.getLogger(__name__)


def stderr_log_level() -> int | None:
    """The level at which this process logs the package's lines to stderr, or None when it logs
    them elsewhere (the demo's live display owns the terminal: its log goes to a file)."""
    if not any(type(h) is logging.StreamHandler and h.stream is sys.stderr for h in logging.getLogger().handlers):
        return None
    return logging.getLogger("tiering").getEffectiveLevel()


def store_client(
    kvstore: KvStoreConfig, timeout_s: float = 30.0, retry_deadline_s: float | None = None
) -> KvStoreClient:
    """The reference store's client of a config (the token, when set, goes with every call);
    ``UsageError`` naming ``kvstore.kind`` for another store: what calls this needs the
    reference store's own API."""
    from tiering.kvstore.client import KvStoreClient

    if kvstore.kind != "http":
        raise UsageError(
            f"kvstore.kind = {kvstore.kind!r}: this command needs the reference store's HTTP API "
            "([kvstore] kind = 'http'); with Apache Fluss it is not available yet"
        )
    return KvStoreClient(
        kvstore.http_url,
        kvstore.token.get_secret_value() or None,
        timeout_s=timeout_s,
        retry_deadline_s=retry_deadline_s,
    )


def planning_store(
    config: TieringConfig, timeout_s: float = 30.0, retry_deadline_s: float | None = None
) -> PlanningStore:
    """The store of a config behind the store seam: the reference store's client, or one Fluss
    database (its Java client from the ``fluss-client`` jar on ``[spark] spark.jars``, for a
    process without a SparkContext; ``[kvstore.client]`` passed through)."""
    kvstore = config.kvstore
    if kvstore.kind == "fluss":
        from tiering.fluss.store import FlussStore

        servers, database = kvstore.fluss_database
        return FlussStore(
            servers,
            database,
            fluss_client_jar(config.spark),
            options=kvstore.client,
            report_lake_progress=kvstore.report_lake_progress,
        )
    from tiering.kvstore.reference import ReferenceStore

    return ReferenceStore(store_client(kvstore, timeout_s, retry_deadline_s))


def fluss_client_jar(spark: Mapping[str, str]) -> Path | None:
    """The ``fluss-client`` jar among ``spark.jars`` (None when it lists none)."""
    jars = [Path(j.strip().removeprefix("file://")) for j in spark.get("spark.jars", "").split(",") if j.strip()]
    return next((j for j in jars if j.name.startswith("fluss-client-") and j.suffix == ".jar"), None)


class TermContext(BaseModel):
    """One leadership term of one job; immutable for the term's life."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    config: TieringConfig
    #: The term's job epoch (never a table epoch: a member's are in ``group_file``).
    epoch: JobEpoch = Field(ge=0)
    lease_id: str = Field(min_length=1)
    #: False when the store has no lease API (found as the term started): no lease calls at all.
    leases: bool = True
    #: In a tiering group (``[job] group``): the local file where the leader keeps the tables this
    #: member owns and their table epochs (coord/ownership.py), for the planning process and the
    #: round; None outside a group.
    group_file: str | None = None
    #: The level at which the planning process, which Spark starts with no logging set up, logs
    #: to stderr (the driver's output) as the driver does; None: it stays quiet as the driver's
    #: stderr is not its log.
    log_level: int | None = None

    @classmethod
    def begin(
        cls,
        config: TieringConfig,
        epoch: JobEpoch,
        *,
        lake: Lake | None = None,
        checkpoint: CheckpointStore | None = None,
    ) -> TermContext:
        """The context of a term just won: the lease id comes from the checkpoint (created there
        on the job's first run, reused by every later term). ``lake`` and ``checkpoint``: the
        ones of ``config`` its leader already built and checked, kept as the term's own (built at
        first use otherwise)."""
        from tiering.state.checkpoint_store import checkpoint_of
        from tiering.state.lease_file import load_or_create_lease_id

        checkpoint = checkpoint if checkpoint is not None else checkpoint_of(config)
        lease_id = load_or_create_lease_id(checkpoint, config.job.name)
        context = cls(config=config, epoch=epoch, lease_id=lease_id, log_level=stderr_log_level())
        # the cached properties' own slots: what the term reaches through .checkpoint and .lake
        context.__dict__["checkpoint"] = checkpoint
        context.__dict__["stores_made"] = []  # made now: the copies the term makes share it
        if lake is not None:
            context.__dict__["lake"] = lake
        return context

    def to_option(self) -> str:
        """The context as the source's one option (secrets in clear: the option stays in this
        job's processes, and its key is redacted by Spark, see ``tiering.source``)."""
        return self.model_dump_json(context=WITH_SECRETS)

    @classmethod
    def from_option(cls, text: str) -> TermContext:
        try:
            return cls.model_validate_json(text)
        except ValidationError as e:
            raise ConfigError([f"kv-tiering source option: not a term context: {e}"]) from None

    @property
    def job(self) -> str:
        return self.config.job.name

    @property
    def writer_id(self) -> str:
        """Who the lake's round commits are from: the job, or in a group the group (``group:<name>``,
        which no job name can be), so that a table's txn versions (table epoch, round) order the
        commits of every member that ever owned it, and the commits of a member that lost the table
        are fenced as a stale term's are (docs/DESIGN.md §6)."""
        group = self.config.job.group
        return self.job if group is None else f"group:{group}"

    def ownership(self) -> OwnedTables | None:
        """The tables this member owns now and their table epochs; None outside a group."""
        group = self.config.job.group
        if group is None or self.group_file is None:
            return None
        from tiering.coord.ownership import OwnedTables

        return OwnedTables.read(Path(self.group_file), group, self.job)

    def write_authority(self) -> WriteAuthority:
        """Which tables the term writes now, each under which epoch (:mod:`tiering.coord.write_authority`):
        in a group, the tables this member owns as its file holds them now (read again when the
        authority is asked whether a table moved since), else every table under the term's epoch."""
        from tiering.coord.write_authority import MemberAuthority, SoloAuthority

        owned = self.ownership()
        if owned is None:
            return SoloAuthority(self.job, self.epoch)
        return MemberAuthority(owned.group, owned.job, owned.tables, self._owned_now)

    def _owned_now(self) -> Mapping[str, TableEpoch]:
        owned = self.ownership()
        return {} if owned is None else owned.tables

    @cached_property
    def lake(self) -> Lake:
        """The term's lake, built once: every part of the term reaches it through this one value."""
        from tiering.delta_log.lake import Lake

        return Lake.of(self.config.lake)

    @cached_property
    def checkpoint(self) -> CheckpointStore:
        """The term's checkpoint (:func:`tiering.state.checkpoint_store.checkpoint_of`), built once."""
        from tiering.state.checkpoint_store import checkpoint_of

        return checkpoint_of(self.config)

    @cached_property
    def stores_made(self) -> list[PlanningStore]:
        """The stores this term made (:meth:`planning_store`), for :meth:`close`: one list, which
        the context's copies (``model_copy``) share once made (:meth:`begin` makes it)."""
        return []

    def planning_store(self, *, open_client: bool = False) -> PlanningStore:
        """A store of the term behind the seam (:func:`planning_store`), a new one each call (the
        term's parts use theirs from threads of their own), closed with the term (:meth:`close`).
        ``open_client``: a Fluss store's Java client starts opening now, on a thread of its own
        (:meth:`~tiering.fluss.store.FlussStore.open_java_soon`): for a process whose first Java
        call (the driver's lease claim, the planning process's first snapshots) comes after other
        work that it can overlap."""
        store = planning_store(self.config)
        self.stores_made.append(store)
        if open_client and self.config.kvstore.kind == "fluss":
            from tiering.fluss.store import FlussStore

            if isinstance(store, FlussStore):
                store.open_java_soon()
        return store

    def close(self) -> None:
        """Let go of every store the term made: the term is over or its job stopped. A Fluss
        store holds a pyfluss connection on an event loop of its own, the Java client's connection
        (in a gateway JVM it started, where the process has no Spark JVM with the client) and the
        bucket reader the driver read with (the reference store holds nothing). A store used
        after this connects again, and is closed again by the next call (the leader's, once the
        group member that shares the term has stopped); one that fails to close does not keep the
        others open."""
        for store in self.stores_made:
            try:
                store.close()
            except Exception as e:  # noqa: BLE001 - the term is over either way: closing is best effort
                log.warning("%r not closed at the term's end: %s", store, one_line(e))

    def job_lease(self, store: PlanningStore) -> JobLease:
        """The term's lease handle on ``store``: every call carries this term's epoch."""
        from tiering.lease.job_lease import JobLease

        return JobLease(store, self.lease_id, self.epoch, int(self.config.lease.duration_s * 1000), enabled=self.leases)
