"""``tiering check``: every dependency of a job tried once, before a first run, one verdict each.

Failure mode it prevents: a first ``run`` that stops at the first dependency out of reach, then,
once that is fixed, at the next one. Here each dependency is tried once, without retries and within
a timeout, and each gets a verdict even when another failed. The checks are those ``run`` makes on
its way, reused: ZooKeeper (connect, read the job's znodes: :func:`tiering.coord.leader.read_status`;
whether the configured digest credentials may write them, from their ACL),
the KV store (``GET /v1/health``, then the API version its OpenAPI document gives, when it serves
one, then the tables ``[tables]`` selects: an include pattern that matches no table fails, naming
what the store has; for Apache Fluss, :func:`_fluss`: its servers, the database, the tables, the
snapshot lease API), the lake root (:meth:`ObjectStore.check` with the conditional-put probe of
:mod:`tiering.objectstore.commit_probe`: two commits of one version, the second must be refused), and the
checkpoint (:func:`tiering.state.checkpoint_check.check_checkpoint`). Nothing is left behind: the
probe table is removed, a lake root or checkpoint not made yet is not made.

A run tries the store the same way first (:func:`before_run`): an availableNow run whose store is
out of reach, or whose selection matches no table, would otherwise retry for minutes or tier
nothing and exit 0, run after scheduled run.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tiering.conf.model import TieringConfig
from tiering.errors import (
    ConfigError,
    CoordinationError,
    LakeStorageError,
    LeaseUnsupportedError,
    StoreUnavailableError,
    one_line,
)

if TYPE_CHECKING:
    from tiering.conf.model import TablesConfig
    from tiering.fluss.store import FlussStore

__all__ = ["Verdict", "preflight", "CHECKS", "Selection", "table_selection", "before_run", "fluss_store"]

log = logging.getLogger(__name__)

#: What is checked, in this order: the name a verdict carries.
CHECKS = ("zookeeper", "kvstore", "lake", "checkpoint")
#: How long each dependency has to answer, by default: a person, or a scheduler, is waiting.
TIMEOUT_S = 10.0
#: At most this many of the store's table names in a line that lists them.
LISTED_TABLES = 20


@dataclass(frozen=True)
class Verdict:
    """One dependency's outcome: ``detail`` says what was found, or why it failed. ``warning``: it
    passed, with something a run goes on without (a Fluss server without the lease API)."""

    name: str
    ok: bool
    detail: str
    warning: bool = False

    def line(self) -> str:
        status = "FAILED" if not self.ok else "WARN" if self.warning else "ok"
        return f"{status:<6} {self.name:<10} {self.detail}"

    def as_dict(self) -> dict:
        return asdict(self)


def preflight(config: TieringConfig, timeout_s: float = TIMEOUT_S) -> list[Verdict]:
    """A verdict for each of :data:`CHECKS`, each dependency tried once within ``timeout_s``."""
    checks: dict[str, Callable[[TieringConfig, float], str | Verdict]] = {
        "zookeeper": _zookeeper,
        "kvstore": _kvstore,
        "lake": _lake,
        "checkpoint": _checkpoint,
    }
    return [_verdict(name, checks[name], config, timeout_s) for name in CHECKS]


def _verdict(
    name: str, check: Callable[[TieringConfig, float], str | Verdict], config: TieringConfig, timeout_s: float
) -> Verdict:
    try:
        found = check(config, timeout_s)
        return found if isinstance(found, Verdict) else Verdict(name, True, found)
    except Exception as e:  # noqa: BLE001 - every dependency gets its verdict; the error is that verdict
        log.debug("check %s failed", name, exc_info=True)
        return Verdict(name, False, one_line(e) or type(e).__name__)


def _zookeeper(config: TieringConfig, timeout_s: float) -> str:
    from tiering.coord.leader import read_status
    from tiering.coord.paths import job_path

    hosts, job = config.zookeeper.hosts, config.job.name
    status = read_status(hosts, job, timeout_s=timeout_s)
    if status.epoch is None:
        return f"{hosts}: connected; job {job!r} has no epoch yet (its first run creates {job_path(job)})"
    leader = status.leader or "none"
    return f"{hosts}: {job_path(job)} readable: epoch {status.epoch}, leader {leader}; {_writable(config, timeout_s)}"


def _writable(config: TieringConfig, timeout_s: float) -> str:
    """Whether the configured credentials may write the job's znode, read from its ACL.

    ZooKeeper accepts any digest credentials at connect time and refuses only the first write
    they do not cover (NoAuth), which for a job is its first election: the ACL is the one place
    a wrong password shows before a run."""
    from kazoo.security import Permissions, make_digest_acl_credential

    from tiering.coord.client import close_quietly, connect
    from tiering.coord.paths import job_path

    zk_conf, path = config.zookeeper, job_path(config.job.name)
    user, password = zk_conf.auth_user, zk_conf.auth_password
    auth = (user, password.get_secret_value()) if user is not None and password is not None else None
    # connected with the credentials: ZooKeeper shows a digest ACL's hash only to those it admits
    zk = connect(zk_conf.hosts, session_timeout_s=max(timeout_s, 2.0), auth=auth, timeout_s=timeout_s)
    try:
        acls, _ = zk.get_acls(path)
    finally:
        close_quietly(zk)
    writers = {acl.id.id for acl in acls if acl.perms & Permissions.WRITE and acl.id.scheme == "digest"}
    if any(acl.perms & Permissions.WRITE and acl.id.scheme == "world" for acl in acls):
        return "writable by anyone (no digest ACL)"
    if auth is not None and make_digest_acl_credential(*auth) in writers:
        return f"writable as {user!r}"
    names = ", ".join(sorted(repr(writer.split(":")[0]) for writer in writers)) or "nobody"
    if user is None:
        raise CoordinationError(
            f"{path} is writable only by digest user {names}: set zookeeper.auth_user and "
            "zookeeper.auth_password, or the job's first election is refused (NoAuth)"
        )
    raise CoordinationError(
        f"{path} is writable only by digest user {names}: zookeeper.auth_user {user!r} with the configured "
        "auth_password is not one of them, so the job's first election would be refused (NoAuth)"
    )


def _kvstore(config: TieringConfig, timeout_s: float) -> str | Verdict:
    if config.kvstore.kind == "fluss":
        return _fluss(config, timeout_s)
    import requests

    from tiering.context import store_client
    from tiering.kvstore.client import error_for, transport_reason

    client = store_client(config.kvstore, timeout_s=timeout_s)
    try:
        health = client.session.get(f"{client.url}/v1/health", timeout=timeout_s)
    except requests.RequestException as e:
        raise StoreUnavailableError(f"KV store at {client.url} unreachable: {transport_reason(e)}") from None
    if health.status_code != 200:
        raise error_for(health.status_code, _body(health), "GET", "/v1/health", store=client.url)
    selection = table_selection(config, timeout_s)
    selection.check()
    return f"{client.url}: healthy, {_api_version(client.session, client.url, timeout_s)}; {selection.summary()}"


@dataclass(frozen=True)
class Selection:
    """The store's tables against ``[tables]``: those selected, and the include patterns that match
    none of the store's tables (a typo, or a table not created yet)."""

    store: str
    tables: tuple[str, ...]
    selected: tuple[str, ...]
    unmatched: tuple[str, ...]

    def summary(self) -> str:
        return f"{len(self.selected)} of {len(self.tables)} tables selected ({_names(self.selected)})"

    def problem(self) -> str:
        """What is wrong with the selection, as one line ("" when nothing is)."""
        if not self.unmatched:
            return ""
        patterns = ", ".join(repr(p) for p in self.unmatched)
        return (
            f"tables.include: {patterns} {'matches' if len(self.unmatched) == 1 else 'match'} no table in the "
            f"store at {self.store}, which has {len(self.tables)}: {_names(self.tables)}"
        )

    def check(self) -> None:
        """ConfigError naming the include patterns that match no table."""
        if self.unmatched:
            raise ConfigError([self.problem()])


