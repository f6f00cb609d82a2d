#!/usr/bin/env bash
# Prepares a fresh machine for kv-tiering: Java 17 (Spark and the embedded ZooKeeper run on
# it), tmux (the `tiering status --watch` test runs it in a terminal), a virtualenv in .venv with
# the package and its test extras, a second one in .venv-oldest on the oldest supported pyspark
# (scripts/setup_oldest.sh), a third in .venv-delta with delta-spark and its JVM jars fetched with
# Maven into deploy/jars/lib (scripts/setup_delta.sh), hadoop-aws and its AWS SDK bundle (Spark's
# s3a, for a checkpoint on S3) fetched the same way into deploy/jars/s3a/lib (scripts/setup_s3a.sh),
# and promtool in .venv/bin (the alert rules' tests); every venv's pyspark.zip gets bytecode
# (scripts/pyspark_bytecode.py). Safe to run again.
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

if ! command -v tmux >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing tmux"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux >/dev/null
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: Python >= 3.11 is required, $PY is $("$PY" --version 2>&1)" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
.venv/bin/python scripts/pyspark_bytecode.py  # Spark's Python processes import pyspark from its zip
./scripts/setup_oldest.sh  # .venv-oldest: the oldest supported pyspark, for scripts/test_oldest.sh
./scripts/setup_delta.sh  # .venv-delta + deploy/jars/lib: delta-spark and its jars, for scripts/test_delta.sh
./scripts/setup_s3a.sh  # deploy/jars/s3a/lib: hadoop-aws + AWS SDK bundle, for a checkpoint on S3

# promtool only, from Debian's prometheus package: installing the package would start a server.
if ! command -v promtool >/dev/null 2>&1 && [ ! -x .venv/bin/promtool ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing promtool (from Debian's prometheus package) into .venv/bin"
  deb=$(mktemp -d)
  (cd "$deb" && { apt-get download -qq prometheus 2>/dev/null || { apt-get update -qq && apt-get download -qq prometheus; }; })
  dpkg-deb --fsys-tarfile "$deb"/prometheus_*.deb | tar -xO ./usr/bin/promtool > .venv/bin/promtool.part
  chmod +x .venv/bin/promtool.part && mv .venv/bin/promtool.part .venv/bin/promtool
  rm -rf "$deb"
fi
echo "setup: ready ($(.venv/bin/python --version), $(java -version 2>&1 | head -1))"
