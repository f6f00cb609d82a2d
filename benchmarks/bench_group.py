"""``group`` mode: a tiering group of 1, 2 and 3 members over N changing tables: how a member's
round shrinks with its share, and how long a killed member's tables take to move.

Real parts: the store process, an embedded ZooKeeper, and each member a ``tiering run`` process
(``local[1]``, its own JVM) with ``[job] group`` set, all over one local lake (docs/DESIGN.md §7).
``--tables N`` tables of 2 buckets; a writer changes 3 rows in every table, pass after pass, the
whole time. Members join one after another up to each count of ``--members 1,2,3``; once the group
is balanced (ZooKeeper's table epochs give every member its share) and every member commits, the
steady round of each member is read from the lake: a member's round ends with its last commit (the
commits carry the member's lease and round), and its round time is the time between two
consecutive round ends, ``--repeat`` rounds per member after the window's first (begun before it).
The ratio is that against the 1-member round of the same run. At the largest count one member is
SIGKILLed: the time from the kill until every table it owned has a commit by another member
(commit timestamps), which includes its ZooKeeper session's expiry (``--session-timeout``).

Run: .venv/bin/python -m benchmarks.bench_tiering group [--tables 600] [--members 1,2,3]
[--repeat 4] [--session-timeout 6] [--out FILE]
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from benchmarks.common import Worker, load_table, rows
from tests.support.config import SPARK_LOCAL, write_conf
from tests.support.drivers import Driver
from tests.support.waiting import wait_until
from tiering.coord.embedded import EmbeddedZooKeeper
from tiering.coord.group import read_group
from tiering.delta_log.commits import tiering_entry
from tiering.delta_log.lake import Lake

GROUP = "bench-g"
BUCKETS = 2
TRIGGER_S = 1.0
#: bounds for JVMs starting and bootstrapping hundreds of tables on two busy cores; never a figure
DEADLINE_S = 1200.0
#: a committed table in a member's log: a cheap way to count its rounds while waiting
_COMMITTED = re.compile(rb"round=(\d+) table=")


@dataclass(frozen=True)
class _Commit:
    """One tiering commit of a table, as the lake's history holds it."""

    table: str
    job: str
    lease_id: str
    round: int
    at_ms: int


class _Writer(Worker):
    """3 rows changed in every table, 4 tables at a time, pass after pass (at most one a second),
    so every round of every member finds each of its tables changed."""

    def __init__(self, client, names: list[str]) -> None:
        super().__init__("bench-group-writer")
        self._client = client
        self._names = names
        self.passes = 0

    def work(self) -> None:
        with ThreadPoolExecutor(4) as pool:
            while not self.stopping.is_set():
                started = time.monotonic()
                changed = rows(pa.array([1, 7, 13], pa.int64()), salt=self.passes + 1)
                list(pool.map(lambda name: self._client.write_arrow(name, changed), self._names))
                self.passes += 1
                self.stopping.wait(max(0.0, 1.0 - (time.monotonic() - started)))


class _Members:
    """The group's member processes, each a ``tiering run`` over the same tables and lake."""

    def __init__(self, work: Path, store_url: str, zk_hosts: str, session_timeout_s: float) -> None:
        self._work = work
        self._store_url = store_url
        self._zk_hosts = zk_hosts
        self._session_timeout_s = session_timeout_s
        self.drivers: dict[str, Driver] = {}

    def start(self, name: str) -> Driver:
        (self._work / name).mkdir()
        conf = write_conf(
            self._work / name / "tiering.toml",
            job=name,
            store_url=self._store_url,
            zk_hosts=self._zk_hosts,
            lake_root=self._work / "lake",
            group=GROUP,
            tables={"include": ["g_*"]},
            zookeeper={"session_timeout_s": self._session_timeout_s},
            trigger={"interval_s": TRIGGER_S},
            spark={**SPARK_LOCAL, "spark.master": "local[1]", "spark.driver.memory": "768m"},
        )
        self.drivers[name] = Driver(conf, conf.parent / "driver.log")
        return self.drivers[name]

    def live(self) -> dict[str, Driver]:
        return {name: d for name, d in self.drivers.items() if d.proc.returncode is None}

    def check(self) -> None:
        """Raise, with its output's tail, when a member that was not killed has exited."""
        for name, driver in self.live().items():
            if driver.proc.poll() is not None:
                raise RuntimeError(f"member {name} exited {driver.proc.returncode}:\n{driver.tail()}")

    def rounds_since(self, name: str, offset: int) -> set[int]:
        """The rounds a member's log shows committing tables after byte ``offset``."""
        with open(self.drivers[name].log, "rb") as out:
            out.seek(offset)
            return {int(m.group(1)) for m in _COMMITTED.finditer(out.read())}

    def stop(self) -> None:
        for driver in self.live().values():
            driver.signal(signal.SIGTERM)
        for driver in self.drivers.values():
            driver.wait(180)


