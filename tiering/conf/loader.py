"""Load the configuration: TOML file, then ``TIERING_<SECTION>_<KEY>`` environment, then overrides,
then settings (``tiering --set section.key=value``).

Failure mode this prevents: an operator fixing one config mistake per restart. Every problem —
unreadable file, unknown key or variable, unparsable text, wrong type, missing required key —
is collected and raised as one :class:`~tiering.errors.ConfigError`, each line naming the key,
where its value came from, what was expected and what was given. Values are never guessed: an
unknown ``TIERING_*`` variable is an error, not ignored, because it is almost always a typo.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import tomllib
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from tiering.conf.fields import base_type, is_optional, is_secret, type_label
from tiering.conf.model import RENAMED_KEYS, SECTIONS, TieringConfig, flatten_spark
from tiering.errors import ConfigError

__all__ = ["load_config", "ENV_PREFIX", "env_name"]

log = logging.getLogger(__name__)

ENV_PREFIX = "TIERING_"
OVERRIDE_SOURCE = "override"
SET_SOURCE = "--set"
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")
_TOML_LINE = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def env_name(section: str, key: str) -> str:
    """The environment variable that sets ``section.key``: ``TIERING_TRIGGER_AVAILABLE_NOW``."""
    return f"{ENV_PREFIX}{section.upper()}_{key.upper()}"


@dataclass
class _Layers:
    """Values by section and key, where each came from (the last layer that set it), and the
    problems found before validation."""

    raw: dict[str, dict[str, Any]] = field(default_factory=lambda: {s: {} for s in [*SECTIONS, "spark"]})
    sources: dict[tuple[str, str], str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def set(self, section: str, key: str, value: Any, source: str) -> None:
        self.raw[section][key] = value
        self.sources[(section, key)] = source


def load_config(
    path: str | Path | None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
    settings: Mapping[str, str] | None = None,
) -> TieringConfig:
    """Build the validated config. ``path`` None means no file (environment and overrides only);
    ``env`` None means ``os.environ``; ``overrides`` maps dotted keys (``"trigger.available_now"``,
    ``"spark.spark.sql.shuffle.partitions"``) to values, a None value meaning "flag not given";
    a string given for a non-string key is parsed like an environment value. ``settings`` are
    ``--set`` texts by dotted key, over every other layer; an entry of a table-valued key is
    named by one more segment (``lake.storage.AWS_REGION``, ``tables.freshness_targets.orders``).

    Raises ConfigError listing every problem found.
    """
    layers = _Layers()
    file_read = path is None or _read_file(Path(path), layers)
    _apply_env(os.environ if env is None else env, layers)
    _apply_overrides(overrides or {}, layers)
    _apply_overrides(settings or {}, layers, SET_SOURCE)
    _apply_renamed(layers)
    config = None
    if file_read:
        try:
            config = TieringConfig.model_validate(layers.raw)
        except ValidationError as e:
            layers.problems.extend(_describe(err, layers.sources) for err in e.errors())
    if layers.problems or config is None:
        raise ConfigError(layers.problems)
    return config


def _read_file(path: Path, layers: _Layers) -> bool:
    label = str(path)
    try:
        with path.open("rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        layers.problems.append(f"{label}: cannot read config file: {e.strerror or e}")
        return False
    except UnicodeDecodeError:
        layers.problems.append(f"{label}: cannot read config file: not UTF-8 text")
        return False
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        where = _TOML_LINE.search(message)
        if where:
            message = f"line {where[1]}, column {where[2]}: {message[: where.start()]}"
        layers.problems.append(f"{label}: invalid TOML: {message}")
        return False
    for name, value in doc.items():
        if name == "spark" and isinstance(value, dict):
            for key, item in flatten_spark(value).items():
                layers.set("spark", key, item, label)
        elif name in layers.raw and isinstance(value, dict):
            for key, item in value.items():
                layers.set(name, key, item, label)
        elif name in layers.raw:
            layers.problems.append(f"{name} ({label}): expected a [{name}] table, got {value!r}")
        else:
            layers.problems.append(f"{name} ({label}): {_unknown_top_level(name, value)}")
    return True


def _unknown_top_level(name: str, value: Any) -> str:
    if not isinstance(value, dict):
        owners = [s for s, model in SECTIONS.items() if name in model.model_fields]
        if owners:
            return f"key outside any section; it belongs under [{owners[0]}]"
    return "unknown section" + _did_you_mean(name, [*SECTIONS, "spark"])


def _keys(section: str) -> list[str]:
    """The keys ``section`` accepts: its fields and its renamed keys."""
    return [*SECTIONS[section].model_fields, *(old for s, old in RENAMED_KEYS if s == section)]


def _field(section: str, key: str) -> FieldInfo:
    """The field that types ``key``; a renamed key is typed like the first key it now sets."""
    fields = SECTIONS[section].model_fields
    return fields[key] if key in fields else fields[RENAMED_KEYS[(section, key)][0]]


def _apply_env(env: Mapping[str, str], layers: _Layers) -> None:
    known = {env_name(s, k): (s, k) for s in SECTIONS for k in _keys(s)}
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX):
            continue
        source = f"env {name}"
        if name in known:
            section, key = known[name]
            _set_text(layers, section, key, env[name], source)
        elif name.startswith(f"{ENV_PREFIX}SPARK_"):
            layers.problems.append(
                f"{name} (env): Spark settings cannot come from the environment (their keys contain "
                "dots); set them under [spark] in the file or as overrides 'spark.<key>'"
            )
        else:
            # Compare without the shared prefix, or every name looks close to every other.
            suffixes = [k.removeprefix(ENV_PREFIX) for k in known]
            close = difflib.get_close_matches(name.removeprefix(ENV_PREFIX), suffixes, n=1)
            hint = f"did you mean '{ENV_PREFIX}{close[0]}'?" if close else "expected TIERING_<SECTION>_<KEY>"
            layers.problems.append(f"{name} (env): unknown setting; {hint}")


def _apply_overrides(overrides: Mapping[str, object], layers: _Layers, source: str = OVERRIDE_SOURCE) -> None:
    known = [f"{s}.{k}" for s, model in SECTIONS.items() for k in model.model_fields]
    for dotted, value in overrides.items():
        if value is None:
            continue
        section, _, key = dotted.partition(".")
        name, _, entry = key.partition(".")
        if section == "spark" and key:
            layers.set("spark", key, value, source)
        elif section in SECTIONS and key in _keys(section):
            if isinstance(value, str):
                _set_text(layers, section, key, value, source)
            else:
                layers.set(section, key, value, source)
        elif section in SECTIONS and entry and _is_table(section, name) and isinstance(value, str):
            _set_entry(layers, section, name, entry, value, source)
        else:
            same_section = [k for k in known if k.startswith(f"{section}.")]
            layers.problems.append(
                f"{dotted} ({source}): unknown key" + _did_you_mean(dotted, known, same_section or known)
            )


def _is_table(section: str, key: str) -> bool:
    info = SECTIONS[section].model_fields.get(key)
    return info is not None and typing.get_origin(base_type(info)) is dict


def _set_entry(layers: _Layers, section: str, key: str, entry: str, text: str, source: str) -> None:
    """One entry of a table-valued key, its text parsed by the table's value type."""
    value_type = typing.get_args(base_type(SECTIONS[section].model_fields[key]))[1]
    info = FieldInfo.from_annotation(value_type)
    try:
        value = _parse_text(info, text)
    except ValueError:
        layers.problems.append(
            f"{section}.{key}.{entry} ({source}): expected {type_label(info)}, got {_shown(text, is_secret(info))}"
        )
        return
    table = layers.raw[section].get(key)
    layers.set(section, key, {**(table if isinstance(table, dict) else {}), entry: value}, source)


