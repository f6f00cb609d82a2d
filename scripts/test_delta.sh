#!/usr/bin/env bash
# Runs the tests marked delta_jars in .venv-delta (scripts/setup_delta.sh; made here when absent),
# with deploy/jars/lib on Spark's classpath (tests/support/delta_spark.py): the delta-spark writer's
# cases of the tests parametrized over the writers, and the pipeline tests whose tables Spark's own
# Delta reader reads too, beside delta-rs (rows, schema, time travel, the change data feed), and
# that the drivers map the venv's class archive (tests/integration/test_class_archive.py). Left out
# (DESELECT) are the cases whose delta-spark part another test of the lane already proves: a crash
# before the Delta commit (its replay is a plain delta-spark round), the three interleaved tables
# (the writer's bootstrap and MERGE tests), and delta-rs's refusal of a schema change (the main
# suite runs it; the lake is left as it was, for Spark's reader too).
# Everything else runs once, in the main suite without jars; the delta-rs cases this lane runs
# whole, the main suite leaves to it (scripts/test.sh's IN_DELTA_LANE). scripts/test.sh runs it after the
# main suite, beside scripts/test_oldest.sh. Arguments replace the selection. pytest's exit 5
# (no tests) is not a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-delta
JARS=deploy/jars/lib
{ [ -x "$VENV/bin/python" ] && ./scripts/delta_jars.sh >/dev/null; } || ./scripts/setup_delta.sh || exit
DELTA_SPARK_JARS=$(./scripts/delta_jars.sh) || exit
export DELTA_SPARK_JARS
pipeline=tests/integration/pipeline
DESELECT=(
  "$pipeline/test_driver_crash.py::test_killed_before_the_delta_commit_replays_the_round_with_the_same_lease[delta-spark]"
  "$pipeline/test_tiering_rounds.py::test_three_tables_interleaved_with_snapshots_match_store_row_by_row[delta-spark]"
  "$pipeline/test_schema_evolution.py::test_a_change_the_lake_cannot_follow_fails_that_table_only[delta-rs-driver-other-type]"
  "$pipeline/test_schema_evolution.py::test_a_change_the_lake_cannot_follow_fails_that_table_only[delta-rs-driver-dropped-column]"
)
SELECTION=(-m delta_jars tests/integration/writers "$pipeline" tests/integration/test_class_archive.py
  "${DESELECT[@]/#/--deselect=}")
[ "$#" -eq 0 ] && set -- "${SELECTION[@]}"
echo "test_delta: pyspark $("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)'), $(ls "$JARS" | wc -l) Delta jars"
exec ./scripts/venv_pytest.sh test_delta "$VENV" "$@"
