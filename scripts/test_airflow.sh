#!/usr/bin/env bash
# Loads the Airflow DAG factory (jobs/airflow/kv_tiering_dag.py) with Apache Airflow and its Spark
# provider and runs tests/airflow/ on the newest and the oldest Airflow the project claims, each in
# its own virtualenv, .venv-airflow and .venv-airflow-oldest (scripts/setup_airflow.sh makes them,
# here too when absent or on another version). The two runs are independent: they run at once.
# Arguments go to both pytest runs.
set -uo pipefail
cd "$(dirname "$0")/.."
./scripts/setup_airflow.sh || exit
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__UNIT_TEST_MODE=True
source scripts/lanes.sh

# test_on VENV [pytest args]
test_on() {
  local venv=$1
  shift
  echo "test_airflow: Airflow $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("apache-airflow"))') ($venv)"
  # --noconftest and -c /dev/null: the main suite's conftest and settings need packages (kazoo,
  # pyspark, pytest-timeout) these venvs do not have; no cache shared with .venv's pytest.
  AIRFLOW_HOME="$PWD/$venv/airflow-home" "$venv/bin/python" -m pytest -p no:cacheprovider --noconftest -c /dev/null \
    --rootdir=. -o "markers=integration: real Airflow" tests/airflow "$@"
}

rc=0
lane_start newest test_on .venv-airflow "$@"
lane_start oldest test_on .venv-airflow-oldest "$@"
lane_wait newest || rc=$?
lane_wait oldest || rc=$?
exit "$rc"
