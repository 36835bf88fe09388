"""A database outage under running jobs and polling pages, through a TCP proxy we control.

The real gunicorn talks to the test database through tests/dbproxy.py, which can
refuse and cut connections (the database was killed or restarted) or hold every byte
(it froze). Whatever happens, the books stay honest; a blip shorter than the lease
loses no work; pages get a polite 503 and keep polling; the log stays readable.
"""

import re
import time
import uuid

import pytest
import requests

from tests.conftest import off_the_main_thread
from tests.live import Server, User
from tests.test_crash import ledger_check

pytestmark = [pytest.mark.server, pytest.mark.minimal_work]

LEASE = 3.0
POLL = 0.5
ENV = {
    "JOB_LEASE_SECONDS": str(LEASE),
    "JOB_HEARTBEAT_SECONDS": "0.3",
    "POLL_INTERVAL_SECONDS": str(POLL),
    "MAX_CONCURRENT_JOBS": "8",
}

# The fixtures db_proxy and proxied_live are in conftest.py.


def running_jobs(server: Server, sql, n: int) -> list[tuple[User, str]]:
    """Sign n users up, submit a job each and wait until all of them are running."""
    jobs = []
    for i in range(n):
        user = User(server)
        user.signup(f"outage{i}@example.com")
        r = user.submit()
        assert r.status_code == 303, r.text[:300]
        jobs.append((user, r.headers["Location"].rsplit("/", 1)[1]))
    wait_for(
        lambda: sql("SELECT count(*) FROM assessment_jobs WHERE status = 'running'")[0][0] == n
    )
    return jobs


def settle(jobs, timeout: float) -> dict[str, tuple[str, str, float]]:
    """Poll every job page until each is settled; return status, billing and when."""
    settled: dict[str, tuple[str, str, float]] = {}
    deadline = time.monotonic() + timeout
    while len(settled) < len(jobs):
        assert time.monotonic() < deadline, f"unsettled: {len(jobs) - len(settled)}"
        for user, job_id in jobs:
            if job_id in settled:
                continue
            try:
                status, billing, done, _ = user.status(job_id)
            except (requests.RequestException, AttributeError):
                continue  # a 503 has no fragment
            if done:
                settled[job_id] = (status, billing, time.monotonic())
        time.sleep(POLL / 2)
    return settled


def books(sql) -> dict[str, tuple[int, int]]:
    """Return each job's (consumes, refunds) from the ledger."""
    rows = sql(
        "SELECT j.id::text, count(*) FILTER (WHERE l.kind = 'consume'),"
        " count(*) FILTER (WHERE l.kind = 'refund')"
        " FROM assessment_jobs j LEFT JOIN point_ledger l ON l.job_id = j.id GROUP BY j.id"
    )
    return {job_id: (consumes, refunds) for job_id, consumes, refunds in rows}


