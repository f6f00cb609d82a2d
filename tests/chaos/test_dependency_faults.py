"""The fault matrix on real processes: the KV store, ZooKeeper, Spark executors.

Each case breaks one dependency of a running job at an exact point of a round, then clears the
fault, and asserts what an operator relies on: the lake equals the test's oracle row by row
(read by delta-rs, not by the service: :mod:`tests.support.fault_matrix`), no key twice, the
failing table's error names the dependency and the operation while the fault lasts (the round
outcome, ``tiering status --json``), the other tables go on committing where they can, no lease
is left after a clean stop, and how many seconds after the fault cleared the lake caught up.

The exact point is a request the job makes: the store is reached through
:class:`~tests.support.fault_proxy.FaultProxy`, which holds the round's first request of a kind
(the planner's snapshot listing, a table's segment lookup in prepare, its lake report after the
commit, a lease release) while the test freezes or kills the store, then lets it go on.

CI runs a bounded part (each case within ~60 s): the store SIGKILLed mid-round and restarted,
ZooKeeper SIGSTOPped past the session timeout while the leader's round writes files.
``scripts/chaos.sh`` runs the whole matrix (``CHAOS_MATRIX=full``); the table is printed at the
end of the session and written to ``$CHAOS_MATRIX_JSON`` when set.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.support.config import CHAOS, CHAOS_LEASE_S, CHAOS_SESSION_TIMEOUT_S, write_conf
from tests.support.drivers import REPO, Driver, build_pyfiles_zip
from tests.support.fault_matrix import (
    FaultMatrix,
    FaultResult,
    full_matrix_only,
    status,
    status_line,
    tally,
    wait_recovered,
)
from tests.support.fault_proxy import FaultProxy, Hold, Rule, store_error
from tests.support.lake import assert_no_orphans, tiering_commits
from tests.support.oracle import TableOracle
from tests.support.running import Rounds, Writers, in_thread
from tests.support.waiting import wait_until
from tiering.conf.loader import load_config
from tiering.context import TermContext
from tiering.job import TieringJob

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

SEED = int(os.environ.get("CHAOS_SEED", "6061"))
#: A frozen store outlasts `tiering status`'s patience (10 s a call) but not the job's (30 s a
#: call): the job waits the stall out, the operator is told the store does not answer.
STALL_S = 20.0
#: A store answering 5xx outlasts the job's retries of one call (30 s, tiering.kvstore.retry).
ERRORS_S = 40.0


class _Retries(logging.Handler):
    """The store calls the job retried (``tiering.kvstore.retry``'s warnings), as logged."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@dataclass
class StoreUnderFault:
    """A continuous job in this process tiering tables ``a`` and ``b`` from a store reached
    through a fault proxy; the test writes to the store directly."""

    store: object
    proxy: FaultProxy
    conf: Path
    tables: list[TableOracle]
    lake: Path
    rounds: Rounds = field(default_factory=Rounds)
    retries: _Retries = field(default_factory=_Retries)
    stop: threading.Event = field(default_factory=threading.Event)
    box: dict = field(default_factory=dict)
    runner: threading.Thread | None = None

    @property
    def client(self):
        return self.tables[0].client

    def churn(self) -> None:
        """Changes in every table right before a fault: the lake lags when it strikes."""
        for t in self.tables:
            t.churn(40, key_space=400)

    def add_table(self, name: str) -> None:
        """A new table with a snapshot: its first round leases, bootstraps and releases it."""
        table = TableOracle(self.client, name, num_buckets=2, seed=SEED)
        table.upsert(range(200))
        self.client.take_snapshots(name)
        self.tables.append(table)

    def hold(self, method: str, path: str) -> Hold:
        """Hold the job's next ``method`` request on ``path`` (a pattern): the round stops there."""
        return self.proxy.add(Rule(Hold(), method=method, path=path, times=1)).action

    def commits(self, table: str) -> int:
        return len(tiering_commits(self.lake, table))

    def finish(self, cleared_at: float) -> float:
        """Recovery seconds; then a clean stop that must leave no lease and no stuck file."""
        recovery_s = wait_recovered(self.client, self.lake, self.tables, cleared_at)
        self.stop.set()
        self.runner.join(120)
        assert "error" not in self.box, f"the job died of the fault: {self.box.get('error')!r}"
        assert self.box["result"].ok, self.box["result"].failed_tables
        assert self.client.list_leases() == [], "a clean stop leaves no lease"
        assert_no_orphans(self.lake, self.tables)
        return recovery_s


@pytest.fixture
def under_fault(spark, store_factory, zk_server, tmp_path) -> Iterator[StoreUnderFault]:
    store = store_factory(snapshot_interval_s=1.0)
    client = store.client()
    tables = [TableOracle(client, name, num_buckets=2, seed=SEED) for name in ("a", "b")]
    for t in tables:
        t.upsert(range(300))
    proxy = FaultProxy(store.url, seed=SEED).start()
    conf = write_conf(
        tmp_path / "tiering.toml",
        job="faults",
        store_url=proxy.url,
        zk_hosts=zk_server.hosts,
        zookeeper={"session_timeout_s": CHAOS_SESSION_TIMEOUT_S},
        lease={"duration_s": CHAOS_LEASE_S, "renew": True},
        trigger={"available_now": False, "interval_s": 0.3},
    )
    run = StoreUnderFault(store, proxy, conf, tables, tmp_path / "lake")
    retry_log = logging.getLogger("tiering.kvstore.retry")
    retry_log.addHandler(run.retries)
    job = TieringJob(spark, TermContext.begin(load_config(conf, {}, {}), 1), on_round=run.rounds)
    run.runner, run.box = in_thread(lambda: job.run(stop=run.stop))
    try:
        with Writers(tables):  # a few rounds of changes under way before the fault
            run.rounds.wait_for(3, run.box)
        yield run
    finally:
        run.stop.set()
        proxy.stop()
        store.kill(signal.SIGCONT)
        run.runner.join(120)
        retry_log.removeHandler(run.retries)


#: The call a retried store error names: ``(METHOD /path)`` at the end of its message.
_CALL = re.compile(r"\(([A-Z]+ /\S*)\)\.?$")


def _job_saw(run: StoreUnderFault, since: int) -> str:
    """The job's own first word on the fault: a table failure, else a retried store call."""
    if len(run.rounds.failures) > since:
        return run.rounds.failures[since]
    calls = Counter(m.group(1) for m in map(_CALL.search, run.retries.messages) if m)
    if not calls:
        return "no call failed"
    return "retried " + ", ".join(f"{call} x{n}" for call, n in calls.most_common())


def _stall(run: StoreUnderFault, method: str, path: str, signum: int, down_s: float) -> tuple[str, float]:
    """Hold the job's next ``method path`` request, send the store ``signum`` (SIGSTOP or
    SIGKILL), let the request go on into the stopped store, ask `tiering status` meanwhile,
    then bring the store back after ``down_s``. What status said, and when the fault cleared.
    Only a bootstrap holds snapshots, so a held release waits for a new table's round."""
    hold = run.hold(method, path)
    run.churn()
    if "release" in path:
        run.add_table("c")
    hold.wait_arrived()
    down_at = time.monotonic()
    run.store.kill(signum)
    hold.release()
    saw = status_line(run.conf)
    time.sleep(max(0.0, down_at + down_s - time.monotonic()))
    if signum == signal.SIGSTOP:
        run.store.kill(signal.SIGCONT)
    else:
        run.store.launch()
    return saw, time.monotonic()


def _names_the_store(saw: str, operation: str) -> None:
    assert "KV store" in saw and operation in saw, f"the error names neither the store nor {operation}: {saw}"


@pytest.mark.timeout(150)
def test_store_sigkilled_mid_round_and_restarted(under_fault, fault_matrix: FaultMatrix, tmp_path):
    run = under_fault
    failures = len(run.rounds.failures)

    saw, cleared_at = _stall(run, "POST", r"^/v1/segments$", signal.SIGKILL, down_s=3.0)

    _names_the_store(saw, "GET /v1/tables")
    recovery_s = run.finish(cleared_at)
    job_saw = _job_saw(run, failures)
    fault_matrix.record(
        FaultResult.of(
            "store SIGKILL mid-round (prepare), restarted after 3 s",
            recovery_s,
            tally(run.lake, run.tables),
            f"{saw}; job: {job_saw}",
            ci=True,
        ),
        tmp_path,
    )
    assert tally(run.lake, run.tables).clean


@full_matrix_only
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "where, method, path",
    [
        pytest.param("during planning", "GET", r"^/v1/logs(\?|$)", id="planning"),  # the path with its query
        pytest.param("between the Delta commit and the report", "POST", r"^/v1/lake-reports$", id="after-commit"),
        pytest.param("during a lease release", "POST", r"^/v1/leases/[^/]+/release$", id="release"),
    ],
)
def test_store_sigstopped(under_fault, fault_matrix: FaultMatrix, tmp_path, where, method, path):
    """The store frozen at a point of the round, longer than `tiering status` waits: the job waits
    it out; afterwards the store knows every commit the lake holds (a report held in the freeze
    arrived, or a later one did) and a clean stop leaves no lease (a release held in it went through)."""
    run = under_fault
    failures = len(run.rounds.failures)

    saw, cleared_at = _stall(run, method, path, signal.SIGSTOP, down_s=STALL_S)

    _names_the_store(saw, "GET /v1/tables")
    recovery_s = run.finish(cleared_at)
    for t in run.tables:
        reported = run.client.get_lake(t.name)
        assert reported is not None and reported.lake_version == DeltaTable(str(run.lake / t.name)).version(), t.name
    fault_matrix.record(
        FaultResult.of(
            f"store SIGSTOP {STALL_S:.0f}s {where}",
            recovery_s,
            tally(run.lake, run.tables),
            f"{saw}; job: {_job_saw(run, failures)}",
            ci=False,
        ),
        tmp_path,
    )


