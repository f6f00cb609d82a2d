"""Opening a kazoo session for the tiering service: timeouts, reconnect policy, digest auth.

Failure modes: an unreachable ensemble makes ``KazooClient.start()`` time out with a bare
"Connection time-out" and keeps retrying in the background; here it is stopped and reported
naming the hosts. kazoo's default reconnect backoff grows to a minute, longer than a leader's
session timeout, so a restarted server would be noticed late: the backoff is capped at 1 s.
The server grants a session timeout within its own ``minSessionTimeout``/``maxSessionTimeout``,
not necessarily the one asked for, and it expires the session after the granted one: a leader
timing its step-down by the configured one (60 s asked, 40 s granted) would keep acting long
after a standby could lead. kazoo reads the granted timeout from the server's connect answer but
keeps only the read and ping timeouts it derives from it; :class:`SessionClient` keeps it
(:func:`granted_timeout_s`).
"""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import Connect
from kazoo.security import ACL, ANYONE_ID_UNSAFE, Permissions, make_digest_acl

from tiering.errors import CoordinationError

__all__ = ["SessionClient", "connect", "job_acls", "close_quietly", "granted_timeout_s"]

RECONNECT_POLICY = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}


class SessionClient(KazooClient):
    """A kazoo client that keeps the session timeout the server granted (:attr:`granted_s`: the
    one asked for until a server answered). Each (re)connection's answer replaces it: another
    server of the ensemble may grant another."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.granted_s: float = self._session_timeout / 1000
        connection = self._connection
        invoke = connection._invoke

        def recording(timeout, request, xid=None):
            answer = invoke(timeout, request, xid)
            if isinstance(request, Connect) and isinstance(answer, tuple) and isinstance(answer[0], Connect):
                if answer[0].time_out > 0:  # 0: the session expired, nothing was granted
                    self.granted_s = answer[0].time_out / 1000
            return answer

        connection._invoke = recording


def granted_timeout_s(zk: KazooClient) -> float:
    """The session timeout the server granted ``zk`` (a :class:`SessionClient`), else the one
    ``zk`` asked for: after it without contact the server expires the session."""
    if isinstance(zk, SessionClient):
        return zk.granted_s
    return zk._session_timeout / 1000


def job_acls(auth: tuple[str, str] | None) -> list[ACL] | None:
    """With auth: only ``user`` may change the job's znodes; everyone may read them (status)."""
    if auth is None:
        return None
    user, password = auth
    return [make_digest_acl(user, password, all=True), ACL(Permissions.READ, ANYONE_ID_UNSAFE)]


def connect(
    hosts: str, session_timeout_s: float, *, auth: tuple[str, str] | None = None, timeout_s: float = 15.0
) -> SessionClient:
    """A started client asking for ``session_timeout_s``, or CoordinationError naming ``hosts`` when
    none answers in ``timeout_s``."""
    if auth is not None and (not auth[0] or ":" in auth[0]):
        raise CoordinationError(f"zookeeper auth user {auth[0]!r} must be non-empty and contain no ':'")
    zk = SessionClient(
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