def _names(names: tuple[str, ...]) -> str:
    shown = ", ".join(names[:LISTED_TABLES]) or "none"
    return shown + (f" and {len(names) - LISTED_TABLES} more" if len(names) > LISTED_TABLES else "")


def table_selection(config: TieringConfig, timeout_s: float = TIMEOUT_S) -> Selection:
    """The store's tables and what ``[tables]`` selects of them, asked once (no retries):
    :class:`StoreUnavailableError` naming the store when it does not answer within ``timeout_s``;
    for Fluss, :class:`ConfigError` naming the database when the cluster has no such database."""
    if config.kvstore.kind == "fluss":
        store = fluss_store(config, timeout_s)
        try:
            return _fluss_selection(config, store)
        finally:
            store.close()
    from tiering.context import store_client

    client = store_client(config.kvstore, timeout_s=timeout_s, retry_deadline_s=0)
    return _selection(config.tables, client.url, tuple(sorted(t.name for t in client.list_tables())))


def _selection(tables_config: TablesConfig, store: str, tables: tuple[str, ...]) -> Selection:
    unmatched = tuple(p for p in tables_config.include if not any(fnmatch.fnmatchcase(t, p) for t in tables))
    return Selection(store, tables, tuple(t for t in tables if tables_config.selects(t)), unmatched)


def _fluss(config: TieringConfig, timeout_s: float) -> Verdict:
    """The Fluss cluster reached, the database there, the tables selected (log tables skipped,
    named), and a lease created and dropped: a server without the lease API is a warning, since
    the job tiers on without leases (docs/DESIGN.md §3)."""
    store = fluss_store(config, timeout_s)
    try:
        selection = _fluss_selection(config, store)
        selection.check()
        found = f"{config.kvstore.where}: reachable; {selection.summary()}"
        if store.log_tables:
            found += f"; log tables skipped (no primary key): {_names(tuple(sorted(store.log_tables)))}"
        lease, warning = _fluss_lease(config.job.name, store, timeout_s)
        return Verdict("kvstore", True, f"{found}; {lease}", warning=warning)
    finally:
        store.close()