@full_matrix_only
@pytest.mark.timeout(300)
def test_store_answering_503_to_the_rounds_segment_lookups(under_fault, fault_matrix: FaultMatrix, tmp_path):
    """Longer than the job retries one call: the round's one segment lookup (every table's) keeps
    failing, so the tables with changes fail with the store as their cause and the call named;
    nothing is committed half, and every table catches up once the store answers."""
    run = under_fault
    run.churn()
    rule = run.proxy.add(Rule(store_error(503), method="POST", path=r"^/v1/segments$"))
    started = time.monotonic()

    def a_failing() -> dict | None:
        _, doc, _ = status(run.conf)
        return next((t for t in (doc or {}).get("tables", []) if t["table"] == "a" and t["state"] == "failing"), None)

    a = wait_until(a_failing, "table a to show as failing in `tiering status`", timeout_s=ERRORS_S + 30)
    time.sleep(max(0.0, started + ERRORS_S - time.monotonic()))
    run.proxy.remove(rule)
    cleared_at = time.monotonic()

    assert a["last_failure_cause"] == "store" and a["last_failure_state"] == "acquired", a
    _names_the_store(a["last_failure"], "POST /v1/segments")
    recovery_s = run.finish(cleared_at)
    fault_matrix.record(
        FaultResult.of(
            f"store 503 to the round's segment lookups, {ERRORS_S:.0f}s ({rule.injected} answers)",
            recovery_s,
            tally(run.lake, run.tables),
            f"status: a failing ({a['last_failure_cause']} in {a['last_failure_state']}): {a['last_failure']}",
            ci=False,
        ),
        tmp_path,
    )


