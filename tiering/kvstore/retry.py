"""Named retry policies for calls to the KV store.

Failure mode: a store restart (seconds) must not fail a tiering round, yet a fenced epoch or
a bad request must fail at once — retrying those only delays the inevitable and, for a
fence, lets a zombie keep acting. So the policies retry :class:`StoreUnavailableError` only
(connection refused/reset, timeouts, 5xx), with exponential backoff and jitter (many
executors reconnecting at once must not stampede the restarted store), up to a deadline, and
then re-raise the last error itself, not a ``RetryError``. A call's first retry is logged as a
warning, the later ones at DEBUG: a store down for minutes is one line per retried call, not one
per attempt.

Policies are templates: callers run ``policy.copy()`` so concurrent calls never share retry
state. Tests make waits zero with :func:`instant` (or ``monkeypatch`` a policy with it).
"""

from __future__ import annotations

import logging

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
    wait_none,
)

from tiering.errors import StoreUnavailableError, one_line

log = logging.getLogger(__name__)
log.addHandler(logging.NullHandler())


def _log_retry(state: RetryCallState) -> None:
    """The first retry of a call as a warning naming the error (its message names the call), the
    later ones at DEBUG."""
    error = state.outcome.exception() if state.outcome is not None else None
    level = logging.WARNING if state.attempt_number == 1 else logging.DEBUG
    log.log(level, "KV store call retried until it answers or its retry deadline passes: %s", one_line(error or ""))


STORE_RETRY = Retrying(
    retry=retry_if_exception_type(StoreUnavailableError),
    wait=wait_exponential_jitter(multiplier=0.1, max=5.0, jitter=0.5),
    stop=stop_after_delay(30),
    before_sleep=_log_retry,
    reraise=True,
)
"""Every KV store call: ~30 s of retries, covering a store restart."""

NO_RETRY = Retrying(stop=stop_after_attempt(1), reraise=True)
"""For callers that own their retries (health probes)."""


def instant(policy: Retrying, attempts: int = 3) -> Retrying:
    """The same policy with zero waits and at most ``attempts`` tries (for tests)."""
    return policy.copy(wait=wait_none(), stop=stop_after_attempt(attempts))
