"""The two epochs a write carries, as two types: a leadership term's and a group table's.

Failure mode it prevents: a table epoch passed where a job epoch is expected (or the reverse).
Both are ints, ordered only among their own kind (a job's term 12 says nothing about a table's
owner 3), so a write carrying the wrong one is refused where it should land, or, worse, lands
where it should be refused. As distinct types, mypy refuses the swap before anything runs; at
run time they are plain ints (the wire, the checkpoint and the lake keep numbers).
"""

from __future__ import annotations

from typing import NewType

__all__ = ["JobEpoch", "TableEpoch"]

#: A leadership term's epoch (``coord/epoch.py``), bumped once per term: every lease call, lake
#: report and the job's own lake commits carry it, and a store refuses one below the highest seen.
JobEpoch = NewType("JobEpoch", int)
#: A table's epoch in a tiering group (``coord/table_epochs.py``), bumped each time the table
#: changes hands: a member's claims, lake reports and the group's lake commits carry it.
TableEpoch = NewType("TableEpoch", int)
