#!/usr/bin/env bash
# Prepares a fresh machine to run kv-tiering: Java 17 (Spark and the embedded ZooKeeper run on
# it) and a virtualenv in .venv with the package, its demo and test extras; its pyspark.zip and
# py4j zip get bytecode (scripts/pyspark_bytecode.py), and so do the package's modules. What only
# the tests need (tmux, promtool, the other virtualenvs, the JVM jars fetched with Maven) is
# scripts/setup_tests.sh's, which scripts/test.sh runs: `tiering demo` needs none of it. Safe to
# run again.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v java >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Java 17 (openjdk-17-jre-headless)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    echo "setup: Java 17 is required (Spark and ZooKeeper run on it); install it and rerun" >&2
    exit 1
  fi
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: Python >= 3.11 is required, $PY is $("$PY" --version 2>&1)" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
.venv/bin/python scripts/pyspark_bytecode.py  # Spark's Python processes import pyspark and py4j from zips
# The package's own bytecode, which pip writes for installed packages but not for an editable one:
# every process (drivers, the store, Spark's Python workers) then stops compiling the modules it
# imports, also where PYTHONDONTWRITEBYTECODE keeps Python from caching them itself.
.venv/bin/python -m compileall -q tiering jobs
echo "setup: ready ($(.venv/bin/python --version), $(java -version 2>&1 | head -1))"
