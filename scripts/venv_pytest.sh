#!/usr/bin/env bash
# `scripts/venv_pytest.sh NAME VENV PYTEST-ARGS...`: runs pytest in the virtualenv VENV as the
# side suites do (scripts/test_oldest.sh, scripts/test_delta.sh): its Python for Spark's driver and
# workers, TEST_WORKERS (default 2) pytest-xdist workers, a module per worker at a time in
# collection order (as scripts/test.sh says why), no cache, Spark's and the JVMs' scratch space
# removed at the end. pytest's exit 5 (no tests collected) is not a failure; NAME prefixes what
# this script says.
set -uo pipefail
name=$1 venv=$2
shift 2
# Run alone: the scratch space of Spark and the JVMs in a directory of its own, as scripts/test.sh
# says why.
if [ -z "${SPARK_LOCAL_DIRS:-}" ]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  export SPARK_LOCAL_DIRS="$scratch/spark" TESTS_JVM_TMPDIR="$scratch/java"
  mkdir -p "$SPARK_LOCAL_DIRS" "$TESTS_JVM_TMPDIR"
fi
export PYSPARK_PYTHON="$PWD/$venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/$venv/bin/python"
"$venv/bin/python" -m pytest -p no:cacheprovider -n "${TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "$name: no tests were collected"
  rc=0
fi
exit "$rc"
