"""kv-tiering: continuously copy primary-key tables from a KV store into Delta Lake."""

import logging

logging.getLogger(__name__).addHandler(logging.NullHandler())


def __getattr__(name: str) -> str:
    """``tiering.__version__``: the installed distribution's, pyproject.toml being its one source."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kv-tiering")
    except PackageNotFoundError:
        return "unknown (the kv-tiering distribution is not installed)"
