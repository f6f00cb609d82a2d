"""Table epochs: which member of a tiering group owns each table, under an epoch per table.

Failure mode it prevents: two members acting on one table at once — a member frozen past its
session timeout (SIGSTOP, a long GC pause) that wakes up still planning a table the group gave to
another member, or a member slow to see a rebalance. Before a member touches a table it has newly
been given, it bumps the table's epoch in ZooKeeper with a compare-and-set (the znode's version)
inside a transaction fenced by the member's own job epoch (coord/fencing.py), so a stale leader of
that job cannot bump either. The new epoch is persisted before the table's first lease call,
report or commit (TiCDC's idea, its PR 5434: the owner's epoch is written before ownership moves),
and every one of those carries it: the store refuses a lower one (409 ``TABLE_EPOCH_FENCED``) and
the Delta commit is fenced by it, so the stale owner is refused wherever it writes, not only
where the assignment lives. Fluss's tiering epochs fence the coordinator's bookkeeping but not the
lake commit (Fluss #2648); ours fence both.

The znode ``/tiering/groups/<group>/tables/<table>`` holds ``{"job": owner, "epoch": n}``. Epochs
start at 1 and only grow; each epoch belongs to one owner.
"""

from __future__ import annotations

import json
import logging
from functools import partial
from typing import NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.security import OPEN_ACL_UNSAFE

from tiering.coord.cas import CasConflict, compare_and_set, create_or_set, is_conflict
from tiering.coord.epoch import Epoch
from tiering.coord.fencing import OperationFailed, commit_fenced
from tiering.coord.paths import ensure_group_znodes, table_epoch_path
from tiering.epochs import TableEpoch
from tiering.errors import CoordinationError

__all__ = ["TableHolder", "read_table_epoch", "read_table_epochs", "bump_table_epoch"]

log = logging.getLogger(__name__)


class TableHolder(NamedTuple):
    """Who holds a table in its group (its table epoch znode): the job, and the table epoch it got."""

    table: str
    job: str
    epoch: TableEpoch


def _decode(table: str, path: str, data: bytes) -> TableHolder:
    try:
        record = json.loads(data)
        job, epoch = record["job"], record["epoch"]
    except (ValueError, TypeError, KeyError):
        raise CoordinationError(f"table epoch znode {path} holds {data[:80]!r}, not {{job, epoch}}") from None
    if not isinstance(job, str) or not isinstance(epoch, int) or epoch < 1:
        raise CoordinationError(f"table epoch znode {path} holds {data[:80]!r}: job must be a name, epoch >= 1")
    return TableHolder(table, job, TableEpoch(epoch))


def _read(zk: KazooClient, group: str, table: str) -> tuple[TableHolder, int] | None:
    path = table_epoch_path(group, table)
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return None
    except KazooException as e:
        raise CoordinationError(f"cannot read the epoch of table {table!r} in group {group!r} at {path}: {e!r}") from e
    return _decode(table, path, data), stat.version


def read_table_epoch(zk: KazooClient, group: str, table: str) -> TableHolder | None:
    """The table's owner and epoch in ``group``, or None when no member ever owned it."""
    found = _read(zk, group, table)
    return None if found is None else found[0]


def read_table_epochs(zk: KazooClient, group: str, tables: list[str]) -> dict[str, TableHolder]:
    """Owner and epoch of each of ``tables`` that a member ever owned (for status and planning).
    The reads are sent at once and then waited for: a rebalance of hundreds of tables pays one
    round trip, not one per table."""
    paths = {table: table_epoch_path(group, table) for table in tables}
    pending = {table: zk.get_async(path) for table, path in paths.items()}
    found: dict[str, TableHolder] = {}
    for table, answer in pending.items():
        path = paths[table]
        try:
            data, _ = answer.get()
        except NoNodeError:
            continue
        except KazooException as e:
            raise CoordinationError(
                f"cannot read the epoch of table {table!r} in group {group!r} at {path}: {e!r}"
            ) from e
        found[table] = _decode(table, path, data)
    return found


def bump_table_epoch(zk: KazooClient, group: str, table: str, job: str, job_epoch: Epoch) -> TableHolder:
    """Make ``job`` the table's owner at the next table epoch and return it, persisted.

    The set is a compare-and-set on the table znode's version (coord/cas.py) inside a transaction
    that checks ``job``'s epoch znode (``job_epoch``): a concurrent bump makes ours retry from the
    new value; a newer term of ``job`` makes it raise FencedEpochError, and a lost session
    LeadershipLostError (coord/fencing.py). Raises CoordinationError after
    ``MAX_CAS_ATTEMPTS`` concurrent bumps in a row.
    """
    ensure_group_znodes(zk, group)
    what = f"epoch of table {table!r} in group {group!r} at {table_epoch_path(group, table)}"
    return compare_and_set(partial(_bump_once, zk, group, table, job, job_epoch), what=what)


def _bump_once(zk: KazooClient, group: str, table: str, job: str, job_epoch: Epoch) -> TableHolder:
    """One fenced compare-and-set of the table's epoch; CasConflict when another bump landed since the read."""
    path = table_epoch_path(group, table)
    current = _read(zk, group, table)
    epoch = 1 if current is None else current[0].epoch + 1
    data = json.dumps({"job": job, "epoch": epoch}, sort_keys=True).encode()
    version = None if current is None else current[1]
    build = partial(create_or_set, path=path, data=data, version=version, acl=OPEN_ACL_UNSAFE)
    try:
        commit_fenced(zk, job, job_epoch, build, what=f"table epoch of {table!r}")
    except OperationFailed as e:
        if is_conflict(e.error):
            raise CasConflict(path) from e
        raise
    previous = "nobody" if current is None else f"job {current[0].job!r} at table epoch {current[0].epoch}"
    log.info("table %r of group %r: job %r owns it at table epoch %d (from %s)", table, group, job, epoch, previous)
    return TableHolder(table, job, TableEpoch(epoch))
