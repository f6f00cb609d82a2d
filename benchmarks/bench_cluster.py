"""``cluster`` mode: the tiering service as users deploy it (spark-submit to a Spark standalone
cluster, an S3 lake) against the same copy written by hand, on the same cluster in one run.

What it guards against: a service whose protocol (planning, leases, fencing, the driver's
commit) costs much more on a real cluster than the copy it wraps; executors that do not share
the work (a second worker that brings nothing); a fixed cost per run far above what any PySpark
job pays to start. Everything is on loopback: a master and workers from pyspark's
``spark-class`` (:mod:`tests.support.spark_cluster`, as the cluster tests run it), SeaweedFS
(:mod:`tiering.objectstore.embedded_s3`), an embedded ZooKeeper and the reference store in its own
process. Every submission is timed from spark-submit's start to its exit, with Spark's event log
on so the time can be split (``breakdown``: the Python driver up, leadership, the SparkContext,
executors registered, the round's planning, its Spark job and tasks, the Delta commit, shutdown;
the job's warm-up of the executors' Python workers apart). Every service run tiers a table of its
own: the store keeps one lake report per table, and a job planning a table the store says some
lake holds up to its log ends skips it (docs/DESIGN.md §5), so a second job over the same table
would commit nothing.

1. ``--rows`` rows in ``--buckets`` buckets, snapshotted, tiered by ``jobs/tiering_job.py
   --available-now`` on a master and 2 workers (``service_s``; ``service_round_s``: Spark's
   ``triggerExecution`` of the round) vs. ``cluster_baseline_copy.py`` submitted the same way
   (``baseline_s``; ``baseline_copy_s``: its Spark job and commit). ``service_vs_baseline`` is
   baseline_s / service_s, a throughput ratio (goal >= 0.9). Both lake tables are counted through
   delta-rs afterwards and must hold exactly ``--rows`` rows.
2. The same service run on a cluster of 1 worker (over a copy of the table): ``workers_1_s``
   against ``workers_2_s`` (run 1's), ``speedup_2_vs_1``; and the baseline again on that cluster
   (``baseline_1_worker_s``, ``service_vs_baseline_1_worker``, ``baseline_speedup_2_vs_1``), so
   the ratio is known per worker count.
3. A fresh availableNow submission tiering a 1,000-row table (one per run), from spark-submit's
   start to the Delta table's version 0 (its commit timestamp: one machine, one clock), against the floor:
   ``cluster_floor_job.py`` (a SparkSession, a 10-row count, exit) to its exit. Medians of 3,
   interleaved; ``first_commit_minus_floor_s`` (goal <= 3 s).

Run: .venv/bin/python -m benchmarks.bench_cluster [--rows 20000000] [--buckets 8] [--out F]
[--logs DIR]; the work directory is removed after a run that succeeded, kept (and named) after one
that failed; ``--logs`` keeps a copy of every submission's output and event log, and of the
executors' logs, in DIR.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.common import REPO, load_table, run_mode
from tests.support.config import write_conf
from tests.support.drivers import build_pyfiles_zip
from tests.support.spark_cluster import SparkCluster
from tiering.warmup import JOB_DESCRIPTION as WARM_UP_JOB

if TYPE_CHECKING:
    from tiering.objectstore.embedded_s3 import EmbeddedS3

JOB = REPO / "jobs" / "tiering_job.py"
BASELINE = REPO / "benchmarks" / "cluster_baseline_copy.py"
FLOOR = REPO / "benchmarks" / "cluster_floor_job.py"
FIRST_COMMIT_ROWS = 1000
REPEAT = 3
#: Spark's event log as one plain JSON file (Spark 4 rolls and compresses it by default).
EVENT_LOG = {
    "spark.eventLog.enabled": "true",
    "spark.eventLog.rolling.enabled": "false",
    "spark.eventLog.compress": "false",
}
#: A submission still running after this is killed (its whole process group) and fails the run.
SUBMIT_TIMEOUT_S = 1800.0


def pyfiles_snapshot(work: Path) -> tuple[Path, dict]:
    """The ``tiering`` package zipped for ``--py-files`` the documented way (``scripts/build_pyfiles.sh``),
    once: every submission of the run ships this one copy, though others edit the working tree
    meanwhile. With it, what it was: the HEAD commit and the package's files that differ from it."""

    def git(*argv: str) -> str:
        return subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True, check=True).stdout

    code = {
        "head": git("rev-parse", "HEAD").strip(),
        "uncommitted": [line[3:] for line in git("status", "--porcelain", "--", "tiering").splitlines()],
    }
    return build_pyfiles_zip(work / "kv_tiering.zip"), code


