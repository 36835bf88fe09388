"""Settling a failed job when finalizers race, fail, lose answers or meet a crashed job.

Real threads on real connections; a failure is injected where the job path has a
failpoint, or by wrapping one call to hold its caller at the moment that matters.
"""

import json
import threading
import time

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.assessment import resolve_place
from app.extensions import db
from app.jobs import pipeline, procrastinate_executor, transitions
from app.operations import failpoints
from app.points import billing, incidents, ledger
from tests.conftest import job_id_from, signed_in, wait_for
from tests.test_reaper import pending_job, stale_charged_job
from tests.test_sweep import WatchedDemo, ledger_check, settled_and_refunded


def lock_waiters(sql):
    """Count the sessions of this database waiting for a row lock."""
    return sql(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )[0][0]


def test_a_failing_finalizer_never_leaves_an_incident_on_a_job_another_settled(
    make_app, sql, monkeypatch
):
    # Finalizer A cannot read the ledger; while it decides to route the job to support,
    # finalizer B (the sweep, another tab) settles the job. A's incident must not outlive
    # B's settlement: an open incident on a finalized job is resolved by nothing.
    app, client, actions = signed_in(make_app)
    job_id = stale_charged_job(actions, sql)
    sql("UPDATE assessment_jobs SET status = 'failed' WHERE id = %(j)s", j=job_id)
    user_id = sql("SELECT id FROM users")[0][0]
    deciding, b_done = threading.Event(), threading.Event()
    real_record = incidents.record

    def record_slowly(**incident):
        if threading.current_thread().name == "failing":
            deciding.set()
            b_done.wait(10)  # B runs now, or waits for A's lock
        return real_record(**incident)

    monkeypatch.setattr(incidents, "record", record_slowly)

    def finalize(failing=""):
        try:
            with app.app_context(), failpoints.on_this_thread(failing):
                billing.finalize(job_id, user_id)
                db.session.remove()
        finally:
            if threading.current_thread().name == "settling":
                b_done.set()

    a = threading.Thread(target=finalize, args=("consume_lookup=raise",), name="failing")
    a.start()
    assert deciding.wait(10)
    b = threading.Thread(target=finalize, name="settling")  # the ledger answers B
    b.start()
    wait_for(lambda: b_done.is_set() or lock_waiters(sql) > 0)
    b_done.set()
    a.join(10)
    b.join(10)

    assert settled_and_refunded(sql, job_id)
    assert sql("SELECT count(*) FROM incidents WHERE resolved_at IS NULL") == [(0,)]
    html = client.get(f"/assessments/{job_id}/status").get_data(as_text=True)
    assert 'data-billing="refunded"' in html
    assert ledger_check(app).exit_code == 0


def test_ledger_check_fails_on_an_open_incident_of_a_finalized_job(make_app, sql):
    app, _, actions = signed_in(make_app)
    job_id = stale_charged_job(actions, sql)
    user_id = sql("SELECT id FROM users")[0][0]
    with app.app_context():
        from app.jobs import transitions

        assert transitions.reap(job_id)
        assert billing.finalize(job_id, user_id)
    assert ledger_check(app).exit_code == 0
    sql(
        "INSERT INTO incidents (scope, code, severity, job_id, user_id, detail)"
        " VALUES ('payment', %(c)s, 'critical', %(j)s, %(u)s, 'stuck')",
        c=billing.LOOKUP_FAILED,
        j=job_id,
        u=user_id,
    )
    audit = ledger_check(app)
    assert audit.exit_code == 1
    assert f"job {job_id} is settled but has an open incident" in audit.output


def test_a_dead_job_holding_the_last_point_is_settled_by_the_next_submit(make_app, sql):
    # The balance is 0 because a crashed job holds the point: the INSERT's balance check
    # refuses before the one-in-flight index can, so the submit itself settles the orphan.
    app, client, actions = signed_in(make_app, SIGNUP_POINTS=1)
    dead = stale_charged_job(actions, sql)
    assert sql("SELECT point_balance FROM users") == [(0,)]

    response = actions.submit()

    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    assert settled_and_refunded(sql, dead)
    wait_for(lambda: sql("SELECT count(*) FROM assessment_jobs WHERE status = 'succeeded'")[0][0])
    assert ledger_check(app).exit_code == 0


def test_a_user_without_points_still_reads_402_after_the_settling(make_app, sql):
    app, client, actions = signed_in(make_app, SIGNUP_POINTS=1)
    dead = stale_charged_job(actions, sql)
    sql(
        "UPDATE assessment_jobs SET status = 'succeeded', finished_at = now() WHERE id = %(j)s",
        j=dead,
    )

    assert actions.submit().status_code == 402
    assert sql("SELECT count(*) FROM assessment_jobs") == [(1,)]


def queued_job(sql, waited_seconds):
    """A pending job of the signed-in user that a worker kept fresh in the queue for a while."""
    return sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, area, created_at, heartbeat_at)"
        " SELECT id, '札幌市', 'en', CAST(%(a)s AS jsonb),"
        " now() - make_interval(secs => %(w)s), now() FROM users RETURNING id",
        a=json.dumps(resolve_place("札幌市").to_dict()),
        w=waited_seconds,
    )[0][0]


