"""Free loopback ports for the embedded services (ZooKeeper, the reference store, S3) and tests.

Failure mode: a port the kernel hands out for a bind to 0 is free only at that moment, and one
a process listens on through another interface looks free on loopback (SeaweedFS checks every
interface). So a port is picked by the kernel, then checked against every interface's listeners,
and several picked at once are distinct. A race with another process taking it after the check
stays possible: a service that fails to bind says so, and its start is retried by its caller.
"""

from __future__ import annotations

import socket
from pathlib import Path

__all__ = ["free_port", "free_ports", "listening"]


def listening() -> set[int]:
    """TCP ports in LISTEN state on any address (IPv4 and IPv6)."""
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        ports.update(int(f[1].rsplit(":", 1)[1], 16) for f in (line.split() for line in lines) if f[3] == "0A")
    return ports


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports nothing listens on, on any interface."""
    busy = listening()
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in busy and port not in ports:
            ports.append(port)
    return ports


def free_port() -> int:
    """One loopback port nothing listens on."""
    return free_ports(1)[0]
