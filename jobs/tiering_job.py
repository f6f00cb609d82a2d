"""spark-submit entry point: the same as `tiering run`, with Spark's settings from spark-submit.

    spark-submit --master local[2] --py-files dist/kv_tiering.zip \\
        jobs/tiering_job.py --conf conf/tiering.toml [--available-now] [--metrics-port P]

Failure mode it guards against: a driver that starts Spark on the wrong interpreter or with a
stale copy of the package. The driver's Python must have the service's dependencies
(`pip install kv-tiering` or its wheel); the `tiering` package itself comes from that install
or from the `--py-files` zip built by `scripts/build_pyfiles.sh`, which spark-submit puts in
front of the path on the driver and ships to the executors. The first log line names the
copy in use. Exit codes are `tiering run`'s: 0 ok, 1 runtime failure, 2 bad config, 130
interrupted.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import tiering
    from tiering.cli import main as tiering_main

    print(f"tiering_job: tiering package from {tiering.__file__}", file=sys.stderr, flush=True)
    return tiering_main(["run", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
