"""The reference KV store (docs/DESIGN.md §3): a real server process with real files, real GC and
persistent metadata — the embedded default upstream and the test double that is not a mock.

Modules: ``store`` (operations), ``catalog``/``lake_reports``/``leases`` (metadata), ``gc``
(garbage collection, table by table), ``errors`` (refusals, raised), ``files`` (Parquet layout),
``rows`` (request validation), ``app`` (HTTP), ``guards`` (bearer token, body limit),
``openapi`` (the served document), ``main`` (``serve`` and its flags; ``python -m
tiering.kvstore.server`` runs it), ``process`` (run it as a child process, for tests and the demo).
Modules are imported by name: the package imports none of them, so they may read one another
through it (``from tiering.kvstore.server import catalog``) without a loop back into ``main``.
"""
