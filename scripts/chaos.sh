#!/usr/bin/env bash
# The full reliability matrix: every chaos scenario, with 24 driver-kill trials (verified
# every 3) instead of CI's 4, and every case of the dependency fault matrix
# (tests/chaos/test_dependency_faults.py: CHAOS_MATRIX=full; its table is printed at the end and
# written to $CHAOS_MATRIX_JSON when set). Seed and trial count can be overridden:
#   CHAOS_SEED=7 CHAOS_TRIALS=40 scripts/chaos.sh
# Extra arguments go to pytest. Takes ~9 min on 2 cores (the driver-kill test ~7 min for 24 trials).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYSPARK_PYTHON="$PWD/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
export CHAOS_SEED="${CHAOS_SEED:-6061}"
export CHAOS_TRIALS="${CHAOS_TRIALS:-24}"
export CHAOS_VERIFY_EVERY="${CHAOS_VERIFY_EVERY:-3}"
export CHAOS_MATRIX="${CHAOS_MATRIX:-full}"
echo "chaos: CHAOS_SEED=$CHAOS_SEED CHAOS_TRIALS=$CHAOS_TRIALS CHAOS_VERIFY_EVERY=$CHAOS_VERIFY_EVERY CHAOS_MATRIX=$CHAOS_MATRIX"
exec .venv/bin/python -m pytest tests/chaos -m chaos -s -ra --durations=0 -p no:cacheprovider "$@"
