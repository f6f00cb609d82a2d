"""Runs every benchmark, each in its own process, and writes results/*.json + results/SUMMARY.md's table.

Why one command: the figures are only comparable when measured in one sitting on one
machine; every benchmark carries its own baseline from the same run, and the summary
shows the ratios next to the raw numbers (plus the machine's load, which skews all of them).

Run from the repository's root: .venv/bin/python -m benchmarks.run_all [--quick]
Full: 2M-row snapshot on a local and an S3 lake (and 20M for the memory comparison and the
large-snapshot ratio), 1M updates over 100k keys, the fixed cost of a round (empty, one row),
10/50/200 tables in one round, lag under a 5k rows/s writer for 60 s, 1,000-bucket leases,
1,000 x 16 planning, failover with 5 trials, the store under load for 2 x 120 s. --quick: a
tenth of the sizes, fewer repeats, shorter runs (minutes instead of tens of minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import REPO, RESULTS


def _run(module: str, args: list[str], out: Path) -> dict:
    """``python -m benchmarks.<module> args`` from the repository's root; the JSON it wrote to ``out``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_")}
    env["PYSPARK_PYTHON"] = sys.executable
    started = time.monotonic()
    argv = [sys.executable, "-m", f"benchmarks.{module}", *args]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark {argv[2:]} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    print(f"  {' '.join(args) or module}: {time.monotonic() - started:.0f}s", flush=True)
    return json.loads(out.read_text())


def tiering(mode: str, name: str, *options: str) -> dict:
    out = RESULTS / f"{name}.json"
    return _run("bench_tiering", [mode, *options, "--out", str(out)], out)


