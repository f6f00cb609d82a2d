"""Lake reports: the log offset per bucket a tiering job has committed to the lake.

Failure modes: a zombie driver (an old leadership term) reporting after a newer leader took
over — the table's report remembers the highest epoch seen and a lower one is refused with
409 ``FENCED_EPOCH``; a second job tiering the same table into another lake (each job has its
own epochs, so its reports would pass for a zombie's or overwrite the first job's, and the
other job would settle the table on a lake it does not have) — the report names its job, and
another job's than the one whose report the store holds is refused with 409 ``OTHER_JOB``
(a report naming no job, an older client's, is taken as the holder's) — unless both name the
same tiering group: one table is tiered by one group, its members taking turns under the table's
epoch, and a member's report under a lower table epoch than the store has seen is refused with 409
``TABLE_EPOCH_FENCED`` (table_epochs.py), that table's answer; a report for a
dropped-and-re-created table (its ``table_id`` names the old one) — refused with 409
``CONFLICT``; an offset the bucket never reached — 400. A wrong report would let GC delete log
segments the lake does not hold yet. A table changes jobs only when an operator drops its
report (:func:`drop`): the next job's first report then holds it.

A batch of reports (a round's, one per table) is stored in one transaction: a table's refusal is
that table's answer, except a stale epoch, which refuses the whole batch — a zombie must store
nothing and stop. Functions run inside a caller's transaction (``Database.tx``), like
catalog.py's, and raise ``ApiError`` on refusal.
"""

from __future__ import annotations

import json
import sqlite3
from typing import NamedTuple
from urllib.parse import quote

from tiering.kvstore.models import LakeReport, TableInfo
from tiering.kvstore.server import table_epochs
from tiering.kvstore.server.catalog import TableEnds
from tiering.kvstore.server.errors import (
    CONFLICT,
    FENCED_EPOCH,
    NOT_FOUND,
    OTHER_JOB,
    ApiError,
    bad_request,
    fenced,
    table_not_found,
)


def put_many(
    conn: sqlite3.Connection, tables: dict[str, TableEnds], reports: list[tuple[str, LakeReport]]
) -> list[LakeReport | ApiError]:
    """Store each ``(table name, report)`` in order as one PUT each would (a later report of a
    table sees an earlier one's epoch and job); ``tables``: the live tables among them. Per report
    what was stored (one naming no job is stored as the holder's) or, refused for any other reason
    than its epoch, its refusal (nothing stored for it); a stale epoch is raised: the caller's
    transaction rolls back, so a zombie's batch stores nothing, not even its reports of tables no
    newer term touched yet."""
    ids = json.dumps([t.table_id for t in tables.values()])
    held: dict[int, _Held] = {
        table_id: _Held(epoch, job, group)
        for table_id, epoch, job, group in conn.execute(
            "SELECT table_id, epoch, json_extract(report, '$.job'), json_extract(report, '$.group') FROM lake_reports "
            "WHERE table_id IN (SELECT value FROM json_each(?))",
            (ids,),
        )
    }
    answers: list[LakeReport | ApiError] = []
    rows = []
    for name, report in reports:
        try:
            table = tables.get(name)
            if table is None:
                raise table_not_found(name)
            last = held.get(table.table_id)
            _check(name, table, report, last)
            if report.group is not None and report.job is not None and report.table_epoch is not None:
                owner = table_epochs.Owner(report.group, report.job, report.table_epoch)
                table_epochs.claim(conn, table.table_id, f"lake report of table {name!r}", owner)
        except ApiError as refusal:
            if refusal.code == FENCED_EPOCH:
                raise
            answers.append(refusal)
            continue
        if report.job is None and last is not None and last.job is not None:
            report = report.model_copy(update={"job": last.job})  # an older client's: the holder's
        held[table.table_id] = _Held(report.epoch, report.job, report.group)
        rows.append((table.table_id, report.epoch, dump(report)))
        answers.append(report)
    conn.executemany("INSERT OR REPLACE INTO lake_reports VALUES (?, ?, ?)", rows)
    return answers


class ReportVersion(NamedTuple):
    """Which report of a table: its epoch and lake version (one commit of one term)."""

    epoch: int
    lake_version: int