@dataclass(frozen=True)
class Submission:
    """One spark-submit: the wall clock at its start, seconds to its exit, its output lines
    stamped on arrival, and its Spark event log (one JSON event a line)."""

    started: float
    wall_s: float
    lines: list[tuple[float, str]]
    events: list[dict]

    def line_at(self, text: str) -> float | None:
        """Seconds from the start to the first output line containing ``text``."""
        return next((round(t - self.started, 3) for t, line in self.lines if text in line), None)

    def events_of(self, kind: str) -> list[dict]:
        """Events whose type ends with ``kind`` (``TaskEnd``, ``QueryProgressEvent``...)."""
        return [e for e in self.events if e["Event"].endswith(kind)]

    def since_start(self, epoch_ms: float) -> float:
        return round(epoch_ms / 1000 - self.started, 3)

    def rounds(self) -> list[dict]:
        """Spark's progress reports of the micro-batches that carried a round (an ``addBatch``)."""
        reports = (e["progress"] for e in self.events_of("QueryProgressEvent"))
        return [r for r in reports if "addBatch" in r["durationMs"]]

    def round_s(self) -> float:
        return round(sum(r["durationMs"]["triggerExecution"] for r in self.rounds()) / 1000, 3)

    def spark_marks(self) -> dict:
        """What Spark's event log says, in seconds from spark-submit's start: the SparkContext's
        construction begun, executors registered, each Spark job's submission and end, the first
        task's launch, the application's end and the process's exit; and every task's run time
        (an executor's first Python task also starts its Python worker). The job's warm-up of the
        executors' Python workers (:mod:`tiering.warmup`) runs beside the query's start: its job
        and tasks are reported apart, the others are the round's (or the floor's, the baseline's)."""
        ends = {e["Job ID"]: e for e in self.events_of("JobEnd")}
        jobs = {False: [], True: []}
        warm_stages = set()
        for start in self.events_of("JobStart"):
            warm_up = start["Properties"].get("spark.job.description") == WARM_UP_JOB
            jobs[warm_up].append(
                [self.since_start(start["Submission Time"]), self.since_start(ends[start["Job ID"]]["Completion Time"])]
            )
            if warm_up:
                warm_stages.update(start["Stage IDs"])
        tasks = sorted(self.events_of("TaskEnd"), key=lambda e: e["Task Info"]["Launch Time"])
        work = [e for e in tasks if e["Stage ID"] not in warm_stages]
        return {
            "spark_context_init_at_s": self.since_start(self.events_of("ApplicationStart")[0]["Timestamp"]),
            "executors_registered_at_s": [self.since_start(e["Timestamp"]) for e in self.events_of("ExecutorAdded")],
            "spark_jobs_at_s": jobs[False],
            "warm_up_jobs_at_s": jobs[True],
            "first_task_at_s": self.since_start(work[0]["Task Info"]["Launch Time"]),
            "task_run_s": [round(e["Task Metrics"]["Executor Run Time"] / 1000, 3) for e in work],
            "warm_up_task_run_s": [
                round(e["Task Metrics"]["Executor Run Time"] / 1000, 3) for e in tasks if e["Stage ID"] in warm_stages
            ],
            "task_deserialize_s_sum": round(
                sum(e["Task Metrics"]["Executor Deserialize Time"] for e in work) / 1000, 3
            ),
            "application_end_at_s": self.since_start(self.events_of("ApplicationEnd")[0]["Timestamp"]),
            "exit_at_s": round(self.wall_s, 3),
        }

    def job_breakdown(self) -> dict:
        """:meth:`spark_marks` and the phases of a plain Spark job (the baseline, the floor)."""
        marks = self.spark_marks()
        jobs = marks["spark_jobs_at_s"]
        return {
            **marks,
            "phases_s": _phases(
                {
                    "spark_submit_to_spark_context_init": marks["spark_context_init_at_s"],
                    "driver_until_first_spark_job": jobs[0][0],  # SparkContext, session, the script's own work
                    "spark_jobs_and_driver_between": jobs[-1][1],
                    "after_last_job_to_exit": marks["exit_at_s"],
                }
            ),
        }


