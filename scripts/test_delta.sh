#!/usr/bin/env bash
# Runs the tests marked delta_jars in .venv-delta (scripts/setup_delta.sh; made here when absent),
# with deploy/jars/lib on Spark's classpath (tests/support/delta_spark.py): the delta-spark writer's
# cases of the tests parametrized over the writers, and the pipeline tests whose tables Spark's own
# Delta reader reads too, beside delta-rs (rows, schema, time travel, the change data feed), and
# that the drivers map the venv's class archive (tests/integration/test_class_archive.py).
# Everything else runs once, in the main suite without jars. scripts/test.sh runs it after the
# main suite, beside scripts/test_oldest.sh. Arguments replace the selection. pytest's exit 5
# (no tests) is not a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-delta
JARS=deploy/jars/lib
{ [ -x "$VENV/bin/python" ] && ./scripts/delta_jars.sh >/dev/null; } || ./scripts/setup_delta.sh || exit
DELTA_SPARK_JARS=$(./scripts/delta_jars.sh) || exit
export DELTA_SPARK_JARS
SELECTION=(-m delta_jars tests/integration/lake tests/integration/pipeline
  tests/integration/test_class_archive.py)
[ "$#" -eq 0 ] && set -- "${SELECTION[@]}"
echo "test_delta: pyspark $("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)'), $(ls "$JARS" | wc -l) Delta jars"
exec ./scripts/venv_pytest.sh test_delta "$VENV" "$@"
