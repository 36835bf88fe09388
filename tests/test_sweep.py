"""Nothing held, nothing forged: dead jobs of users who never return are swept and refunded,
a stopped job lets go at once, and settings that cannot work stop the server."""

import logging
import threading
import time

import pytest

from app import create_app
from app.assessment import fetchers, resolve_place, run_assessment
from app.assessment.errors import Stopped
from app.assessment.sources.providers import DemoProvider, HttpProvider
from app.caches.singleflight import SingleFlightCache
from app.extensions import db
from app.jobs import housekeeping, runner, sweep
from app.operations import failpoints
from app.points import billing
from tests.conftest import TEST_CONFIG, Actions, at_once, job_id_from, signed_in, wait_for
from tests.test_reaper import dead_job, stale_charged_job


def user_id_of(sql, email):
    return sql("SELECT id FROM users WHERE email = %(e)s", e=email)[0][0]


def settled_and_refunded(sql, job_id):
    return sql(
        "SELECT j.status, j.finalized_at IS NOT NULL,"
        " (SELECT count(*) FROM point_ledger r WHERE r.job_id = j.id AND r.kind = 'refund')"
        " FROM assessment_jobs j WHERE j.id = %(j)s",
        j=job_id,
    ) == [("failed", True, 1)]


def ledger_check(app):
    return app.test_cli_runner().invoke(args=["ledger-check"])


# -- 1. the sweep ------------------------------------------------------------------------


def test_another_users_request_refunds_a_job_whose_owner_never_returns(make_app, sql):
    app = make_app()
    Actions(app.test_client()).signup("gone@example.com")
    gone = user_id_of(sql, "gone@example.com")
    job_id = dead_job(sql, gone)
    sql("UPDATE housekeeping SET last_run_at = NULL")  # the sign-up's sweep came before
    app.extensions["housekeeping"] = housekeeping.throttles()
    assert ledger_check(app).exit_code == 1  # a point held by a dead job is a failure

    # Someone else comes by; the owner never polls again.
    assert app.test_client().get("/login").status_code == 200

    wait_for(lambda: settled_and_refunded(sql, job_id))
    assert sql("SELECT point_balance FROM users WHERE id = %(u)s", u=gone) == [(3,)]
    assert ledger_check(app).exit_code == 0


def test_a_process_that_finds_the_sweep_done_elsewhere_tries_again_when_it_is_due(make_app):
    app = make_app()
    with app.app_context():
        assert housekeeping.claim(housekeeping.SWEEP, 5) is None  # this process sweeps
        due_in = housekeeping.claim(housekeeping.SWEEP, 5)  # another one is too late
    assert 4 < due_in <= 5  # it waits for the row, not a whole interval of its own after
    gate = housekeeping.Throttle()
    assert gate.ready(600)
    gate.retry_in(0)
    assert gate.ready(600)


def test_flask_sweep_settles_every_users_dead_jobs_and_says_how_many(make_app, sql):
    app = make_app()
    for n in range(5):
        Actions(app.test_client()).signup(f"u{n}@example.com")
    users = [user_id_of(sql, f"u{n}@example.com") for n in range(5)]
    running = [dead_job(sql, u) for u in users[:3]]
    # Reaped by someone who died before the refund: failed, not finalized.
    failed = [dead_job(sql, u, status="failed") for u in users[3:]]
    for thread in threading.enumerate():
        if thread.name in ("housekeeping", "sweep"):
            thread.join(10)

    result = app.test_cli_runner().invoke(args=["sweep"])

    assert result.exit_code == 0
    assert result.output.strip() == "reaped 3, finalized 5"
    assert all(settled_and_refunded(sql, j) for j in running + failed)
    assert sql("SELECT DISTINCT point_balance FROM users") == [(3,)]
    assert app.test_cli_runner().invoke(args=["sweep"]).output.strip() == "reaped 0, finalized 0"


def test_the_sweep_pages_in_batches_and_passes_over_a_job_it_cannot_settle(make_app, sql, caplog):
    app = make_app()
    for n in range(5):
        Actions(app.test_client()).signup(f"b{n}@example.com")
    jobs = [dead_job(sql, user_id_of(sql, f"b{n}@example.com")) for n in range(5)]
    failpoints.configure("consume_lookup=raise")  # the ledger cannot be read

    with app.app_context():
        assert sweep.sweep(batch=2) == (5, 0)  # ends: no job is read again and again

    assert sql("SELECT count(*) FROM incidents WHERE resolved_at IS NULL") == [(5,)]
    failpoints.configure("")
    with app.app_context():
        assert sweep.sweep(batch=2) == (0, 5)
    assert all(settled_and_refunded(sql, j) for j in jobs)
    assert sql("SELECT count(*) FROM incidents WHERE resolved_at IS NULL") == [(0,)]


