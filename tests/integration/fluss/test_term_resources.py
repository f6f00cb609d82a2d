"""What a leadership term over Apache Fluss leaves in the driver's process once it ends: nothing it
opened (docs/DESIGN.md §2, ``TermContext.close``). A term's stores (the lease's, the rounds', the
observer's) and the bucket reader the driver read a changelog with each hold a pyfluss connection
to the cluster, and where the process has no Spark JVM with Fluss's client, a gateway JVM of their
own; a driver that runs term after term (a standby taking over, a continuous job restarted in
process) would pile them up. Counted from the operating system: the process's TCP connections to
the cluster's servers and its gateway JVM child processes, before and after an in-process term.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from tests.support.fluss_job import job_conf, lake_rows, table_with_changes_after_its_snapshot
from tiering.conf.loader import load_config
from tiering.job import run_as_leader

pytestmark = pytest.mark.integration

pytest.importorskip("fluss")


def _sockets_to(ports: set[int]) -> set[str]:
    """This process's TCP sockets connected to ``ports`` on loopback, by inode."""
    inodes = {
        os.readlink(f"/proc/self/fd/{fd}")[len("socket:[") : -1]
        for fd in os.listdir("/proc/self/fd")
        if _link(f"/proc/self/fd/{fd}").startswith("socket:[")
    }
    connected = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port, state, inode = int(fields[2].rsplit(":", 1)[1], 16), fields[3], fields[9]
            if inode in inodes and remote_port in ports and state == "01":  # ESTABLISHED
                connected.add(inode)
    return connected


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:  # closed meanwhile
        return ""


def _gateway_jvms() -> set[int]:
    """The py4j gateway JVMs among this process's children (tiering.fluss.jvm's, not Spark's)."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and b"py4j.GatewayServer" in cmdline:
            found.add(int(pid))
    return found


def test_a_term_over_fluss_closes_what_it_opened_in_the_driver(
    fluss_cluster, writer, store, database, zk_server, tmp_path
):
    table = table_with_changes_after_its_snapshot(writer, store, "items", 40, 2)
    conf = job_conf(
        tmp_path, f"term-{uuid.uuid4().hex[:6]}", fluss_cluster.bootstrap_servers, database, zk_server.hosts
    )
    config = load_config(conf, {}, {"trigger.available_now": True})
    port = fluss_cluster.bootstrap_servers.rpartition(":")[2]
    ports = {int(port), fluss_cluster._started_ports().tablet}
    sockets, jvms = _sockets_to(ports), _gateway_jvms()

    result = run_as_leader(config)

    assert result.ok and result.rounds >= 1, result
    assert lake_rows(tmp_path, table) == writer.current_rows(table)
    assert _sockets_to(ports) - sockets == set(), "connections to Fluss left open by the term"
    assert _gateway_jvms() - jvms == set(), "gateway JVMs left running by the term"
