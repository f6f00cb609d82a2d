"""spark-submit entry point in the checkout: runs the installed package's, tiering/jobs/tiering_job.py.

    spark-submit --master local[2] --py-files dist/kv_tiering.zip \\
        jobs/tiering_job.py --conf conf/tiering.toml [--available-now] [--metrics-port P] \\
        [--set SECTION.KEY=VALUE ...] [--log-level LEVEL]

The `tiering` package comes from the `--py-files` zip (scripts/build_pyfiles.sh) or from the
driver's installed kv-tiering; the first log line names which. Exit codes are `tiering run`'s.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from tiering.jobs.tiering_job import main as job_main

    return job_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