def wait_for(predicate, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def test_a_blip_shorter_than_the_lease_loses_no_work(proxied_live, db_proxy, sql, database_url):
    s = proxied_live(**ENV, ASSESSMENT_WORK_SECONDS="3")
    jobs = running_jobs(s, sql, 4)

    db_proxy.down()  # killed: open connections cut, new ones refused
    time.sleep(LEASE / 2)  # the outage itself: half a lease
    db_proxy.up()

    settled = settle(jobs, timeout=30)
    assert {(status, billing) for status, billing, _ in settled.values()} == {
        ("succeeded", "charged")
    }
    assert set(books(sql).values()) == {(1, 0)}  # charged exactly once, never refunded
    assert sql("SELECT DISTINCT point_balance FROM users") == [(2,)]
    assert ledger_check(database_url).returncode == 0
    log = s.log_path.read_text()
    assert log.count("database unreachable") == 1
    assert log.count("database reachable again") == 1
    # The app's logging, not Alembic's, runs the server: INFO lines with a timestamp.
    stamped = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO app\.jobs\.pipeline: job \S+ succeeded"
    assert len(re.findall(stamped, log, re.M)) == 4


def test_an_outage_longer_than_the_lease_refunds_once_and_pages_settle(
    proxied_live, db_proxy, sql, database_url
):
    s = proxied_live(**ENV, ASSESSMENT_WORK_SECONDS="60")
    jobs = running_jobs(s, sql, 4)

    db_proxy.down()
    # Pages keep polling through the outage: each poll gets the polite 503.
    user, job_id = jobs[0]
    answered = []
    deadline = time.monotonic() + LEASE + 1
    while time.monotonic() < deadline:
        r = user.http.get(
            f"{s.url}/assessments/{job_id}/status", headers={"HX-Request": "true"}, timeout=5
        )
        answered.append(r.status_code)
        assert r.status_code == 503, r.text[:300]
        assert r.headers["Retry-After"] == "1"
        assert "We can't reach our database" in r.text
        time.sleep(POLL)
    for path in ("/", f"/assessments/{job_id}", "/assessments", "/no-such-page"):
        r = user.http.get(s.url + path, timeout=5)
        assert r.status_code == 503 and "retries by itself" in r.text, (path, r.text[:300])
    back = time.monotonic()
    db_proxy.up()

    settled = settle(jobs, timeout=LEASE + 10)
    assert {(status, billing) for status, billing, _ in settled.values()} == {
        ("failed", "refunded")
    }
    # Every page settled within one poll of the database's return (the lease ran out
    # during the outage), plus a little for this test's own loop.
    assert max(at for _, _, at in settled.values()) - back < POLL + 1.5
    assert set(books(sql).values()) == {(1, 1)}  # charged once, refunded once
    assert sql("SELECT DISTINCT point_balance FROM users") == [(3,)]
    assert ledger_check(database_url).returncode == 0

    log = s.log_path.read_text()
    assert "Internal Server Error" not in log and " 500 " not in log
    assert log.count("database unreachable") == 1
    assert log.count("database reachable again") == 1
    # One traceback per distinct error per minute at most, not three per poll: a
    # record's own traceback follows its line, chained ones follow a blank line.
    tracebacks = re.findall(r"^\S.*\nTraceback \(most recent call last\)", log, re.M)
    assert len(tracebacks) <= 2, log[-3000:]
    assert len(log) < 30_000


def test_a_stalled_database_ends_each_job_once(proxied_live, db_proxy, sql, database_url):
    s = proxied_live(**ENV, ASSESSMENT_WORK_SECONDS="2")
    jobs = running_jobs(s, sql, 4)

    db_proxy.stall()  # frozen: connections open, nothing moves
    time.sleep(LEASE + 1)
    db_proxy.up()

    settled = settle(jobs, timeout=LEASE + 20)
    counts = books(sql)
    for job_id, (status, billing, _) in settled.items():
        # Whichever wrote first (the job's success or a reaper), there is one outcome.
        assert (status, billing, counts[job_id]) in {
            ("succeeded", "charged", (1, 0)),
            ("failed", "refunded", (1, 1)),
        }
    balances = sql(
        "SELECT u.point_balance, count(*) FILTER (WHERE j.status = 'succeeded')"
        " FROM users u JOIN assessment_jobs j ON j.user_id = u.id GROUP BY u.id"
    )
    assert all(balance == 3 - succeeded for balance, succeeded in balances)
    assert ledger_check(database_url).returncode == 0


# In-process: what a retry means for each transition, and the log's manners.


RUN = uuid.uuid4()  # the one run that starts and finishes the test's job


def running_job(app, sql):
    """Insert a pending job for a new user and start it (charged) in the app."""
    from app.jobs import transitions

    sql("INSERT INTO users (email, password_hash, point_balance) VALUES ('r@example.com', 'x', 0)")
    (user_id,) = sql("SELECT id FROM users")[0]
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, reason) VALUES (%(u)s, 'grant', 3, 't')",
        u=user_id,
    )
    sql("UPDATE users SET point_balance = 3")
    with app.app_context():
        job_id = transitions.create(user_id, "x", "en", None, 0)
        assert transitions.start(job_id, RUN) is not None
    return job_id


def test_a_start_or_success_retried_after_its_commit_landed_is_done_once(make_app, sql):
    from app.jobs import transitions

    app = make_app()
    job_id = running_job(app, sql)
    with app.app_context():
        # The first start committed but its answer was lost: the retry carries on.
        again = transitions.start(job_id, RUN)
        assert again is not None and again.lang == "en"
        assert transitions.succeed(job_id, {"ok": 1}, RUN, "Done.")
        assert transitions.succeed(job_id, {"ok": 1}, RUN, "Done.")  # the retry of a landed commit
        # Another run of the same job (its task delivered again) is not the first's retry.
        assert transitions.start(job_id, uuid.uuid4()) is None
        assert not transitions.succeed(job_id, {"ok": 2}, uuid.uuid4(), "Done.")
    assert sql("SELECT kind FROM point_ledger WHERE job_id IS NOT NULL") == [("consume",)]
    assert sql("SELECT status, point_balance FROM assessment_jobs, users") == [("succeeded", 2)]


def test_a_reaped_job_does_not_succeed_on_retry(make_app, sql):
    from app.jobs import transitions

    app = make_app()
    job_id = running_job(app, sql)
    sql("UPDATE assessment_jobs SET status = 'failed'")
    with app.app_context():
        assert transitions.start(job_id, RUN) is None
        assert not transitions.succeed(job_id, {"ok": 1}, RUN, "Done.")


def test_a_job_whose_lease_ran_out_is_not_revived(make_app, sql):
    from app.jobs import transitions

    app = make_app()
    job_id = running_job(app, sql)
    sql("UPDATE assessment_jobs SET heartbeat_at = now() - interval '1 minute'")
    with app.app_context():
        assert transitions.heartbeat([job_id]) == set()
        with pytest.raises(transitions.JobCancelled):
            transitions.report_progress(job_id, "late", 50)
    # Still stale for the reaper: its refund will stand.
    assert sql("SELECT heartbeat_at < now() - interval '30 s' FROM assessment_jobs") == [(True,)]


