"""The operator commands, Spark-free: what they read (:mod:`~tiering.ops.status`,
:mod:`~tiering.ops.group`), how they draw it (:mod:`~tiering.ops.status_view`), their writes
(:mod:`~tiering.ops.writes`), `tiering check`'s pre-flight (:mod:`~tiering.ops.preflight`) and the
row-by-row comparison of the lake with the store (:mod:`~tiering.ops.verify`).

Imports none of its modules: `tiering status` loads what it reads and draws, not the pre-flight's
probes.
"""
