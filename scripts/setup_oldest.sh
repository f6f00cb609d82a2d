#!/usr/bin/env bash
# Makes .venv-oldest: the package and its test extras on the oldest pyspark the job supports
# (pyproject.toml's lower bound, docs/deploying.md "Spark versions"), for scripts/test_oldest.sh. Called by
# scripts/setup_tests.sh (Java and the rest of the machine are setup.sh's). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv_install.sh
OLDEST_PYSPARK=4.0.0
VENV=.venv-oldest
PY=${PYTHON:-python3}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
venv_install "$VENV" "pyspark==$OLDEST_PYSPARK" -e ".[test]"
"$VENV/bin/python" scripts/pyspark_bytecode.py
echo "setup_oldest: $VENV ready (pyspark $("$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)'))"
