#!/usr/bin/env bash
# Runs, on the oldest pyspark the job supports, in .venv-oldest (scripts/setup_oldest.sh; made here
# when absent), the tests of what differs between Spark versions (tiering/spark_version.py): the
# source without admission control (availableNow as rounds back to back, ended by the first empty
# trigger; its start read from the offsets log; a failing table beside committing ones; a
# processing-time trigger), the checkpoint's file manager, the offsets log this Spark writes, one
# crash replayed from the checkpoint, spark-submit of jobs/tiering_job.py, our Fluss snapshot
# source (the jar built against .venv's pyspark) with fluss-client's classes beside this Spark's,
# and that its drivers map the venv's class archive. Everything else (writers, the store, leases,
# the lake's own logic, the standalone cluster, the chaos runs) does not depend on Spark's version
# and runs once, in the main suite on the newest pyspark. scripts/test.sh runs it after the main
# suite, beside scripts/test_delta.sh. Arguments replace the selection. pytest's exit 5 (no tests)
# is not a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-oldest
[ -x "$VENV/bin/python" ] || ./scripts/setup_oldest.sh || exit
rounds=tests/integration/pipeline/test_tiering_rounds.py
SELECTION=(
  "$rounds::test_second_run_merges_only_new_changes_and_replay_adds_nothing"
  "$rounds::test_the_checkpoint_is_written_through_the_file_system_manager_and_resumed_from"
  "$rounds::test_continuous_run_picks_up_new_writes_until_lag_is_zero"
  "$rounds::test_a_failing_table_is_released_and_the_others_commit_then_it_recovers"
  tests/integration/pipeline/test_batch_splits_both_ways.py
  tests/integration/pipeline/test_driver_crash.py::test_killed_after_the_delta_commit_skips_the_replayed_round
  tests/integration/cli/test_spark_submit.py::test_spark_submit_with_py_files_zip_tiers_every_table
  tests/integration/fluss/test_snapshot_source.py
  tests/integration/test_class_archive.py
)
[ "$#" -eq 0 ] && set -- "${SELECTION[@]}"
echo "test_oldest: pyspark $("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)')"
exec ./scripts/venv_pytest.sh test_oldest "$VENV" "$@"
