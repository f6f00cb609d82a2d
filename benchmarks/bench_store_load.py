"""The reference store under concurrent load, and under load with a SIGKILL in the middle.

Why: the store is the embedded default upstream and other tools speak its protocol; it must
hold up when many clients write, snapshot and lease at once while its own GC runs, and lose
nothing it acknowledged when it is killed. What runs, for ``--duration`` seconds on loopback:

- 8 writers (4 JSON, 4 Arrow), each owning its keys: upserts of batches, some deletes;
- a snapshotter taking snapshots of the tables; the store's GC every 0.2 s (2 retained);
- 2 lease loops: acquire the latest snapshots, renew, check the held ones are still served
  and their files exist after a few GC passes, release;
- a reader listing tables, logs and segments.

Invariants (checked, not timed): no 5xx; every acknowledged write is in the store at the end
(a final snapshot of every table equals what the writers were told was written); no snapshot
was deleted while a lease held it. Figures: requests, p50/p99 latency per endpoint, the same
endpoints' p50 unloaded (the baseline, same run), rows acknowledged, store RSS.

Scenario ``sigkill`` does the same with the store SIGKILLed and restarted half-way; a request
cut off by the kill is retried by the client (its retry policy), never lost.

Run: .venv/bin/python -m benchmarks.bench_store_load [--duration 120] [--scenarios steady,sigkill] [--out FILE]
Writes benchmarks/results/bench_store_load.json (``--out``). The integration test
tests/integration/kvstore/test_load.py runs the sigkill scenario for ~15 s, asserting the
invariants only.
"""

from __future__ import annotations

import argparse
import platform
import random
import re
import signal
import statistics
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import requests

from benchmarks.common import RESULTS, write_json
from benchmarks.rss import rss_mb
from tiering.errors import SnapshotUnavailableError, StoreError
from tiering.kvstore.client import KvStoreClient
from tiering.kvstore.models import BucketRef, SnapshotRef, TableSpec
from tiering.kvstore.server.process import StoreProcess

TABLES = [f"load{i}" for i in range(4)]
WRITERS, KEYS_PER_WRITER, BATCH = 8, 2000, 100
_SEGMENT = re.compile(r"/(?:tables|leases)/[^/]+|/buckets/\d+|/snapshots/\d+")


def _endpoint(response: requests.Response) -> str:
    """``POST /v1/tables/{}/rows (arrow)``: the route of a response, the way figures group it."""
    path = _SEGMENT.sub(lambda m: m.group(0).rsplit("/", 1)[0] + "/{}", response.request.path_url.split("?")[0])
    arrow = "arrow" in (response.request.headers.get("Content-Type") or "")
    return f"{response.request.method} {path}" + (" (arrow)" if arrow else "")


