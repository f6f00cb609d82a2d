"""The service's benchmarks, each measured against a baseline taken in the same run.

Run from the repository's root as modules (``.venv/bin/python -m benchmarks.<module> --help``):
:mod:`.bench_tiering` (the service's modes, one a run), :mod:`.bench_amplification`,
:mod:`.bench_cluster`, :mod:`.bench_failover`, :mod:`.bench_soak`, :mod:`.bench_store`,
:mod:`.bench_store_load`; :mod:`.run_all` runs them all and writes ``results/``. A benchmark
imports what it shares from :mod:`.common` (data, Spark, configs, job runs, results),
:mod:`.merge_baseline` (the hand-written MERGE) and :mod:`.rss` (memory), never from another
benchmark. ``cluster_baseline_copy.py`` and ``cluster_floor_job.py`` are scripts that
spark-submit runs, by path, free of this package.
"""

from tiering.allocator import keep_freed_pages

# The benchmarks run the service's driver in their own process: set up as `tiering run` sets up its
# own, before any benchmark module imports pyarrow.
keep_freed_pages()
