"""How a config field describes itself, to the user reading an error and to the manual.

Failure mode this prevents: an error message and the reference table disagreeing about what a
key accepts, or a secret leaking into either. Both read the same field metadata, built here.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import Field, PlainSerializer, SecretStr, SerializationInfo
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

__all__ = ["setting", "type_label", "base_type", "is_secret", "is_optional", "Secret", "WITH_SECRETS"]

#: Serialization context that writes secrets in clear: only for handing a config to another
#: process of the same job (the Spark source's planning process), never for logs or output.
WITH_SECRETS = {"secrets": True}


def _dump_secret(value: SecretStr, info: SerializationInfo) -> str:
    return value.get_secret_value() if (info.context or {}).get("secrets") else str(value)


#: A secret config value: masked in JSON unless dumped with :data:`WITH_SECRETS`.
Secret = Annotated[SecretStr, PlainSerializer(_dump_secret, when_used="json")]


def setting(
    description: str,
    default: Any = PydanticUndefined,
    *,
    label: str | None = None,
    secret: bool = False,
    **constraints: Any,
) -> Any:
    """A config field: ``description`` feeds the manual; ``label`` replaces the derived type label
    when a validator accepts less than the Python type says (a URL is more than a ``str``)."""
    extra: dict[str, Any] = {}
    if label is not None:
        extra["label"] = label
    if secret:
        extra["secret"] = True
    return Field(default, description=description, json_schema_extra=extra or None, **constraints)


def _extra(info: FieldInfo) -> dict[str, Any]:
    return info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}


def is_secret(info: FieldInfo) -> bool:
    return bool(_extra(info).get("secret"))


def is_optional(info: FieldInfo) -> bool:
    return type(None) in typing.get_args(info.annotation)


def base_type(info: FieldInfo) -> Any:
    """The annotation without ``| None``: what a text value from the environment is parsed into."""
    annotation = info.annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _bounds(info: FieldInfo) -> str:
    parts = []
    for meta in info.metadata:
        if isinstance(meta, annotated_types.Gt):
            parts.append(f"> {meta.gt}")
        elif isinstance(meta, annotated_types.Ge):
            parts.append(f">= {meta.ge}")
    return (" " + ", ".join(parts)) if parts else ""


def type_label(info: FieldInfo) -> str:
    """What the key accepts, in words: ``integer >= 0``, ``one of 'delta-rs', 'delta-spark'``."""
    if "label" in _extra(info):
        return _extra(info)["label"]
    annotation = base_type(info)
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(annotation))
    if origin is list:
        return "list of strings"
    names = {bool: "boolean", int: "integer", float: "number", str: "string", SecretStr: "string (secret)"}
    return names[annotation] + _bounds(info)
