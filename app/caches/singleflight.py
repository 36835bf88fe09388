"""A process-wide value cache whose concurrent misses for one key share one call.

Several hazard layers ask for the same upstream tile or municipality at the same moment.
With "check the cache, else fetch, then store" every one of those concurrent misses would
call the upstream API. Here the first caller for a key (the leader) runs the factory and
later callers join its in-flight call and get the same value, or the same exception.

The in-flight entry is removed in ``finally`` whatever happens, BaseException included, so a
failure is never cached and nobody waits on a call that will not finish. Values live in a
``cachetools.TLRUCache``: each for ``ttl`` seconds, or less where ``ttl_of(value)`` says so
(a "no such tile" answer is kept a day at most, a tile a week). Everything here is per
process: several processes each call once.
"""

import logging
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from typing import Any, TypeVar

from cachetools import TLRUCache

log = logging.getLogger(__name__)

V = TypeVar("V")


class CacheStats:
    """Thread-safe counts of cache hits, joins of in-flight calls, and misses."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.hits = 0
        self.joins = 0
        self.misses = 0

    def add(self, outcome: str) -> None:
        """Count one lookup whose outcome is "hits", "joins" or "misses"."""
        with self._lock:
            setattr(self, outcome, getattr(self, outcome) + 1)

    def as_dict(self) -> dict[str, int]:
        """Return a snapshot of the counts."""
        with self._lock:
            return {"hits": self.hits, "joins": self.joins, "misses": self.misses}


class SingleFlightCache:
    """A TTL cache in which concurrent misses for one key make one factory call."""

    def __init__(
        self,
        maxsize: int = 1024,
        ttl: float = 300.0,
        *,
        timer: Callable[[], float] = time.monotonic,
        ttl_of: Callable[[Any], float] | None = None,
    ) -> None:
        if maxsize < 1 or ttl <= 0:
            raise ValueError("SingleFlightCache needs maxsize >= 1 and ttl > 0")
        self._lock = threading.Lock()
        self.ttl = ttl
        self.ttl_of = ttl_of or (lambda value: ttl)

        def expires(key: Hashable, value: Any, now: float) -> float:
            return now + min(ttl, self.ttl_of(value))

        self._values: TLRUCache[Hashable, Any] = TLRUCache(
            maxsize=maxsize, ttu=expires, timer=timer
        )
        self._in_flight: dict[Hashable, Future[Any]] = {}
        self._stats = CacheStats()

    def get(
        self,
        key: Hashable,
        factory: Callable[[], V],
        counter: CacheStats | None = None,
    ) -> V:
        """Return the cached value for key, or join or make the one call that computes it.

        ``counter``, if given, also counts this lookup, so one job can report its own hits,
        joins and misses while the cache is shared by the whole process.
        """
        with self._lock:
            try:
                value = self._values[key]
            except KeyError:
                pass
            else:
                self._count("hits", counter)
                return value
            call = self._in_flight.get(key)
            leader = call is None
            if call is None:
                call = self._in_flight[key] = Future()
        if not leader:
            self._count("joins", counter)
            log.debug("cache join %r", key)
            return call.result()

        failure: BaseException | None = None
        try:
            self._count("misses", counter)
            log.debug("cache miss %r", key)
            value = factory()
            with self._lock:
                self._values[key] = value
        except BaseException as exc:  # KeyboardInterrupt too: followers must never hang
            failure = exc
            raise
        finally:
            with self._lock:
                del self._in_flight[key]
            # Settled only after the entry is gone: a failure is never handed to a later caller.
            if failure is None:
                call.set_result(value)
            else:
                call.set_exception(failure)
        return value

    def stats(self) -> dict[str, int]:
        """Return the process-wide hits, joins and misses so far."""
        return self._stats.as_dict()

    def clear(self) -> None:
        """Forget every cached value (calls in flight finish and store theirs)."""
        with self._lock:
            self._values.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def _count(self, outcome: str, counter: CacheStats | None) -> None:
        self._stats.add(outcome)
        if counter is not None:
            counter.add(outcome)
