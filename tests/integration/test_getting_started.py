"""The manual's worked example (docs/getting-started.md), run as written, so the page cannot rot.

Its untitled code blocks run in order in an empty directory: ``bash`` ones in a shell, ``python``
ones in this interpreter, ``toml`` ones merged into the ``tiering.toml`` that ``tiering init``
wrote (the page says to edit it so). The titled blocks start ZooKeeper and the store in the
foreground, or need Delta's jars: the test starts a real ZooKeeper and a real store process
itself and puts their addresses where the page has its default ports. Then the Delta table is
read back row by row.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import tomli_w

from tests.support.lake import delta_rows

pytestmark = pytest.mark.integration

PAGE = Path(__file__).resolve().parents[2] / "docs" / "getting-started.md"
_BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
STORE_DEFAULT, ZK_DEFAULT = "127.0.0.1:8420", "127.0.0.1:2181"


def runnable_blocks() -> list[tuple[str, str]]:
    """``(language, code)`` of each untitled block of the worked example, in page order."""
    example = PAGE.read_text().split("## Your own store, tables and lake", 1)[1]
    return [(lang, code) for lang, attrs, code in _BLOCK.findall(example) if not attrs.strip()]


def merge(base: dict, edits: dict) -> dict:
    return {**base, **{k: merge(base.get(k, {}), v) if isinstance(v, dict) else v for k, v in edits.items()}}


def test_the_page_has_the_steps_this_test_runs() -> None:
    assert [lang for lang, _ in runnable_blocks()] == ["bash", "bash", "bash", "toml", "bash", "python"]


def test_worked_example_tiers_the_table_as_the_page_says(store_factory, zk_factory, tmp_path) -> None:
    store, zk = store_factory(), zk_factory()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERING_")}
    env |= {"PATH": f"{Path(sys.executable).parent}:{env['PATH']}", "PYSPARK_PYTHON": sys.executable}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable

    printed_by_blocks = []
    for lang, code in runnable_blocks():
        code = code.replace(STORE_DEFAULT, store.url.removeprefix("http://")).replace(ZK_DEFAULT, zk.hosts)
        if lang == "toml":
            conf = tmp_path / "tiering.toml"
            conf.write_text(tomli_w.dumps(merge(tomllib.loads(conf.read_text()), tomllib.loads(code))))
            continue
        command = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
        result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{code}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        printed_by_blocks.append(result.stdout + result.stderr)
        printed = code.strip().splitlines()[-1]
        if lang == "python" and printed.startswith("# "):
            assert result.stdout.strip() == printed.removeprefix("# "), "the output the page shows"

    assert "job=orders-tiering round=1 table=orders status=committed" in "".join(printed_by_blocks)
    lake = delta_rows(tmp_path / "data" / "lake" / "orders")
    rows = lake.select(["id", "customer", "amount"]).sort_by("id").to_pylist()
    assert [(r["id"], r["customer"], str(r["amount"])) for r in rows] == [(1, "ada", "12.50"), (3, "cy", "3.20")]
    assert store.client().get_lake("orders") is not None, "the job reported the table's lake offsets"
