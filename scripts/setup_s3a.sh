#!/usr/bin/env bash
# Fetches the JVM jars a checkpoint on S3 needs (job.checkpoint = "s3://..."): hadoop-aws and the
# AWS SDK bundle it was built against, pinned in deploy/jars/s3a/pom.xml, copied with mvn into
# deploy/jars/s3a/lib (ignored; mvn's local repository caches them). hadoop-aws must match the
# Hadoop inside the pyspark the job runs with: this checks the pom's hadoop.version against
# .venv's pyspark/jars/hadoop-client-api-<version>.jar and stops naming both when they differ.
# The tests that run Spark with an S3 checkpoint put these jars on spark.jars
# (tests/support/s3a.py). Called by scripts/setup_tests.sh (after .venv exists and Maven is
# installed). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
POM=deploy/jars/s3a/pom.xml
JARS=deploy/jars/s3a/lib
PY=${PYSPARK_VENV_PYTHON:-.venv/bin/python}
want=$(sed -n 's:.*<hadoop.version>\(.*\)</hadoop.version>.*:\1:p' "$POM")
pyspark_jars=$("$PY" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
have=$(ls "$pyspark_jars" | sed -n 's/^hadoop-client-api-\(.*\)\.jar$/\1/p')
if [ "$want" != "$have" ]; then
  echo "setup_s3a: $POM pins hadoop-aws $want but $PY's pyspark has Hadoop $have ($pyspark_jars): set hadoop.version to $have" >&2
  exit 1
fi
command -v mvn >/dev/null 2>&1 || { echo "setup_s3a: needs Maven (scripts/setup_delta.sh installs it)" >&2; exit 1; }
rm -rf "$JARS"  # only the pinned release's jars, never one left from an earlier pin
(cd deploy/jars/s3a && mvn -q -B dependency:copy-dependencies)
echo "setup_s3a: $(ls "$JARS" | paste -sd' ' -) in $JARS (Hadoop $have)"
