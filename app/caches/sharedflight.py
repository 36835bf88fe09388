"""Single-flight across processes: one upstream call per key however many processes miss it.

In front stays the in-process SingleFlightCache (hits and joins cost no round trip). Its
misses come here: a value still fresh in the shared layer_cache table is returned; else
one process per key, holding a PostgreSQL advisory lock on it, makes the call and stores
the value with its expiry, and the others, waiting on the lock, then read that row. A
failure is never stored: the lock is released with nothing written, and the next one
asks again. Ages are compared on the database clock. Opt-in (SHARED_LAYER_CACHE).
"""

import json
import logging
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from flask import Flask
from sqlalchemy import Engine, create_engine, text

from ..database import dbretry
from .singleflight import CacheStats, SingleFlightCache

V = TypeVar("V")

log = logging.getLogger(__name__)
_MISSING = object()

FRESH_SQL = text("SELECT value FROM layer_cache WHERE key = :k AND expires_at > now()")
# Transaction-scoped: released by the commit that makes the value visible, or by the
# rollback after a failure, whatever happens to this process's connection.
LOCK_SQL = text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))")
STORE_SQL = text(
    "INSERT INTO layer_cache (key, value, expires_at)"
    " VALUES (:k, CAST(:v AS jsonb), now() + make_interval(secs => :ttl))"
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at"
)
PURGE_SQL = text("DELETE FROM layer_cache WHERE expires_at < now()")


class SharedSingleFlightCache:
    """A SingleFlightCache whose misses are single-flight across processes too."""

    def __init__(self, app: Flask, local: SingleFlightCache, ttl: float, connections: int):
        self.app = app
        self.local = local
        self.ttl = ttl
        self.connections = connections  # one per layer fetch that can be in flight at once
        self._engine: Engine | None = None
        self._engine_lock = threading.Lock()

    def get(self, key: Hashable, factory: Callable[[], V], counter: CacheStats | None = None) -> V:
        """Return the value for key: this process's cache, else the table, else one call."""
        return self.local.get(key, lambda: self._shared(key, factory), counter)

    def _shared(self, key: Hashable, factory: Callable[[], V]) -> V:
        name = _name(key)
        value: Any = _MISSING
        try:
            with self.engine().connect() as conn:
                row = conn.execute(FRESH_SQL, {"k": name}).first()
                if row is None:
                    conn.execute(LOCK_SQL, {"k": name})
                    # Another process may have stored it while this one waited for the lock.
                    row = conn.execute(FRESH_SQL, {"k": name}).first()
                if row is not None:
                    conn.rollback()
                    return row.value
                value = factory()  # an exception rolls back: the lock goes, nothing stored
                ttl = min(self.ttl, self.local.ttl_of(value))  # a negative answer lives less
                conn.execute(STORE_SQL, {"k": name, "v": json.dumps(value), "ttl": ttl})
                conn.execute(PURGE_SQL)
                conn.commit()
                return value
        except Exception as exc:
            if not dbretry.is_transient(exc):
                raise
            # The table saves upstream calls; it is no reason to end a job over a database
            # blip, which the job's own writes ride out: fetch (or keep) the value here.
            log.warning("shared layer cache unreachable for %s: %s", name, dbretry.first_line(exc))
            return value if value is not _MISSING else factory()

    def engine(self) -> Engine:
        """Return this cache's own engine, made on first use in the process that fetches.

        Its own pool: a miss holds a connection for a whole upstream call, and a full
        worker's layer fetches would otherwise leave its heartbeat and its jobs' writes
        waiting for the app's pool past their lease.
        """
        with self._engine_lock:
            if self._engine is None:
                self._engine = create_engine(
                    self.app.config["SQLALCHEMY_DATABASE_URI"],
                    pool_size=self.connections,
                    max_overflow=0,
                    pool_recycle=1800,
                )
            return self._engine

    def stats(self) -> dict[str, int]:
        """Return this process's hits, joins and misses so far."""
        return self.local.stats()

    def clear(self) -> None:
        """Forget this process's cached values (the shared table keeps its own)."""
        self.local.clear()

    def __len__(self) -> int:
        return len(self.local)


def _name(key: Hashable) -> str:
    parts: Any = key if isinstance(key, tuple) else (key,)
    return "/".join(str(part) for part in parts)