def _tables(client, names: list[str]) -> None:
    """``names`` as tables of 20 rows with a snapshot each, 8 at a time."""

    def one(name: str) -> None:
        load_table(client, name, range(20), BUCKETS)
        client.take_snapshots(name)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, names))


def _owners(zk_hosts: str, names: list[str]) -> dict[str, str]:
    """Table -> the member owning it in ZooKeeper (tables no one owns are left out)."""
    return {table: owned.job for table, owned in read_group(zk_hosts, GROUP, names).owners.items()}


def _balanced(owners: dict[str, str], names: list[str], members: list[str]) -> bool:
    """Every table owned by one of ``members``, each holding its ``n // m`` or ``n // m + 1``."""
    if len(owners) != len(names) or set(owners.values()) != set(members):
        return False
    share = len(names) // len(members)
    counts = [sum(1 for job in owners.values() if job == m) for m in members]
    return all(share <= c <= share + 1 for c in counts)


def _job_of(lease_id: str) -> str:
    """A lease id is ``<job>-<32 hex>`` (docs/DESIGN.md §3)."""
    return lease_id.rsplit("-", 1)[0]


def _commits(lake: Lake, names: list[str], since_ms: int) -> list[_Commit]:
    """Every tiering commit of ``names`` at or after ``since_ms``, from the tables' Delta histories."""

    def of(table: str) -> list[_Commit]:
        loaded = lake.load(table)
        found = []
        for entry in loaded.dt.history() if loaded is not None else []:
            meta = tiering_entry(entry)
            if meta is None or entry["timestamp"] < since_ms:
                continue
            meta = json.loads(meta) if isinstance(meta, str) else meta
            found.append(_Commit(table, _job_of(meta["lease_id"]), meta["lease_id"], meta["round"], entry["timestamp"]))
        return found

    with ThreadPoolExecutor(4) as pool:
        return [c for found in pool.map(of, names) for c in found]


def _round_times(commits: list[_Commit], member: str, repeat: int) -> dict:
    """A member's steady round: the time between the ends (last commit) of its consecutive rounds,
    the window's first round left out (begun before the window); with its rounds' table counts."""
    rounds: dict[tuple[str, int], list[int]] = defaultdict(list)
    for c in commits:
        if c.job == member:
            rounds[(c.lease_id, c.round)].append(c.at_ms)
    ordered = sorted(rounds.values(), key=max)[1 : repeat + 2]
    ends = [max(r) for r in ordered]
    gaps = [(b - a) / 1000 for a, b in zip(ends, ends[1:], strict=False)]
    if not gaps:
        raise RuntimeError(f"member {member}: fewer than 3 rounds committed in the window")
    return {
        "round_s": [round(g, 2) for g in gaps],
        "round_p50_s": round(statistics.median(gaps), 2),
        "tables_per_round": [len(r) for r in ordered[1:]],
    }


def _steady(members: _Members, lake: Lake, zk_hosts: str, names: list[str], repeat: int) -> dict:
    """Once the live members are balanced: ``repeat`` steady rounds of each, from the lake."""
    live = sorted(members.live())

    def balanced() -> bool:
        members.check()
        return _balanced(_owners(zk_hosts, names), names, live)

    wait_until(balanced, f"{len(live)} members to share the tables", timeout_s=DEADLINE_S, interval_s=2.0)
    joined = {name: members.drivers[name].log.stat().st_size for name in live}

    def tiering() -> bool:
        members.check()
        return all(members.rounds_since(name, joined[name]) for name in live)

    # The window opens once every member commits: a joining member takes its share at once, and the
    # others' rounds meanwhile (its JVM still starting) are not those of a group of this size.
    wait_until(tiering, "every member to commit a round", timeout_s=DEADLINE_S, interval_s=2.0)
    since = time.time()
    offsets = {name: members.drivers[name].log.stat().st_size for name in live}

    def enough() -> bool:
        members.check()
        return all(len(members.rounds_since(name, offsets[name])) >= repeat + 3 for name in live)

    wait_until(enough, f"{repeat} steady rounds of each member", timeout_s=DEADLINE_S, interval_s=2.0)
    owners = _owners(zk_hosts, names)
    commits = _commits(lake, names, int(since * 1000))
    per_member = {
        name: {"tables": sum(1 for job in owners.values() if job == name), **_round_times(commits, name, repeat)}
        for name in live
    }
    round_s = statistics.median(m["round_p50_s"] for m in per_member.values())
    return {
        "members": len(live),
        "round_p50_s": round(round_s, 2),
        "tables_per_s": round(sum(m["tables"] / m["round_p50_s"] for m in per_member.values()), 1),
        "per_member": per_member,
    }


