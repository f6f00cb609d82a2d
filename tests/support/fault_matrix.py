"""The fault matrix's record of a case: recovery seconds, rows lost and duplicated, what the operator saw.

Failure mode it guards against: a fault case that passes while the lake quietly lost or doubled
rows, or while nobody could have told what was wrong. Rows are counted by a reader independent
of the service (delta-rs reading the Delta log itself, not ``tiering``'s own lake code) against
the test's oracle; recovery is the seconds from "fault cleared" to "the lake equals the oracle
and every bucket is at its log end". Each case writes its row as JSON in its tmp dir, prints it,
and adds it to the session's :class:`FaultMatrix`, printed (and written to ``$CHAOS_MATRIX_JSON``
when set) at the end of the run. CI runs a bounded part of the matrix; ``scripts/chaos.sh`` sets
``CHAOS_MATRIX=full`` for the rest (:data:`full_matrix_only`). :func:`status_line` is what
`tiering status --json` tells an operator, in one line.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

from tests.support.drivers import tiering_cli
from tests.support.oracle import SYSTEM, TableOracle
from tests.support.running import caught_up
from tests.support.waiting import wait_until
from tiering.delta_log.lake import Lake
from tiering.kvstore.client import KvStoreClient

#: ``scripts/chaos.sh`` sets ``CHAOS_MATRIX=full``: every case, not only CI's bounded part.
FULL = os.environ.get("CHAOS_MATRIX") == "full"
full_matrix_only = pytest.mark.skipif(not FULL, reason="the whole fault matrix runs under scripts/chaos.sh")


@dataclass(frozen=True)
class Tally:
    """The lake against the oracle: keys missing or holding another row (lost), keys the oracle
    deleted or never had (extra), rows beyond one per key (duplicated)."""

    lost: int
    extra: int
    duplicated: int

    @property
    def clean(self) -> bool:
        return not (self.lost or self.extra or self.duplicated)


def tally(lake_root: Path | Lake, tables: Iterable[TableOracle]) -> Tally:
    """Every table read with delta-rs straight from its Delta log (a table not yet in the lake
    has lost every row); ``lake_root`` is a local root or a :class:`Lake` on S3."""
    lake = lake_root if isinstance(lake_root, Lake) else Lake.at(str(lake_root))
    lost = extra = duplicated = 0
    for table in tables:
        loaded = lake.load(table.name)
        by_key: dict[object, dict] = {}
        for row in [] if loaded is None else loaded.to_arrow().to_pylist():
            key = row["id"]
            duplicated += key in by_key
            by_key[key] = {k: v for k, v in row.items() if k not in SYSTEM}
        lost += sum(1 for k, row in table.rows.items() if by_key.get(k) != row)
        extra += sum(1 for k in by_key if k not in table.rows)
    return Tally(lost, extra, duplicated)


def wait_recovered(
    client: KvStoreClient, lake_root: Path | Lake, tables: list[TableOracle], cleared_at: float, timeout_s: float = 120
) -> float:
    """Seconds from ``cleared_at`` (``time.monotonic()``) until the lake is at every log end and
    equals the oracle."""
    lake = lake_root if isinstance(lake_root, Lake) else str(lake_root)
    wait_until(
        lambda: caught_up(client, lake, tables) and tally(lake_root, tables).clean,
        "the lake to catch up after the fault",
        timeout_s=timeout_s,
    )
    return time.monotonic() - cleared_at


def status(conf: Path) -> tuple[int, dict | None, str]:
    """`tiering status --conf conf --json`: exit code, the document (None when it failed), stderr."""
    done = tiering_cli("status", "--conf", str(conf), "--json")
    return done.returncode, json.loads(done.stdout) if done.returncode in (0, 3) else None, done.stderr.strip()


def status_line(conf: Path) -> str:
    """What `tiering status` tells an operator now, in one line: its error, or the leader and
    every failing table's cause, state and message."""
    rc, doc, err = status(conf)
    if doc is None:
        return f"status exit {rc}: {err.splitlines()[-1] if err else '(no message)'}"
    failing = [
        f"{t['table']}: {t['last_failure_cause']} in {t['last_failure_state']}: {t['last_failure']}"
        for t in doc["tables"]
        if t["state"] == "failing"
    ]
    return f"status exit {rc}: leader {doc['leader']} epoch {doc['epoch']}, " + ("; ".join(failing) or "every table ok")


@dataclass(frozen=True)
class FaultResult:
    """One row of the matrix."""

    fault: str
    recovery_s: float
    rows_lost: int
    rows_extra: int
    rows_duplicated: int
    operator_saw: str
    ci: bool

    @classmethod
    def of(cls, fault: str, recovery_s: float, counted: Tally, operator_saw: str, *, ci: bool) -> FaultResult:
        return cls(fault, round(recovery_s, 1), counted.lost, counted.extra, counted.duplicated, operator_saw, ci)


@dataclass
class FaultMatrix:
    """The session's rows, in the order the cases ran."""

    results: list[FaultResult] = field(default_factory=list)

    def record(self, result: FaultResult, tmp_path: Path) -> None:
        (tmp_path / "fault.json").write_text(json.dumps(asdict(result), indent=1))
        self.results.append(result)
        print(
            f"\nfault matrix: {result.fault}: recovered in {result.recovery_s:.1f}s, {result.rows_lost} lost, "
            f"{result.rows_extra} extra, {result.rows_duplicated} duplicated; operator saw: {result.operator_saw}"
        )

    def render(self) -> str:
        lines = [
            "| fault | recovery s | rows lost | rows duplicated | CI | what the operator saw |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {r.fault} | {r.recovery_s:.1f} | {r.rows_lost + r.rows_extra} | {r.rows_duplicated} | "
            f"{'yes' if r.ci else 'no'} | {r.operator_saw} |"
            for r in self.results
        ]
        return "\n".join(lines)


@pytest.fixture(scope="session")
def fault_matrix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultMatrix]:
    matrix = FaultMatrix()
    yield matrix
    if not matrix.results:
        return
    print(f"\n\nfault matrix ({len(matrix.results)} cases)\n{matrix.render()}")
    rows = json.dumps([asdict(r) for r in matrix.results], indent=1)
    (tmp_path_factory.getbasetemp() / "fault-matrix.json").write_text(rows)
    if os.environ.get("CHAOS_MATRIX_JSON"):
        Path(os.environ["CHAOS_MATRIX_JSON"]).write_text(rows)
