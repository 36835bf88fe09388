"""Riding out a database outage: which errors pass by themselves, retrying them, logging them once.

A database that is restarted, failed over or briefly unreachable raises connection
errors for a few seconds and then answers again. The job thread retries such errors
for as long as its lease allows; pages answer 503; the log says once that the
database is gone and once that it is back, and shows a traceback once a minute at most.
"""

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.pool import Pool

from ..extensions import db

log = logging.getLogger(__name__)

T = TypeVar("T")

TRACEBACK_EVERY = 60.0  # seconds between two tracebacks of the same error
FIRST_PAUSE = 0.05  # seconds before the first retry; doubled up to MAX_PAUSE
MAX_PAUSE = 0.5  # short: a job commits soon after the database is back


def _driver_error(exc: BaseException) -> BaseException | None:
    return exc.orig if isinstance(exc, sa_exc.DBAPIError) else exc


def is_unreachable(exc: BaseException) -> bool:
    """Tell whether exc says the database cannot be reached (refused, lost, shut down)."""
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    orig = _driver_error(exc)
    if _rolled_back(orig) or _timed_out(orig):
        return False  # it answered: a serialization failure, a deadlock, a limit
    return isinstance(orig, psycopg.OperationalError | psycopg.InterfaceError)


def is_transient(exc: BaseException) -> bool:
    """Tell whether the same statement may succeed if tried again shortly."""
    orig = _driver_error(exc)
    return is_unreachable(exc) or _rolled_back(orig) or _timed_out(orig)


def _timed_out(orig: BaseException | None) -> bool:
    # A limit of database/limits.py: lock_timeout (55P03) or statement_timeout (57014).
    return isinstance(orig, psycopg.errors.LockNotAvailable | psycopg.errors.QueryCanceled)


def _rolled_back(orig: BaseException | None) -> bool:
    # SQLSTATE class 40, transaction rollback: serialization failure, deadlock.
    return isinstance(orig, psycopg.Error) and (orig.sqlstate or "").startswith("40")


def first_line(exc: BaseException) -> str:
    """Return an error's type and the first line of its message."""
    return f"{type(exc).__name__}: {str(exc).strip().partition(chr(10))[0]}"


class Outage:
    """This process's view of the database: reachable, or unreachable since when.

    Logs one line when the database goes away and one when it is back, whoever
    noticed (a poll, a page, a job, the heartbeat), instead of one per failed request.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.down_since: float | None = None

    def failed(self, exc: BaseException) -> None:
        """Note an error from the database; log it if it is the start of an outage."""
        if not is_unreachable(exc):
            log.warning("database error, may pass if tried again: %s", first_line(exc))
            return
        with self._lock:
            if self.down_since is not None:
                return
            self.down_since = time.monotonic()
        log.error("database unreachable: %s", first_line(exc))

    def reached(self) -> None:
        """Note that the database answered; log the end of an outage."""
        if self.down_since is None:  # the usual case: one attribute read
            return
        with self._lock:
            since, self.down_since = self.down_since, None
        if since is not None:
            log.warning("database reachable again after %.1f s", time.monotonic() - since)


outage = Outage()


@event.listens_for(Pool, "connect")
def _connected(dbapi_connection, connection_record) -> None:
    # After an outage every pooled connection is dead, so the first new connection is
    # the first sign that the database is back: no cost on the healthy path.
    outage.reached()


def retry(call: Callable[[], T], *, until: float, stop: threading.Event | None = None) -> T:
    """Return call(), retrying transient database errors with backoff until `until`.

    `until` is a time.monotonic() deadline (the job's lease); after it, or once `stop`
    is set, the last error is raised. Every statement retried this way must be safe to
    run twice: a commit whose answer was lost may have landed.
    """
    pause = FIRST_PAUSE
    while True:
        try:
            value = call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            rollback()
            outage.failed(exc)
            if time.monotonic() + pause > until or (stop is not None and stop.is_set()):
                raise
            if stop is not None:
                stop.wait(pause)
            else:
                time.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE)
        else:
            outage.reached()
            return value


def rollback() -> None:
    """Roll the session back after an error; a dead connection is simply dropped."""
    try:
        db.session.rollback()
    except Exception:  # noqa: BLE001 - the connection is gone; the pool replaces it
        db.session.close()


class OncePerMinute(logging.Filter):
    """Let a traceback through once per distinct error per minute; repeats keep one line."""

    def __init__(self, every: float = TRACEBACK_EVERY) -> None:
        super().__init__()
        self.every = every
        self._lock = threading.Lock()
        self._shown: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None or getattr(record, "_traceback_checked", False):
            return True
        record._traceback_checked = True  # several handlers may see the same record
        key = f"{type(exc).__module__}.{first_line(exc)}"
        now = time.monotonic()
        with self._lock:
            shown = self._shown.get(key)
            if shown is None or now - shown >= self.every:
                if len(self._shown) > 1000:  # messages may name ids: forget the old ones
                    self._shown = {k: t for k, t in self._shown.items() if now - t < self.every}
                self._shown[key] = now
                return True
        # The message as it would have read, then the note; args are spent.
        record.msg = f"{record.getMessage()} [{key}: traceback shown in the last minute]"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


def filter_tracebacks(logger: logging.Logger) -> None:
    """Put the once-a-minute traceback filter on a logger's handlers (once)."""
    for handler in logger.handlers:
        if not any(isinstance(f, OncePerMinute) for f in handler.filters):
            handler.addFilter(_tracebacks)


_tracebacks = OncePerMinute()