def _set_text(layers: _Layers, section: str, key: str, text: str, source: str) -> None:
    """Parse ``text`` by the field's type; on failure keep the lower layer's value and report."""
    info = _field(section, key)
    try:
        layers.set(section, key, _parse_text(info, text), source)
    except ValueError:
        layers.problems.append(
            f"{section}.{key} ({source}): expected {type_label(info)}, got {_shown(text, is_secret(info))}"
        )


def _apply_renamed(layers: _Layers) -> None:
    """A renamed key sets each key it became that is not set itself, and a warning names them."""
    for (section, old), new_keys in RENAMED_KEYS.items():
        if old not in layers.raw[section]:
            continue
        value, source = layers.raw[section].pop(old), layers.sources.pop((section, old))
        for key in new_keys:
            if key not in layers.raw[section]:
                layers.set(section, key, value, f"{source}, as {section}.{old}")
        names = " and ".join(f"{section}.{key}" for key in new_keys)
        log.warning(
            "%s.%s (%s) is deprecated: it now sets %s (each unless set itself); set those instead",
            section,
            old,
            source,
            names,
        )


def _parse_text(info: FieldInfo, text: str) -> Any:
    kind = base_type(info)
    if is_optional(info) and text == "":
        return None
    if kind is bool:
        if text.strip().lower() in _TRUE + _FALSE:
            return text.strip().lower() in _TRUE
        raise ValueError(text)
    if kind is int:
        return int(text.strip())
    if kind is float:
        return float(text.strip())
    if typing.get_origin(kind) is list:
        return [item.strip() for item in text.split(",") if item.strip()]
    return text


