"""Opening a kazoo session for the tiering service: timeouts, reconnect policy, digest auth.

Failure modes: an unreachable ensemble makes ``KazooClient.start()`` time out with a bare
"Connection time-out" and keeps retrying in the background; here it is stopped and reported
naming the hosts. kazoo's default reconnect backoff grows to a minute, longer than a leader's
session timeout, so a restarted server would be noticed late: the backoff is capped at 1 s.
"""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, ANYONE_ID_UNSAFE, Permissions, make_digest_acl

from tiering.errors import CoordinationError

__all__ = ["connect", "job_acls", "close_quietly"]

RECONNECT_POLICY = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}


def job_acls(auth: tuple[str, str] | None) -> list[ACL] | None:
    """With auth: only ``user`` may change the job's znodes; everyone may read them (status)."""
    if auth is None:
        return None
    user, password = auth
    return [make_digest_acl(user, password, all=True), ACL(Permissions.READ, ANYONE_ID_UNSAFE)]


def connect(
    hosts: str, session_timeout_s: float, *, auth: tuple[str, str] | None = None, timeout_s: float = 15.0
) -> KazooClient:
    """A started client, or CoordinationError naming ``hosts`` when none answers in ``timeout_s``."""
    if auth is not None and (not auth[0] or ":" in auth[0]):
        raise CoordinationError(f"zookeeper auth user {auth[0]!r} must be non-empty and contain no ':'")
    zk = KazooClient(
        hosts=hosts,
        timeout=session_timeout_s,
        connection_retry=dict(RECONNECT_POLICY),
        auth_data=None if auth is None else [("digest", f"{auth[0]}:{auth[1]}")],
        default_acl=job_acls(auth),
    )
    try:
        zk.start(timeout=timeout_s)
    except KazooTimeoutError:
        close_quietly(zk)
        raise CoordinationError(f"cannot connect to ZooKeeper at {hosts} within {timeout_s:.0f}s") from None
    except KazooException as e:
        close_quietly(zk)
        raise CoordinationError(f"cannot connect to ZooKeeper at {hosts}: {e!r}") from e
    return zk


def close_quietly(zk: KazooClient) -> None:
    """Stop (closing the session, which deletes our ephemeral nodes when reachable) and close."""
    try:
        zk.stop()
        zk.close()
    except Exception:  # noqa: BLE001 - teardown of a broken client must not mask the real error
        pass
