"""Single-flight across processes: one upstream call per key, failures never stored.

Each app below has its own engine and its own in-process cache, as separate processes
would; only the database is shared between them.
"""

import threading
import time

import pytest

from app.assessment.report.analysis import LAYERS
from app.caches.sharedflight import SharedSingleFlightCache
from app.extensions import db

SHARED = {"SHARED_LAYER_CACHE": "on"}


class Upstream:
    """A slow upstream that counts its calls and can fail."""

    def __init__(self, error: BaseException | None = None):
        self.calls = 0
        self.error = error
        self._lock = threading.Lock()

    def __call__(self):
        with self._lock:
            self.calls += 1
        time.sleep(0.3)  # long enough for every other caller to miss meanwhile
        if self.error is not None:
            raise self.error
        return {"depth": 1.5}


def caches(make_app, n: int = 4) -> list[SharedSingleFlightCache]:
    built = [make_app(**SHARED).extensions["layer_cache"].layers for _ in range(n)]
    assert all(isinstance(cache, SharedSingleFlightCache) for cache in built)
    return built


def ask_at_once(processes, per_process: int, key, factory) -> list[object]:
    answers: list[object] = []
    barrier = threading.Barrier(len(processes) * per_process)

    def ask(cache):
        barrier.wait(10)
        try:
            answers.append(cache.get(key, factory))
        except Exception as exc:  # noqa: BLE001 - the answer under test
            answers.append(exc)

    threads = [
        threading.Thread(target=ask, args=(cache,))
        for cache in processes
        for _ in range(per_process)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    return answers


def test_concurrent_misses_in_four_processes_make_one_call(make_app, sql):
    upstream = Upstream()

    answers = ask_at_once(caches(make_app), 25, ("flood", "35.1,139.1"), upstream)

    assert upstream.calls == 1
    assert answers == [{"depth": 1.5}] * 100
    assert sql("SELECT key FROM layer_cache") == [("flood/35.1,139.1",)]


def test_a_failure_is_never_stored(make_app, sql):
    processes = caches(make_app, 2)
    failing = Upstream(error=RuntimeError("upstream down"))

    answers = ask_at_once(processes, 1, ("flood", "k"), failing)

    assert all(isinstance(answer, RuntimeError) for answer in answers)
    assert sql("SELECT count(*) FROM layer_cache") == [(0,)]
    healthy = Upstream()
    assert processes[0].get(("flood", "k"), healthy) == {"depth": 1.5}
    assert healthy.calls == 1


def test_an_expired_value_is_asked_again(make_app, sql):
    first, second = caches(make_app, 2)
    upstream = Upstream()
    first.get(("flood", "k"), upstream)
    sql("UPDATE layer_cache SET expires_at = now() - interval '1 second'")

    second.get(("flood", "k"), upstream)

    assert upstream.calls == 2


@pytest.mark.parametrize(
    "settings, shared",
    [
        ({}, False),
        ({"JOB_EXECUTOR": "procrastinate"}, True),
        ({"JOB_EXECUTOR": "procrastinate", "SHARED_LAYER_CACHE": "off"}, False),
        ({"SHARED_LAYER_CACHE": "on"}, True),
    ],
)
def test_the_shared_cache_is_opt_in(make_app, settings, shared):
    cache = make_app(**settings).extensions["layer_cache"].layers
    assert isinstance(cache, SharedSingleFlightCache) == shared


def test_without_its_table_the_cache_still_answers_from_upstream(make_app, db_proxy):
    # The cache's own database connection goes through a proxy that is down: a job must
    # not end over the shared table (its own writes ride out the blip), so the value is
    # fetched here, once per miss, and a later miss in this process is a hit.
    cache = make_app(**SHARED).extensions["layer_cache"].layers
    cache.app.config["SQLALCHEMY_DATABASE_URI"] = (
        f"postgresql+psycopg://postgres@127.0.0.1:{db_proxy.port}/postgres"
    )
    db_proxy.down()
    upstream = Upstream()
    assert cache.get(("elevation", "x"), upstream) == {"depth": 1.5}
    assert cache.get(("elevation", "x"), upstream) == {"depth": 1.5}
    assert upstream.calls == 1


def test_the_cache_has_its_own_pool_sized_for_every_layer_fetch(make_app):
    app = make_app(**SHARED, MAX_CONCURRENT_JOBS=3)
    cache = app.extensions["layer_cache"].layers
    with app.app_context():
        assert cache.engine() is not db.engine
    assert cache.engine().pool.size() == 3 * len(LAYERS)