def fluss_store(config: TieringConfig, timeout_s: float) -> FlussStore:
    """The config's Fluss store for one question each, as the operator commands ask it: no retries
    (Fluss's clients retry for long by default), and the Java client's connection and requests
    given ``timeout_s`` unless ``[kvstore.client]`` says otherwise (pyfluss's connect fails at
    once when nothing listens)."""
    from tiering.context import fluss_client_jar
    from tiering.fluss.store import FlussStore
    from tiering.kvstore.retry import NO_RETRY

    servers, database = config.kvstore.fluss_database
    bound = f"{max(1, int(timeout_s))}s"
    options = {"client.connect-timeout": bound, "client.request-timeout": bound, **config.kvstore.client}
    return FlussStore(servers, database, fluss_client_jar(config.spark), options, retrying=NO_RETRY)


def _fluss_selection(config: TieringConfig, store: FlussStore) -> Selection:
    databases = tuple(store.databases())
    if store.database not in databases:
        raise ConfigError(
            [
                f"kvstore.database: Fluss at {store.bootstrap_servers} has no database {store.database!r}; "
                f"it has {len(databases)}: {_names(databases)}"
            ]
        )
    return _selection(config.tables, config.kvstore.where, tuple(sorted(t.name for t in store.tables())))


def _fluss_lease(job: str, store: FlussStore, timeout_s: float) -> tuple[str, bool]:
    """A lease of the job's created and dropped (it lapses by itself within ``timeout_s`` when the
    drop fails): what was found, and whether it is a warning."""
    lease_id = f"{job}-{uuid.uuid4().hex}"
    try:
        store.create(lease_id, 0, int(timeout_s * 1000))
        store.drop(lease_id, 0)
    except LeaseUnsupportedError as e:
        return f"snapshot lease API: none ({one_line(e)}); a run tiers WITHOUT snapshot leases", True
    return "snapshot lease API: a lease created and dropped", False


def before_run(config: TieringConfig, timeout_s: float = TIMEOUT_S) -> None:
    """What a run asks the store before it leads. An availableNow run fails at once, with check's
    line, when the store is out of reach (:class:`StoreUnavailableError`) or its selection matches
    no table (:class:`ConfigError` naming the patterns); a continuous run waits for both (it
    retries the store, and tiers a table once one is created), saying so in one line."""
    try:
        selection = table_selection(config, timeout_s)
    except StoreUnavailableError as e:
        if config.trigger.available_now:
            raise
        log.warning("job=%s: %s; the job retries it", config.job.name, one_line(e))
        return
    if not selection.unmatched:
        return
    if config.trigger.available_now and not selection.selected:
        selection.check()
    what = f"tiers the {len(selection.selected)} it selects" if selection.selected else "tiers nothing"
    log.warning("job=%s: %s; the job %s until one is created", config.job.name, selection.problem(), what)


def _body(response) -> object:
    try:
        return response.json()
    except ValueError:
        return response.text


def _api_version(session, url: str, timeout_s: float) -> str:
    """The store's API version from its OpenAPI document; a store of the protocol need not serve one."""
    import requests

    try:
        response = session.get(f"{url}/openapi.json", timeout=timeout_s)
        version = response.json()["info"]["version"] if response.status_code == 200 else None
    except (requests.RequestException, ValueError, KeyError, TypeError):
        version = None
    return f"API version {version}" if version else "API version not published (no /openapi.json)"


def _lake(config: TieringConfig, timeout_s: float) -> str:
    from tiering.delta_log.lake import Lake

    store = Lake.of(config.lake).store
    if not store.is_s3 and not os.path.exists(store.root):
        return f"{store.root}: not created yet; {_creatable(Path(store.root), 'lake root')}"
    store.check(probe=True)
    return f"{store.root}: writable, a second commit of one Delta version is refused (conditional put)"


def _checkpoint(config: TieringConfig, timeout_s: float) -> str:
    from tiering.state.checkpoint_check import check_checkpoint
    from tiering.state.checkpoint_store import checkpoint_of
    from tiering.state.lease_file import read_lease_id

    checkpoint = checkpoint_of(config)
    check_checkpoint(checkpoint, config.job.name)
    root = checkpoint.name()
    if checkpoint.kind() is None:
        return f"{root}: not created yet; its first run creates it"
    lease_id = read_lease_id(checkpoint)
    return f"{root}: usable" + (f", lease {lease_id}" if lease_id else ", no lease id yet")


def _creatable(path: Path, role: str) -> str:
    """Where ``path`` would be created, when a write there is allowed; else LakeStorageError."""
    ancestor = path.absolute().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise LakeStorageError(f"{role} {path} cannot be created: {ancestor} is not a writable directory")
    return f"its first run creates it in {ancestor}"
