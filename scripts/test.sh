#!/usr/bin/env bash
# Runs the whole test suite, after scripts/setup_tests.sh (what only the tests need) has made
# what the main suite needs: with no arguments, the Airflow DAG tests in their own venvs
# (scripts/test_airflow.sh) beside the main suite in .venv (made by scripts/setup.sh) on the
# newest supported pyspark, while .venv-oldest and .venv-delta are made (setup_tests.sh's oldest
# and delta parts: downloads, mostly); then, at the same time, the tests of what differs between
# Spark versions on the oldest, in .venv-oldest (scripts/test_oldest.sh), and the tests that need
# Delta's JVM jars, in .venv-delta (scripts/test_delta.sh; the main suite leaves the delta-rs
# cases that lane runs whole to it). The main suite prints as it goes; each
# other part's output is printed whole when it ends (scripts/lanes.sh). Arguments go to the main
# pytest run and skip the Airflow, oldest and Delta parts, e.g. `scripts/test.sh -m unit`; only
# what is missing of the main suite's needs is made then.
# pytest's "no tests collected" (exit 5) is not a failure; a failure in any part fails the
# whole. The main suite runs in TEST_WORKERS (default 2) pytest-xdist workers, a test module per
# worker at a time (--dist loadfile; the modules sharing a costly session fixture as one:
# tests/support/worker_units.py): most of its time is spent waiting on JVM starts, processes
# and timeouts, which overlap well. Modules are handed out in collection order
# (--no-loadscope-reorder): tests/chaos and the integration tests' long single-test modules
# first, the many short unit modules last to even out the workers' ends (xdist's default, modules
# with most tests first, leaves the longest for last).
set -uo pipefail
cd "$(dirname "$0")/.."
whole=false
[ "$#" -eq 0 ] && whole=true
if $whole; then
  ./scripts/setup_tests.sh main || exit
else
  ./scripts/setup_tests.sh --if-missing main || exit
fi
source scripts/lanes.sh
# Spark's scratch space for every driver of the run (its spark-* directory holds a copy of each
# jar in spark.jars: the AWS SDK bundle's hundreds of MB in the Delta lane) inside the lanes'
# directory, which goes when this script ends: a driver the tests SIGKILL leaves its own behind.
export SPARK_LOCAL_DIRS="$lanes_dir/spark"
# The JVMs' temporary files there too (java.io.tmpdir, tests/support/jvm.py): the native libraries
# each JVM unpacks and Spark's temporary directories outlive a JVM the tests kill.
export TESTS_JVM_TMPDIR="$lanes_dir/java"
mkdir -p "$SPARK_LOCAL_DIRS" "$TESTS_JVM_TMPDIR"
if $whole; then
  lane_start airflow ./scripts/test_airflow.sh -q
  lane_start setup-oldest ./scripts/setup_tests.sh oldest
  lane_start setup-delta ./scripts/setup_tests.sh delta
fi
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
# The delta-rs cases the Delta lane runs whole, Spark's Delta reader checking the same lake beside
# delta-rs there (marked delta_jars, in scripts/test_delta.sh's selection): the main suite leaves
# them to it when that lane follows.
pipeline=tests/integration/pipeline
IN_DELTA_LANE=(
  "$pipeline/test_change_feed.py::test_the_feed_replayed_from_version_0_is_the_lake_and_a_round_names_only_its_keys[delta-rs]"
  "$pipeline/test_s3_lake.py::test_three_tables_with_updates_and_deletes_land_in_s3_row_by_row"
  "$pipeline/test_schema_evolution.py::test_columns_added_upstream_reach_the_lake_while_the_other_table_keeps_committing[delta-rs-driver]"
  "$pipeline/test_schema_evolution.py::test_a_bootstrap_reads_a_snapshot_older_than_the_column_and_a_log_with_it[delta-rs-driver]"
)
$whole && set -- "${IN_DELTA_LANE[@]/#/--deselect=}"
.venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test: no tests were collected"
  rc=0
fi
$whole || exit "$rc"
airflow_rc=0 oldest_rc=0 delta_rc=0
# Three workers between the two lanes, on 2 cores: their tests run continuous jobs, writers and
# polls whose work grows with the time each test takes, so more processes at once cost more CPU
# in all, not less time (the Delta lane's tests take longer: it gets two).
lane_wait setup-oldest && lane_start oldest env TEST_WORKERS="${TEST_WORKERS:-1}" ./scripts/test_oldest.sh ||
  oldest_rc=$?
lane_wait setup-delta && lane_start delta env TEST_WORKERS="${TEST_WORKERS:-2}" ./scripts/test_delta.sh || delta_rc=$?
lane_wait airflow || airflow_rc=$?
[ "$oldest_rc" -ne 0 ] || lane_wait oldest || oldest_rc=$?
[ "$delta_rc" -ne 0 ] || lane_wait delta || delta_rc=$?
if [ "$oldest_rc" -ne 0 ]; then
  echo "test: the tests on the oldest supported pyspark failed (exit $oldest_rc)"
  [ "$rc" -ne 0 ] || rc=$oldest_rc
fi
if [ "$delta_rc" -ne 0 ]; then
  echo "test: the tests with the Delta jars (delta-spark) failed (exit $delta_rc)"
  [ "$rc" -ne 0 ] || rc=$delta_rc
fi
if [ "$airflow_rc" -ne 0 ]; then
  echo "test: the Airflow DAG test failed (exit $airflow_rc)"
  exit "$airflow_rc"
fi
exit "$rc"
