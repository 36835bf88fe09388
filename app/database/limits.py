"""Limits on every database connection: a statement's and a lock wait's time per role, keepalives.

Without them one stalled transaction holding a job's row made every writer behind it
wait for ever, and a connection whose peer vanished (a dropped network path, a server
failed over) waited the operating system's two hours before it failed. Each code path
that is not a web request names its role where its thread or chore begins (the job
threads, the heartbeat, the sweep, the commands, the migrations); a connection taken
from the pool gets its role's limits, with one SET only when they differ from the ones
it has, so a poll on a connection that served polls pays nothing. An exceeded limit is
a transient error (dbretry): the job path retries it within the lease, a page answers 503.
"""

import contextlib
import contextvars
from collections.abc import Iterator

import psycopg
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.pool import Pool

# TCP keepalives and a connect timeout, for every pool (SQLAlchemy's and the queue's):
# a dead peer is noticed in about 25 s instead of hours.
KEEPALIVES = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}

# Per role: (statement_timeout, lock_timeout) in milliseconds; 0 is no limit.
LIMITS: dict[str, tuple[int, int]] = {
    "web": (10_000, 5_000),  # pages and polls: someone is waiting for the answer
    "job": (15_000, 5_000),  # a job's transitions, retried within its lease
    "heartbeat": (5_000, 1_000),  # the next beat comes in seconds; locked rows are skipped
    "sweep": (30_000, 5_000),  # batches of the dead jobs of every user
    "console": (60_000, 10_000),  # the flask commands (ledger-check scans every job)
    "migrate": (0, 0),  # a migration waits for the lock of another process's migration
}
QUEUE_ROLE = "console"  # procrastinate's own pool: fetching, finishing, its worker rows

_role: contextvars.ContextVar[str] = contextvars.ContextVar("database_role", default="web")


def connect_args() -> dict[str, int]:
    """Return the connection arguments every pool of the app passes to libpq."""
    return dict(KEEPALIVES)


def queue_options() -> str:
    """Return libpq's options string that gives the queue's pool its limits."""
    statement, lock = LIMITS[QUEUE_ROLE]
    return f"-c statement_timeout={statement} -c lock_timeout={lock}"


def set_role(name: str) -> None:
    """Give the rest of this thread (or context) the limits of a role."""
    if name not in LIMITS:
        raise ValueError(f"unknown database role {name!r}")
    _role.set(name)


@contextlib.contextmanager
def role(name: str) -> Iterator[None]:
    """Give the connections taken inside the block the limits of a role."""
    if name not in LIMITS:
        raise ValueError(f"unknown database role {name!r}")
    token = _role.set(name)
    try:
        yield
    finally:
        _role.reset(token)


@event.listens_for(Pool, "checkout")
def _limit(dbapi_connection, connection_record, connection_proxy) -> None:
    wanted = LIMITS[_role.get()]
    if connection_record.info.get("limits") == wanted:  # the usual case: no round trip
        return
    statement, lock = wanted
    try:
        with dbapi_connection.cursor() as cur:
            cur.execute(
                "SELECT set_config('statement_timeout', %s, false),"
                " set_config('lock_timeout', %s, false)",
                (f"{statement}ms", f"{lock}ms"),
            )
        if not dbapi_connection.autocommit:
            dbapi_connection.commit()  # a SET in a transaction rolled back would be undone
    except psycopg.Error as exc:
        # A connection that died in the pool: the pool replaces it and tries again.
        raise sa_exc.DisconnectionError(str(exc)) from exc
    connection_record.info["limits"] = wanted
