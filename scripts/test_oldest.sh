#!/usr/bin/env bash
# Runs the tests that touch Spark on the oldest pyspark the job supports, in .venv-oldest
# (scripts/setup_oldest.sh; made here when absent): the pipeline (local and S3 lakes),
# spark-submit (local and on a standalone cluster) and a bounded chaos subset (CHAOS_TRIALS,
# default 2, driver kills). scripts/test.sh runs it after the main suite; the main suite covers
# the newest pyspark. Arguments replace the selection. pytest's exit 5 (no tests) is not a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-oldest
[ -x "$VENV/bin/python" ] || ./scripts/setup_oldest.sh || exit
export PYSPARK_PYTHON="$PWD/$VENV/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/$VENV/bin/python"
export CHAOS_TRIALS="${CHAOS_TRIALS:-2}"
SELECTION=(
  tests/integration/pipeline
  tests/integration/cli/test_spark_submit.py
  tests/integration/cluster
  tests/chaos/test_driver_kills.py
)
[ "$#" -eq 0 ] && set -- "${SELECTION[@]}"
echo "test_oldest: pyspark $("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)') (CHAOS_TRIALS=$CHAOS_TRIALS)"
"$VENV/bin/python" -m pytest -p no:cacheprovider -n "${TEST_WORKERS:-2}" --dist loadfile "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test_oldest: no tests were collected"
  rc=0
fi
exit "$rc"
