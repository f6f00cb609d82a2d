"""The generated reference documents every key the models have, with type and default."""

from __future__ import annotations

import pytest

from tiering.conf.fields import type_label
from tiering.conf.model import SECTIONS
from tiering.conf.reference import config_reference_markdown

pytestmark = pytest.mark.unit


def rows() -> dict[str, list[str]]:
    table = [line for line in config_reference_markdown().splitlines() if line.startswith("| `")]
    return {cells[0].strip("`"): cells[1:] for cells in ([c.strip() for c in r.strip("|").split(" | ")] for r in table)}


def test_every_field_has_exactly_one_row_in_model_order() -> None:
    expected = [f"{s}.{k}" for s, m in SECTIONS.items() for k in m.model_fields] + ["spark.<key>"]
    assert list(rows()) == expected


def test_rows_carry_type_default_and_description() -> None:
    table = rows()
    assert table["job.name"][:2] == ["name matching [A-Za-z0-9._-]+", "required"]
    assert table["kvstore.url"][:2] == ["http(s) URL", "unset"]
    assert table["kvstore.token"][:2] == ["string (secret)", '`""`']
    assert table["zookeeper.session_timeout_s"][:2] == ["number > 0", "`10`"]
    assert table["zookeeper.auth_password"][:2] == ["string (secret)", "unset"]
    assert table["lake.writer"][:2] == ["one of 'delta-rs', 'delta-spark'", '`"delta-rs"`']
    assert table["lake.compression"][:2] == ["one of 'zstd', 'snappy', 'lz4', 'gzip', 'none'", '`"zstd"`']
    assert table["tables.include"][:2] == ["non-empty list of glob patterns", '`["*"]`']
    assert table["trigger.available_now"][:2] == ["boolean", "`false`"]
    assert table["limits.max_bytes_per_trigger"][:2] == ["integer >= 0", "`0`"]
    for section, model in SECTIONS.items():
        for key, info in model.model_fields.items():
            assert table[f"{section}.{key}"][0] == type_label(info)
            assert table[f"{section}.{key}"][2] == info.description
