"""The log-in and sign-up brakes' counts in PostgreSQL, where every process sees them.

Flask-Limiter counts in a `limits` storage named by a URI. Memory storage counts per
process, so N web instances, or WEB_CONCURRENCY=N, gave a guesser N times the attempts.
This storage registers the scheme `postgresql+brake://` and keeps the counts in the
database the app already has (migration 09_login_brakes): no new server to run. It is the
default when RATELIMIT_STORAGE_URI is unset (app/__init__.py); a URI that is set wins.

Times come from the database clock, so every process agrees on every window. Each call
is one statement on a connection of the storage's own small pool, in autocommit: a brake
never joins, waits on or rolls back with the request's own transaction.
What it costs a log-in against memory storage: docs/brakes.md.
"""

import hashlib
import os
import time

from limits.storage import MovingWindowSupport, Storage
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import SQLAlchemyError

SCHEME = "postgresql+brake"
# Rows past their window are dropped as their key is next counted, and all of them at
# most this often per process, so keys never seen again do not pile up.
PURGE_SECONDS = 60


def uri_for(database_uri: str) -> str:
    """Return the brake storage URI for a database URL (postgresql:// or +psycopg)."""
    return SCHEME + "://" + database_uri.partition("://")[2]


MAX_KEY_CHARS = 200


def stored_key(key: str) -> str:
    """Return a key PostgreSQL can store and index: no NUL, valid UTF-8, not too long.

    Keys hold what a client typed (the email of a log-in), checked by nothing yet.
    """
    safe = key.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
    if len(safe) <= MAX_KEY_CHARS:
        return safe
    return safe[: MAX_KEY_CHARS - 65] + "#" + hashlib.sha256(safe.encode()).hexdigest()


_engines: dict[str, Engine] = {}


def _engine_for(url: str) -> Engine:
    # One small pool per database and process, however many apps (tests build many).
    if url not in _engines:
        _engines[url] = create_engine(
            url, isolation_level="AUTOCOMMIT", pool_size=2, max_overflow=8, pool_recycle=1800
        )
    return _engines[url]


def _forget_parents_connections() -> None:
    # A forked child (gunicorn's master built the app) never uses its parent's sockets.
    for engine in _engines.values():
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_forget_parents_connections)


class PostgresBrakeStorage(Storage, MovingWindowSupport):
    """A `limits` storage on PostgreSQL: moving windows in brake_hits, fixed in brake_counters."""

    STORAGE_SCHEME = [SCHEME]

    def __init__(self, uri: str, wrap_exceptions: bool = False, **options) -> None:
        super().__init__(uri, wrap_exceptions=wrap_exceptions, **options)
        self._engine = _engine_for("postgresql+psycopg://" + uri.partition("://")[2])
        self._purged = time.monotonic()

    @property
    def base_exceptions(self) -> type[Exception]:
        return SQLAlchemyError

    def _run(self, statement: str, **params):
        with self._engine.connect() as conn:
            result = conn.execute(text(statement), params)
            return result.first() if result.returns_rows else None

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """Count `amount` attempts in the key's moving window, if they fit under `limit`."""
        if amount > limit:
            return False
        self._purge_now_and_then()
        row = self._run(
            "SELECT brake_acquire(:k, :lim, :expiry, :amount)",
            k=stored_key(key),
            lim=limit,
            expiry=float(expiry),
            amount=amount,
        )
        return bool(row[0])

    def release_entry(self, key: str, expiry: int, amount: int = 1) -> None:
        """Uncount the key's `amount` latest attempts: taken before the work, not to count."""
        self._run(
            "DELETE FROM brake_hits WHERE ctid IN (SELECT ctid FROM brake_hits"
            " WHERE key = :k AND at > clock_timestamp() - make_interval(secs => :e)"
            " ORDER BY at DESC LIMIT :n)",
            k=stored_key(key),
            e=float(expiry),
            n=amount,
        )

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """Return the oldest counted attempt's time in the window and how many there are."""
        start, count = self._run(
            "SELECT extract(epoch FROM coalesce(min(at), clock_timestamp()))::float8, count(*)"
            " FROM brake_hits"
            " WHERE key = :k AND at > clock_timestamp() - make_interval(secs => :e)",
            k=stored_key(key),
            e=float(expiry),
        )
        return start, count

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        """Add to the key's fixed window, starting a new window once the last one ended."""
        (count,) = self._run(
            "INSERT INTO brake_counters AS c (key, count, expires_at)"
            " VALUES (:k, :n, clock_timestamp() + make_interval(secs => :e))"
            " ON CONFLICT (key) DO UPDATE SET"
            "  count = CASE WHEN c.expires_at <= clock_timestamp() THEN excluded.count"
            "          ELSE c.count + excluded.count END,"
            "  expires_at = CASE WHEN c.expires_at <= clock_timestamp() THEN excluded.expires_at"
            "               ELSE c.expires_at END"
            " RETURNING count",
            k=stored_key(key),
            n=amount,
            e=float(expiry),
        )
        return count

    def decr(self, key: str, amount: int = 1) -> int:
        """Take back from the key's current fixed window (never below zero)."""
        row = self._run(
            "UPDATE brake_counters SET count = greatest(count - :n, 0)"
            " WHERE key = :k AND expires_at > clock_timestamp() RETURNING count",
            k=stored_key(key),
            n=amount,
        )
        return row[0] if row else 0

    def get(self, key: str) -> int:
        """Return the count of the key's current fixed window."""
        row = self._run(
            "SELECT count FROM brake_counters WHERE key = :k AND expires_at > clock_timestamp()",
            k=stored_key(key),
        )
        return row[0] if row else 0

    def get_expiry(self, key: str) -> float:
        """Return when the key's fixed window ends (now, if there is none)."""
        (at,) = self._run(
            "SELECT extract(epoch FROM coalesce(max(expires_at), clock_timestamp()))::float8"
            " FROM brake_counters WHERE key = :k AND expires_at > clock_timestamp()",
            k=stored_key(key),
        )
        return at

    def check(self) -> bool:
        """Tell whether the database answers."""
        try:
            return self._run("SELECT true")[0]
        except SQLAlchemyError:
            return False

    def reset(self) -> int | None:
        """Forget every count."""
        (dropped,) = self._run(
            "WITH hits AS (DELETE FROM brake_hits RETURNING 1),"
            " counters AS (DELETE FROM brake_counters RETURNING 1)"
            " SELECT (SELECT count(*) FROM hits) + (SELECT count(*) FROM counters)"
        )
        return dropped

    def clear(self, key: str) -> None:
        """Forget the key's counts."""
        self._run(
            "WITH hits AS (DELETE FROM brake_hits WHERE key = :k RETURNING 1)"
            " DELETE FROM brake_counters WHERE key = :k",
            k=stored_key(key),
        )

    def _purge_now_and_then(self) -> None:
        if time.monotonic() - self._purged < PURGE_SECONDS:
            return
        self._purged = time.monotonic()
        self._run("DELETE FROM brake_hits WHERE expires_at <= clock_timestamp()")
        self._run("DELETE FROM brake_counters WHERE expires_at <= clock_timestamp()")
