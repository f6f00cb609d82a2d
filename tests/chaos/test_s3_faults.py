"""The fault matrix's S3 cases: a lake on a real S3 server that freezes, dies
or answers badly under a running job.

A continuous `tiering run` driver tiers tables ``a`` and ``b`` into a SeaweedFS lake reached
through :class:`~tests.support.fault_proxy.FaultProxy`, with short client timeouts and few retries
(:data:`FAST_S3`, the same option names a deployment sets in ``[lake.storage]``) so a fault
outlasts them within seconds. A case picks the exact request to break — a round's data-file PUT,
its Delta log reads, the commit's conditional PUT of ``_delta_log/<version>.json`` — and asserts
what an operator relies on: after the fault clears the lake equals the test's oracle row by row
(read by delta-rs and pyarrow, not by the service), no key twice, a failing table's error names
S3 and the request, ``tiering status`` shows it while it lasts, the other table goes on committing
where it can, no lease is left after a clean stop, and the seconds from "fault cleared" to
"caught up".

CI runs a bounded part (each case within ~60 s): SeaweedFS SIGSTOPped past the client timeouts
during a round's file writes, and 503 SlowDown for a share of all requests. ``scripts/chaos.sh``
(``CHAOS_MATRIX=full``) runs every case; the table is printed at the end of the session.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.config import CHAOS, write_conf
from tests.support.drivers import Driver, tiering_cli
from tests.support.fault_matrix import FaultMatrix, FaultResult, tally, wait_recovered
from tests.support.fault_proxy import FaultProxy, Hold, Reset, Respond, Rule, slow_down
from tests.support.lake import tiering_commits
from tests.support.oracle import TableOracle
from tests.support.running import Writers
from tests.support.waiting import wait_until
from tiering.delta_log.lake import Lake
from tiering.objectstore.embedded_s3 import EmbeddedS3

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

SEED = int(os.environ.get("CHAOS_SEED", "6061"))
FULL = os.environ.get("CHAOS_MATRIX") == "full"
full_matrix_only = pytest.mark.skipif(not FULL, reason="the whole fault matrix runs under scripts/chaos.sh")
#: Client settings a fault outlasts quickly: a request gives up after ~3 x 3 s.
FAST_S3 = {
    "timeout": "3s",
    "connect_timeout": "2s",
    "max_retries": "2",
    "retry_timeout": "10s",
    "backoff_config.init_backoff": "50ms",
    "backoff_config.max_backoff": "500ms",
}
#: Longer than a request's whole retry budget under FAST_S3.
STOP_S = 12.0
#: A table's data files, its Delta log (reads and the commit's PUT), by path through the proxy.
#: (pyarrow escapes the ``=`` of ``__bucket=<b>``).
DATA_PUT = r"^/lake/[^/]+/{table}/__bucket(=|%3D)\d+/part-[^/?]+\.parquet"
LOG = r"^/lake/[^/]+/{table}/_delta_log/"
COMMIT_PUT = r"^/lake/[^/]+/{table}/_delta_log/\d{{20}}\.json"


def _internal_error(path: str = "/") -> Respond:
    body = f"<Error><Code>InternalError</Code><Message>injected</Message><Resource>{path}</Resource></Error>"
    return Respond(500, body.encode(), "application/xml")


@dataclass
class LakeUnderFault:
    """A `tiering run` driver tiering ``a`` and ``b`` into an S3 lake behind a fault proxy. (The
    driver is a process of its own: delta-rs holds the GIL in some calls, which would stall a
    proxy serving from the job's own process.)"""

    s3: EmbeddedS3
    proxy: FaultProxy
    conf: Path
    lake: Lake
    tables: list[TableOracle]
    driver: Driver | None = None

    @property
    def client(self):
        return self.tables[0].client

    def churn(self) -> None:
        for t in self.tables:
            t.churn(40, key_space=400)

    def commits(self, table: str) -> int:
        return len(tiering_commits(self.lake, table))

    def failures(self, table: str = "") -> list[str]:
        """The driver's ``status=failed`` lines so far (of ``table``, else of any), oldest first,
        each with its continuation lines (delta-rs's error chain, when the log shows it so)."""
        found: list[str] = []
        for line in self.driver.output().splitlines():
            if "status=failed" in line and f"table={table}" in line:
                found.append(line)
            elif found and line[:1].isspace():
                found[-1] += " " + line.strip()
        return found

    def status(self, table: str) -> tuple[dict | None, str]:
        """``table``'s entry in `tiering status --json` when it shows as failing, and what the
        command said in one line."""
        done = tiering_cli("status", "--conf", str(self.conf), "--json")
        if done.returncode not in (0, 3):
            return None, f"status exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"
        entry = next((t for t in json.loads(done.stdout)["tables"] if t["table"] == table), None)
        if entry is None or entry["state"] != "failing":
            return None, f"status: {table} {entry['state'] if entry else 'not listed'}"
        return entry, (
            f"status: {table} failing ({entry['last_failure_cause']} in {entry['last_failure_state']}): "
            f"{entry['last_failure']}"
        )

    def unreadable(self, table: str) -> str:
        """Why `tiering status` cannot read ``table``'s Delta log now ('' when it can): the planner
        leaves such a table out of its rounds, so no round of it fails."""
        done = tiering_cli("status", "--conf", str(self.conf), "--json")
        if done.returncode not in (0, 3):
            return ""
        entry = next((t for t in json.loads(done.stdout)["tables"] if t["table"] == table), None)
        return entry["lake_error"] or "" if entry is not None and entry["state"] == "lake unreadable" else ""

    def finish(self, cleared_at: float) -> float:
        """Recovery seconds, then a clean stop that leaves no lease and no duplicate commit."""
        recovery_s = wait_recovered(self.client, self.lake, self.tables, cleared_at)
        self.driver.signal(signal.SIGTERM)
        rc = self.driver.wait(120)
        assert rc == 0, f"the driver did not stop cleanly ({rc}):\n{self.driver.tail()}"
        assert self.client.list_leases() == [], "a clean stop leaves no lease"
        for t in self.tables:
            rounds = [(c.epoch, c.round) for c in tiering_commits(self.lake, t.name)]
            assert len(rounds) == len(set(rounds)), f"{t.name}: a round committed twice: {rounds}"
        return recovery_s


@pytest.fixture
def s3_under_fault(store_factory, zk_server, tmp_path) -> Iterator[LakeUnderFault]:
    s3 = EmbeddedS3().start(tmp_path / "s3")
    store = store_factory(snapshot_interval_s=1.0)
    client = store.client()
    tables = [TableOracle(client, name, num_buckets=2, seed=SEED) for name in ("a", "b")]
    for t in tables:
        t.upsert(range(300))
    proxy = FaultProxy(s3.endpoint, seed=SEED).start()
    storage = {**s3.storage_options(), "AWS_ENDPOINT_URL": proxy.url, **FAST_S3}
    root = f"{s3.root}/faults"
    conf = write_conf(
        tmp_path / "tiering.toml",
        job="s3-faults",
        store_url=store.url,
        zk_hosts=zk_server.hosts,
        lake_root=root,
        lake={"storage": storage},
        trigger={"available_now": False, "interval_s": 0.3},
        **CHAOS,
    )
    # the test reads the lake straight from the server, past the proxy
    run = LakeUnderFault(s3, proxy, conf, Lake.at(root, s3.storage_options()), tables)
    run.driver = Driver(conf)
    try:
        with Writers(tables):
            for t in tables:
                wait_until(lambda: run.commits(t.name) >= 2, f"{t.name}'s first rounds", timeout_s=300)
        yield run
    finally:
        run.driver.reap()
        proxy.clear()
        proxy.stop()
        if s3._proc is not None:
            s3.kill()  # SIGKILL works on a stopped process too


def _names_s3(saw: str, *operations: str) -> None:
    assert "s3://" in saw or "S3" in saw, f"the error does not name S3: {saw}"
    assert any(op in saw for op in operations), f"the error names none of {operations}: {saw}"


@pytest.mark.timeout(480)
def test_s3_sigstopped_during_a_rounds_file_writes(s3_under_fault, fault_matrix: FaultMatrix, tmp_path):
    """Frozen past every client timeout while a round writes its files: the round's tables fail
    naming S3, the job lives on, and the first round after SIGCONT catches up."""
    run = s3_under_fault
    since = len(run.failures())
    run.churn()
    hold = run.proxy.add(Rule(Hold(), method="PUT", path=DATA_PUT.format(table="a"), times=1)).action
    hold.wait_arrived()
    os.kill(run.s3.pid, signal.SIGSTOP)
    stopped_at = time.monotonic()
    hold.release()
    try:  # a frozen PutObject gives up after ~3 x 10 s: pyarrow's attempts each wait out the timeout twice
        wait_until(lambda: run.failures()[since:], "a table to fail while S3 is frozen", timeout_s=90)
    except AssertionError as e:
        raise AssertionError(f"{e}; the driver's output:\n{run.driver.tail()}") from None
    failure = run.failures()[since:][0]
    time.sleep(max(0.0, stopped_at + STOP_S - time.monotonic()))
    os.kill(run.s3.pid, signal.SIGCONT)
    cleared_at = time.monotonic()

    _names_s3(failure, "PutObject", "UploadPart", "HeadObject", "PUT", "GET")
    recovery_s = run.finish(cleared_at)
    counted = tally(run.lake, run.tables)
    fault_matrix.record(
        FaultResult.of(
            f"S3 SIGSTOP {STOP_S:.0f}s during a round's file writes", recovery_s, counted, f"job: {failure}", ci=True
        ),
        tmp_path,
    )
    assert counted.clean, counted


def _saw(failures: list[str]) -> str:
    return f"job: {len(failures)} table rounds failed" + (f", first: {failures[0]}" if failures else "")


@pytest.mark.timeout(480)
@pytest.mark.parametrize(
    ("kind", "action"),
    [
        pytest.param("503 SlowDown", slow_down(), id="503"),
        pytest.param("500 InternalError", _internal_error(), id="500", marks=full_matrix_only),
        pytest.param("connection reset", Reset(), id="reset", marks=full_matrix_only),
    ],
)
def test_s3_failing_a_share_of_all_requests(s3_under_fault, fault_matrix: FaultMatrix, tmp_path, kind, action):
    """Scattered errors are retried inside the requests (or fail a round, re-planned next one):
    both tables keep committing, and nothing is lost or doubled."""
    run = s3_under_fault
    since = len(run.failures())
    before = {t.name: run.commits(t.name) for t in run.tables}
    rule = run.proxy.add(Rule(action, share=0.25))
    with Writers(run.tables):
        for t in run.tables:
            wait_until(
                lambda: run.commits(t.name) >= before[t.name] + 3, f"{t.name} to commit under the faults", timeout_s=120
            )
    run.proxy.remove(rule)
    cleared_at = time.monotonic()

    failures = run.failures()[since:]
    recovery_s = run.finish(cleared_at)
    counted = tally(run.lake, run.tables)
    fault_matrix.record(
        FaultResult.of(
            f"S3 {kind} to 25% of requests ({rule.injected} answers)",
            recovery_s,
            counted,
            _saw(failures),
            ci=kind.startswith("503"),
        ),
        tmp_path,
    )
    assert counted.clean, counted


def _one_table_fails(
    run: LakeUnderFault, rule: Rule, hold_s: float = 15.0, log_unreadable: bool = False
) -> tuple[str, str, float]:
    """With ``rule`` on table ``a``'s requests: ``a`` fails while ``b`` commits; then the rule
    goes. ``a``'s failure as the driver logged it (``log_unreadable``: as `tiering status` names
    its unreadable Delta log — the planner leaves it out, no round of it fails), what `tiering
    status` said meanwhile, and when the fault cleared."""
    run.churn()
    since, b_before = len(run.failures("a")), run.commits("b")
    run.proxy.add(rule)
    started = time.monotonic()
    seen = (lambda: run.unreadable("a")) if log_unreadable else (lambda: run.failures("a")[since:])
    failure = wait_until(seen, "table a to fail", timeout_s=60)
    status = run.status("a")[1]
    run.tables[1].churn(20, key_space=400)
    wait_until(lambda: run.commits("b") > b_before, "b to commit while a fails", timeout_s=60)
    time.sleep(max(0.0, started + hold_s - time.monotonic()))
    run.proxy.remove(rule)
    return (failure if log_unreadable else failure[0]), status, time.monotonic()


@full_matrix_only
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("fault", "rule", "named", "status_reads_it"),
    [
        pytest.param(
            "503 SlowDown to every data-file PUT",
            Rule(slow_down(), method="PUT", path=DATA_PUT.format(table="a")),
            ("PutObject", "SLOW_DOWN"),
            True,
            id="data-put-503",
        ),
        # the planner leaves a table whose Delta log it cannot read out of its rounds; status names it
        pytest.param(
            "500 to every Delta log request",
            Rule(_internal_error(), path=LOG.format(table="a")),
            ("_delta_log",),
            False,
            id="delta-log-500",
        ),
    ],
)
def test_s3_failing_one_tables_requests(
    s3_under_fault, fault_matrix: FaultMatrix, tmp_path, fault, rule, named, status_reads_it
):
    """Longer than the client retries: table ``a`` fails naming S3 and the request, ``b`` commits."""
    run = s3_under_fault
    failure, status, cleared_at = _one_table_fails(run, rule, log_unreadable=not status_reads_it)

    _names_s3(failure, named[0])
    assert all(word in failure for word in named), failure
    assert not status_reads_it or status.startswith("status: a failing (files"), status
    recovery_s = run.finish(cleared_at)
    fault_matrix.record(
        FaultResult.of(
            f"S3 {fault} of table a ({rule.injected} answers)",
            recovery_s,
            tally(run.lake, run.tables),
            f"{status}; b committed meanwhile",
            ci=False,
        ),
        tmp_path,
    )


