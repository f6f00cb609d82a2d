"""Runs every benchmark, each in its own process, and writes results/*.json + results/SUMMARY.md.

Why one command: the figures are only comparable when measured in one sitting on one
machine; every benchmark carries its own baseline from the same run, and the summary
shows the ratios next to the raw numbers (plus the machine's load, which skews all of them).

Run: .venv/bin/python benchmarks/run_all.py [--quick]
Full: 2M-row snapshot (and 200k for the memory comparison), 1M updates over 100k keys,
1,000-bucket leases, 1,000 x 16 planning, failover with 5 trials, the store under load for
2 x 120 s. --quick: a tenth of the sizes, fewer repeats, 2 x 20 s of load (minutes instead of
tens of minutes).
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

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def _run(args: list[str], out: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_")}
    env["PYSPARK_PYTHON"] = sys.executable
    started = time.monotonic()
    proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, cwd=HERE.parent)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark {args} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    print(f"  {' '.join(args[1:]) or args[0]}: {time.monotonic() - started:.0f}s", flush=True)
    return json.loads(out.read_text())


def tiering(mode: str, name: str, *options: str) -> dict:
    out = RESULTS / f"{name}.json"
    return _run([str(HERE / "bench_tiering.py"), mode, *options, "--out", str(out)], out)


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
        "snapshot_small": tiering("snapshot", "snapshot_tenth", "--rows", str(rows // 10)),
        "changelog": tiering("changelog", "changelog", "--keys", str(10_000 if q else 100_000),
                             "--updates", str(100_000 if q else 1_000_000)),
        "leases": tiering("leases", "leases", "--buckets", "1000", "--repeat", "5" if q else "20"),
        "planning": tiering("planning", "planning", "--tables", "1000", "--buckets", "16", "--repeat", "3" if q else "10"),
    }
    _run([str(HERE / "bench_failover.py"), "--trials", "2" if q else "5", "--timeouts", "2" if q else "2,4"],
         RESULTS / "bench_failover.json")
    r["failover"] = json.loads((RESULTS / "bench_failover.json").read_text())
    _run([str(HERE / "bench_store.py"), "--rows", str(rows // 2), "--repeat", "10" if q else "50"],
         RESULTS / "bench_store.json")
    r["store"] = json.loads((RESULTS / "bench_store.json").read_text())
    r["store_load"] = _run([str(HERE / "bench_store_load.py"), "--duration", "20" if q else "120"],
                           RESULTS / "bench_store_load.json")["scenarios"]
    meta = {"quick": q, "cpus": os.cpu_count(), "python": platform.python_version(),
            "load_avg_1m_before": round(load_before, 2), "load_avg_1m_after": round(os.getloadavg()[0], 2),
            "wall_s": round(time.monotonic() - started, 1)}
    (RESULTS / "SUMMARY.md").write_text(summary(r, meta))
    print((RESULTS / "SUMMARY.md").read_text())


def summary(r: dict, meta: dict) -> str:
    s, small, c, le, p = r["snapshot"], r["snapshot_small"], r["changelog"], r["leases"], r["planning"]
    fo = r["failover"]["results"][0]
    round_ms = s["service_s"] * 1000
    lines = [
        "# Benchmark summary",
        "",
        f"{'Quick run' if meta['quick'] else 'Full run'}: {meta['cpus']} CPUs, Python {meta['python']}, "
        f"load average {meta['load_avg_1m_before']} before / {meta['load_avg_1m_after']} after "
        f"(other processes on the machine skew every figure), {meta['wall_s']:.0f} s in all. "
        "Produced by `benchmarks/run_all.py`; raw figures in `results/*.json`.",
        "",
        "| Benchmark | Service | Baseline (same run) | Ratio |",
        "|---|---|---|---|",
        f"| Snapshot tiering, {s['rows']:,} rows / {s['snapshot_mb']} MB, {s['buckets']} buckets "
        f"(store + TieringJob availableNow vs. spark.read.parquet -> Delta commit) | "
        f"{s['service_s']} s, {s['service_rows_per_s']:,} rows/s, {s['service_mb_per_s']} MB/s | "
        f"{s['baseline_s']} s, {s['baseline_rows_per_s']:,} rows/s, {s['baseline_mb_per_s']} MB/s | "
        f"{s['service_vs_baseline_throughput']}x throughput |",
        f"| Changelog tiering, {c['changes']:,} updates over {c['keys']:,} keys (service merge round vs. "
        f"pyarrow dedupe + DeltaTable.merge) | {c['service_s']} s, {c['service_changes_per_s']:,} changes/s | "
        f"{c['baseline_merge_s']} s, {c['baseline_changes_per_s']:,} changes/s | "
        f"{c['service_vs_baseline_throughput']}x throughput |",
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
        f"| Peak driver RSS, snapshot {small['rows']:,} -> {s['rows']:,} rows (10x) | Python "
        f"{small['driver_python_peak_rss_mb']} -> {s['driver_python_peak_rss_mb']} MB; JVM "
        f"{small['driver_jvm_peak_rss_mb']} -> {s['driver_jvm_peak_rss_mb']} MB | - | Python "
        f"{_ratio(s['driver_python_peak_rss_mb'], small['driver_python_peak_rss_mb'])}x, JVM "
        f"{_ratio(s['driver_jvm_peak_rss_mb'], small['driver_jvm_peak_rss_mb'])}x for 10x data |",
        f"| Store ingest, {r['store']['ingest']['rows']:,} rows (HTTP Arrow write vs. pyarrow Parquet write) | "
        f"{r['store']['ingest']['store_rows_per_s']:,} rows/s | {r['store']['ingest']['baseline_rows_per_s']:,} rows/s | "
        f"{r['store']['ingest']['ratio_store_to_baseline']}x time |",
        *_store_load_rows(r["store_load"]),
        "",
    ]
    return "\n".join(lines)


def _store_load_rows(scenarios: dict) -> list[str]:
    """The store under load: latency of writes and lease calls next to the same calls unloaded."""
    rows = []
    for name, sc in scenarios.items():
        figures = [(label, sc["endpoints"].get(endpoint)) for label, endpoint in (
            ("JSON write", "POST /v1/tables/{}/rows"), ("Arrow write", "POST /v1/tables/{}/rows (arrow)"),
            ("acquire", "POST /v1/leases/{}/acquire"))]
        loaded = "; ".join(f"{label} p50 {f['p50_ms']} / p99 {f['p99_ms']} ms" for label, f in figures if f)
        unloaded = "; ".join(f"{label} p50 {f['unloaded_p50_ms']} ms" for label, f in figures if f)
        ratios = " / ".join(f"{f['ratio_p50_loaded_to_unloaded']}x" for _, f in figures if f)
        killed = f", SIGKILL half-way (healthy again after {sc['sigkill_to_healthy_s']} s)" if name == "sigkill" else ""
        rows.append(
            f"| Store under load{killed}: 8 writers, snapshots, GC every 0.2 s, 2 lease loops, {sc['duration_s']:.0f} s; "
            f"{sc['requests']:,} requests, {sc['server_errors_5xx']} 5xx, {sc['acknowledged_rows']:,} rows acknowledged, "
            f"{sc['verified_keys']:,} keys verified, {sc['leased_snapshots_checked']} leased snapshots checked, "
            f"{sc['violation_count']} violations, store RSS max {sc['store_rss_mb']['max']} MB | {loaded} | "
            f"unloaded, same run: {unloaded} | {ratios} p50 |"
        )
    return rows


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "n/a"


if __name__ == "__main__":
    main()
