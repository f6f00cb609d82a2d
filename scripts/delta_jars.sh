#!/usr/bin/env bash
# Prints the Delta jars scripts/setup_delta.sh fetched into deploy/jars/lib as absolute paths
# joined by commas, the form tests/support/delta_spark.py's DELTA_SPARK_JARS takes; exits 1,
# printing nothing, when there are none. scripts/test_delta.sh and scripts/setup_tests.sh (the
# Delta venv's class archive) name the jars with it.
set -euo pipefail
cd "$(dirname "$0")/.."
ls "$PWD"/deploy/jars/lib/*.jar 2>/dev/null | paste -sd, - | grep .