def test_concurrent_sweeps_refund_each_job_once(make_app, sql):
    app = make_app()
    for n in range(8):
        Actions(app.test_client()).signup(f"c{n}@example.com")
    jobs = [dead_job(sql, user_id_of(sql, f"c{n}@example.com")) for n in range(8)]

    totals = at_once(app, 6, lambda: sweep.sweep(batch=3))

    assert sum(r for r, _ in totals) == 8
    assert sum(f for _, f in totals) == 8
    assert all(settled_and_refunded(sql, j) for j in jobs)
    assert sql("SELECT DISTINCT point_balance FROM users") == [(3,)]


# -- 2. ledger-check ---------------------------------------------------------------------


def test_ledger_check_fails_on_jobs_past_their_lease_only(make_app, sql):
    app, _, actions = signed_in(make_app, "late@example.com")
    user_id = user_id_of(sql, "late@example.com")
    assert ledger_check(app).exit_code == 0
    job_id = dead_job(sql, user_id)
    assert ledger_check(app).exit_code == 1
    assert f"job {job_id}" in ledger_check(app).output

    # Failed but not finalized: fine for a moment, a failure once the lease has passed.
    sql(
        "UPDATE assessment_jobs SET status = 'failed', finished_at = now() WHERE id = %(j)s",
        j=job_id,
    )
    assert ledger_check(app).exit_code == 0
    sql(
        "UPDATE assessment_jobs SET finished_at = now() - interval '1 minute' WHERE id = %(j)s",
        j=job_id,
    )
    assert ledger_check(app).exit_code == 1
    # A running job with a fresh heartbeat, started within the deadline, is no failure.
    sql(
        "UPDATE assessment_jobs SET status = 'running', finished_at = NULL,"
        " created_at = now(), started_at = now(), heartbeat_at = now() WHERE id = %(j)s",
        j=job_id,
    )
    assert ledger_check(app).exit_code == 0


# -- 3. the stop signal reaches the fetch ------------------------------------------------


class WatchedDemo(DemoProvider):
    """The demo provider whose every fetch holds for hold_seconds unless the job stops,
    counting calls and any call made after the job's stop."""

    def __init__(self, hold_seconds):
        super().__init__(0)
        self.hold_seconds = hold_seconds
        self.calls = 0
        self.after_stop = 0
        self.lock = threading.Lock()

    def count(self, stop):
        with self.lock:
            self.calls += 1
            self.after_stop += bool(stop is not None and stop.is_set())

    def fetch(self, dataset, key, stop=None):
        self.count(stop)
        if (stop or threading.Event()).wait(self.hold_seconds):
            raise Stopped()
        return super().fetch(dataset, key, stop=stop)


def long_job(make_app, sql):
    # Each demo call sleeps a minute: only the stop signal can end the job in the test.
    app, _, actions = signed_in(make_app, MAX_CONCURRENT_JOBS=2)
    provider = WatchedDemo(60)
    app.extensions["layer_provider"] = provider
    job_id = job_id_from(actions.submit())
    wait_for(lambda: provider.calls > 0)
    return app, provider, job_id