def _phases(ends: dict[str, float | None]) -> dict[str, float | None]:
    """Consecutive phases from the seconds at which each ends (in order): each one's length. A
    phase whose end the run's output does not show is None, and the next phase holds its time
    (py4j logs the marks of two phases at INFO only, which ``tiering`` quiets unless DEBUG)."""
    lengths: dict[str, float | None] = {}
    before = 0.0
    for name, end in ends.items():
        lengths[name] = None if end is None else round(end - before, 3)
        before = before if end is None else end
    return lengths


@dataclass(frozen=True)
class ClusterBench:
    """What every submission of a run shares: the work directory, the store, ZooKeeper, the S3
    server and the service's zip. Each submission gets a job name, lake root and checkpoint of
    its own, so every run starts from nothing (a first round, a fresh lease)."""

    work: Path
    store_url: str
    zk_hosts: str
    s3: EmbeddedS3
    zip_path: Path

    def submit(self, cluster: SparkCluster, name: str, script: Path, *args: str) -> Submission:
        """``script args`` through spark-submit, every submission the same way (the zip shipped,
        the event log on), waited for; a failed one raises with its output's tail."""
        events = self.work / "events" / name
        events.mkdir(parents=True)
        command = cluster.submit_command(
            script, *args, py_files=self.zip_path, conf={**EVENT_LOG, "spark.eventLog.dir": events.as_uri()}
        )
        # --py-files reaches the Python driver and the executors, not the Python processes the
        # driver's JVM starts (the source's planner): on PYTHONPATH they import the zip too, not
        # the venv's editable install (the working tree as it is by then).
        env = {**cluster.env(), "PYTHONPATH": str(self.zip_path)}
        lines: list[tuple[float, str]] = []
        started = time.time()
        proc = subprocess.Popen(
            command,
            env=env,
            cwd=self.work,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        watchdog = threading.Timer(SUBMIT_TIMEOUT_S, os.killpg, (proc.pid, signal.SIGKILL))
        watchdog.start()
        try:
            for line in proc.stdout:
                lines.append((time.time(), line.rstrip("\n")))
            rc = proc.wait()
            wall_s = time.time() - started
        finally:
            watchdog.cancel()
        output = "\n".join(line for _, line in lines)
        (self.work / f"{name}.log").write_text(output + "\n")
        if rc != 0:
            raise RuntimeError(f"spark-submit {name} exited {rc}:\n{output[-4000:]}")
        (log,) = events.iterdir()
        return Submission(started, wall_s, lines, [json.loads(e) for e in log.read_text().splitlines()])

    def service(self, cluster: SparkCluster, name: str, table: str) -> Submission:
        """The job as users submit it (docs/deploying.md, spark-submit): ``--conf FILE --available-now``."""
        conf = write_conf(
            self.work / f"{name}.toml",
            job=name,
            store_url=self.store_url,
            zk_hosts=self.zk_hosts,
            checkpoint=self.work / f"ckpt-{name}",
            lake_root=self.lake_root(name),
            lake={"storage": self.s3.storage_options()},
            tables={"include": [table]},
        )
        run = self.submit(cluster, name, JOB, "--conf", str(conf), "--available-now")
        if run.line_at(f"job {name!r} done after") is None:
            tail = "\n".join(line for _, line in run.lines[-40:])
            raise RuntimeError(f"service run {name} did not say it was done:\n{tail}")
        return run

    def baseline(self, cluster: SparkCluster, name: str, snapshots, table: str) -> tuple[Submission, dict]:
        """The copy by hand; its own account of the copy and the commit (``cluster_baseline_copy.py``)."""
        plan = self.work / f"{name}.json"
        plan.write_text(
            json.dumps(
                {
                    "table_uri": f"{self.lake_root(name)}/{table}",
                    "storage": self.s3.storage_options(),
                    "buckets": {str(s.bucket): s.files for s in snapshots.buckets},
                }
            )
        )
        run = self.submit(cluster, name, BASELINE, str(plan))
        (said,) = [line for _, line in run.lines if line.startswith("baseline_copy: ")]
        return run, json.loads(said.removeprefix("baseline_copy: "))

    def lake_root(self, name: str) -> str:
        return f"{self.s3.root}/{name}"

    def lake_table(self, name: str, table: str):
        from deltalake import DeltaTable

        return DeltaTable(f"{self.lake_root(name)}/{table}", storage_options=self.s3.storage_options())

    def rows_in_lake(self, name: str, table: str) -> int:
        """Rows of the table's current version, counted from its files' footers, read through
        pyarrow's S3 filesystem as the job reads (:func:`tiering.delta_log.lake.table_dataset`)."""
        from tiering.delta_log.lake import table_dataset
        from tiering.objectstore.object_store import ObjectStore

        path = f"{self.lake_root(name)}/{table}"
        store = ObjectStore.of(path, self.s3.storage_options())
        return table_dataset(self.lake_table(name, table), store, path).count_rows()

    def commit_at_s(self, run: Submission, name: str, table: str) -> float:
        """Seconds from ``run``'s start to its table's version 0 (the commit's own timestamp)."""
        (first,) = [c for c in self.lake_table(name, table).history() if c["version"] == 0]
        return run.since_start(first["timestamp"])


def service_breakdown(bench: ClusterBench, run: Submission, name: str, table: str) -> dict:
    """A service run's time line (seconds from spark-submit's start, from its log lines and
    Spark's event log) and the consecutive phases it makes, which add up to the run's wall time."""
    spark = run.spark_marks()
    (report,) = run.rounds()  # a first round: one batch carries it
    durations = report["durationMs"]
    triggered = _iso_s(report["timestamp"]) - run.started
    (batch,) = [e["time"] for e in run.events_of("SQLExecutionStart")]  # the batch's addBatch starts it
    job_submitted, job_ended = spark["spark_jobs_at_s"][0][0], spark["spark_jobs_at_s"][-1][1]  # the round's data
    marks = {
        "python_driver_at_s": run.line_at("tiering_job: tiering package from"),
        "leader_at_s": run.line_at(" leader with epoch="),
        # py4j starts its callback server for the job's first Python listener, just after the session is built
        "session_built_at_s": run.line_at("Callback Server Starting"),
        "query_started_at_s": run.line_at(" query started ("),
        "round_triggered_at_s": round(triggered, 3),
        "batch_execution_at_s": run.since_start(batch),
        # the JVM calls its second Python object (after the query listener): the round committer
        "committer_called_at_s": run.line_at("Received command c on object id p1"),
        "delta_commit_at_s": bench.commit_at_s(run, name, table),
        "round_logged_at_s": run.line_at(" status=committed "),
        **spark,
    }
    return {
        **marks,
        "round_ms": durations,
        "phases_s": _phases(
            {
                "spark_submit_jvm_and_python_driver_start": marks["python_driver_at_s"],
                "imports_config_lake_check_and_election": marks["leader_at_s"],
                "spark_context_and_session": marks["session_built_at_s"],
                "source_registration_and_query_start": marks["query_started_at_s"],
                "available_now_preparation": marks[
                    "round_triggered_at_s"
                ],  # the source's planning process opens the lake
                "round_planning_and_spark_batch_planning": marks["batch_execution_at_s"],  # latestOffset, queryPlanning
                "batch_dataframe_before_the_committer": marks["committer_called_at_s"],
                "committer_before_spark_job": job_submitted,  # lease re-acquired, lake tables loaded, files resolved
                "spark_job_executors_write_files": job_ended,
                "delta_commit_report_release": marks["round_logged_at_s"],
                "stop_and_exit": marks["exit_at_s"],
            }
        ),
    }


def _iso_s(timestamp: str) -> float:
    """Seconds since the epoch of Spark's ISO-8601 progress timestamp (UTC, ``Z``)."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def bench_cluster(args, work: Path, store) -> dict:
    from tiering.coord.embedded import EmbeddedZooKeeper
    from tiering.objectstore.embedded_s3 import EmbeddedS3

    load_before = os.getloadavg()
    client = store.client(timeout_s=600)
    load_table(client, "snap", range(args.rows), args.buckets)
    snapshots = client.take_snapshots("snap")
    for table, rows in [("snap-1w", args.rows), *((f"small-{i}", FIRST_COMMIT_ROWS) for i in range(REPEAT))]:
        load_table(client, table, range(rows), args.buckets)
        client.take_snapshots(table)
    with contextlib.ExitStack() as stack:
        zk = EmbeddedZooKeeper().start(work / "zk")
        stack.callback(zk.stop)
        s3 = stack.enter_context(EmbeddedS3(bucket="bench").start(work / "s3"))
        zip_path, code = pyfiles_snapshot(work)
        bench = ClusterBench(work, store.url, zk.hosts, s3, zip_path)
        with SparkCluster(work / "cluster-2", workers=2).start() as cluster:
            service = bench.service(cluster, "service-2w", "snap")
            baseline, copied = bench.baseline(cluster, "baseline", snapshots, "snap")
            floors, firsts = [], []
            for i in range(REPEAT):  # interleaved: a load spike from elsewhere hits both sides
                floors.append(bench.submit(cluster, f"floor-{i}", FLOOR))
                firsts.append(bench.service(cluster, f"first-{i}", f"small-{i}"))
        with SparkCluster(work / "cluster-1", workers=1).start() as cluster:
            one_worker = bench.service(cluster, "service-1w", "snap-1w")
            baseline_1w, copied_1w = bench.baseline(cluster, "baseline-1w", snapshots, "snap")
        lake_rows = {
            name: bench.rows_in_lake(name, table)
            for name, table in (
                ("service-2w", "snap"),
                ("baseline", "snap"),
                ("service-1w", "snap-1w"),
                ("baseline-1w", "snap"),
            )
        }
        first_rows = [bench.rows_in_lake(f"first-{i}", f"small-{i}") for i in range(REPEAT)]
        first_commits = [bench.commit_at_s(run, f"first-{i}", f"small-{i}") for i, run in enumerate(firsts)]
        mid = _median_index(first_commits)
        breakdown = {
            "service_2_workers": service_breakdown(bench, service, "service-2w", "snap"),
            "service_1_worker": service_breakdown(bench, one_worker, "service-1w", "snap-1w"),
            "baseline": {**copied, **baseline.job_breakdown()},
            "baseline_1_worker": {**copied_1w, **baseline_1w.job_breakdown()},
            "first_commit_median_run": service_breakdown(bench, firsts[mid], f"first-{mid}", f"small-{mid}"),
            "floor_median_run": floors[_median_index([f.wall_s for f in floors])].job_breakdown(),
        }
    if args.logs:
        keep_logs(work, args.logs)
    if set(lake_rows.values()) != {args.rows} or set(first_rows) != {FIRST_COMMIT_ROWS}:
        raise RuntimeError(f"the lake does not hold the rows copied: {lake_rows}, first-commit runs {first_rows}")
    mb = sum(s.size_bytes for s in snapshots.buckets) / 2**20
    first_commit_s, floor_s = statistics.median(first_commits), statistics.median(f.wall_s for f in floors)
    baseline_copy_s = copied["copy_s"] + copied["commit_s"]
    return {
        "service_code": code,
        "rows": args.rows,
        "buckets": args.buckets,
        "snapshot_mb": round(mb, 1),
        "lake": "s3 (SeaweedFS, loopback)",
        "cluster": "standalone, master + workers of 1 core / 1 GiB, executors 512 MiB, driver 512 MiB (client mode)",
        "service_s": round(service.wall_s, 3),
        "service_round_s": service.round_s(),
        "service_rows_per_s": round(args.rows / service.wall_s),
        "service_mb_per_s": round(mb / service.wall_s, 2),
        "baseline_s": round(baseline.wall_s, 3),
        "baseline_copy_s": round(baseline_copy_s, 3),
        "baseline_rows_per_s": round(args.rows / baseline.wall_s),
        "service_vs_baseline": round(baseline.wall_s / service.wall_s, 3),
        "service_round_vs_baseline_copy": round(baseline_copy_s / service.round_s(), 3),
        "lake_rows": lake_rows,
        "workers_2_s": round(service.wall_s, 3),
        "workers_1_s": round(one_worker.wall_s, 3),
        "speedup_2_vs_1": round(one_worker.wall_s / service.wall_s, 3),
        "workers_2_round_s": service.round_s(),
        "workers_1_round_s": one_worker.round_s(),
        "round_speedup_2_vs_1": round(one_worker.round_s() / service.round_s(), 3),
        "baseline_1_worker_s": round(baseline_1w.wall_s, 3),
        "baseline_1_worker_copy_s": round(copied_1w["copy_s"] + copied_1w["commit_s"], 3),
        "service_vs_baseline_1_worker": round(baseline_1w.wall_s / one_worker.wall_s, 3),
        "baseline_speedup_2_vs_1": round(baseline_1w.wall_s / baseline.wall_s, 3),
        "first_commit_rows": FIRST_COMMIT_ROWS,
        "first_commit_s": round(first_commit_s, 3),
        "first_commit_runs_s": first_commits,
        "floor_s": round(floor_s, 3),
        "floor_runs_s": [round(f.wall_s, 3) for f in floors],
        "first_commit_minus_floor_s": round(first_commit_s - floor_s, 3),
        "goals": {"service_vs_baseline": ">= 0.9", "first_commit_minus_floor_s": "<= 3"},
        "breakdown": breakdown,
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
    }


def keep_logs(work: Path, into: Path) -> None:
    """Every submission's output, conf and event log, and the cluster's daemon and executor logs
    (``cluster-N/worker*/app-*/*/stderr``), copied into ``into`` (the work directory goes)."""
    into.mkdir(parents=True, exist_ok=True)
    for path in [*work.glob("*.log"), *work.glob("*.toml"), *work.glob("*.json")]:
        shutil.copy2(path, into / path.name)
    shutil.copytree(work / "events", into / "events", dirs_exist_ok=True)
    for log in work.glob("cluster-*/**/*"):
        if log.is_file() and (log.name in ("stderr", "stdout") or log.suffix == ".log"):
            target = into / log.relative_to(work)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(log, target)


def _median_index(values: list[float]) -> int:
    """Where the median of an odd count of values is: its run's breakdown is the one reported."""
    return sorted(range(len(values)), key=values.__getitem__)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--buckets", type=int, default=8)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--logs", type=Path, help="keep the submissions' and executors' logs here")
    args = parser.parse_args()
    run_mode("cluster", bench_cluster, args)


if __name__ == "__main__":
    main()
