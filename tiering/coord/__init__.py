"""ZooKeeper coordination (docs/DESIGN.md §7): election, epoch fencing, session watchdog, embedded ZK.

The job needs only ``acquire_leadership`` and the ``LeaderTerm`` it returns; ``read_status``
serves ``tiering status``. The modules below them are one primitive each.
"""

from tiering.coord.leader import LeaderTerm, acquire_leadership, read_status

__all__ = ["LeaderTerm", "acquire_leadership", "read_status"]
