"""A store and jobs of different releases keep working together (a rolling upgrade, docs/DESIGN.md §3).

Failure modes looked for: an upgraded store answering a job of the previous release a field its
strict models refuse (``lake_job``, once any upgraded job has reported: ``GET /v1/logs`` answers
every table, so one such report failed that job's every planning); the store's kept answers or
its ETag serving one variant of the logs answer to a client that asked for the other (a 304
confirming a body without the holders, a kept JSON with them); a request body with a field the
store does not know accepted instead of refused, naming it.

The previous release's reading is a strict copy of its models (``extra="forbid"``, its fields as
they were at 9a41dd5), its calls plain HTTP without the new question.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests
from pydantic import BaseModel, ConfigDict, ValidationError

from tests.support.store import orders_spec
from tiering.kvstore.models import LakeReport
from tiering.kvstore.server.process import StoreProcess

pytestmark = pytest.mark.integration


class _Previous(BaseModel):
    """How the previous release read the store's answers: any field it does not know is an error."""

    model_config = ConfigDict(extra="forbid")


class PreviousBucketLog(_Previous):
    bucket: int
    log_start_offset: int
    log_end_offset: int


class PreviousNamedTableLog(_Previous):
    table_id: int
    buckets: list[PreviousBucketLog]
    name: str
    lake: dict[str, int] | None = None


class PreviousTablesLog(_Previous):
    tables: list[PreviousNamedTableLog]
    missing: list[str] = []


def _get(store: StoreProcess, path: str, **kwargs: Any) -> requests.Response:
    response = requests.get(store.url + path, timeout=30, **kwargs)
    assert response.status_code in (200, 304), response.text
    return response


def _post(store: StoreProcess, path: str, body: Any, **kwargs: Any) -> requests.Response:
    return requests.post(store.url + path, json=body, timeout=30, **kwargs)


@pytest.fixture
def reported(kv_store: StoreProcess) -> StoreProcess:
    """``held``: reported by a job of this release (naming itself); ``unnamed``: by a client naming
    no job (the previous release's); ``cold``: never reported."""
    client = kv_store.client()
    for name in ("held", "unnamed", "cold"):
        info = client.create_table(orders_spec(name))
        client.upsert(name, [{"id": i, "amount": 1.0} for i in range(3)])
        if name != "cold":
            job = "upgraded" if name == "held" else None
            client.report_lake(
                name, LakeReport(table_id=info.table_id, epoch=1, lake_version=0, buckets={"0": 3}, job=job)
            )
    return kv_store


def test_the_previous_release_reads_the_logs_it_always_read(reported):
    every = _get(reported, "/v1/logs")
    named = _post(reported, "/v1/logs", {"tables": ["held", "unnamed", "cold", "nope"]})

    assert named.status_code == 200, named.text
    for answer in (every, named):
        read = PreviousTablesLog.model_validate_json(answer.content)
        assert [t.name for t in read.tables] == ["cold", "held", "unnamed"]
        assert read.tables[1].lake == {"0": 3}
        assert all("lake_job" not in table for table in answer.json()["tables"]), answer.text
    assert PreviousTablesLog.model_validate_json(named.content).missing == ["nope"]
    tag = every.headers["ETag"]
    assert _get(reported, "/v1/logs", headers={"If-None-Match": tag}).status_code == 304

    with pytest.raises(ValidationError, match="lake_job"):  # what the previous release met before this fix
        PreviousTablesLog.model_validate_json(_get(reported, "/v1/logs?holders=true").content)


def test_a_client_that_asks_gets_each_tables_holder(reported):
    every = _get(reported, "/v1/logs", params={"holders": "true"}).json()
    named = _post(reported, "/v1/logs", {"tables": ["held", "unnamed", "cold"]}, params={"holders": "true"}).json()

    for answer in (every, named):
        assert {t["name"]: t.get("lake_job", "absent") for t in answer["tables"]} == {
            "held": "upgraded",
            "unnamed": "absent",
            "cold": "absent",
        }
    client = reported.client()
    assert client.lake_holders(["held", "unnamed", "cold", "nope"]) == {
        "held": "upgraded",
        "unnamed": None,
        "cold": None,
    }
    assert client.logs()["held"].lake_job == "upgraded"


