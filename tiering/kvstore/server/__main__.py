"""``python -m tiering.kvstore.server``: the reference store on its own, with every serve() flag.

Why not only ``tiering kv-store serve``: a store option must be usable (by StoreProcess, by the
tests) from the moment serve() has it, not from when the ``tiering`` command learns its flag.
Exit codes as the ``tiering`` command's: 0 stopped, 2 bad flags, 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import sys

from tiering.errors import ConfigError, UsageError
from tiering.kvstore.server.main import add_serve_arguments, serve_from_args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tiering.kvstore.server", description=__doc__.splitlines()[0])
    add_serve_arguments(parser)
    parser.add_argument("--log-level", default="INFO", help="Python log level (default INFO)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        serve_from_args(args)
    except (ConfigError, UsageError) as e:
        print(f"kv-store: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
