"""Write amplification: does a round's cost follow its changes or the table's size?

A round of the same 1,000 changed keys goes into a small table and a big one (8 buckets each,
``--small-keys`` and ``--keys`` rows), with two change patterns: "recent" (the highest ids, the
keys a growing table changes) and "uniform" (a random sample of every id). Each round is the
service's own (an availableNow run of the tiering job; its time is the round's Spark
``triggerExecution``), and the same changes of the big table are also MERGEd by hand with
delta-rs into a plain Delta table holding the same rows (``DeltaTable.merge``, as the changelog
benchmark's baseline does). Before the measured rounds one uniform round settles the layout
(the bootstrap byte-copies each bucket's snapshot file; the first round touching it rewrites it
whole): its time is reported as ``first_round_s``.

Both sides write one Parquet codec, ``--compression`` (default: the service's, zstd): the
service's ``lake.compression``, and the MERGE's writer properties (and its target's first write),
so the comparison is like for like (delta-rs alone would write snappy). The byte-copied
snapshot files are the store's zstd until the first round rewrites them.

``--writer`` picks the service's ``lake.writer``; with ``delta-spark``, ``--delta-spark-write``
its ``lake.delta_spark_write`` (``merge``: a MERGE with deletion vectors; ``replace``: the
buckets rewritten), and the Delta jars of ``deploy/jars/lib`` (or ``$DELTA_SPARK_JARS``) are put
on Spark's classpath with Delta's SQL extension and catalog: run it with ``.venv-delta``'s Python,
whose pyspark the jars are built for.

``big_vs_small`` is the big table's recent round over the small one's (goal <= 2);
``uniform_vs_merge`` is the MERGE's time over the round's for uniform changes, a throughput
ratio (goal >= 0.9). Per round the lake commit's files rewritten (removed, not re-added with a
deletion vector), deletion vectors written, files added and bytes written (new files and vectors).

    .venv/bin/python -m benchmarks.bench_amplification [--keys 20000000] [--small-keys 200000]
        [--target-file-mb N] [--compression zstd|snappy|lz4|gzip|none] [--repeat 3] [--out FILE]
        [--writer delta-rs|delta-spark] [--delta-spark-write merge|replace]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from benchmarks.common import load_table, rows, run_mode, run_service, service_config, spark_session
from benchmarks.merge_baseline import ChangelogRounds
from tiering.conf.defaults import DEFAULT_COMPRESSION
from tiering.conf.model import Compression
from tiering.writers.compression import delta_rs_properties

#: Keys a measured round changes.
CHANGED_KEYS = 1000
BUCKETS = 8
#: The big table's name: the changelog benchmark's MERGE baseline (ChangelogRounds) reads it.
BIG = "cl"
SMALL = "amp-small"


@dataclass
class TieredTable:
    """One store table and the availableNow job that tiers it alone; its rounds' figures."""

    name: str
    keys: int
    config: object
    epoch: int = 0
    rounds: dict[str, list[dict]] = field(default_factory=dict)

    def round(self, spark) -> dict:
        """One availableNow run: its round's seconds and what its lake commit did."""
        self.epoch += 1
        run = run_service(spark, self.config, epoch=self.epoch)
        return {"round_s": round(run.rounds_s, 3), **_last_commit(Path(self.config.lake.root) / self.name)}


