#!/usr/bin/env bash
# Prepares what the tests need beyond scripts/setup.sh's .venv, in parts:
#   main     tmux (the `tiering status --watch` test runs it in a terminal), promtool in .venv/bin
#            (the alert rules' tests), Maven, hadoop-aws and its AWS SDK bundle for a checkpoint on
#            S3 (scripts/setup_s3a.sh), the Apache Fluss server and client jars (scripts/
#            setup_fluss.sh) and our Spark source of Fluss snapshots built on them (scripts/
#            setup_fluss_source.sh), .venv's archive of Spark's classes and the bytecode of the tests and
#            benchmarks (scripts/setup.sh compiles the package's): what the main suite needs
#   oldest   .venv-oldest on the oldest supported pyspark (scripts/setup_oldest.sh)
#   delta    .venv-delta with delta-spark and its jars (scripts/setup_delta.sh; after main: Maven)
#   airflow  the Airflow venvs (scripts/setup_airflow.sh)
# With no part named, all of them: main first, the others at once, in lanes (scripts/lanes.sh:
# mostly downloads and unpacking). Each venv that runs Spark tests gets an archive of Spark's
# classes its test drivers map at start instead of loading them again
# (tests/support/class_archive.py; remade when older than its pyspark's jars or the JDK; without
# it the tests run as well, on more CPU). scripts/test.sh makes main first and the other parts
# beside the main suite; `--if-missing` (test.sh with arguments: only the main suite) makes only
# what is absent, without refetching pinned jars or reinstalling venvs. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
missing_only=false
[ "${1:-}" = "--if-missing" ] && { missing_only=true; shift; }
parts=("$@")
[ "${#parts[@]}" -gt 0 ] || parts=(main oldest delta airflow)
[ -x .venv/bin/python ] || { echo "setup_tests: no .venv: run scripts/setup.sh first" >&2; exit 1; }

apt_install() {
  command -v apt-get >/dev/null 2>&1 || { echo "setup_tests: install $1 and rerun" >&2; exit 1; }
  echo "setup_tests: installing $1"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
}
# main's machine tools, Debian's
main_tools() {
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
}

has_jars() { ls "$1"/*.jar >/dev/null 2>&1; }
class_archive() {
  local venv=$1 archive=$1/spark-classes.jsa jars java
  # pyspark's jars directory found by its place in the venv: a Python start costs seconds
  jars=("$venv"/lib/python3*/site-packages/pyspark/jars)
  java=$(readlink -f "$(command -v java)")
  # the JDK's own (base) archive too: a dynamic archive maps only over the base it was made on
  if [ -f "$archive" ] && [ -d "${jars[0]}" ] &&
    [ -z "$(find "${jars[0]}" "$java" "${java%/bin/java}"/lib/server/classes*.jsa -maxdepth 0 -newer "$archive" 2>/dev/null)" ]; then
    return 0
  fi
  "$venv/bin/python" -m tests.support.class_archive ||
    echo "setup_tests: no archive of Spark's classes in $venv: its tests start their drivers without one"
}
main() {
  local rc=0
  lane_start archive class_archive .venv
  .venv/bin/python -m compileall -q tests benchmarks
  main_tools
  { $missing_only && has_jars deploy/jars/s3a/lib || ./scripts/setup_s3a.sh; } || rc=$?
  { $missing_only && has_jars deploy/jars/fluss/lib || ./scripts/setup_fluss.sh; } || rc=$?
  ./scripts/setup_fluss_source.sh || rc=$?  # rebuilt only when its sources are newer than its jar
  lane_wait archive || rc=$?
  return "$rc"
}
oldest() {
  { $missing_only && [ -x .venv-oldest/bin/python ] || ./scripts/setup_oldest.sh; } && class_archive .venv-oldest
}
delta() {
  { $missing_only && [ -x .venv-delta/bin/python ] && has_jars deploy/jars/lib || ./scripts/setup_delta.sh; } &&
    DELTA_SPARK_JARS=$(./scripts/delta_jars.sh) class_archive .venv-delta
}
airflow() { $missing_only || ./scripts/setup_airflow.sh; }

source scripts/lanes.sh
rc=0
for part in "${parts[@]}"; do
  case $part in
    main) main || rc=$? ;;
    oldest | delta | airflow) lane_start "$part" "$part" ;;
    *) echo "setup_tests: no part $part (main, oldest, delta, airflow)" >&2; exit 2 ;;
  esac
done
for part in "${parts[@]}"; do
  [ "$part" = main ] || lane_wait "$part" || rc=$?
done
[ "$rc" -eq 0 ] || { echo "setup_tests: failed (exit $rc)" >&2; exit "$rc"; }
echo "setup_tests: ready (${parts[*]})"
