"""The brakes' counts in PostgreSQL (app/database/brakes.py): one window for every process."""

import threading

import pytest
from limits import parse
from limits.storage import storage_from_string
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

from tests.conftest import truncate


@pytest.fixture
def storage(database_url):
    truncate(database_url)
    from app.database import brakes

    return storage_from_string(brakes.uri_for(database_url))


def test_is_the_default_and_an_explicit_uri_wins(make_app):
    from app.database.brakes import PostgresBrakeStorage
    from app.extensions import limiter

    make_app()
    assert isinstance(limiter.storage, PostgresBrakeStorage)
    make_app(RATELIMIT_STORAGE_URI="memory://")
    assert not isinstance(limiter.storage, PostgresBrakeStorage)


def test_racing_takers_never_get_more_than_the_limit(storage, sql):
    # Real threads on their own connections, released together, for the last entries.
    barrier = threading.Barrier(16)
    taken = []

    def take():
        barrier.wait(10)
        taken.append(storage.acquire_entry("race", 5, 900))

    threads = [threading.Thread(target=take) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(taken) == [False] * 11 + [True] * 5
    assert sql("SELECT count(*) FROM brake_hits WHERE key = 'race'") == [(5,)]


def test_the_window_moves_on_the_database_clock(storage, sql):
    limiter = MovingWindowRateLimiter(storage)
    item = parse("2 per 15 minutes")
    assert limiter.hit(item, "mover") and limiter.hit(item, "mover")
    assert not limiter.hit(item, "mover") and not limiter.test(item, "mover")
    start, count = storage.get_moving_window("LIMITER/mover/2/15/minute", 2, 900)
    assert count == 2
    # The oldest attempt passes out of the window (aged in the table, not by sleeping).
    sql(
        "UPDATE brake_hits SET at = at - interval '16 minutes'"
        " WHERE ctid = (SELECT min(ctid) FROM brake_hits)"
    )
    assert limiter.test(item, "mover") and limiter.hit(item, "mover")
    assert not limiter.hit(item, "mover")
    assert sql("SELECT count(*) FROM brake_hits") == [(2,)]  # the aged one is gone
    storage.clear("LIMITER/mover/2/15/minute")
    assert limiter.test(item, "mover")


def test_keys_as_clients_type_them_are_stored(storage):
    for key in ("nul\x00byte", "x" * 10_000, "\ud800 lone surrogate", "普通"):
        assert storage.acquire_entry(key, 1, 60)
        assert not storage.acquire_entry(key, 1, 60)
        assert storage.get_moving_window(key, 1, 60)[1] == 1


def test_the_fixed_window_strategy_works_too(storage, sql):
    limiter = FixedWindowRateLimiter(storage)
    item = parse("2 per minute")
    assert limiter.hit(item, "fixed") and limiter.hit(item, "fixed")
    assert not limiter.hit(item, "fixed")
    reset, remaining = limiter.get_window_stats(item, "fixed")
    assert remaining == 0 and reset > 0
    sql("UPDATE brake_counters SET expires_at = now() - interval '1 second'")
    assert limiter.hit(item, "fixed")  # a new window
    assert storage.reset() >= 1 and limiter.test(item, "fixed")


def test_a_log_in_while_the_database_is_down_is_503_then_braked_again(
    make_app, db_proxy, database_url
):
    # The brake's counts are the database's: in an outage a log-in answers 503, never 500.
    from sqlalchemy.engine import make_url

    from app.config import sqlalchemy_url
    from tests.conftest import Actions

    through = make_url(database_url).set(host="127.0.0.1", port=db_proxy.port, query={})
    app = make_app(
        SQLALCHEMY_DATABASE_URI=sqlalchemy_url(through.render_as_string(hide_password=False)),
        LOGIN_RATE_LIMIT="1 per 15 minutes",
    )
    guesser = Actions(app.test_client())
    token = guesser.token("/login")
    db_proxy.down()
    try:
        answer = guesser.client.post(
            "/login", data={"email": "x@example.com", "password": "guess", "csrf_token": token}
        )
        assert answer.status_code == 503 and "Retry-After" in answer.headers
    finally:
        db_proxy.up()
    assert guesser.login("x@example.com", "guess").status_code == 400
    assert guesser.login("x@example.com", "guess").status_code == 429


def test_an_attempt_taken_can_be_given_back(storage, sql):
    # A log-in is counted before its password check; one that succeeds is uncounted.
    assert storage.acquire_entry("back", 2, 900) and storage.acquire_entry("back", 2, 900)
    assert not storage.acquire_entry("back", 2, 900)
    storage.release_entry("back", 900)
    assert storage.acquire_entry("back", 2, 900)
    storage.release_entry("back", 900, amount=5)  # never more than there are
    assert sql("SELECT count(*) FROM brake_hits WHERE key = 'back'") == [(0,)]
    limiter = FixedWindowRateLimiter(storage)
    item = parse("1 per minute")
    assert limiter.hit(item, "fixed-back")
    storage.decr(item.key_for("fixed-back"))
    assert limiter.hit(item, "fixed-back") and not limiter.test(item, "fixed-back")
    storage.decr(item.key_for("fixed-back"), 5)
    assert storage.get(item.key_for("fixed-back")) == 0