def bench_amplification(args, work: Path, store) -> dict:
    client = store.client(timeout_s=600)
    keys, small_keys = args.keys, getattr(args, "small_keys", 200_000)
    target = getattr(args, "target_file_mb", None)
    compression = getattr(args, "compression", None) or DEFAULT_COMPRESSION
    lake = {"compression": compression, **({"target_file_mb": target} if target else {})}
    writer = getattr(args, "writer", "delta-rs")
    lake["writer"] = writer
    if writer == "delta-spark":
        lake["delta_spark_write"] = getattr(args, "delta_spark_write", "merge")
        _delta_jars()
    merge_writer = delta_rs_properties(compression)
    print(f"bench amplification: codec {compression} (the service's lake.compression and the MERGE's)", file=sys.stderr)
    spark = spark_session()
    rng, salt = random.Random(21), 0
    tables = {}
    for name, n in ((SMALL, small_keys), (BIG, keys)):
        load_table(client, name, range(n), BUCKETS)
        client.take_snapshots(name)
        config = service_config(work, store.url, f"amp-{name}", {"tables.include": [name]}, **lake)
        tables[name] = TieredTable(name, n, config)
        tables[name].round(spark)  # the bootstrap, untimed
    baseline = ChangelogRounds(args, work, client, merge_writer)
    baseline.create_target(client.take_snapshots(BIG))

    def changes(pattern: str, n: int) -> pa.Array:
        ids = range(n - CHANGED_KEYS, n) if pattern == "recent" else rng.sample(range(n), CHANGED_KEYS)
        return pa.array(ids, pa.int64())

    def round_of(table: TieredTable, pattern: str) -> dict:
        nonlocal salt
        salt += 1
        ids = changes(pattern, table.keys)
        if table.name != BIG:
            client.write_arrow(table.name, rows(ids, salt))
            return table.round(spark)
        before, _ = baseline.write([rows(ids, salt)])
        measured = table.round(spark)
        measured["merge_s"] = round(baseline.merge(before)[0], 3)
        return measured

    first = {name: round_of(t, "uniform") for name, t in tables.items()}  # settles the layout
    for pattern in ("recent", "uniform"):
        for table in tables.values():
            table.rounds[pattern] = [round_of(table, pattern) for _ in range(args.repeat)]
    spark.stop()

    def median(table: str, pattern: str, key: str = "round_s") -> float:
        return statistics.median(r[key] for r in tables[table].rounds[pattern])

    small_s, big_s = median(SMALL, "recent"), median(BIG, "recent")
    uniform_s, merge_s = median(BIG, "uniform"), median(BIG, "uniform", "merge_s")
    return {
        "writer": writer,
        "delta_spark_write": lake.get("delta_spark_write"),
        "keys": keys,
        "small_keys": small_keys,
        "buckets": BUCKETS,
        "changed_keys": CHANGED_KEYS,
        "repeat": args.repeat,
        "lake_target_file_mb": target,
        "compression": compression,
        "small_round_s": small_s,
        "big_round_s": big_s,
        "big_vs_small": round(big_s / small_s, 3),
        "big_uniform_round_s": uniform_s,
        "big_uniform_merge_s": merge_s,
        "big_recent_merge_s": median(BIG, "recent", "merge_s"),
        "uniform_vs_merge": round(merge_s / uniform_s, 3),
        "small_uniform_round_s": median(SMALL, "uniform"),
        "first_round_s": {name: r["round_s"] for name, r in first.items()},
        "rounds": {name: {"first": first[name], **t.rounds} for name, t in tables.items()},
    }


def _last_commit(table: Path) -> dict:
    """What the table's newest commit wrote (a local lake): files rewritten (removed and not
    re-added: a file re-added with a deletion vector is not rewritten), deletion vectors, new
    files, and the bytes of the new files and the vectors."""
    newest = max((table / "_delta_log").glob("*.json"), key=lambda p: int(p.stem))
    actions = [json.loads(line) for line in newest.read_text().splitlines() if line.strip()]
    removed = {a["remove"]["path"] for a in actions if "remove" in a}
    adds = [a["add"] for a in actions if "add" in a]
    vectors = [a["deletionVector"] for a in adds if a.get("deletionVector")]
    new = [a for a in adds if a["path"] not in removed]
    return {
        "files_rewritten": len(removed - {a["path"] for a in adds}),
        "deletion_vectors": len(vectors),
        "files_added": len(new),
        "bytes_written": sum(a["size"] for a in new) + sum(v.get("sizeInBytes", 0) for v in vectors),
    }


def _delta_jars() -> None:
    """The Delta jars, SQL extension and catalog in the Spark about to start (delta-spark)."""
    jars = os.environ.get("DELTA_SPARK_JARS") or ",".join(
        str(p) for p in sorted((Path(__file__).resolve().parents[1] / "deploy/jars/lib").glob("*.jar"))
    )
    os.environ["PYSPARK_SUBMIT_ARGS"] = (
        f"--jars {jars} --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension "
        "--conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog pyspark-shell"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=20_000_000, help="rows of the big table")
    parser.add_argument("--small-keys", type=int, default=200_000, help="rows of the small table")
    parser.add_argument("--target-file-mb", type=int, default=None, help="lake.target_file_mb (default: the service's)")
    parser.add_argument(
        "--compression",
        choices=typing.get_args(Compression),
        default=DEFAULT_COMPRESSION,
        help="the Parquet codec of both sides: lake.compression and the MERGE's (default: the service's)",
    )
    parser.add_argument("--writer", choices=["delta-rs", "delta-spark"], default="delta-rs", help="lake.writer")
    parser.add_argument(
        "--delta-spark-write", choices=["merge", "replace"], default="merge", help="lake.delta_spark_write"
    )
    parser.add_argument("--repeat", type=int, default=3, help="measured rounds per table and pattern (medians)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    run_mode("amplification", bench_amplification, args)


if __name__ == "__main__":
    main()
