#!/usr/bin/env bash
# Prepares what the tests need beyond scripts/setup.sh's .venv: tmux (the `tiering status --watch`
# test runs it in a terminal), promtool in .venv/bin (the alert rules' tests), Maven, hadoop-aws
# and its AWS SDK bundle for a checkpoint on S3 (scripts/setup_s3a.sh), .venv-oldest on the oldest
# supported pyspark (scripts/setup_oldest.sh), .venv-delta with delta-spark and its jars
# (scripts/setup_delta.sh), the Airflow venvs (scripts/setup_airflow.sh) and, in each venv that
# runs Spark tests, an archive of Spark's classes its test drivers map at start instead of loading
# them again (tests/support/class_archive.py; remade when older than its pyspark's jars or the
# JDK; without it the tests run as well, on more CPU). scripts/test.sh runs it; `--if-missing` (test.sh with arguments: only the main suite) makes only what is absent and
# the main suite needs, without refetching pinned jars or reinstalling venvs. The venvs and jars
# are made at once, in lanes (scripts/lanes.sh): mostly downloads and unpacking; the two Maven
# fetches share one lane (one local repository). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
missing_only=false
[ "${1:-}" = "--if-missing" ] && missing_only=true
[ -x .venv/bin/python ] || { echo "setup_tests: no .venv: run scripts/setup.sh first" >&2; exit 1; }

apt_install() {
  command -v apt-get >/dev/null 2>&1 || { echo "setup_tests: install $1 and rerun" >&2; exit 1; }
  echo "setup_tests: installing $1"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
}
command -v tmux >/dev/null 2>&1 || apt_install tmux
command -v mvn >/dev/null 2>&1 || apt_install maven

# promtool only, from Debian's prometheus package: installing the package would start a server.
if ! command -v promtool >/dev/null 2>&1 && [ ! -x .venv/bin/promtool ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup_tests: installing promtool (from Debian's prometheus package) into .venv/bin"
  deb=$(mktemp -d)
  (cd "$deb" && { apt-get download -qq prometheus 2>/dev/null || { apt-get update -qq && apt-get download -qq prometheus; }; })
  dpkg-deb --fsys-tarfile "$deb"/prometheus_*.deb | tar -xO ./usr/bin/promtool > .venv/bin/promtool.part
  chmod +x .venv/bin/promtool.part && mv .venv/bin/promtool.part .venv/bin/promtool
  rm -rf "$deb"
fi

has_jars() { ls "$1"/*.jar >/dev/null 2>&1; }
class_archive() {
  local venv=$1 archive=$1/spark-classes.jsa jars
  jars=$("$venv/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
  if [ -f "$archive" ] && [ -z "$(find "$jars" "$(readlink -f "$(command -v java)")" -maxdepth 0 -newer "$archive")" ]; then
    return 0
  fi
  "$venv/bin/python" -m tests.support.class_archive ||
    echo "setup_tests: no archive of Spark's classes in $venv: its tests start their drivers without one"
}
jars_and_delta() {
  { $missing_only && has_jars deploy/jars/s3a/lib || ./scripts/setup_s3a.sh; } &&  # hadoop-aws + AWS SDK bundle
    { $missing_only && [ -x .venv-delta/bin/python ] && has_jars deploy/jars/lib || ./scripts/setup_delta.sh; } &&  # delta-spark
    DELTA_SPARK_JARS=$(ls "$PWD"/deploy/jars/lib/*.jar | paste -sd, -) class_archive .venv-delta
}
oldest() {
  { $missing_only && [ -x .venv-oldest/bin/python ] || ./scripts/setup_oldest.sh; } && class_archive .venv-oldest  # the oldest supported pyspark
}
source scripts/lanes.sh
lane_start archive class_archive .venv
lane_start jars+delta jars_and_delta
lane_start oldest oldest
$missing_only || lane_start airflow ./scripts/setup_airflow.sh
rc=0
lane_wait archive || rc=$?
lane_wait jars+delta || rc=$?
lane_wait oldest || rc=$?
$missing_only || lane_wait airflow || rc=$?
[ "$rc" -eq 0 ] || { echo "setup_tests: failed (exit $rc)" >&2; exit "$rc"; }
echo "setup_tests: ready"
