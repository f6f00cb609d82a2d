"""kv-tiering: continuously copy primary-key tables from a KV store into Delta Lake."""

import logging

logging.getLogger(__name__).addHandler(logging.NullHandler())

__version__ = "0.1.0"