@dataclass
class Recorder:
    """Every response the load's clients got: latency per endpoint, and the 5xx."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    server_errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        with self._lock:
            self.latencies[_endpoint(response)].append(response.elapsed.total_seconds())
            if response.status_code >= 500:
                self.server_errors.append(f"{response.status_code} {_endpoint(response)}: {response.text[:300]}")

    def client(self, url: str, token: str | None) -> KvStoreClient:
        client = KvStoreClient(url, token=token, timeout_s=60)
        client.session.hooks["response"].append(self)
        return client

    def figures(self) -> dict[str, dict[str, float]]:
        out = {}
        for endpoint, samples in sorted(self.latencies.items()):
            ms = sorted(s * 1000 for s in samples)
            p99 = statistics.quantiles(ms, n=100)[98] if len(ms) > 1 else ms[0]
            out[endpoint] = {"requests": len(ms), "p50_ms": round(statistics.median(ms), 2), "p99_ms": round(p99, 2)}
        return out


@dataclass
class Outcome:
    """What the load observed; ``violations`` must stay empty."""

    recorder: Recorder
    acknowledged_rows: int = 0
    verified_keys: int = 0
    leases_checked: int = 0
    restart_s: float | None = None
    violations: list[str] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)


class Load:
    """The clients of one scenario, sharing a stop event; see the module docstring."""

    def __init__(self, store: StoreProcess, outcome: Outcome, stop: threading.Event) -> None:
        self.store, self.outcome, self.stop = store, outcome, stop
        # Per key: the states the store may hold (one, or two after a write that failed).
        self.expected: dict[tuple[str, int], set[float | None]] = {}
        self._lock = threading.Lock()

    def client(self) -> KvStoreClient:
        return self.outcome.recorder.client(self.store.url, self.store.token)

    def _acknowledge(self, keys: list[tuple[str, int]], value: float | None, ok: bool) -> None:
        with self._lock:
            for key in keys:
                self.expected[key] = {value} if ok else self.expected.get(key, {None}) | {value}
            self.outcome.acknowledged_rows += len(keys) if ok else 0

    def writer(self, n: int) -> None:
        client, rng, arrow = self.client(), random.Random(n), n % 2 == 1
        base, seq = n * KEYS_PER_WRITER, 0
        while not self.stop.is_set():
            table, seq = TABLES[rng.randrange(len(TABLES))], seq + 1
            ids = rng.sample(range(base, base + KEYS_PER_WRITER), BATCH)
            delete = seq % 10 == 0
            try:
                if delete:
                    ids = ids[: BATCH // 10]
                    client.delete(table, [{"id": i} for i in ids])
                elif arrow:
                    client.write_arrow(table, pa.table({"id": pa.array(ids, pa.int64()), "v": [float(seq)] * len(ids)}))
                else:
                    client.upsert(table, [{"id": i, "v": float(seq)} for i in ids])
                ok = True
            except StoreError as e:
                self.outcome.violations.append(f"writer {n}: write refused: {e}")
                ok = False
            self._acknowledge([(table, i) for i in ids], None if delete else float(seq), ok)

    def snapshotter(self) -> None:
        client, rng = self.client(), random.Random(100)
        while not self.stop.wait(0.3):
            client.take_snapshots(TABLES[rng.randrange(len(TABLES))])

    def leaser(self, n: int) -> None:
        client, rng, epoch = self.client(), random.Random(200 + n), 1
        while not self.stop.is_set():
            table = TABLES[rng.randrange(len(TABLES))]
            latest = client.latest_snapshots(table)
            refs = [
                SnapshotRef(table_id=latest.table_id, bucket=s.bucket, snapshot_id=s.snapshot_id)
                for s in latest.buckets
            ]
            held = client.acquire_lease(f"load-{n}", epoch, 30_000, refs).snapshots
            client.renew_lease(f"load-{n}", epoch, 30_000)
            self.stop.wait(0.5)  # a few GC passes while held
            for ref in held:
                self._check_held(client, table, ref)
            client.release_lease(f"load-{n}", epoch, [BucketRef(table_id=r.table_id, bucket=r.bucket) for r in held])
            epoch += 1

    def _check_held(self, client: KvStoreClient, table: str, ref: SnapshotRef) -> None:
        try:
            snap = client.get_snapshot(table, ref.bucket, ref.snapshot_id)
            missing = [f for f in snap.files if not Path(f).exists()]
        except SnapshotUnavailableError as e:
            missing = [str(e)]
        with self._lock:
            self.outcome.leases_checked += 1
        if missing:
            self.outcome.violations.append(f"leased snapshot {ref} of {table} deleted: {missing}")

    def reader(self) -> None:
        client = self.client()
        while not self.stop.wait(0.2):
            for info in client.list_tables():
                for bucket in client.log_info(info.name).buckets[:1]:
                    client.log_segments(info.name, bucket.bucket, bucket.log_start_offset, bucket.log_end_offset)

    def verify(self) -> None:
        """Every acknowledged write is what a final snapshot of its table holds."""
        client = self.client()
        stored: dict[tuple[str, int], float] = {}
        for table in TABLES:
            for snap in client.take_snapshots(table).buckets:
                for row in pq.read_table(snap.files, columns=["id", "v"]).to_pylist():
                    stored[(table, row["id"])] = row["v"]
        for key, allowed in self.expected.items():
            if stored.get(key) not in allowed:
                self.outcome.violations.append(
                    f"{key}: stored {stored.get(key)!r}, acknowledged {sorted(map(str, allowed))}"
                )
        self.outcome.verified_keys = len(self.expected)


def _unloaded_baseline(store: StoreProcess, repeat: int) -> dict[str, dict[str, float]]:
    """The same endpoints, one client, nothing else running: the latency floor of this machine."""
    recorder = Recorder()
    client = recorder.client(store.url, store.token)
    client.create_table(
        TableSpec(
            name="baseline",
            schema=[{"name": "id", "type": "bigint"}, {"name": "v", "type": "double"}],
            primary_key=["id"],
            num_buckets=8,
        )
    )
    for i in range(repeat):
        ids = list(range(i * BATCH, (i + 1) * BATCH))
        client.upsert("baseline", [{"id": k, "v": 1.0} for k in ids])
        client.write_arrow("baseline", pa.table({"id": pa.array(ids, pa.int64()), "v": [2.0] * BATCH}))
        latest = client.take_snapshots("baseline")
        refs = [
            SnapshotRef(table_id=latest.table_id, bucket=s.bucket, snapshot_id=s.snapshot_id) for s in latest.buckets
        ]
        client.acquire_lease("baseline", 1, 30_000, refs)
        client.renew_lease("baseline", 1, 30_000)
        client.release_lease("baseline", 1, [BucketRef(table_id=r.table_id, bucket=r.bucket) for r in refs])
        client.health()
    client.drop_lease("baseline", 1)
    client.drop_table("baseline")
    return recorder.figures()


def _sample_rss(store: StoreProcess, outcome: Outcome, stop: threading.Event) -> None:
    while not stop.wait(1.0):
        rss = rss_mb(store.pid)
        if rss is not None:  # None between a kill and the restart, and for a zombie (no RSS line)
            outcome.rss_mb.append(rss)


def run_load(store: StoreProcess, duration_s: float, kill_at_s: float | None = None) -> Outcome:
    """Run the load against ``store`` (GC every 0.2 s expected) and check its invariants."""
    outcome = Outcome(recorder=Recorder())
    setup = store.client()
    for table in TABLES:
        setup.create_table(
            TableSpec(
                name=table,
                schema=[{"name": "id", "type": "bigint"}, {"name": "v", "type": "double"}],
                primary_key=["id"],
                num_buckets=8,
            )
        )
    stop = threading.Event()
    load = Load(store, outcome, stop)
    failures: list[str] = []

    def spawn(name: str, work: Any, *args: Any) -> threading.Thread:
        def run() -> None:
            try:
                work(*args)
            except Exception as e:  # noqa: BLE001 - a dead client is a finding, reported with the others
                failures.append(f"{name}: {type(e).__name__}: {e}")
                stop.set()

        thread = threading.Thread(target=run, name=name)
        thread.start()
        return thread

    workers = [spawn(f"writer-{n}", load.writer, n) for n in range(WRITERS)]
    workers += [spawn(f"leaser-{n}", load.leaser, n) for n in range(2)]
    workers += [
        spawn("snapshotter", load.snapshotter),
        spawn("reader", load.reader),
        spawn("rss", _sample_rss, store, outcome, stop),
    ]
    started = time.monotonic()
    if kill_at_s is not None:
        stop.wait(kill_at_s)
        killed = time.monotonic()
        store.kill(signal.SIGKILL)
        store.launch()
        outcome.restart_s = round(time.monotonic() - killed, 2)
    stop.wait(max(0.0, duration_s - (time.monotonic() - started)))
    stop.set()
    for worker in workers:
        worker.join(timeout=120)
    outcome.violations += failures
    outcome.violations += outcome.recorder.server_errors
    load.verify()
    return outcome


def _scenario(name: str, duration_s: float, baseline_repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"bench-store-load-{name}-") as tmp:
        store = StoreProcess.start(Path(tmp) / "store", gc_interval_s=0.2, num_retained=2)
        try:
            baseline = _unloaded_baseline(store, baseline_repeat)
            outcome = run_load(store, duration_s, kill_at_s=duration_s / 2 if name == "sigkill" else None)
        finally:
            store.stop()
    loaded = outcome.recorder.figures()
    for endpoint, figures in loaded.items():
        floor = baseline.get(endpoint)
        if floor:
            figures["unloaded_p50_ms"] = floor["p50_ms"]
            figures["ratio_p50_loaded_to_unloaded"] = round(figures["p50_ms"] / floor["p50_ms"], 1)
    return {
        "duration_s": duration_s,
        "violations": outcome.violations[:20],
        "violation_count": len(outcome.violations),
        "server_errors_5xx": len(outcome.recorder.server_errors),
        "acknowledged_rows": outcome.acknowledged_rows,
        "verified_keys": outcome.verified_keys,
        "leased_snapshots_checked": outcome.leases_checked,
        "sigkill_to_healthy_s": outcome.restart_s,
        "requests": sum(f["requests"] for f in loaded.values()),
        "store_rss_mb": {
            "max": max(outcome.rss_mb, default=None),
            "last": outcome.rss_mb[-1] if outcome.rss_mb else None,
        },
        "endpoints": loaded,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=120.0, help="seconds of load per scenario (default 120)")
    parser.add_argument("--scenarios", default="steady,sigkill", help="steady, sigkill or both (default)")
    parser.add_argument("--baseline-repeat", type=int, default=30, help="unloaded calls per endpoint (default 30)")
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_store_load.json", help="where the JSON goes")
    args = parser.parse_args()
    report = {
        "benchmark": "bench_store_load",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "scenarios": {name: _scenario(name, args.duration, args.baseline_repeat) for name in args.scenarios.split(",")},
    }
    write_json(args.out, report)
    for name, result in report["scenarios"].items():
        print(
            f"{name}: {result['duration_s']:.0f} s, {result['requests']:,} "
            f"requests, {result['server_errors_5xx']} 5xx, "
            f"{result['acknowledged_rows']:,} rows acknowledged, {result['verified_keys']:,} keys verified, "
            f"{result['leased_snapshots_checked']} leased snapshots checked, {result['violation_count']} violations, "
            f"store RSS max {result['store_rss_mb']['max']} MB"
        )
        for endpoint, f in result["endpoints"].items():
            ratio = f" ({f['ratio_p50_loaded_to_unloaded']}x unloaded)" if "ratio_p50_loaded_to_unloaded" in f else ""
            print(f"  {endpoint:<48} {f['requests']:>7,}  p50 {f['p50_ms']:>8} ms{ratio}  p99 {f['p99_ms']:>8} ms")
    print(f"-> {args.out}")
    if any(r["violation_count"] for r in report["scenarios"].values()):
        raise SystemExit("invariants violated (see violations in the JSON)")


if __name__ == "__main__":
    main()