class _Held(NamedTuple):
    """What a table's stored report fences the next with: its epoch, the job that made it and that
    job's group."""

    epoch: int
    job: str | None
    group: str | None

    def other_job(self, report: LakeReport) -> bool:
        """Whether ``report`` comes from another job than this one's, outside its group."""
        if None in (self.job, report.job) or self.job == report.job:
            return False
        return self.group is None or self.group != report.group


def dump(report: LakeReport) -> str:
    """A report's JSON, without ``job`` when it names none: what an older client reads back then
    is what it always read (its models refuse unknown fields)."""
    return report.model_dump_json(exclude_none=True)


def _check(name: str, table: TableEnds, report: LakeReport, last: _Held | None) -> None:
    """Refuses a report of the table's previous incarnation, another job's (outside its group),
    impossible offsets and a stale epoch (checked last: epochs compare only within one job; between
    the members of a group the table epoch orders them)."""
    if report.table_id != table.table_id:
        raise ApiError(
            409,
            CONFLICT,
            f"lake report for table {name!r} names table_id {report.table_id}, but the table's id is "
            f"{table.table_id} (it was dropped and re-created)",
        )
    if last is not None and last.other_job(report):
        holder = f"job {last.job!r}'s" if last.group is None else f"job {last.job!r}'s (group {last.group!r})"
        raise ApiError(
            409,
            OTHER_JOB,
            f"lake report of table {name!r} from job {report.job!r} refused: the store holds {holder} "
            f"report, and one table is tiered by one job or group. To hand the table over, stop job {last.job!r} "
            "tiering it "
            "(exclude it there), then drop its report (DELETE "
            f"/v1/tables/{quote(name, safe='')}/lake); job {report.job!r}'s "
            "next report holds it",
        )
    for key, offset in report.buckets.items():
        if int(key) not in table.buckets:  # LakeReport's keys are 1-10 ASCII digits
            raise bad_request(f"buckets.{key}: not a bucket of table {name!r} (0..{len(table.buckets) - 1})")
        end = table.buckets[int(key)][1]
        if not 0 <= offset <= end:
            raise bad_request(f"buckets.{key}: offset {offset} is outside the bucket's log [0, {end}]")
    if last is not None and report.epoch < last.epoch and (None in (last.job, report.job) or last.job == report.job):
        raise fenced(f"lake report of table {name!r}", report.epoch, last.epoch)


def _find(conn: sqlite3.Connection, table_id: int) -> LakeReport | None:
    row = conn.execute("SELECT report FROM lake_reports WHERE table_id = ?", (table_id,)).fetchone()
    return LakeReport.model_validate_json(row["report"]) if row else None


def get(conn: sqlite3.Connection, table: TableInfo) -> LakeReport:
    """The table's last report; 404 ``NOT_FOUND`` before its first."""
    report = _find(conn, table.table_id)
    if report is None:
        raise ApiError(404, NOT_FOUND, f"table {table.name!r} (table_id {table.table_id}) has no lake report yet")
    return report


def drop(conn: sqlite3.Connection, table: TableInfo, expected: ReportVersion | None = None) -> LakeReport:
    """Forget the table's report, so another job's next report holds it (a deliberate hand-over;
    until then GC deletes no segment as tiered). Returns it; 404 ``NOT_FOUND`` when there is none.

    ``expected``: drop only the report an operator checked, at this epoch and lake version; 409
    ``CONFLICT`` naming the one held when its job reported since (a term started between the
    check and the drop): that report is its job's fresh progress, not the one checked."""
    report = get(conn, table)
    if expected is not None and (report.epoch, report.lake_version) != expected:
        raise ApiError(
            409,
            CONFLICT,
            f"lake report of table {table.name!r} not dropped: job {report.job!r} reported since (epoch "
            f"{report.epoch}, lake version {report.lake_version}; the drop named epoch {expected.epoch}, lake "
            f"version {expected.lake_version})",
        )
    conn.execute("DELETE FROM lake_reports WHERE table_id = ?", (table.table_id,))
    return report


def offsets(conn: sqlite3.Connection, table_id: int) -> dict[int, int]:
    """Bucket -> offset the lake holds (exclusive); empty while nothing is tiered."""
    report = _find(conn, table_id)
    return {int(b): o for b, o in report.buckets.items()} if report else {}