@full_matrix_only
@pytest.mark.timeout(240)
def test_store_answering_500_to_a_third_of_all_calls(under_fault, fault_matrix: FaultMatrix, tmp_path):
    """Scattered 5xx are retried away: no table fails, every table keeps committing."""
    run = under_fault
    failures = len(run.rounds.failures)
    before = {t.name: run.commits(t.name) for t in run.tables}
    rule = run.proxy.add(Rule(store_error(500, "INTERNAL", "injected"), share=0.33))
    with Writers(run.tables):
        for t in run.tables:
            wait_until(
                lambda: run.commits(t.name) >= before[t.name] + 3, f"{t.name} to commit under the 500s", timeout_s=120
            )
    run.proxy.remove(rule)
    cleared_at = time.monotonic()

    assert run.rounds.failures[failures:] == [], "retries absorb scattered 5xx"
    recovery_s = run.finish(cleared_at)
    fault_matrix.record(
        FaultResult.of(
            f"store 500 to 33% of calls ({rule.injected} answers)",
            recovery_s,
            tally(run.lake, run.tables),
            f"{status_line(run.conf)}; job: {_job_saw(run, failures)}",
            ci=False,
        ),
        tmp_path,
    )


def _wait_saw(driver: Driver, text: str, timeout_s: float = 120) -> None:
    """Wait for ``text`` in the driver's output; fail at once, with its output, if it exits first."""

    def seen() -> bool:
        if driver.saw(text):
            return True
        assert driver.proc.poll() is None, (
            f"driver {driver.pid} exited {driver.proc.returncode} before {text!r}:\n{driver.tail()}"
        )
        return False

    wait_until(seen, f"{text!r} from driver {driver.pid}", timeout_s=timeout_s, interval_s=0.2)


