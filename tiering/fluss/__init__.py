"""Apache Fluss as the KV store upstream: a real cluster on loopback (``cluster.py``) for the
tests and the demo; the clients' calls the job builds on are proven by tests/integration/fluss."""
