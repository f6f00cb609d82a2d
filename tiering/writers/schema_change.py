"""Following the KV table's schema into its Delta table (docs/DESIGN.md §6, "upstream schema changes").

Failure mode this guards against: a table whose KV schema grew stuck failing every round, as
Fluss users saw. The store only ever appends nullable columns (``POST /v1/tables/{t}/columns``),
so the lake can follow: a column the KV table has and the Delta table lacks is added to the
Delta schema by the round's own commit (the writers put the new schema in the commit that adds
the round's files), and rows already in the lake read it as null, because Delta readers fill a
column a data file lacks. Whatever cannot be followed without rewriting or losing data fails
that table's round before any file is written, with a :class:`SchemaMismatchError` naming the
table, the column and what was expected:

- a column whose type differs (the store never changes one; a Delta table written by someone
  else may): old files could not be read as the new type;
- a Delta column the KV table lacks (dropped upstream, or never ours): its data would be lost;
- a new column that is NOT NULL: rows already in the lake have no value for it;
- a system column (``__bucket``, ``__offset``, ``__timestamp``) missing in Delta: the table was
  not written by a tiering job, and inventing the column would not make it one.

Columns match by name, as Delta's and Parquet's readers match them; their order is not compared
(delta-spark appends an added column after the system columns, delta-rs keeps the KV order).
"""

from __future__ import annotations

from deltalake import Schema
from deltalake.schema import Field

from tiering.delta_log.layout import SYSTEM_COLUMNS
from tiering.errors import SchemaMismatchError

__all__ = ["added_columns"]


def added_columns(table: str, uri: str, delta: Schema, kv: Schema) -> tuple[str, ...]:
    """The columns of ``kv`` (the KV table's lake schema) that the round adds to ``delta`` (the
    Delta table's schema at ``uri``), in the KV table's order; :class:`SchemaMismatchError` when the
    Delta table cannot follow ``kv`` by adding them."""
    have = {f.name: f for f in delta.fields}
    want = {f.name: f for f in kv.fields}
    problems = [
        f"column {n!r} is in Delta but not in the KV table; expected every Delta column to stay "
        "(columns are never dropped from the lake)"
        for n in have
        if n not in want
    ]
    problems += [_changed(have[n], want[n]) for n in want if n in have and have[n].type != want[n].type]
    added = tuple(n for n in want if n not in have)
    problems += [_not_addable(want[n]) for n in added if n in SYSTEM_COLUMNS or not want[n].nullable]
    if problems:
        raise SchemaMismatchError(
            f"table {table!r}: the Delta table at {uri} cannot follow the KV table's schema: " + "; ".join(problems),
            table=table,
        )
    return added


def _changed(delta: Field, kv: Field) -> str:
    return (
        f"column {kv.name!r} is {_type(kv)} in the KV table but {_type(delta)} in Delta; expected "
        f"{_type(delta)} (a column's type cannot change)"
    )


def _not_addable(kv: Field) -> str:
    if kv.name in SYSTEM_COLUMNS:
        return (
            f"system column {kv.name!r} is missing in Delta; expected every one of {list(SYSTEM_COLUMNS)} "
            "(not a table a tiering job wrote)"
        )
    return (
        f"new column {kv.name!r} is NOT NULL in the KV table; expected a nullable column "
        "(rows already in the lake have no value for it)"
    )


def _type(field: Field) -> str:
    """Delta's name of the type (``long``, ``decimal(10,2)``), nested types as Delta prints them."""
    return getattr(field.type, "type", str(field.type))