def test_errors_that_pass_are_retried_and_others_are_not(make_app):
    import psycopg
    from psycopg import errors
    from sqlalchemy import exc

    from app.database import dbretry

    refused = psycopg.OperationalError("connection refused")
    wrapped = exc.OperationalError("SELECT 1", {}, refused)
    assert dbretry.is_unreachable(refused) and dbretry.is_unreachable(wrapped)
    assert dbretry.is_unreachable(errors.AdminShutdown("terminating connection"))
    serialization = exc.OperationalError("UPDATE", {}, errors.SerializationFailure("x"))
    assert dbretry.is_transient(serialization) and not dbretry.is_unreachable(serialization)
    assert not dbretry.is_transient(exc.IntegrityError("INSERT", {}, errors.UniqueViolation()))
    assert not dbretry.is_transient(ValueError("x"))

    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise wrapped
        return "done"

    app = make_app()
    with app.app_context():
        assert dbretry.retry(flaky, until=time.monotonic() + 5) == "done"
        with pytest.raises(exc.OperationalError):
            dbretry.retry(lambda: (_ for _ in ()).throw(wrapped), until=time.monotonic() + 0.2)
        with pytest.raises(ValueError):
            dbretry.retry(lambda: int("x"), until=time.monotonic() + 5)
    assert len(calls) == 3


def test_a_traceback_is_logged_once_a_minute_per_distinct_error():
    import logging

    from app.database.dbretry import OncePerMinute

    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append((self.format(record), record.exc_info is not None))

    logger = logging.getLogger("tests.outage.once")
    logger.propagate = False
    handler = Keep()
    handler.addFilter(OncePerMinute())
    logger.addHandler(handler)
    for error in (ValueError("a"), ValueError("a"), ValueError("b"), ValueError("a")):
        try:
            raise error
        except ValueError:
            logger.exception("poll %s failed", 7)
    logger.removeHandler(handler)
    assert [with_traceback for _, with_traceback in records] == [True, False, True, False]
    assert records[1][0].startswith("poll 7 failed [builtins.ValueError: a: traceback shown")


def test_each_role_of_connection_has_its_time_limits(make_app):
    import asyncio
    import threading

    from sqlalchemy import text

    from app.database import limits
    from app.extensions import db
    from app.jobs import procrastinate_executor

    app = make_app()
    shown = "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')"

    def limits_here():
        with app.app_context():
            row = tuple(db.session.execute(text(shown)).one())
            db.session.remove()
            return row

    assert limits_here() == ("10s", "5s")  # a page or a poll
    with limits.role("sweep"):
        assert limits_here() == ("30s", "5s")
    with limits.role("migrate"):
        assert limits_here() == ("0", "0")
    assert limits_here() == ("10s", "5s")  # the same pooled connection, back to its role

    seen = []
    app.extensions["runner"].reserve()  # a job thread holds a slot, as a submit takes one
    app.extensions["runner"].start(uuid.uuid4(), lambda job, stop: seen.append(limits_here()))
    assert app.extensions["runner"].wait(10)
    beat = threading.Thread(
        target=lambda: (limits.set_role("heartbeat"), seen.append(limits_here()))
    )
    beat.start()
    beat.join(10)
    assert seen == [("15s", "5s"), ("5s", "1s")]

    # Every pool keeps its connections alive, the queue's too, which has limits of its own.
    with app.app_context():
        raw = db.engine.raw_connection()
        assert raw.driver_connection.info.get_parameters()["keepalives"] == "1"
        raw.close()
    queue = procrastinate_executor.queue_app(app)

    async def queue_connection():
        async with queue.open_async():
            async with queue.connector.pool.connection() as conn:
                cur = await conn.execute(shown)
                return conn.info.get_parameters()["keepalives"], await cur.fetchone()

    shown_by_queue = off_the_main_thread(lambda: asyncio.run(queue_connection()))
    assert shown_by_queue == ("1", ("1min", "10s"))


def test_a_connection_lost_after_the_answer_is_made_does_not_turn_it_into_a_500(
    make_app, db_proxy, database_url, sql
):
    """make chaos found it: the request's closing ROLLBACK failed and the started job's
    submit was answered 500, "nothing was charged"."""
    from tests.conftest import Actions, _sa

    app = make_app(SQLALCHEMY_DATABASE_URI=_sa(db_proxy.url(database_url)))
    cutting = []

    @app.after_request
    def cut_every_connection(response):  # the view is done; the request is not
        if cutting:
            db_proxy.down()
            db_proxy.up()
        return response

    client = app.test_client()
    actions = Actions(client)
    actions.signup()
    token = actions.token("/assessments/new")
    cutting.append(True)
    response = actions.submit(token=token)

    assert response.status_code == 303
    assert sql("SELECT count(*) FROM assessment_jobs") == [(1,)]
    cutting.clear()
    assert client.get("/account").status_code == 200  # the lost connection was let go