def test_the_runtime_limit_counts_from_the_start_not_from_the_queue(make_app, sql):
    # Picked up a second before JOB_MAX_RUNTIME_SECONDS after it was queued, the job
    # still has its whole run time: it is not charged and then reaped mid-work. The
    # work (two seconds) outlasts the second left of the queue's count, and leaves the
    # run time eight to spare on a loaded machine.
    app, client, actions = signed_in(
        make_app, JOB_MAX_RUNTIME_SECONDS=10, ASSESSMENT_WORK_SECONDS=2, JOB_HEARTBEAT_SECONDS=0.2
    )
    job_id = queued_job(sql, waited_seconds=9)

    procrastinate_executor.run_task(app, str(job_id))

    assert sql("SELECT status FROM assessment_jobs") == [("succeeded",)]
    assert sql("SELECT point_balance FROM users") == [(2,)]
    assert ledger_check(app).exit_code == 0


def test_a_job_that_waited_past_the_deadline_fails_before_it_is_charged(make_app, sql):
    app, client, actions = signed_in(make_app, JOB_MAX_RUNTIME_SECONDS=3)
    job_id = queued_job(sql, waited_seconds=4)

    with pytest.raises(procrastinate_executor.JobNotSucceeded):  # the task fails, as its job
        procrastinate_executor.run_task(app, str(job_id))

    assert sql("SELECT status, error_code, finalized_at IS NOT NULL FROM assessment_jobs") == [
        ("failed", transitions.TOO_LATE, True)
    ]
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'consume'") == [(0,)]
    html = client.get(f"/assessments/{job_id}/status").get_data(as_text=True)
    assert 'data-billing="not_charged"' in html
    assert "No point was used." in html


def test_a_task_delivered_again_runs_no_paid_work_twice(make_app, sql):
    # A manual retry, a second defer or procrastinate's retry_stalled_jobs hands a worker
    # the task of a job that is running already: it must do nothing, not run the paid
    # work a second time on the one charge, nor take the first run's heartbeat away.
    app, _, actions = signed_in(make_app, MAX_CONCURRENT_JOBS=2)
    app.extensions["layer_provider"] = WatchedDemo(60)  # each call sleeps a minute
    job_id = job_id_from(actions.submit())
    wait_for(lambda: sql("SELECT count(*) FROM point_ledger WHERE kind = 'consume'") == [(1,)])
    runner = app.extensions["runner"]
    outcomes = []

    def deliver_again():
        try:
            procrastinate_executor.run_task(app, str(job_id))
        except procrastinate_executor.JobNotSucceeded as exc:
            outcomes.append(exc)  # the task is recorded failed: it ran nothing

    again = threading.Thread(target=deliver_again)

    again.start()
    again.join(5)  # a second run would sit in the provider's minute-long fetch

    assert not again.is_alive() and len(outcomes) == 1
    assert runner.running_ids() == [job_id]  # the first run still has its heartbeat
    assert sql("SELECT status FROM assessment_jobs") == [("running",)]
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'consume'") == [(1,)]
    sql("UPDATE assessment_jobs SET status = 'failed' WHERE id = %(j)s", j=job_id)
    wait_for(lambda: runner.running_ids() == [] and not again.is_alive(), timeout=5)


def lost(statement):
    """The error a statement raises when the connection drops before its answer."""
    return OperationalError(statement, {}, psycopg.OperationalError("server closed the connection"))


def test_a_failure_whose_commit_answer_was_lost_is_still_settled(make_app, sql, monkeypatch):
    # fail()'s commit lands and its answer is lost: the retry finds the job failed
    # already, and must settle it rather than leave it "checking" for a poll or the sweep.
    app, _, actions = signed_in(make_app)
    job_id = stale_charged_job(actions, sql)
    sql("UPDATE assessment_jobs SET heartbeat_at = now(), created_at = now(), started_at = now()")
    real_commit = Session.commit

    def commit_then_lose_the_answer(self):
        real_commit(self)
        monkeypatch.setattr(Session, "commit", real_commit)
        raise lost("COMMIT")

    with app.app_context():
        lease = pipeline.Lease(app.config["JOB_LEASE_SECONDS"], app.extensions["runner"])
        monkeypatch.setattr(Session, "commit", commit_then_lose_the_answer)
        pipeline._fail(job_id, "INTERNAL_ERROR", "The assessment failed.", lease)
        db.session.remove()

    assert settled_and_refunded(sql, job_id)
    assert sql("SELECT count(*) FROM incidents") == [(0,)]


def test_a_blip_in_the_finalizer_is_retried_not_sent_to_support(make_app, sql, monkeypatch):
    app, _, actions = signed_in(make_app)
    job_id = stale_charged_job(actions, sql)
    real_lookup = ledger.consume_for_job
    calls = []

    def lookup_once_lost(job):
        calls.append(job)
        if len(calls) == 1:
            raise lost("SELECT")
        return real_lookup(job)

    monkeypatch.setattr(ledger, "consume_for_job", lookup_once_lost)
    with app.app_context():
        assert transitions.fail_and_settle(job_id, transitions.INTERRUPTED, "stopped")
        db.session.remove()

    assert len(calls) == 2
    assert settled_and_refunded(sql, job_id)
    assert sql("SELECT count(*) FROM incidents") == [(0,)]


