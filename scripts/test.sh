#!/usr/bin/env bash
# Runs the whole test suite, after scripts/setup_tests.sh (what only the tests need; with
# arguments, only what is missing): with no arguments, first the Airflow DAG test in its own venv
# (scripts/test_airflow.sh), then the main suite in .venv (made by scripts/setup.sh) on the
# newest supported pyspark, then the tests that touch Spark again on the oldest, in .venv-oldest
# (scripts/test_oldest.sh), then the tests that need Delta's JVM jars, in .venv-delta
# (scripts/test_delta.sh). Arguments go to the main pytest run and skip the Airflow, oldest and
# Delta parts, e.g. `scripts/test.sh -m unit`.
# pytest's "no tests collected" (exit 5) is not a failure. The suite runs in TEST_WORKERS
# (default 2) pytest-xdist workers, a test module per worker at a time (--dist loadfile): most
# of its time is spent waiting on JVM starts, processes and timeouts, which overlap well. Modules
# are handed out in collection order (--no-loadscope-reorder): tests/chaos and the integration
# tests' long single-test modules first, the many short unit modules last to even out the
# workers' ends (xdist's default, modules with most tests first, leaves the longest for last).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then
  ./scripts/setup_tests.sh || exit
else
  ./scripts/setup_tests.sh --if-missing || exit
fi
airflow_rc=0
if [ "$#" -eq 0 ]; then
  ./scripts/test_airflow.sh -q
  airflow_rc=$?
fi
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
.venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test: no tests were collected"
  rc=0
fi
oldest_rc=0
if [ "$#" -eq 0 ]; then
  ./scripts/test_oldest.sh
  oldest_rc=$?
fi
delta_rc=0
if [ "$#" -eq 0 ]; then
  ./scripts/test_delta.sh
  delta_rc=$?
fi
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
