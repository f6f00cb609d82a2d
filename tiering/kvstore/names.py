"""Which table and column names the KV store accepts (docs/DESIGN.md §3) — the rule, in one place.

Failure mode: a name is data that ends up where code expects structure. A table name becomes a
directory of the lake (``<lake.root>/<table>``) and part of the store's own file layout; a name
like ``../x`` or ``a/b`` would address a file outside the table's directory, ``.`` or ``..``
the directory itself or its parent, a NUL byte truncates a path in C, and a segment over 255
bytes fails on every common filesystem. A column named like a system column (``__offset``)
would be overwritten by, or overwrite, the store's and the lake's bookkeeping.

The rule:

- table names are refused when empty, longer than 255 bytes (UTF-8), exactly ``.`` or ``..``,
  containing ``/``, ``\\``, a NUL or another control character, or starting/ending with
  whitespace. Everything else — quotes, backticks, spaces inside, dots inside, unicode, SQL
  keywords — is accepted and must be handled as data (parameterized SQL, quoted identifiers).
- column names are refused when empty, longer than 255 bytes, containing a control character,
  or starting with ``__`` (reserved for system columns: the store's ``__offset``, ``__op``,
  ``__timestamp`` and the lake's ``__bucket``); everything else is accepted. Two columns of a
  table may not differ only by case: Spark and Delta resolve column names case-insensitively.

Each refusal is a ``ValueError`` whose message names the offending name and the reason, so a
400 says what to change.
"""

from __future__ import annotations

__all__ = ["MAX_NAME_BYTES", "RESERVED_PREFIX", "check_column_name", "check_table_name", "duplicate_names"]

#: A single path segment on ext4, xfs, APFS, NTFS (bytes of the UTF-8 encoding).
MAX_NAME_BYTES = 255
#: Column names starting with this are system columns (store and lake).
RESERVED_PREFIX = "__"


def _control_character(name: str) -> str | None:
    return next((c for c in name if ord(c) < 0x20 or ord(c) == 0x7F), None)


def _common_problem(name: str) -> str | None:
    if not name:
        return "must not be empty"
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        return f"is {size} bytes long in UTF-8; at most {MAX_NAME_BYTES} are allowed"
    bad = _control_character(name)
    if bad is not None:
        return f"contains the control character {bad!r}"
    return None


def check_table_name(name: str) -> str:
    """``name`` if it is safe as one path segment, else ValueError naming it and why."""
    problem = _common_problem(name)
    if problem is None and name in (".", ".."):
        problem = "is a relative path component"
    if problem is None:
        separator = next((c for c in name if c in "/\\"), None)
        if separator is not None:
            problem = f"contains the path separator {separator!r}"
    if problem is None and name != name.strip():
        problem = "starts or ends with whitespace"
    if problem is not None:
        raise ValueError(f"table name {name[:80]!r} {problem}")
    return name


def check_column_name(name: str) -> str:
    """``name`` if it is a user column name, else ValueError naming it and why."""
    problem = _common_problem(name)
    if problem is None and name.startswith(RESERVED_PREFIX):
        problem = f"is reserved: names starting with {RESERVED_PREFIX!r} are system columns"
    if problem is not None:
        raise ValueError(f"column name {name[:80]!r} {problem}")
    return name


def duplicate_names(names: list[str]) -> list[str]:
    """The names that repeat another one of ``names`` when case is ignored (as Spark does)."""
    seen: set[str] = set()
    repeated = []
    for name in names:
        folded = name.casefold()
        if folded in seen:
            repeated.append(name)
        seen.add(folded)
    return repeated