def _describe(err: ErrorDetails, sources: Mapping[tuple[str, str], str]) -> str:
    """One pydantic error as one line: key (source): expected ..., got ... (a rule across sections
    names its keys itself)."""
    if not err["loc"]:
        return str(err["ctx"]["error"])
    section, kind, loc = str(err["loc"][0]), err["type"], err["loc"]
    if len(loc) == 1:
        where = sorted({src for (s, _), src in sources.items() if s == section})
        head = f"{section} ({', '.join(where)})" if where else section
        if kind == "value_error":
            text = str(err["ctx"]["error"])
            key, known, rest = text.partition(": ")
            if known and key in SECTIONS[section].model_fields:  # a rule across keys, naming the one at fault
                source = sources.get((section, key))
                return f"{section}.{key}" + (f" ({source})" if source else "") + f": {rest}"
            return f"{head}: {text}"
        return f"{head}: expected a [{section}] table, got {err['input']!r}"
    key = str(loc[1])
    name = f"{section}.{key}" + "".join(f"[{i}]" for i in loc[2:])
    source = sources.get((section, key))
    head = f"{name} ({source})" if source else name
    if kind == "missing":
        return f"{name}: required, missing"
    if kind == "extra_forbidden":
        return f"{head}: unknown key" + _did_you_mean(key, SECTIONS[section].model_fields)
    info = TieringConfig.model_fields["spark"] if section == "spark" else SECTIONS[section].model_fields[key]
    label = "string" if len(loc) > 2 else type_label(info)
    detail = str(err["ctx"]["error"]) if kind == "value_error" else ""
    return f"{head}: expected {label}, got {_shown(err['input'], is_secret(info))}" + (f" ({detail})" if detail else "")


def _shown(value: Any, secret: bool) -> str:
    return f"a value of type {type(value).__name__} (hidden)" if secret else repr(value)


def _did_you_mean(name: str, candidates: Iterable[str], listed: Iterable[str] | None = None) -> str:
    """A close match if there is one, else the ``listed`` keys (default: all candidates)."""
    candidates = list(candidates)
    close = difflib.get_close_matches(name, candidates, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return "; expected one of " + ", ".join(repr(c) for c in (candidates if listed is None else listed))
