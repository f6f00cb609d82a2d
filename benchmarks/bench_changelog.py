"""``changelog`` mode: a round of the continuous job against a hand-written MERGE of the same changes.

``--keys K --updates U [--repeat R]``: K keys tiered, then R times: U upserts over them, a round of
a continuous job (Spark's ``triggerExecution`` of the one batch that carries them: the writes are
made between two triggers, :data:`CHANGELOG_TRIGGER_S` apart) and a hand-written
``DeltaTable.merge`` of the same changes (:class:`benchmarks.merge_baseline.ChangelogRounds`),
written with the service's Parquet codec (``lake.compression``; ``compression`` in the JSON), at
each library's default level (zstd 1 in both), and with delta-rs's statistics of every column (the
round's files carry them for integer columns only), into a table of the lake's columns and
partitions that must end with the lake's rows: the baseline does no less than the round; then R
times the same with an availableNow run per round (``available_now_*``: each run starts a query,
whose planning process opens the lake afresh; the run with its query start is reported apart).
Medians of the R, after one untimed round and MERGE (the process's first of each pays for warming
pyarrow and DataFusion up). A round is Spark's trigger: its batch (``service_batches_s``: the
round's reads, writes, commit and store calls) and what Spark does around it
(``service_outside_batch_s``: planning, the offsets and commit logs; each phase's ms in
``service_outside_batch_ms``), a fixed cost the MERGE does not pay
(``batch_vs_baseline_throughput``: the batch alone against the MERGE). ``store_wakeup_ms``, before
and after: the store's first answer after seconds idle and the next
(:func:`benchmarks.common.wakeup_ms`), which says how much this machine taxes a process it wakes;
``baseline_merges_after_idle_s``: each round's MERGE once more after this process and the store
idled as the round's processes do between triggers (``service_vs_idle_baseline_throughput``).
``driver_rss_mb`` and ``driver_peak_rss_mb``: this process's resident memory after the rounds and
at its peak (it is the job's driver, and runs the MERGE too).
While a round runs the benchmark asks the lake whether it landed only after each trigger's report,
not every poll: the wait runs in the driver's process beside the round, and the MERGE is timed with
nothing beside it. ``--driver-max-changes 0`` makes the executors write the buckets instead of the
driver (``--merge-max-changes``, its older name, still works and says so).

Run: .venv/bin/python -m benchmarks.bench_tiering changelog [--keys K] [--updates U] [--repeat R]
[--driver-max-changes N]
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import POLL, ContinuousJob, load_table, run_service, service_config, spark_session, wakeup_ms
from benchmarks.merge_baseline import ChangelogRounds
from benchmarks.rss import peak_rss_mb, rss_mb
from tests.support.waiting import wait_until

#: The continuous job's trigger in the changelog benchmark: long enough for U upserts to be
#: written between two triggers, so each round carries all of them.
CHANGELOG_TRIGGER_S = 10.0
#: How long the MERGE timed after idle waits past a trigger of the job: seconds, as the round's
#: processes idle between triggers, and done before the job's next trigger.
IDLE_MERGE_AFTER_S = 6.0
#: A trigger's phases that are not Spark's part around the batch: the batch, and the whole.
_NOT_OUTSIDE = frozenset({"addBatch", "triggerExecution"})


def bench_changelog(args, work: Path, store) -> dict:
    from tiering.delta_log.lake import Lake
    from tiering.enumerator.positions import LakePosition
    from tiering.writers.compression import delta_rs_properties

    client = store.client(timeout_s=600)
    wakeups = [wakeup_ms(client)]
    load_table(client, "cl", range(args.keys), args.buckets)
    snapshots = client.take_snapshots("cl")
    spark = spark_session()
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")  # a progress report per idle trigger
    config = service_config(work, store.url, "bench-changelog", driver_max_changes=args.driver_max_changes)
    codec = delta_rs_properties(config.lake.compression)  # the MERGE writes the service's codec: like with like
    run_service(spark, config)  # bootstrap, untimed
    table_id = client.log_info("cl").table_id
    bench = ChangelogRounds(args, work, client, codec)
    bench.create_target(snapshots)
    lake = Lake.of(config.lake)
    rounds, batches, merges, idle_merges, keys_merged = [], [], [], [], 0
    outside: list[dict[str, int]] = []  # Spark's phases around each measured batch, ms

    continuous = service_config(
        work,
        store.url,
        "bench-changelog",
        {"trigger.available_now": False, "trigger.interval_s": CHANGELOG_TRIGGER_S},
        driver_max_changes=args.driver_max_changes,
    )
    with ContinuousJob(spark, continuous, epoch=2) as running:
        attempts, warming_up = 0, True  # the first round the driver writes and the first MERGE: untimed
        while len(rounds) < args.repeat:
            attempts += 1
            if attempts > 2 * args.repeat + 1:
                raise RuntimeError("benchmark: the writes kept straddling two triggers; raise CHANGELOG_TRIGGER_S")
            chunks = bench.updates()
            seen = len(running.batches())
            wait_until(
                lambda: any("addBatch" not in b.durationMs for b in running.batches()[seen:]),
                what="an idle trigger",
                **POLL,
            )
            written_from = len(running.batches())
            before, changes = bench.write(chunks)
            after = bench.ends()
            wait_until(
                _landed(running, lambda: (lake.position("cl", table_id) or LakePosition(table_id)).buckets == after),
                timeout_s=300,
                interval_s=POLL["interval_s"],
                what="the round in the lake",
            )
            carried = wait_until(
                lambda: [b for b in running.batches()[written_from:] if "addBatch" in b.durationMs],
                what="the round's progress report",
                **POLL,
            )
            if running.error is not None:
                raise running.error
            merge_s, keys_merged = bench.merge(before)
            if not warming_up:
                merges.append(merge_s)
                idle_merges.append(_merge_after_idle(running, bench, before))
                if len(carried) == 1:  # else the writes straddled a trigger: two rounds, not measured
                    rounds.append(carried[0].durationMs["triggerExecution"] / 1000)
                    batches.append(carried[0].durationMs["addBatch"] / 1000)
                    outside.append({k: v for k, v in carried[0].durationMs.items() if k not in _NOT_OUTSIDE})
            warming_up = False

    available_now, runs = [], []
    for epoch in range(3, args.repeat + 3):  # an availableNow run per round, as a scheduler starts them
        before, changes = bench.write(bench.updates())
        run = run_service(spark, config, epoch=epoch)
        available_now.append(run.rounds_s)
        runs.append(run.wall_s)
        merges.append(bench.merge(before)[0])
    rss = {"driver_rss_mb": rss_mb(os.getpid()), "driver_peak_rss_mb": peak_rss_mb(os.getpid())}
    spark.stop()
    bench.check_same_rows(lake.load("cl").to_arrow())
    wakeups.append(wakeup_ms(client))
    service_s, baseline_s = statistics.median(rounds), statistics.median(merges)
    idle_baseline_s = statistics.median(idle_merges)
    available_now_s = statistics.median(available_now)
    return {
        "keys": args.keys,
        "buckets": args.buckets,
        "driver_max_changes": args.driver_max_changes,
        "changes": changes,
        "distinct_keys_changed": keys_merged,
        "repeat": args.repeat,
        "compression": config.lake.compression,
        "service_s": round(service_s, 3),
        "service_changes_per_s": round(changes / service_s),
        "service_rounds_s": [round(r, 3) for r in rounds],
        "service_batches_s": [round(b, 3) for b in batches],
        "service_outside_batch_s": [round(r - b, 3) for r, b in zip(rounds, batches, strict=False)],
        "service_outside_batch_ms": outside,
        "available_now_round_s": round(available_now_s, 3),
        "available_now_rounds_s": [round(r, 3) for r in available_now],
        "run_with_query_start_s": round(statistics.median(runs), 3),
        "baseline_merge_s": round(baseline_s, 3),
        "baseline_changes_per_s": round(changes / baseline_s),
        "baseline_merges_s": [round(m, 3) for m in merges],
        "service_vs_baseline_throughput": round(baseline_s / service_s, 3),
        "idle_merge_after_s": IDLE_MERGE_AFTER_S,
        "baseline_merge_after_idle_s": round(idle_baseline_s, 3),
        "baseline_merges_after_idle_s": [round(m, 3) for m in idle_merges],
        "service_vs_idle_baseline_throughput": round(idle_baseline_s / service_s, 3),
        "available_now_vs_baseline_throughput": round(baseline_s / available_now_s, 3),
        "batch_vs_baseline_throughput": round(baseline_s / statistics.median(batches), 3),
        "store_wakeup_ms": wakeups,
        **rss,
    }


def _merge_after_idle(running: ContinuousJob, bench: ChangelogRounds, before: dict[int, int]) -> float:
    """The round's MERGE once more, timed after this process and the store idled
    :data:`IDLE_MERGE_AFTER_S` past a trigger of the job: the round starts in processes idle
    since the job's last trigger, the MERGE of :meth:`ChangelogRounds.merge` right after the
    round, in a busy process, and this machine taxes a process it wakes (``store_wakeup_ms``).
    The target already holds the changes; a MERGE rewrites the files of every matched key all the
    same, so the work is the round's."""
    report = running.last_report()
    wait_until(lambda: running.last_report() != report, what="the job's next trigger", **POLL)
    time.sleep(IDLE_MERGE_AFTER_S)
    return bench.merge(before)[0]


def _landed(running: ContinuousJob, in_lake: Callable[[], bool]) -> Callable[[], bool]:
    """A poll of whether the round is in the lake (``in_lake``) that asks the lake only once a
    trigger has ended since it last asked. It runs while the round does, in the driver's
    process: opening the lake's table every poll (a Delta log read, its history) took CPU and
    the GIL from the round it waits for, which the MERGE, measured alone, does not share. A
    round lands before its trigger reports, so the report after it finds it in the lake."""
    asked_at = [running.last_report()]

    def landed() -> bool:
        report = running.last_report()
        if report == asked_at[0]:
            return False
        asked_at[0] = report
        return in_lake()

    return landed
