"""The leader loop: wait to lead the job, run its query for the term, then give leadership back.

Failure modes:
- the driver dies (SIGKILL): nothing here runs; the next term restarts from the checkpoint,
  reuses the lease id kept there, replays the planned round and trims it to what the lake
  lacks; the lease it held lapses after ``lease.duration_s`` if nobody takes over;
- a newer leader exists, or ZooKeeper is out of reach longer than the session timeout: the
  query stops and the job raises :class:`LeadershipLostError` without committing anything
  more, whatever wrapper Spark put around the refusal;
- a lake root or a checkpoint that cannot be used (a file where a directory should be, a log
  Spark did not write, a read-only or full disk): the lake root is refused before the job
  queues for leadership, the checkpoint when the term is won, before anything is written to it
  (:mod:`tiering.state.checkpoint_check`);
- a clean stop while a standby waits: it leaves the queue with an empty result; the query
  listener is removed once Spark delivered it the query's end, so no callback reaches a Python
  process that is exiting.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tiering.conf.model import TieringConfig
from tiering.context import TermContext
from tiering.delta_log.lake import Lake
from tiering.errors import CoordinationError, LeadershipLostError, NotLeaderError
from tiering.job.group import group_member
from tiering.job.query import JobResult, RoundListener, TieringJob
from tiering.job.spark_session import build_spark
from tiering.state.checkpoint_check import check_checkpoint
from tiering.state.checkpoint_store import checkpoint_of

if TYPE_CHECKING:
    from tiering.coord.leader import LeaderTerm
    from tiering.coord.rebalancer import GroupRebalancer

__all__ = ["lead", "run_as_leader"]

log = logging.getLogger(__name__)


def lead(
    config: TieringConfig, *, cancel: threading.Event | None = None, timeout_s: float | None = None, role: str = "run"
) -> LeaderTerm:
    """This process's term of ``config``'s job (see ``acquire_leadership``)."""
    from tiering.coord.leader import acquire_leadership

    zk = config.zookeeper
    auth = (zk.auth_user, zk.auth_password.get_secret_value()) if zk.auth_user and zk.auth_password else None
    owner = {"host": socket.gethostname(), "pid": os.getpid(), "role": role}
    return acquire_leadership(
        zk.hosts, config.job.name, zk.session_timeout_s, owner=owner, auth=auth, cancel=cancel, timeout_s=timeout_s
    )


def run_as_leader(
    config: TieringConfig,
    *,
    stop: threading.Event | None = None,
    listeners: Sequence[RoundListener] = (),
    ask_store_first: bool = False,
) -> JobResult:
    """Wait to lead the job, run its query for the term, then give leadership back.

    A standby waits inside ``acquire_leadership``; ``stop`` set while it waits ends the wait
    (an empty result: it never led). Losing the term stops the query and raises
    :class:`LeadershipLostError` (the caller exits non-zero: another driver now owns the job,
    or ZooKeeper was out of reach longer than the session timeout and a supervisor restarts it).
    ``listeners`` get every round's outcome after the job's own observer (the demo's view).
    A lake root that cannot be used is refused before anything else, a checkpoint that cannot be
    used (:mod:`tiering.state.checkpoint_check`) as soon as the term is won: nothing is written.
    ``ask_store_first`` (`tiering run`): then the store is asked for the tables the job selects
    (:func:`tiering.ops.preflight.before_run`: an availableNow run over none, or with the store out
    of reach, is refused before it leads).
    """
    from tiering import observability
    from tiering.ops import preflight

    lake = Lake.of(config.lake)
    lake.store.check()  # a bad lake root fails here, before the job leads or writes
    if ask_store_first:
        preflight.before_run(config)
    log.info("job=%s waiting for leadership at %s", config.job.name, config.zookeeper.hosts)
    try:
        term = lead(config, cancel=stop)
    except CoordinationError:
        if stop is not None and stop.is_set():
            log.info("job=%s stopped while waiting for leadership", config.job.name)
            return JobResult()
        raise
    log.info("job=%s leader with epoch=%d", config.job.name, term.epoch)
    group: GroupRebalancer | None = None
    context: TermContext | None = None
    try:
        checkpoint = checkpoint_of(config)
        check_checkpoint(checkpoint, config.job.name)  # before the term writes to it
        context = TermContext.begin(config, term.epoch, lake=lake, checkpoint=checkpoint)
        if config.job.group is not None:
            group = group_member(config, config.job.group, term, context.planning_store())
            context = context.model_copy(update={"group_file": str(group.path)})
            if config.trigger.available_now:  # its rounds end at the first with nothing owned: join first
                group.start()
        spark = build_spark(config)
        # the claim is the lease store's first call: over Fluss, loading fluss-client into Spark's
        # JVM then overlaps the query's set-up instead of coming before it
        lease = context.job_lease(context.planning_store(open_client=True))
        observer = observability.RoundObserver(context, lease, listeners=listeners)
        progress = observability.ProgressListener(context.job)
        spark.streams.addListener(progress)
        job = TieringJob(spark, context, lease=lease, check_term=term.check, on_round=observer)
        try:
            # A continuous member joins once its query has started, not before the driver's JVM
            # and query start: tables it took then would wait that long for a round.
            join = group.start if group is not None and not group.started else None
            result = job.run(stop, lost=term.lost, on_started=join)
        except Exception as e:
            # A query failing because the term ended (the term check raised, a fence refused a
            # write) is a leadership loss, whatever wrapper Spark put around it.
            reason = _lost_reason(term, e)
            if reason is None:
                raise
            raise LeadershipLostError(
                f"job {config.job.name!r}: leadership lost ({reason}); query stopped, lease left to the new leader",
                epoch=term.epoch,
            ) from e
        finally:
            progress.detach(spark)  # before the process may exit: Spark still delivers the query's end to it
        if term.lost.is_set():
            raise LeadershipLostError(
                f"job {config.job.name!r}: leadership lost ({term.lost_reason}); stopped without dropping the lease",
                epoch=term.epoch,
            )
        return result
    finally:
        if group is not None:
            group.stop()
        if context is not None:
            context.close()  # the stores of the term: its group member's, its lease's, its observer's
        term.resign()


def _lost_reason(term, error: Exception) -> str | None:
    """Why ``term`` is over, or None while it still holds (asks ZooKeeper if need be). A term
    whose term check refused it a write is over even when ZooKeeper, asked again, would confirm it
    (it could not be asked then, and the round that asked was aborted)."""
    if isinstance(error, NotLeaderError):
        return str(error)
    if term.lost.is_set():
        return term.lost_reason
    if term.refusal is not None:
        return term.refusal
    try:
        term.check()
    except LeadershipLostError as e:
        return str(e)
    return None
