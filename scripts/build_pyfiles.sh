#!/usr/bin/env bash
# Builds what spark-submit needs to ship the `tiering` package (see docs/deploying.md, "spark-submit").
# Usage: scripts/build_pyfiles.sh [OUT.zip] [--wheel]
#   dist/kv_tiering.zip  for `spark-submit --py-files dist/kv_tiering.zip jobs/tiering_job.py ...`
#   with --wheel also dist/kv_tiering-*.whl, to `pip install` on the cluster's Python.
# The zip holds only the package's sources; the third-party dependencies (pyspark's peers:
# deltalake, kazoo, pyarrow, ...) must be installed where the driver runs. The wheel also carries
# our Fluss snapshot reader's jar (tiering/resources/jvm, scripts/setup_fluss_source.sh builds and
# copies it): built without it, it says so in one line, and that wheel cannot read Fluss snapshots.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUT=dist/kv_tiering.zip
WHEEL=0
for arg in "$@"; do
  case "$arg" in
    --wheel) WHEEL=1 ;;
    *) OUT=$arg ;;
  esac
done
mkdir -p "$(dirname "$OUT")"
"$PY" - "$OUT" <<'PYEOF'
import sys
import zipfile
from pathlib import Path

out = Path(sys.argv[1])
files = sorted(p for p in Path("tiering").rglob("*.py") if "__pycache__" not in p.parts)
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for path in files:
        z.write(path, path.as_posix())
print(f"build_pyfiles: {out} ({len(files)} modules)")
PYEOF
if [ "$WHEEL" = 1 ]; then
  packaged=(tiering/resources/jvm/fluss-snapshot-source-*.jar)
  [ -f "${packaged[0]}" ] || echo "build_pyfiles: the wheel carries no fluss-snapshot-source jar: it cannot read Apache Fluss snapshots (scripts/setup_fluss_source.sh builds it)" >&2
  rm -rf build  # setuptools builds in build/lib and never removes from it: a file deleted since (an older jar) would ship
  "$PY" -m pip wheel -q --no-deps -w dist .
  echo "build_pyfiles: wheel in dist/: $(ls dist/*.whl)"
fi
