"""The `tiering` command (DESIGN §8). Each subcommand is a thin shell over a library function.

Exit codes: 0 success, 1 runtime failure, 2 bad usage or configuration, 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from tiering.errors import ConfigError, TieringError


def _zk(args: argparse.Namespace) -> int:
    from tiering.coord.embedded import run_foreground

    run_foreground(port=args.port, data_dir=Path(args.data_dir))
    return 0


def _kv_store_serve(args: argparse.Namespace) -> int:
    from tiering.kvstore.server import serve

    serve(
        data_dir=Path(args.data_dir),
        port=args.port,
        host=args.host,
        snapshot_interval_s=args.snapshot_interval,
        num_retained=args.num_retained,
        gc_interval_s=args.gc_interval,
        token=args.token or None,
    )
    return 0


def _load(args: argparse.Namespace, **overrides: object):
    from tiering.conf.loader import load_config

    return load_config(args.conf, os.environ, {k: v for k, v in overrides.items() if v is not None})


def _run(args: argparse.Namespace) -> int:
    from tiering.job import run_as_leader

    config = _load(args, **{"trigger.available_now": True if args.available_now else None})
    result = run_as_leader(config)
    if not result.ok:
        for table, error in sorted(result.failed_tables.items()):
            print(f"tiering: table {table!r} was not tiered: {error}", file=sys.stderr)
        return 1
    print(f"tiering: job {config.job.name!r} done after {result.rounds} rounds")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tiering", description=__doc__.splitlines()[0])
    parser.add_argument("--log-level", default="INFO", help="Python log level (default INFO)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="lead the job and run the tiering query (a standby waits)")
    run.add_argument("--conf", required=True, help="TOML config file (see conf/tiering.toml)")
    run.add_argument("--available-now", action="store_true",
                     help="tier what is available now, then stop (for scheduled runs)")
    run.set_defaults(func=_run)

    zk = commands.add_parser("zk", help="run an embedded ZooKeeper server in the foreground")
    zk.add_argument("--port", type=int, default=2181)
    zk.add_argument("--data-dir", required=True)
    zk.set_defaults(func=_zk)

    kv = commands.add_parser("kv-store", help="the reference KV store")
    kv_commands = kv.add_subparsers(dest="kv_command", required=True, metavar="COMMAND")
    serve = kv_commands.add_parser("serve", help="serve the reference KV store over HTTP")
    serve.add_argument("--data-dir", required=True)
    serve.add_argument("--port", type=int, default=8420)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--snapshot-interval", type=float, default=0.0,
                       help="seconds between periodic snapshots of every table (0 = only on demand)")
    serve.add_argument("--num-retained", type=int, default=2,
                       help="newest snapshots kept per bucket (kv.snapshot.num-retained)")
    serve.add_argument("--gc-interval", type=float, default=30.0, help="seconds between GC passes")
    serve.add_argument("--token", default=os.environ.get("TIERING_KVSTORE_TOKEN", ""),
                       help="require this bearer token (default: $TIERING_KVSTORE_TOKEN, none)")
    serve.set_defaults(func=_kv_store_serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    args = _parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"tiering: {e}", file=sys.stderr)
        return 2
    except TieringError as e:
        print(f"tiering: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
