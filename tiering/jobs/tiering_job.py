"""spark-submit entry point: the same as `tiering run`, with Spark's settings from spark-submit.

    spark-submit --master local[2] "$(python -c 'import tiering.submit as s; print(s.ENTRY)')" \\
        --conf tiering.toml [--available-now] [--metrics-port P] [--set SECTION.KEY=VALUE ...] \\
        [--log-level LEVEL]

or `tiering submit --conf tiering.toml [--available-now] -- --master local[2]`, which builds that
command. This file is inside the installed package (``tiering/jobs/tiering_job.py``); the checkout's
``jobs/tiering_job.py`` runs it too.

Failure mode it guards against: a driver that starts Spark on the wrong interpreter or with a
stale copy of the package. The driver's Python must have the service's dependencies
(the kv-tiering wheel, or `pip install .` in a checkout); the `tiering` package itself comes from that install
or from the `--py-files` zip built by `scripts/build_pyfiles.sh`, which spark-submit puts in
front of the path on the driver and ships to the executors. The first log line names the
copy in use and the Spark version; a Spark outside the supported range (``tiering.spark_version``)
exits 2 before anything starts. Exit codes are `tiering run`'s: 0 ok, 1 runtime failure, 2 bad
config or Spark version, 130 interrupted.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    import tiering
    from tiering import spark_version
    from tiering.cli import EXIT_USAGE
    from tiering.cli import main as tiering_main
    from tiering.errors import ConfigError

    try:
        version = spark_version.check()  # the Spark spark-submit runs: its pyspark is first on the path
    except ConfigError as e:
        print(f"tiering_job: {e}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    print(f"tiering_job: tiering package from {tiering.__file__}", file=sys.stderr, flush=True)
    print(f"tiering_job: Spark {version}", file=sys.stderr, flush=True)
    return tiering_main(["run", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