def test_the_two_logs_answers_never_share_an_etag_or_a_kept_body(reported):
    holders = _get(reported, "/v1/logs", params={"holders": "true"})  # kept by the store first with holders
    plain = _get(reported, "/v1/logs")
    assert plain.headers["ETag"] != holders.headers["ETag"]
    assert "lake_job" not in plain.text and '"lake_job":"upgraded"' in holders.text

    crossed_plain = _get(reported, "/v1/logs", headers={"If-None-Match": holders.headers["ETag"]})
    crossed_holders = _get(
        reported, "/v1/logs", params={"holders": "true"}, headers={"If-None-Match": plain.headers["ETag"]}
    )

    assert (crossed_plain.status_code, crossed_plain.content) == (200, plain.content)
    assert (crossed_holders.status_code, crossed_holders.content) == (200, holders.content)
    for response, params in ((plain, {}), (holders, {"holders": "true"})):
        again = _get(reported, "/v1/logs", params=params, headers={"If-None-Match": response.headers["ETag"]})
        assert (again.status_code, again.headers["ETag"]) == (304, response.headers["ETag"])

    # a hand-over moves both answers, each still its own
    client = reported.client()
    report = client.drop_lake("held")
    client.report_lake("held", report.model_copy(update={"job": "next"}))
    moved = {
        params.get("holders", "false"): _get(reported, "/v1/logs", params=params, headers={"If-None-Match": tag})
        for params, tag in (({}, plain.headers["ETag"]), ({"holders": "true"}, holders.headers["ETag"]))
    }
    assert {k: r.status_code for k, r in moved.items()} == {"false": 200, "true": 200}
    assert "lake_job" not in moved["false"].text and '"lake_job":"next"' in moved["true"].text
    assert client.lake_holders(["held"]) == {"held": "next"}


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("POST", "/v1/tables", {**orders_spec("t").model_dump(by_alias=True), "owner": "x"}, "owner"),
        (
            "POST",
            "/v1/tables",
            {
                **orders_spec("t").model_dump(by_alias=True),
                "schema": [{"name": "id", "type": "bigint", "comment": "x"}],
            },
            "schema[0].comment",
        ),
        ("POST", "/v1/tables/held/columns", {"name": "c", "type": "string", "default": 1}, "default"),
        ("POST", "/v1/logs", {"tables": ["held"], "holders": True}, "holders"),
        (
            "PUT",
            "/v1/tables/held/lake",
            {"table_id": 1, "epoch": 9, "lake_version": 1, "buckets": {}, "owner": "x"},
            "owner",
        ),
        (
            "POST",
            "/v1/lake-reports",
            {
                "reports": [
                    {
                        "table": "held",
                        "report": {"table_id": 1, "epoch": 9, "lake_version": 1, "buckets": {}, "owner": "x"},
                    }
                ]
            },
            "reports[0].report.owner",
        ),
        (
            "POST",
            "/v1/leases/l/acquire",
            {"duration_ms": 1000, "epoch": 1, "snapshots": [{"table_id": 1, "bucket": 0, "snapshot_id": 1, "size": 1}]},
            "snapshots[0].size",
        ),
        (
            "POST",
            "/v1/segments",
            {"tables": [{"table": "held", "ranges": [{"bucket": 0, "from": 0, "to": 1, "x": 1}]}]},
            "tables[0].ranges[0].x",
        ),
    ],
)
def test_a_request_with_a_field_the_store_does_not_know_is_refused_naming_it(reported, method, path, body, field):
    before = _get(reported, "/v1/logs", params={"holders": "true"}).content

    response = requests.request(method, reported.url + path, json=body, timeout=30)

    assert response.status_code == 400, response.text
    assert response.json() == {"error": "BAD_REQUEST", "message": f"{field}: Extra inputs are not permitted"}
    assert _get(reported, "/v1/logs", params={"holders": "true"}).content == before
