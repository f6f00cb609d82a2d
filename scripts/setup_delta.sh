#!/usr/bin/env bash
# Makes .venv-delta and deploy/jars/lib, for scripts/test_delta.sh: the package with its test and
# delta-spark extras on the newest pyspark delta-spark accepts (its Python package pins the range:
# 4.4.x takes pyspark >= 4.0.1, <= 4.2.0), and the Delta JVM jars of the same release, fetched with
# mvn from deploy/jars/pom.xml (pinned there; mvn's local repository caches them). Keep
# DELTA_VERSION and DELTA_PYSPARK equal to the pom's delta.version and spark.minor. Called by
# scripts/setup_tests.sh (Java and the rest of the machine are setup.sh's). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv_install.sh
DELTA_VERSION=4.4.0
DELTA_PYSPARK=4.2.0
VENV=.venv-delta
JARS=deploy/jars/lib
PY=${PYTHON:-python3}
if ! command -v mvn >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  echo "setup_delta: installing Maven (the Delta jars are fetched with it)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null
fi
rm -rf "$JARS"  # only the pinned release's jars, never one left from an earlier pin
(cd deploy/jars && mvn -q -B dependency:copy-dependencies)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
venv_install "$VENV" "pyspark==$DELTA_PYSPARK" "delta-spark==$DELTA_VERSION" -e ".[test,delta-spark]"
"$VENV/bin/python" scripts/pyspark_bytecode.py
echo "setup_delta: $VENV ready (pyspark $("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)'), delta-spark $DELTA_VERSION, $(ls "$JARS" | wc -l) jars in $JARS)"
