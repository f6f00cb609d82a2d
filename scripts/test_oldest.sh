#!/usr/bin/env bash
# Runs the tests that touch Spark on the oldest pyspark the job supports, in .venv-oldest
# (scripts/setup_oldest.sh; made here when absent): where Spark versions differ (the source's
# offsets and availableNow, the checkpoint, replays after a crash, a table failing and
# recovering), the S3 lake, spark-submit on a standalone cluster, our Fluss snapshot source (the
# jar built against .venv's pyspark) with fluss-client's classes beside this Spark's, a bounded
# chaos subset (driver kills, CHAOS_TRIALS default 2) and that its drivers map the venv's class
# archive. The rest (writers, the store, the lake's own logic) does not depend on Spark's version
# and runs once, in the main suite on the newest pyspark. scripts/test.sh runs it after the main
# suite, beside scripts/test_delta.sh. Arguments replace the selection. pytest's exit 5 (no tests)
# is not a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-oldest
[ -x "$VENV/bin/python" ] || ./scripts/setup_oldest.sh || exit
export CHAOS_TRIALS="${CHAOS_TRIALS:-2}"
SELECTION=(
  tests/integration/pipeline/test_tiering_rounds.py
  tests/integration/pipeline/test_batch_splits_both_ways.py
  tests/integration/pipeline/test_driver_crash.py
  tests/integration/pipeline/test_table_lifecycle.py
  tests/integration/pipeline/test_s3_lake.py
  tests/integration/cluster
  tests/integration/fluss/test_snapshot_source.py
  tests/chaos/test_driver_kills.py
  tests/integration/test_class_archive.py
)
[ "$#" -eq 0 ] && set -- "${SELECTION[@]}"
echo "test_oldest: pyspark $("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)') (CHAOS_TRIALS=$CHAOS_TRIALS)"
exec ./scripts/venv_pytest.sh test_oldest "$VENV" "$@"