def _kill_one(members: _Members, lake: Lake, zk_hosts: str, names: list[str]) -> dict:
    """SIGKILL the first member: seconds until ZooKeeper gives all its tables to the others, and
    until each of them has a commit by another member (its first commit's timestamp)."""
    killed = sorted(members.live())[0]
    lost = sorted(t for t, job in _owners(zk_hosts, names).items() if job == killed)
    members.drivers[killed].kill()
    killed_at = time.time()

    def reassigned() -> bool:
        members.check()
        owners = _owners(zk_hosts, names)
        return all(owners.get(t) not in (None, killed) for t in lost)

    wait_until(reassigned, "the killed member's tables reassigned", timeout_s=DEADLINE_S, interval_s=0.5)
    reassigned_s = time.time() - killed_at
    pending = set(lost)

    def committed() -> bool:
        members.check()
        moved = {c.table for c in _commits(lake, sorted(pending), int(killed_at * 1000)) if c.job != killed}
        pending.difference_update(moved)
        return not pending

    wait_until(committed, "the killed member's tables committed by others", timeout_s=DEADLINE_S, interval_s=2.0)
    after = [c for c in _commits(lake, lost, int(killed_at * 1000)) if c.job != killed]
    late = [c for c in _commits(lake, lost, int(killed_at * 1000)) if c.job == killed]
    if late:
        raise RuntimeError(f"the killed member {killed} committed after its kill: {late[:3]}")
    first = {t: min(c.at_ms for c in after if c.table == t) for t in lost}
    return {
        "killed": killed,
        "tables": len(lost),
        "reassigned_s": round(reassigned_s, 1),
        "moved_s": round(max(first.values()) / 1000 - killed_at, 2),
        "first_moved_s": round(min(first.values()) / 1000 - killed_at, 2),
    }


def bench_group(args, work: Path, store) -> dict:
    counts = sorted({int(n) for n in args.members.split(",")})
    names = [f"g_{i:05d}" for i in range(args.tables)]
    client = store.client(timeout_s=600)
    started = time.perf_counter()
    _tables(client, names)
    setup_s = time.perf_counter() - started
    lake = Lake.at(str(work / "lake"))
    phases = []
    with EmbeddedZooKeeper() as zk, _Writer(client, names) as writer:
        zk.start(work / "zk")
        members = _Members(work, store.url, zk.hosts, args.session_timeout)
        try:
            for count in counts:
                while len(members.drivers) < count:
                    members.start(f"bench-m{len(members.drivers)}")
                phases.append(_steady(members, lake, zk.hosts, names, args.repeat))
                if writer.error is not None:
                    raise writer.error
                print(json.dumps(phases[-1]), file=sys.stderr, flush=True)
            moved = _kill_one(members, lake, zk.hosts, names) if counts[-1] > 1 else None
            print(json.dumps({"killed_member": moved}), file=sys.stderr, flush=True)
            members.stop()
        finally:
            for driver in members.drivers.values():
                driver.reap()
    base = next((p for p in phases if p["members"] == 1), None)
    for phase in phases:
        if base is not None:
            phase["round_vs_1_member"] = round(phase["round_p50_s"] / base["round_p50_s"], 2)
            phase["throughput_vs_1_member"] = round(phase["tables_per_s"] / base["tables_per_s"], 2)
    return {
        "tables": args.tables,
        "buckets_per_table": BUCKETS,
        "setup_s": round(setup_s, 1),
        "session_timeout_s": args.session_timeout,
        "trigger_s": TRIGGER_S,
        "writer_passes": writer.passes,
        "load_avg": [round(x, 1) for x in os.getloadavg()],
        "phases": phases,
        "killed_member": moved,
    }
