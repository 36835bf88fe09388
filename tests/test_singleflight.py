"""The single-flight cache: one upstream call per key, however many ask at once."""

import threading
import time
from collections.abc import Callable

import pytest

from app.caches.singleflight import CacheStats, SingleFlightCache

TIMEOUT = 5.0  # generous: a bug makes a test fail after this, never hang


def wait_until(predicate: Callable[[], bool]) -> None:
    """Wait until predicate() is true, failing the test after TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.001)


def run_threads(n: int, target: Callable[[int], None]) -> list[threading.Thread]:
    """Start n threads that pass a barrier together and then call target(i)."""
    barrier = threading.Barrier(n)

    def body(i: int) -> None:
        barrier.wait(TIMEOUT)
        target(i)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for thread in threads:
        thread.start()
    return threads


def join_all(threads: list[threading.Thread]) -> None:
    """Join every thread, failing if one is still alive after TIMEOUT."""
    for thread in threads:
        thread.join(TIMEOUT)
        assert not thread.is_alive(), "a caller hung"


class BlockingFactory:
    """A factory that counts its calls and blocks until released."""

    def __init__(self, result: object = "value", error: BaseException | None = None) -> None:
        self.calls = 0
        self.release = threading.Event()
        self.result = result
        self.error = error

    def __call__(self) -> object:
        self.calls += 1
        assert self.release.wait(TIMEOUT)
        if self.error is not None:
            raise self.error
        return self.result


def test_a_hundred_concurrent_misses_make_one_call() -> None:
    cache = SingleFlightCache()
    factory = BlockingFactory(result={"tile": 1})
    results: list[object] = [None] * 100
    threads = run_threads(100, lambda i: results.__setitem__(i, cache.get("k", factory)))

    wait_until(lambda: cache.stats()["joins"] == 99)
    factory.release.set()
    join_all(threads)

    assert factory.calls == 1
    assert all(result is factory.result for result in results)
    assert cache.stats() == {"hits": 0, "joins": 99, "misses": 1}
    assert cache.get("k", factory) is factory.result
    assert cache.stats()["hits"] == 1


def test_a_failure_reaches_every_caller_and_is_not_cached() -> None:
    cache = SingleFlightCache()
    error = RuntimeError("upstream down")
    factory = BlockingFactory(error=error)
    caught: list[BaseException | None] = [None] * 10

    def call(i: int) -> None:
        try:
            cache.get("k", factory)
        except RuntimeError as exc:
            caught[i] = exc

    threads = run_threads(10, call)
    wait_until(lambda: cache.stats()["joins"] == 9)
    factory.release.set()
    join_all(threads)

    assert factory.calls == 1
    assert all(exc is error for exc in caught)
    assert cache.get("k", lambda: "fresh") == "fresh"
    assert len(cache) == 1


class Abort(BaseException):
    """Stands for KeyboardInterrupt or SystemExit raised inside a factory."""


@pytest.mark.parametrize("error", [Abort(), KeyboardInterrupt(), SystemExit(3)])
def test_a_base_exception_leaves_no_stuck_entry(error: BaseException) -> None:
    cache = SingleFlightCache()
    factory = BlockingFactory(error=error)
    caught: list[BaseException | None] = [None] * 5

    def call(i: int) -> None:
        try:
            cache.get("k", factory)
        except BaseException as exc:  # noqa: B036 - the test inspects what each caller got
            caught[i] = exc

    threads = run_threads(5, call)
    wait_until(lambda: cache.stats()["joins"] == 4)
    factory.release.set()
    join_all(threads)

    assert all(exc is error for exc in caught)
    try:
        after = cache.get("k", lambda: "after")
    except BaseException as exc:  # noqa: B036 - fail the test, not the test session
        pytest.fail(f"the interrupted call was left behind: {exc!r}")
    assert after == "after"


def test_a_value_expires_after_its_ttl() -> None:
    now = [0.0]
    cache = SingleFlightCache(ttl=10, timer=lambda: now[0])
    calls: list[int] = []

    def factory() -> int:
        calls.append(1)
        return len(calls)

    assert cache.get("k", factory) == 1
    now[0] = 9.9
    assert cache.get("k", factory) == 1
    now[0] = 10.1
    assert cache.get("k", factory) == 2
    assert cache.stats() == {"hits": 1, "joins": 0, "misses": 2}


def test_the_size_bound_evicts_the_least_recently_used() -> None:
    cache = SingleFlightCache(maxsize=2)
    calls: list[str] = []

    def factory_for(key: str) -> Callable[[], str]:
        return lambda: calls.append(key) or key

    for key in ("a", "b", "c"):
        cache.get(key, factory_for(key))
    assert len(cache) == 2
    cache.get("c", factory_for("c"))
    cache.get("a", factory_for("a"))
    assert calls == ["a", "b", "c", "a"]


def test_a_counter_sees_only_its_own_lookups() -> None:
    cache = SingleFlightCache()
    first, second = CacheStats(), CacheStats()

    cache.get("k", lambda: 1, counter=first)
    cache.get("k", lambda: 2, counter=second)
    cache.get("other", lambda: 3, counter=second)

    assert first.as_dict() == {"hits": 0, "joins": 0, "misses": 1}
    assert second.as_dict() == {"hits": 1, "joins": 0, "misses": 1}
    assert cache.stats() == {"hits": 1, "joins": 0, "misses": 2}


def test_joins_are_counted_for_the_caller_that_joined() -> None:
    cache = SingleFlightCache()
    factory = BlockingFactory()
    leader, follower = CacheStats(), CacheStats()
    threads = [
        threading.Thread(target=cache.get, args=("k", factory, leader), daemon=True),
    ]
    threads[0].start()
    wait_until(lambda: factory.calls == 1)
    threads.append(threading.Thread(target=cache.get, args=("k", factory, follower)))
    threads[1].start()
    wait_until(lambda: cache.stats()["joins"] == 1)
    factory.release.set()
    join_all(threads)

    assert leader.as_dict() == {"hits": 0, "joins": 0, "misses": 1}
    assert follower.as_dict() == {"hits": 0, "joins": 1, "misses": 0}


@pytest.mark.parametrize("kwargs", [{"maxsize": 0}, {"ttl": 0}])
def test_a_cache_that_could_hold_nothing_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SingleFlightCache(**kwargs)