def steady(read, quiet=0.5, timeout=10):
    """Wait until read() is above zero and has not changed for `quiet` seconds; return it."""
    deadline = time.monotonic() + timeout
    last, since = read(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = read()
        if now != last:
            last, since = now, time.monotonic()
        elif now and time.monotonic() - since >= quiet:
            return now
    raise AssertionError(f"never steady: {last}")


def no_layer_threads():
    # The job has left the process's fetch pool: nothing of it waits there or runs.
    counts = fetchers.pool().counts()
    return counts["jobs"] == 0 and counts["running"] == 0


def test_a_reaped_job_stops_inside_its_fetch_and_frees_its_slot(make_app, sql):
    app, provider, job_id = long_job(make_app, sql)
    jobs = app.extensions["runner"]
    assert jobs.running_ids() == [job_id]

    # Reaped from elsewhere (another worker's sweep): the next heartbeat stops it.
    sql("UPDATE assessment_jobs SET status = 'failed' WHERE id = %(j)s", j=job_id)

    wait_for(lambda: jobs.running_ids() == [], timeout=2)
    assert jobs._slots._value == jobs.max_jobs
    calls = provider.calls
    wait_for(no_layer_threads, timeout=2)
    assert provider.calls == calls and provider.after_stop == 0


def test_shutdown_stops_a_job_inside_its_fetch_and_frees_its_slot(make_app, sql):
    app, provider, job_id = long_job(make_app, sql)
    jobs = app.extensions["runner"]

    jobs.shutdown()

    wait_for(lambda: jobs.running_ids() == [], timeout=2)
    assert jobs._slots._value == jobs.max_jobs
    calls = provider.calls
    wait_for(no_layer_threads, timeout=2)
    assert provider.calls == calls and provider.after_stop == 0
    assert settled_and_refunded(sql, job_id)


def test_the_http_provider_makes_no_call_once_stopped(upstream):
    stop = threading.Event()
    stop.set()
    with pytest.raises(Stopped):
        HttpProvider(upstream.url, timeout=2).fetch("faults", "011002", stop)
    assert not upstream.hits


def test_a_job_that_joined_a_stopped_jobs_fetch_fetches_for_itself():
    area = resolve_place("札幌市")
    stops = {"first": threading.Event(), "second": threading.Event()}

    class FirstJobWaits:
        """Upstream answers the second job at once; the first job's calls hang till stopped."""

        name, is_demo = "gated", False

        def fetch(self, dataset, key, stop=None):
            if stop is stops["first"] and stop.wait(30):
                raise Stopped()
            return DemoProvider().fetch(dataset, key)

    cache, outcome = SingleFlightCache(), {}

    def job(name):
        try:
            outcome[name] = run_assessment(
                area,
                "en",
                provider=FirstJobWaits(),
                cache=cache,
                progress=lambda *_: None,
                stop=stops[name],
            )
        except Stopped as exc:
            outcome[name] = exc

    def lookups():
        return cache.stats()["misses"] + cache.stats()["joins"]

    threads = {name: threading.Thread(target=job, args=(name,)) for name in stops}
    threads["first"].start()
    hanging = steady(lookups)  # its share of the fetch pool hangs on its first calls
    assert hanging == fetchers.THREADS // 2  # a job alone: half the pool's threads
    threads["second"].start()
    wait_for(lambda: lookups() >= 2 * hanging)  # and the second job's same calls join them
    stops["first"].set()
    for thread in threads.values():
        thread.join(10)

    assert isinstance(outcome["first"], Stopped)
    assert outcome["second"]["area"]["code"] == area.code


# -- 4. a thread that cannot start -------------------------------------------------------


def test_a_job_whose_thread_cannot_start_keeps_no_slot_and_costs_nothing(
    make_app, sql, monkeypatch
):
    app, _, actions = signed_in(make_app, MAX_CONCURRENT_JOBS=1)
    real_start = threading.Thread.start

    def refuse(thread):
        if thread.name.startswith("job-"):
            raise RuntimeError("can't start new thread")
        return real_start(thread)

    monkeypatch.setattr(runner.threading.Thread, "start", refuse)
    refused = actions.submit()
    monkeypatch.undo()

    assert refused.status_code == 503
    assert "Nothing was charged" in refused.get_data(as_text=True)
    jobs = app.extensions["runner"]
    assert jobs.running_ids() == []
    assert jobs._slots._value == 1
    assert sql("SELECT status, finalized_at IS NOT NULL FROM assessment_jobs") == [("failed", True)]
    assert sql("SELECT kind FROM point_ledger") == [("grant",)]
    # The one slot is free and nothing is in flight: the next submit runs.
    job_id_from(actions.submit())


# -- 5. one lock order -------------------------------------------------------------------


def test_finalize_and_support_settle_a_job_once_without_deadlock(make_app, sql, caplog):
    app, _, actions = signed_in(make_app, "race@example.com")
    user_id = user_id_of(sql, "race@example.com")
    support_id = sql(
        "INSERT INTO users (email, password_hash, role) VALUES ('s@example.com', 'x', 'support')"
        " RETURNING id"
    )[0][0]
    caplog.set_level(logging.ERROR)
    errors = []

    for _ in range(40):
        job_id = dead_job(sql, user_id, status="failed")
        incident = sql(
            "INSERT INTO incidents (scope, code, severity, job_id, user_id, detail)"
            " VALUES ('payment', %(c)s, 'critical', %(j)s, %(u)s, 'test') RETURNING id",
            c=billing.LOOKUP_FAILED,
            j=job_id,
            u=user_id,
        )[0][0]
        barrier = threading.Barrier(2)
        outcomes = {}

        def finalize(job_id=job_id, outcomes=outcomes, barrier=barrier):
            with app.app_context():
                barrier.wait()
                outcomes["finalize"] = billing.finalize(job_id, user_id)
                db.session.remove()

        def settle(job_id=job_id, incident=incident, outcomes=outcomes, barrier=barrier):
            with app.app_context():
                barrier.wait()
                try:
                    outcomes["support"] = billing.settle_by_support(
                        incident, job_id, support_id, True, "checked by hand"
                    )
                except Exception as exc:  # noqa: BLE001 - the test reports it
                    errors.append(exc)
                    db.session.rollback()
                db.session.remove()

        threads = [threading.Thread(target=finalize), threading.Thread(target=settle)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(outcomes.values()) == [False, True]
        assert sql(
            "SELECT count(*) FROM point_ledger WHERE job_id = %(j)s AND kind = 'refund'", j=job_id
        ) == [(1,)]

    assert errors == []
    assert "Deadlock" not in caplog.text
    assert sql("SELECT DISTINCT point_balance FROM users WHERE id = %(u)s", u=user_id) == [(3,)]


def test_every_failed_finalize_is_logged_repeats_too(make_app, sql, caplog):
    app, _, actions = signed_in(make_app)
    job_id = stale_charged_job(actions, sql)
    sql("UPDATE assessment_jobs SET status = 'failed' WHERE id = %(j)s", j=job_id)
    user_id = sql("SELECT id FROM users")[0][0]
    failpoints.configure("consume_lookup=raise")
    caplog.set_level(logging.ERROR)
    with app.app_context():
        for _ in range(3):
            assert not billing.finalize(job_id, user_id)
    logged = [r for r in caplog.records if "could not finalize" in r.getMessage()]
    assert len(logged) == 3 and all(str(job_id) in r.getMessage() for r in logged)
    assert sql("SELECT count(*) FROM incidents") == [(1,)]


# -- 6. settings that cannot work --------------------------------------------------------


@pytest.mark.parametrize(
    "settings, named",
    [
        ({"JOB_HEARTBEAT_SECONDS": 2, "JOB_LEASE_SECONDS": 2}, "JOB_HEARTBEAT_SECONDS"),
        ({"JOB_HEARTBEAT_SECONDS": 1, "JOB_LEASE_SECONDS": 2}, "JOB_HEARTBEAT_SECONDS"),
        ({"JOB_LEASE_SECONDS": 0}, "JOB_LEASE_SECONDS"),
        ({"JOB_HEARTBEAT_SECONDS": -1}, "JOB_HEARTBEAT_SECONDS"),
        ({"JOB_MAX_RUNTIME_SECONDS": 0}, "JOB_MAX_RUNTIME_SECONDS"),
        ({"POLL_INTERVAL_SECONDS": 0}, "POLL_INTERVAL_SECONDS"),
        ({"HOUSEKEEPING_INTERVAL_SECONDS": 0}, "HOUSEKEEPING_INTERVAL_SECONDS"),
        ({"SWEEP_INTERVAL_SECONDS": -5}, "SWEEP_INTERVAL_SECONDS"),
        ({"MAX_CONCURRENT_JOBS": 0}, "MAX_CONCURRENT_JOBS"),
    ],
)
def test_create_app_refuses_settings_that_cannot_work(database_url, settings, named):
    with pytest.raises(ValueError, match=named):
        create_app(
            {**TEST_CONFIG, "SQLALCHEMY_DATABASE_URI": "postgresql+psycopg://x/y", **settings}
        )


def test_the_sweep_interval_defaults_to_the_lease(make_app):
    assert make_app(JOB_LEASE_SECONDS=7).config["SWEEP_INTERVAL_SECONDS"] == 7
    assert make_app(SWEEP_INTERVAL_SECONDS=3).config["SWEEP_INTERVAL_SECONDS"] == 3
