"""The tiering service against hand-written copies of the same data: one command, one mode a run.

Each mode runs in its own process (so peak RSS belongs to one measurement), with a store
process of its own, and prints one JSON object (``--out FILE``: also written there). The modes
live in modules of their own, whose docstrings say what each measures and against what:

- ``snapshot`` (:mod:`benchmarks.bench_snapshot`): a snapshot tiered by the whole service vs.
  Spark's and pyarrow's copies of the same files;
- ``changelog`` (:mod:`benchmarks.bench_changelog`): a round of U upserts vs. a hand-written
  delta-rs MERGE of them;
- ``empty-round``, ``lag`` (:mod:`benchmarks.bench_rounds`): the fixed cost of a round, and how
  far the lake trails a steady writer;
- ``tables`` (:mod:`benchmarks.bench_tables`): rounds of one job over 10 to 10,000 tables;
- ``leases``, ``planning`` (:mod:`benchmarks.bench_protocol`): the lease calls and the planner;
- ``amplification`` (:mod:`benchmarks.bench_amplification`): a round in a small and a big table;
- ``cluster`` (:mod:`benchmarks.bench_cluster`): spark-submit to a standalone cluster;
- ``group`` (:mod:`benchmarks.bench_group`): a tiering group of 1, 2, 3 members, and a killed one.

Run from the repository's root: .venv/bin/python -m benchmarks.bench_tiering MODE [options]
(``--help`` lists them; each says which modes read it). ``python -m benchmarks.run_all`` runs
every benchmark and writes the results.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import typing
from pathlib import Path

from benchmarks.common import run_mode
from tiering.conf.defaults import DEFAULT_DRIVER_MAX_CHANGES
from tiering.conf.model import Compression

#: mode -> (module, function): imported when run, so one mode's imports cost no other mode.
MODES = {
    "snapshot": ("benchmarks.bench_snapshot", "bench_snapshot"),
    "changelog": ("benchmarks.bench_changelog", "bench_changelog"),
    "leases": ("benchmarks.bench_protocol", "bench_leases"),
    "planning": ("benchmarks.bench_protocol", "bench_planning"),
    "empty-round": ("benchmarks.bench_rounds", "bench_empty_round"),
    "tables": ("benchmarks.bench_tables", "bench_tables"),
    "lag": ("benchmarks.bench_rounds", "bench_lag"),
    "amplification": ("benchmarks.bench_amplification", "bench_amplification"),
    "cluster": ("benchmarks.bench_cluster", "bench_cluster"),
    "group": ("benchmarks.bench_group", "bench_group"),
}


class _RenamedFlag(argparse.Action):
    """A flag under its older name: it sets the new one's value and says what replaced it."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(
            f"bench: {option_string} is now --{self.dest.replace('_', '-')} (lake.{self.dest}); "
            f"{option_string} {values} taken as --{self.dest.replace('_', '-')} {values}",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (``argv``, else the process's), with each mode's defaults filled in."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--tables", type=int, default=None, help="default: 600 (group), 1000 otherwise")
    parser.add_argument("--members", default="1,2,3", help="group: the member counts to measure, comma-separated")
    parser.add_argument(
        "--session-timeout", type=float, default=6.0, help="group: the members' zookeeper.session_timeout_s"
    )
    parser.add_argument(
        "--buckets", type=int, default=None, help="default: 8 (snapshot, changelog), 1000 (leases), 16 (planning)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="default: 3 (changelog: rounds, medians reported), 4 (group: rounds per member), 10 otherwise",
    )
    parser.add_argument(
        "--driver-max-changes",
        type=int,
        default=DEFAULT_DRIVER_MAX_CHANGES,
        help="changelog, tables: the service's lake.driver_max_changes (0: Spark's executors rewrite the buckets)",
    )
    parser.add_argument(
        "--merge-max-changes",
        type=int,
        action=_RenamedFlag,
        dest="driver_max_changes",
        help="the older name of --driver-max-changes (lake.merge_max_changes was split)",
    )
    parser.add_argument("--counts", default="10,50,200", help="tables: the table counts to measure, comma-separated")
    parser.add_argument(
        "--changed-max",
        type=int,
        default=1000,
        help="tables: the largest count whose changed round is measured (larger ones: idle rounds only)",
    )
    parser.add_argument("--rate", type=int, default=5000, help="lag: rows written per second")
    parser.add_argument("--duration", type=float, default=60.0, help="lag: seconds of steady writing")
    parser.add_argument(
        "--lake",
        choices=("local", "s3"),
        default="local",
        help="snapshot, tables: where the lake is (s3: an embedded S3 server on loopback)",
    )
    parser.add_argument(
        "--table-parallelism", type=int, default=None, help="tables: lake.table_parallelism (default: the service's)"
    )
    parser.add_argument(
        "--s3-latency-ms",
        type=float,
        default=0.0,
        help="with --lake s3: every request to it delayed this long (a proxy process in front of it)",
    )
    parser.add_argument(
        "--small-keys",
        type=int,
        default=200_000,
        help="amplification: rows of the small table (--keys: rows of the big one)",
    )
    parser.add_argument(
        "--target-file-mb", type=int, default=None, help="amplification: lake.target_file_mb (default: the service's)"
    )
    parser.add_argument(
        "--compression",
        choices=typing.get_args(Compression),
        default=None,
        help="amplification: the Parquet codec of the service and the MERGE (default: the service's)",
    )
    parser.add_argument("--logs", type=Path, help="cluster: keep the submissions' and executors' logs here")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    if args.buckets is None:
        args.buckets = {"leases": 1000, "planning": 16}.get(args.mode, 8)
    if args.repeat is None:
        args.repeat = {"changelog": 3, "group": 4}.get(args.mode, 10)
    if args.tables is None:
        args.tables = 600 if args.mode == "group" else 1000
    return args


def main() -> None:
    args = parse_args()
    module, function = MODES[args.mode]
    run = getattr(importlib.import_module(module), function)
    run_mode(args.mode, run, args, with_store=args.mode != "planning")


if __name__ == "__main__":
    main()