@pytest.mark.timeout(240)
def test_zookeeper_sigstopped_past_the_session_timeout_while_the_leader_writes_files(
    store_factory, zk_factory, fault_matrix: FaultMatrix, tmp_path
):
    """The leader's round is held in prepare, ZooKeeper is frozen until the leader's watchdog
    gives the term up, then the round goes on and writes its files with ZooKeeper still frozen:
    its commit must be refused by the fence. ZooKeeper comes back; the standby leads with a newer
    epoch and finishes the work; no commit of the old term lands after the freeze."""
    store = store_factory(snapshot_interval_s=1.0)
    client = store.client()
    zk = zk_factory()
    tables = [TableOracle(client, name, num_buckets=2, seed=SEED) for name in ("a", "b")]
    for t in tables:
        t.upsert(range(300))
    lake = tmp_path / "lake"
    with FaultProxy(store.url, seed=SEED) as proxy:
        conf = write_conf(
            tmp_path / "tiering.toml",
            job="zk-faults",
            store_url=proxy.url,
            zk_hosts=zk.hosts,
            **CHAOS,
            trigger={"available_now": False, "interval_s": 0.3},
        )
        leader = Driver(conf, tmp_path / "leader.log")
        standby: Driver | None = None
        try:
            _wait_saw(leader, "query started")
            standby = Driver(conf, tmp_path / "standby.log")
            _wait_saw(standby, "waiting for leadership")
            wait_until(lambda: all(tiering_commits(lake, t.name) for t in tables), "the leader's first commits")
            old = {t.name: tiering_commits(lake, t.name) for t in tables}
            old_epoch = old["a"][-1].epoch
            for t in tables:
                t.churn(40, key_space=400)
            hold = proxy.add(Rule(Hold(), method="POST", path=r"^/v1/segments$", times=1)).action
            hold.wait_arrived()
            old = {t.name: tiering_commits(lake, t.name) for t in tables}

            zk.kill(signal.SIGSTOP)
            status_thread, status_box = in_thread(lambda: status_line(conf))
            _wait_saw(leader, "leadership lost", timeout_s=CHAOS_SESSION_TIMEOUT_S * 4)
            hold.release()  # the old term's round writes its files now, ZooKeeper still frozen
            _wait_saw(leader, "LeadershipLost", timeout_s=60)
            zk.kill(signal.SIGCONT)
            cleared_at = time.monotonic()
            status_thread.join(30)

            assert leader.wait(60) != 0, "a leader that lost its term exits non-zero"
            _wait_saw(standby, "leader with epoch=")
            recovery_s = wait_recovered(client, lake, tables, cleared_at)
            standby.signal(signal.SIGTERM)
            assert standby.wait(120) == 0, standby.tail()
        finally:
            leader.reap()
            if standby is not None:
                standby.reap()

    for t in tables:
        commits = tiering_commits(lake, t.name)
        assert [c for c in commits if c.epoch <= old_epoch] == old[t.name], f"{t.name}: an old-term commit landed"
        assert commits[-1].epoch > old_epoch, f"{t.name}: the standby's term committed"
        assert [c.epoch for c in commits] == sorted(c.epoch for c in commits)
    assert client.list_leases() == [], "the standby's clean stop dropped the lease"
    assert_no_orphans(lake, tables)
    lost = re.search(r"leadership lost: (.*)", leader.output()).group(1)
    assert "ZooKeeper" in lost, lost
    counted = tally(lake, tables)
    fault_matrix.record(
        FaultResult.of(
            f"ZooKeeper SIGSTOP past the session timeout ({CHAOS_SESSION_TIMEOUT_S:.0f}s) while the leader's round "
            "writes files",
            recovery_s,
            counted,
            f"{status_box.get('result', status_box.get('error'))} (asked during the freeze, answered after it); old "
            f"leader exit 1: leadership lost: {lost}; its round's commit refused by the fence, standby led",
            ci=True,
        ),
        tmp_path,
    )
    assert counted.clean