def test_a_ledger_that_stays_unreadable_goes_to_support_once_the_retries_end(
    make_app, sql, monkeypatch
):
    app, _, actions = signed_in(make_app)
    job_id = stale_charged_job(actions, sql)
    user_id = sql("SELECT id FROM users")[0][0]
    calls = []

    def lookup_always_lost(job):
        calls.append(job)
        raise lost("SELECT")

    monkeypatch.setattr(ledger, "consume_for_job", lookup_always_lost)
    with app.app_context():
        assert transitions.reap(job_id)
        assert not billing.finalize(job_id, user_id, until=time.monotonic() + 0.3)
        db.session.remove()

    assert len(calls) > 1
    assert sql("SELECT code, resolved_at FROM incidents") == [(billing.LOOKUP_FAILED, None)]
    assert sql("SELECT finalized_at FROM assessment_jobs") == [(None,)]


def test_a_cancel_in_a_transaction_older_than_the_start_ends_after_the_start(make_app, sql):
    # The cancel route runs inside the transaction the user loader opened: now() is that
    # transaction's start, which may precede the job's start committed meanwhile.
    app, _, actions = signed_in(make_app)
    user_id = sql("SELECT id FROM users")[0][0]
    job_id = pending_job(sql, user_id)
    with app.app_context():
        db.session.execute(text("SELECT 1 FROM users WHERE id = :u"), {"u": user_id})  # the loader
        time.sleep(0.01)  # the job starts a moment later, on its own connection
        sql("UPDATE assessment_jobs SET status = 'running', started_at = clock_timestamp()")
        assert transitions.cancel(job_id, user_id)
        db.session.remove()

    assert sql("SELECT finished_at >= started_at FROM assessment_jobs") == [(True,)]


def test_the_database_refuses_a_job_that_finished_before_it_started(make_app, sql):
    make_app()
    sql("INSERT INTO users (email, password_hash) VALUES ('c@example.com', 'x')")
    with pytest.raises(psycopg.errors.CheckViolation):
        sql(
            "INSERT INTO assessment_jobs (user_id, query_text, lang, status, started_at,"
            " finished_at) SELECT id, 'x', 'en', 'failed', now(), now() - interval '1 s'"
            " FROM users"
        )


@pytest.mark.parametrize(
    "fields",
    [
        {"query": "札幌市"},  # a place the user has a report of
        {"query": "Osaka"},  # one they have none of
        {"query": ""},  # a form error
        {"query": "札幌市", "lang": "xx"},
    ],
)
def test_a_revoked_session_is_sent_to_log_in_whatever_it_posts(make_app, sql, fields):
    app, client, actions = signed_in(make_app)
    job_id_from(actions.submit("札幌市"))
    # A whole report: seconds beside the rest of the suite.
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)], timeout=45)
    token = actions.token("/assessments/new")
    sql("UPDATE users SET session_generation = session_generation + 1")  # logged out elsewhere

    response = client.post("/assessments", data={"lang": "en", "csrf_token": token, **fields})

    assert response.status_code == 302
    assert "/login" in response.headers["Location"]
    assert sql("SELECT count(*) FROM assessment_jobs") == [(1,)]


def test_a_row_lock_held_elsewhere_does_not_stop_the_other_jobs_heartbeats(
    make_app, sql, database_url
):
    # One stalled transaction holds one job's row: the heartbeat of every other job of
    # the process still lands, and the locked one is not told to stop (it is not known
    # to have ended), so the reaper never throws live work away for it.
    app = make_app()
    jobs = []
    for n in range(3):
        sql("INSERT INTO users (email, password_hash) VALUES (%(e)s, 'x')", e=f"h{n}@example.com")
        jobs.append(
            sql(
                "INSERT INTO assessment_jobs (user_id, query_text, lang, status, started_at,"
                " heartbeat_at) SELECT id, 'x', 'en', 'running', now() - interval '1 s',"
                " now() - interval '1 s' FROM users WHERE email = %(e)s RETURNING id",
                e=f"h{n}@example.com",
            )[0][0]
        )
    stalled = psycopg.connect(database_url)
    stalled.execute("SELECT 1 FROM assessment_jobs WHERE id = %s FOR UPDATE", (jobs[0],))
    beats = []

    def beat():
        with app.app_context():
            beats.append(transitions.heartbeat(jobs))
            db.session.remove()

    try:
        thread = threading.Thread(target=beat)
        thread.start()
        thread.join(5)
        assert not thread.is_alive(), "the heartbeat waited for another session's row lock"
    finally:
        stalled.close()
    thread.join(10)
    assert beats == [set(jobs)]
    assert sql(
        "SELECT id FROM assessment_jobs WHERE heartbeat_at > now() - interval '0.5 s' ORDER BY id"
    ) == sorted((j,) for j in jobs[1:])
