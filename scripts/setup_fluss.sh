#!/usr/bin/env bash
# Fetches the JVM jars of an Apache Fluss cluster and its Java client (fluss-server, fluss-client,
# slf4j and log4j 2), pinned in deploy/jars/fluss/pom.xml, copied with mvn into
# deploy/jars/fluss/lib (ignored; mvn's local repository caches them). The Fluss cluster the tests
# start (tests/fixtures/fluss.py, tiering/fluss/cluster.py) runs on them. Called by
# scripts/setup_tests.sh (after Maven is installed). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
JARS=deploy/jars/fluss/lib
command -v mvn >/dev/null 2>&1 || { echo "setup_fluss: needs Maven (scripts/setup_tests.sh installs it)" >&2; exit 1; }
rm -rf "$JARS"  # only the pinned release's jars, never one left from an earlier pin
(cd deploy/jars/fluss && mvn -q -B dependency:copy-dependencies)
echo "setup_fluss: $(ls "$JARS" | paste -sd' ' -) in $JARS"