def _executors(cluster) -> list[int]:
    """Pids of the executor JVMs of ``cluster`` (their working directory is under the cluster's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if b"CoarseGrainedExecutorBackend" in cmdline and cwd.startswith(str(cluster.directory)):
            found.append(int(entry.name))
    return sorted(found)


def _new_data_file(table_dir: Path, known: set[Path]) -> Path | None:
    """A bucket file that was not in the table before the round (written by a running task)."""
    return next((p for p in table_dir.glob("__bucket=*/*.parquet") if p not in known), None)


@full_matrix_only
@pytest.mark.timeout(600)
def test_executor_sigkilled_mid_task_on_the_standalone_cluster(
    spark_cluster, store_factory, zk_server, fault_matrix: FaultMatrix, tmp_path
):
    """`spark-submit` to the standalone cluster; the executors rewrite many buckets. As soon as the
    round's first bucket file appears, an executor is SIGKILLed: its running task is retried
    elsewhere (Spark's driver log says so), the job commits once, and no file of the killed
    attempt is referenced (no key twice, every unreferenced file vacuumable)."""
    store = store_factory()
    client = store.client()
    big = TableOracle(client, "big", num_buckets=16, seed=SEED)
    for start in range(0, 160_000, 40_000):
        big.upsert(range(start, start + 40_000))
    conf = write_conf(
        tmp_path / "tiering.toml",
        job="executor-kill",
        store_url=store.url,
        zk_hosts=zk_server.hosts,
        zookeeper={"session_timeout_s": 6.0},
        lake={"driver_max_changes": 0},
    )
    zip_path = build_pyfiles_zip(tmp_path / "kv_tiering.zip")
    table_dir = tmp_path / "lake" / "big"
    log = tmp_path / "spark-submit.log"
    with open(log, "wb") as out:
        submitted = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "spark-submit"),
                "--master",
                spark_cluster.master,
                "--py-files",
                str(zip_path),
                "--conf",
                "spark.driver.host=127.0.0.1",
                "--conf",
                "spark.driver.bindAddress=127.0.0.1",
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                "spark.driver.memory=512m",
                "--conf",
                "spark.executor.memory=512m",
                str(REPO / "jobs" / "tiering_job.py"),
                "--conf",
                str(conf),
                "--available-now",
            ],
            env=spark_cluster.env(),
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        first = wait_until(
            lambda: _new_data_file(table_dir, set()) or submitted.poll() is not None,
            "the round's first bucket file",
            timeout_s=300,
            interval_s=0.02,
        )
        assert isinstance(first, Path), f"spark-submit exited first:\n{log.read_text()[-3000:]}"
        assert not (table_dir / "_delta_log").exists() or not DeltaTable(str(table_dir)).files(), "still uncommitted"
        victim = _executors(spark_cluster)[0]
        os.kill(victim, signal.SIGKILL)
        cleared_at = time.monotonic()
        rc = submitted.wait(400)
    finally:
        if submitted.poll() is None:
            os.killpg(submitted.pid, signal.SIGKILL)
            submitted.wait()
    output = log.read_text(errors="replace")
    assert rc == 0, output[-4000:]
    recovery_s = time.monotonic() - cleared_at
    lost_task = re.search(r"Lost task \S+ in stage \S+ \(TID \d+\).*", output)
    assert lost_task, f"no task of the killed executor {victim} was retried:\n{output[-4000:]}"
    assert [c.epoch for c in tiering_commits(tmp_path / "lake", "big")] == [1], "one commit, by the one term"
    assert client.list_leases() == [], "the clean stop dropped the lease"
    assert_no_orphans(tmp_path / "lake", [big])
    counted = tally(tmp_path / "lake", [big])
    fault_matrix.record(
        FaultResult.of(
            "Spark executor SIGKILL mid-task (standalone cluster, 16-bucket bootstrap)",
            recovery_s,
            counted,
            f"driver log: {lost_task.group(0)[:160]}; job exit 0",
            ci=False,
        ),
        tmp_path,
    )
    assert counted.clean
