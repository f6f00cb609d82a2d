"""The configuration reference, generated from the models.

Failure mode this prevents: a manual that documents keys, defaults or types the code no longer
has. ``scripts/gen_docs.py`` writes this table into ``docs/reference/configuration.md``; a test
checks every field appears in it and that the page is current.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import SecretStr
from pydantic.fields import FieldInfo

from tiering.conf.fields import type_label
from tiering.conf.loader import ENV_PREFIX
from tiering.conf.model import SECTIONS, TieringConfig

__all__ = ["config_reference_markdown"]


def config_reference_markdown() -> str:
    """A Markdown table of every key: ``section.key``, type, default, description."""
    rows = [
        f"Every key can also be set with the environment variable `{ENV_PREFIX}<SECTION>_<KEY>` "
        "(lists comma-separated), which wins over the file; command-line flags win over both, and "
        "`--set section.key=value` (repeatable; `lake.storage.<option>` for an entry of a table) over all. "
        "Unknown keys and variables are errors.",
        "",
        "| Key | Type | Default | Description |",
        "| --- | --- | --- | --- |",
    ]
    for section, model in SECTIONS.items():
        for key, info in model.model_fields.items():
            rows.append(_row(f"{section}.{key}", info))
    rows.append(_row("spark.<key>", TieringConfig.model_fields["spark"]))
    return "\n".join(rows) + "\n"


def _row(key: str, info: FieldInfo) -> str:
    cells = [f"`{key}`", type_label(info), _default(info), info.description or ""]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value: Any = info.get_default(call_default_factory=True)
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    return f"`{json.dumps(value)}`"