@full_matrix_only
@pytest.mark.timeout(600)
def test_the_answer_to_a_commits_conditional_put_is_lost(s3_under_fault, fault_matrix: FaultMatrix, tmp_path):
    """The commit's PUT lands, its answer does not: the client retries the PUT, the store refuses
    it (the version exists), and the round's txn says the commit is ours — no second commit."""
    run = s3_under_fault
    since = len(run.failures())
    run.churn()
    before = run.commits("a")
    rule = run.proxy.add(Rule(Reset(after_forward=True), method="PUT", path=COMMIT_PUT.format(table="a"), times=1))
    wait_until(lambda: rule.injected, "a commit of table a to lose its answer", timeout_s=60)
    cleared_at = time.monotonic()

    recovery_s = run.finish(cleared_at)
    assert run.commits("a") > before
    fault_matrix.record(
        FaultResult.of(
            "S3 commit's conditional PUT landed, its answer lost (reset)",
            recovery_s,
            tally(run.lake, run.tables),
            _saw(run.failures()[since:]),
            ci=False,
        ),
        tmp_path,
    )


@full_matrix_only
@pytest.mark.timeout(600)
def test_s3_sigkilled_during_a_commit_and_restarted(s3_under_fault, fault_matrix: FaultMatrix, tmp_path):
    run = s3_under_fault
    since = len(run.failures())
    run.churn()
    hold = run.proxy.add(Rule(Hold(), method="PUT", path=COMMIT_PUT.format(table="a"), times=1)).action
    hold.wait_arrived()
    run.s3.kill()
    hold.release()
    wait_until(lambda: run.failures()[since:], "a table to fail while S3 is down", timeout_s=60)
    failure = run.failures()[since:][0]
    status = run.status("a")[1]
    run.s3.restart()
    cleared_at = time.monotonic()

    _names_s3(failure, "PUT", "GET", "_delta_log")
    recovery_s = run.finish(cleared_at)
    fault_matrix.record(
        FaultResult.of(
            "S3 SIGKILL during a commit, restarted on the same data dir",
            recovery_s,
            tally(run.lake, run.tables),
            f"job: {failure}; {status}",
            ci=False,
        ),
        tmp_path,
    )
