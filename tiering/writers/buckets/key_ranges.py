"""Which lake files of a bucket a round rewrites, and which changes land in each: a rewrite by
file costs what the round changed, not the bucket's size. Ranges may overlap (a byte-copied
snapshot file is not sorted): that is only slower, never wrong, since every file whose range
covers a changed key is rewritten; a file without a range could hold any key, so then the whole
bucket is one group."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import methodcaller

import pyarrow as pa
import pyarrow.compute as pc

from tiering.delta_log.lake import LakeFile
from tiering.kvstore.contract import DELETE, OP_COLUMN

__all__ = ["RewriteGroup", "rewrite_groups"]

_DELETE = pa.scalar(DELETE, pa.string())
_as_py = methodcaller("as_py")


@dataclass(frozen=True)
class RewriteGroup:
    """Lake files rewritten together, and the changes that land in them: the keys in their
    range, and new keys placed with them. Groups do not overlap: one key, one group."""

    files: tuple[LakeFile, ...]
    changes: pa.Table


def rewrite_groups(files: Sequence[LakeFile], changes: pa.Table, key: str) -> list[RewriteGroup]:
    """The files of a bucket a round must rewrite for ``changes`` (newest per key, deletes
    included; ``key`` the first key column), in groups that share no key.

    A file is rewritten when its range covers a changed key (every such file: ranges may
    overlap). An upsert of a key no range covers joins the rewrite of the nearest file below or
    above it, so it is written exactly once and ranges stay apart; a delete of such a key
    changes nothing. Overlapping rewritten files form one group (their rows are sorted
    together). A file without a range could hold any key: then every file is one group.

    The changes are sorted by ``key`` once, so every range, gap and group is a slice of them,
    found by binary search: the work in Python grows with the files, not with the changes.
    """
    if not changes.num_rows or not files:
        return []
    if not all(f.ranged for f in files) or not pa.types.is_integer(changes.schema.field(key).type):
        return [RewriteGroup(tuple(files), changes)]
    ordered = changes.take(pc.sort_indices(changes, [(key, "ascending")]))
    keys = ordered[key].combine_chunks()
    low, high = zip(*(_span(f) for f in files), strict=True)

    def between(low: int, high: int) -> tuple[int, int]:
        return _below(keys, low), _above(keys, high)

    chosen = {i for i in range(len(files)) if _nonempty(between(low[i], high[i]))}
    homeless: dict[int, list[tuple[int, int]]] = {}  # file -> slices of new keys placed with it
    for (start, end), home in _gaps(low, high, keys):
        if start < end and pc.any(pc.not_equal(ordered[OP_COLUMN].slice(start, end - start), _DELETE)).as_py():
            chosen.add(home)
            homeless.setdefault(home, []).append((start, end))
    groups: list[list[int]] = []
    for i in sorted(chosen, key=lambda i: low[i]):  # merge overlapping ranges, by low end
        if groups and low[i] <= max(high[j] for j in groups[-1]):
            groups[-1].append(i)
        else:
            groups.append([i])
    out = []
    for members in groups:
        # the members' ranges are contiguous: every key between their ends is covered by one
        inside = between(low[members[0]], max(high[j] for j in members))
        slices = [inside, *(s for j in members for s in homeless.get(j, ()))]
        parts = [ordered.slice(a, b - a) for a, b in slices if a < b]
        out.append(RewriteGroup(tuple(files[j] for j in members), pa.concat_tables(parts)))
    return out


def _span(file: LakeFile) -> tuple[int, int]:
    """``file``'s key range, for a file already known to be ranged."""
    if file.low is None or file.high is None:
        raise ValueError(f"{file.path} has no key range")
    return file.low, file.high


def _gaps(low: Sequence[int], high: Sequence[int], keys: pa.Array) -> Iterator[tuple[tuple[int, int], int]]:
    """The slices of sorted ``keys`` no file range covers (file ``i`` covers ``low[i]`` to
    ``high[i]``), each with the file its new keys join:
    below the lowest range, the file starting lowest; above the highest, the one ending highest;
    between two, the file ending closest below or starting closest above (below on a tie)."""
    spans: list[list[int]] = []  # [low, high, file starting lowest, file ending highest]
    for i in sorted(range(len(low)), key=lambda i: low[i]):
        if spans and low[i] <= spans[-1][1]:
            if high[i] > spans[-1][1]:
                spans[-1][1], spans[-1][3] = high[i], i
        else:
            spans.append([low[i], high[i], i, i])
    yield (0, _below(keys, spans[0][0])), spans[0][2]
    for below, above in zip(spans, spans[1:], strict=False):
        middle = (below[1] + above[0]) // 2
        yield (_above(keys, below[1]), _above(keys, middle)), below[3]
        yield (_above(keys, middle), _below(keys, above[0])), above[2]
    yield (_above(keys, spans[-1][1]), len(keys)), spans[-1][3]


def _below(keys: pa.Array, value: int) -> int:
    """Where ``value`` goes in sorted ``keys``, before equal keys (one ``as_py`` per probe)."""
    return bisect_left(keys, value, key=_as_py)


def _above(keys: pa.Array, value: int) -> int:
    """Where ``value`` goes in sorted ``keys``, after equal keys."""
    return bisect_right(keys, value, key=_as_py)


def _nonempty(bounds: tuple[int, int]) -> bool:
    return bounds[0] < bounds[1]