def bench(module: str, *options: str) -> dict:
    out = RESULTS / f"{module}.json"
    return _run(module, [*options, "--out", str(out)], out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    args = parser.parse_args()
    q = args.quick
    rows = 200_000 if q else 2_000_000
    RESULTS.mkdir(exist_ok=True)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    print("benchmarks" + (" (quick)" if q else ""), flush=True)
    r = {
        "snapshot": tiering("snapshot", "snapshot", "--rows", str(rows)),
        "snapshot_s3": tiering("snapshot", "snapshot_s3", "--rows", str(rows), "--lake", "s3"),
        "snapshot_large": tiering("snapshot", "snapshot_10x", "--rows", str(rows * 10)),
        "changelog": tiering(
            "changelog",
            "changelog",
            "--keys",
            str(10_000 if q else 100_000),
            "--updates",
            str(100_000 if q else 1_000_000),
        ),
        "empty_round": tiering("empty-round", "empty_round", "--repeat", "5" if q else "10"),
        "tables": tiering("tables", "tables", "--counts", "10,50" if q else "10,50,200"),
        "lag": tiering("lag", "lag", "--duration", "20" if q else "60"),
        "leases": tiering("leases", "leases", "--buckets", "1000", "--repeat", "5" if q else "20"),
        "planning": tiering(
            "planning", "planning", "--tables", "1000", "--buckets", "16", "--repeat", "3" if q else "10"
        ),
    }
    r["failover"] = bench("bench_failover", "--trials", "2" if q else "5", "--timeouts", "2" if q else "2,4")
    r["store"] = bench("bench_store", "--rows", str(rows // 2), "--repeat", "10" if q else "50")
    r["store_load"] = bench("bench_store_load", "--duration", "20" if q else "120")["scenarios"]
    meta = {
        "quick": q,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_avg_1m_before": round(load_before, 2),
        "load_avg_1m_after": round(os.getloadavg()[0], 2),
        "wall_s": round(time.monotonic() - started, 1),
    }
    path = RESULTS / "SUMMARY.md"
    path.write_text(with_history(summary(r, meta), path.read_text() if path.exists() else ""))
    print(summary(r, meta))


def with_history(current: str, previous: str) -> str:
    """``current`` (this run's table) above the sections of ``previous`` after its own table: a
    run replaces the table, not the measurements recorded under it, which a later run cannot redo."""
    _, marker, history = previous.partition("\n## ")
    return current + ("\n" + marker.lstrip("\n") + history if marker else "")


def summary(r: dict, meta: dict) -> str:
    s, s3, big, c, le, p = (
        r["snapshot"],
        r["snapshot_s3"],
        r["snapshot_large"],
        r["changelog"],
        r["leases"],
        r["planning"],
    )
    er, tb, lag = r["empty_round"], r["tables"]["rounds"], r["lag"]
    fo = r["failover"]["results"][0]
    round_ms = s["service_s"] * 1000
    lines = [
        "# Benchmark summary",
        "",
        f"{'Quick run' if meta['quick'] else 'Full run'}: {meta['cpus']} CPUs, Python {meta['python']}, "
        f"load average {meta['load_avg_1m_before']} before / {meta['load_avg_1m_after']} after "
        f"(other processes on the machine skew every figure), {meta['wall_s']:.0f} s in all. "
        "Produced by `python -m benchmarks.run_all`; raw figures in `results/*.json`.",
        "",
        "| Benchmark | Service | Baseline (same run) | Ratio |",
        "|---|---|---|---|",
        *(_snapshot_row(x) for x in (s, big, s3)),
        f"| Changelog round, {c['changes']:,} updates over {c['keys']:,} keys (a round of the continuous job vs. "
        f"pyarrow dedupe + DeltaTable.merge, medians of {c['repeat']}; the round of an availableNow run: "
        f"{c['available_now_round_s']} s = {c['available_now_vs_baseline_throughput']}x, that run with its query "
        f"start: {c['run_with_query_start_s']} s) | {c['service_s']} s, "
        f"{c['service_changes_per_s']:,} changes/s | {c['baseline_merge_s']} s, {c['baseline_changes_per_s']:,} "
        f"changes/s (after {c['idle_merge_after_s']:.0f} s idle: {c['baseline_merge_after_idle_s']} s) | "
        f"{c['service_vs_baseline_throughput']}x throughput ({c['service_vs_idle_baseline_throughput']}x against the "
        "MERGE after idle) |",
        "| Fixed cost of a round, continuous job, 1 table x 8 "
        f"buckets | nothing changed: {er['empty_round_p50_ms']} ms "
        f"p50; one changed row: {er['one_row_round_p50_ms']} ms p50 ({er['one_row_round_max_ms']} max) | target | "
        f"<= 500 ms |",
        "| One round of N tables x 4 buckets, a few rows changed in each | "
        + "; ".join(f"{t['tables']}: {t['round_ms']:,} ms ({t['per_table_ms']} ms/table)" for t in tb)
        + " | target | <= 30 ms/table |",
        f"| Lag under a steady writer, {lag['rate_rows_per_s']:,} rows/s for {lag['duration_s']:.0f} s, trigger "
        f"{lag['trigger_interval_s']} s | p50 {lag['lag_p50_s']} s, p99 {lag['lag_p99_s']} s, max {lag['lag_max_s']} s "
        f"({lag['rounds']} rounds) | the trigger interval | {lag['trigger_interval_s']} s |",
        f"| Lease overhead per round, {le['buckets']:,} buckets (acquire + release) | {le['per_round_ms']} ms "
        f"(acquire {le['acquire_p50_ms']}, release {le['release_p50_ms']}) | the {s['rows']:,}-row snapshot round: "
        f"{round_ms:,.0f} ms | {100 * le['per_round_ms'] / round_ms:.2f}% of the round |",
        f"| Planning, {p['tables']:,} tables x {p['buckets_per_table']} buckets ({p['splits']:,} splits) | "
        f"{p['plan_p50_ms']} ms (RoundPlanner.plan) | {p['offset_json_p50_ms']} ms (offset -> JSON, "
        f"{p['offset_json_kb']} KB) | {p['plan_vs_offset_json']}x |",
        f"| Failover after SIGKILL, session timeout {fo['session_timeout_s']} s | "
        f"{fo['failover_after_sigkill']['median_s']} s median | session timeout | "
        f"{fo['failover_after_sigkill']['median_x_session_timeout']}x |",
        f"| Step-down when ZooKeeper freezes, session timeout {fo['session_timeout_s']} s | "
        f"{fo['step_down_when_zk_frozen']['median_s']} s median | session timeout | "
        f"{fo['step_down_when_zk_frozen']['median_x_session_timeout']}x |",
        f"| Peak driver RSS, snapshot {s['rows']:,} -> {big['rows']:,} rows (10x) | Python "
        f"{s['driver_python_peak_rss_mb']} -> {big['driver_python_peak_rss_mb']} MB; JVM "
        f"{s['driver_jvm_peak_rss_mb']} -> {big['driver_jvm_peak_rss_mb']} MB | - | Python "
        f"{_ratio(big['driver_python_peak_rss_mb'], s['driver_python_peak_rss_mb'])}x, JVM "
        f"{_ratio(big['driver_jvm_peak_rss_mb'], s['driver_jvm_peak_rss_mb'])}x for 10x data |",
        f"| Store ingest, {r['store']['ingest']['rows']:,} "
        "rows (HTTP Arrow write vs. pyarrow Parquet write) | "
        f"{r['store']['ingest']['store_rows_per_s']:,} rows/s | "
        f"{r['store']['ingest']['baseline_rows_per_s']:,} rows/s | "
        f"{r['store']['ingest']['ratio_store_to_baseline']}x time |",
        *_store_load_rows(r["store_load"]),
        "",
    ]
    return "\n".join(lines)


def _snapshot_row(s: dict) -> str:
    return (
        f"| Snapshot tiering, {s['rows']:,} rows / {s['snapshot_mb']} MB, {s['buckets']} buckets, {s['lake']} lake "
        f"(store + TieringJob availableNow, the process's second run; first run: {s['first_run_1k_rows_s']} s) vs. "
        f"{s['baseline']} copy | {s['service_s']} s, {s['service_rows_per_s']:,} rows/s (the round alone: "
        f"{s['service_round_s']} s) | {s['baseline_s']} s, "
        f"{s['baseline_rows_per_s']:,} rows/s | {s['service_vs_baseline_throughput']}x throughput "
        f"({s['service_vs_pyarrow_copy']}x of a pyarrow/delta-rs copy: {s['pyarrow_copy_s']} s) |"
    )


def _store_load_rows(scenarios: dict) -> list[str]:
    """The store under load: latency of writes and lease calls next to the same calls unloaded."""
    rows = []
    for name, sc in scenarios.items():
        figures = [
            (label, sc["endpoints"].get(endpoint))
            for label, endpoint in (
                ("JSON write", "POST /v1/tables/{}/rows"),
                ("Arrow write", "POST /v1/tables/{}/rows (arrow)"),
                ("acquire", "POST /v1/leases/{}/acquire"),
            )
        ]
        loaded = "; ".join(f"{label} p50 {f['p50_ms']} / p99 {f['p99_ms']} ms" for label, f in figures if f)
        unloaded = "; ".join(f"{label} p50 {f['unloaded_p50_ms']} ms" for label, f in figures if f)
        ratios = " / ".join(f"{f['ratio_p50_loaded_to_unloaded']}x" for _, f in figures if f)
        killed = f", SIGKILL half-way (healthy again after {sc['sigkill_to_healthy_s']} s)" if name == "sigkill" else ""
        rows.append(
            f"| Store under load{killed}: 8 writers, snapshots, GC "
            f"every 0.2 s, 2 lease loops, {sc['duration_s']:.0f} s; "
            f"{sc['requests']:,} requests, {sc['server_errors_5xx']} "
            f"5xx, {sc['acknowledged_rows']:,} rows acknowledged, "
            f"{sc['verified_keys']:,} keys verified, {sc['leased_snapshots_checked']} leased snapshots checked, "
            f"{sc['violation_count']} violations, store RSS max {sc['store_rss_mb']['max']} MB | {loaded} | "
            f"unloaded, same run: {unloaded} | {ratios} p50 |"
        )
    return rows


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "n/a"


if __name__ == "__main__":
    main()
