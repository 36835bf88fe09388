"""The poll-triggered reaper and the ledger-driven finalizer, under real concurrency."""

import logging
import threading
import time
import uuid

import pytest

from app.operations import failpoints
from tests.conftest import Actions, chores_done, job_id_from, signed_in
from tests.test_jobs import attr, clients_sharing_session, poll_until, settled

pytestmark = pytest.mark.minimal_work


def dead_job(sql, user_id, status="running"):
    """Make user_id a charged job whose worker vanished an hour ago (running, or as given)."""
    job_id = sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, status, created_at,"
        " started_at, heartbeat_at) VALUES (%(u)s, 'x', 'en', %(s)s,"
        " now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 hour')"
        " RETURNING id",
        u=user_id,
        s=status,
    )[0][0]
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, job_id, reason)"
        " VALUES (%(u)s, 'consume', -1, %(j)s, 'test')",
        u=user_id,
        j=job_id,
    )
    return job_id


def stale_charged_job(actions, sql):
    """Make the signed-in user a running, charged job whose worker vanished an hour ago."""
    return dead_job(sql, sql("SELECT id FROM users")[0][0])


def pending_job(sql, user_id, age="0 seconds"):
    """Make user_id a job that no worker has taken yet, queued age ago."""
    return sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, created_at)"
        " VALUES (%(u)s, 'x', 'en', now() - CAST(%(a)s AS interval)) RETURNING id",
        u=user_id,
        a=age,
    )[0][0]


def test_fifty_concurrent_polls_reap_and_refund_once(app, client, actions, sql, caplog):
    actions.signup()
    job_id = stale_charged_job(actions, sql)
    tabs = clients_sharing_session(app, client, 50)
    barrier = threading.Barrier(50)
    seen = []

    def poll(tab):
        barrier.wait()
        html = tab.get(f"/assessments/{job_id}/status").get_data(as_text=True)
        seen.append((attr(html, "data-status"), attr(html, "data-billing")))

    caplog.set_level(logging.WARNING, logger="app.jobs")
    threads = [threading.Thread(target=poll, args=(tab,)) for tab in tabs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert len(seen) == 50
    assert len([r for r in caplog.records if r.getMessage().startswith("reaped stale job")]) == 1
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'refund'") == [(1,)]
    assert sql("SELECT point_balance FROM users") == [(3,)]
    # Every answer told the truth of its moment: never "refunded" before the refund.
    assert set(seen) <= {("failed", "pending"), ("failed", "refunded")}
    assert ("failed", "refunded") in seen
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_failed_ledger_lookup_routes_to_support_once(make_app, sql, caplog):
    # Support settles it: no sweep retries the lookup meanwhile (one that ran late, or a
    # request two seconds on, would settle it before support could).
    app, client, actions = signed_in(make_app, "victim@example.com", SWEEP_INTERVAL_SECONDS=3600)
    chores_done()
    job_id = stale_charged_job(actions, sql)
    failpoints.configure("consume_lookup=raise")
    caplog.set_level(logging.ERROR, logger="app.incidents")

    for _ in range(5):
        html = client.get(f"/assessments/{job_id}/status").get_data(as_text=True)
        assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "support")
        assert "please contact support about your points" in html
        assert "hx-trigger" in html  # later polls retry the lookup

    assert sql("SELECT severity, scope, code FROM incidents") == [
        ("critical", "payment", "REAP_CONSUME_LOOKUP_FAILED")
    ]
    assert len([r for r in caplog.records if "REAP_CONSUME_LOOKUP_FAILED" in r.getMessage()]) == 1
    assert sql("SELECT finalized_at FROM assessment_jobs") == [(None,)]

    # The database recovers; support refunds through the console.
    failpoints.configure("")
    staff = Actions(app.test_client())
    staff.signup("staff@example.com")
    sql("UPDATE users SET role = 'support' WHERE email = 'staff@example.com'")
    assert client.get("/support").status_code == 403
    console = staff.client.get("/support").get_data(as_text=True)
    assert "victim@example.com" in console and "REAP_CONSUME_LOOKUP_FAILED" in console
    incident_id = sql("SELECT id FROM incidents")[0][0]
    done = staff.client.post(
        f"/support/incidents/{incident_id}/refund",
        data={"reason": "ledger was unreachable", "csrf_token": staff.token("/support")},
    )
    assert done.status_code == 303

    html = client.get(f"/assessments/{job_id}/status").get_data(as_text=True)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "refunded")
    assert "hx-trigger" not in html
    assert sql("SELECT point_balance FROM users WHERE email = 'victim@example.com'") == [(3,)]
    resolved = sql("SELECT resolved_by IS NOT NULL, resolution FROM incidents")
    assert resolved == [(True, "refund: ledger was unreachable")]
    # A second click changes nothing.
    staff.client.post(
        f"/support/incidents/{incident_id}/refund",
        data={"reason": "again", "csrf_token": staff.token("/support")},
    )
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'refund'") == [(1,)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_support_no_refund_due_settles_as_charged(make_app, sql):
    # Support settles it: no sweep retries the lookup meanwhile (one that ran late, or a
    # request two seconds on, would settle it before support could).
    app, client, actions = signed_in(make_app, "user@example.com", SWEEP_INTERVAL_SECONDS=3600)
    chores_done()
    job_id = stale_charged_job(actions, sql)
    failpoints.configure("consume_lookup=raise")
    client.get(f"/assessments/{job_id}/status")  # reaps; the lookup fails: support
    failpoints.configure("")
    staff = Actions(app.test_client())
    staff.signup("staff@example.com")
    sql("UPDATE users SET role = 'support' WHERE email = 'staff@example.com'")
    incident_id = sql("SELECT id FROM incidents")[0][0]
    empty = staff.client.post(
        f"/support/incidents/{incident_id}/no-refund",
        data={"reason": "  ", "csrf_token": staff.token("/support")},
    )
    assert empty.status_code == 303
    assert sql("SELECT resolved_at FROM incidents") == [(None,)]  # a reason is required
    staff.client.post(
        f"/support/incidents/{incident_id}/no-refund",
        data={"reason": "report was delivered by email", "csrf_token": staff.token("/support")},
    )
    html = client.get(f"/assessments/{job_id}/status").get_data(as_text=True)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "charged")
    assert "report was delivered by email" in html and "hx-trigger" not in html
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_slow_job_with_fresh_heartbeat_is_never_reaped(make_app, sql):
    # The work runs for twice the lease; the heartbeat keeps it alive through every poll.
    app, client, actions = signed_in(
        make_app, ASSESSMENT_WORK_SECONDS=4, JOB_LEASE_SECONDS=1.5, JOB_HEARTBEAT_SECONDS=0.3
    )
    job_id = job_id_from(actions.submit())
    seen = set()
    html = poll_until(
        client, job_id, lambda h: seen.add(attr(h, "data-status")) or settled(h), timeout=30
    )
    assert attr(html, "data-status") == "succeeded"
    assert "failed" not in seen and "running" in seen


def test_job_past_the_hard_deadline_is_reaped_despite_heartbeat(make_app, sql):
    app, client, actions = signed_in(
        make_app, ASSESSMENT_WORK_SECONDS=6, JOB_MAX_RUNTIME_SECONDS=1, JOB_HEARTBEAT_SECONDS=0.2
    )
    job_id = job_id_from(actions.submit())
    html = poll_until(client, job_id, settled, timeout=20)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "refunded")
    assert app.extensions["runner"].wait(10)  # the thread was told to stop
    assert sql("SELECT status, result FROM assessment_jobs") == [("failed", None)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_history_page_reaps_the_users_orphans(client, actions, sql):
    actions.signup()
    stale_charged_job(actions, sql)
    page = client.get("/assessments").get_data(as_text=True)
    assert "Refunded" in page
    assert sql("SELECT status, finalized_at IS NOT NULL FROM assessment_jobs") == [("failed", True)]


def test_a_job_gone_quiet_says_checking_then_the_reaping_poll_settles_it(client, actions, sql):
    actions.signup()
    job_id = stale_charged_job(actions, sql)
    # Quiet for three heartbeats (0.3 s each), well inside the 2 s lease.
    sql(
        "UPDATE assessment_jobs SET created_at = now() - interval '5 seconds',"
        " started_at = now() - interval '5 seconds', heartbeat_at = now() - interval '1 second'"
    )
    html = client.get(f"/assessments/{job_id}/status").get_data(as_text=True)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("running", "pending")
    assert "lost contact" in html and "Checking your points…" in html
    assert '<span class="badge billing-pending">Checking</span>' in html
    assert "hx-trigger" in html
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'refund'") == [(0,)]

    sql("UPDATE assessment_jobs SET heartbeat_at = now() - interval '1 hour'")
    html = client.get(f"/assessments/{job_id}/status").get_data(as_text=True)
    # The poll that reaps also settles: the truth at once, not one poll later.
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "refunded")
    assert "hx-trigger" not in html


def test_shutdown_while_a_job_is_being_charged_never_charges_it(make_app, sql):
    # The job thread holds its row between "running" and the charge. The shutdown sets
    # the job's stop signal first, and the start reads it under that lock before it
    # charges: it rolls back, and the shutdown, which waited on the lock, fails a job that
    # was never charged. "No point was used" is then the truth, not a guess before a
    # charge lands.
    app, client, actions = signed_in(make_app, FAILPOINTS="after_running=sleep:1")
    job_id = job_id_from(actions.submit())
    time.sleep(0.3)  # the thread is inside its start transaction, sleeping

    app.extensions["runner"].shutdown()

    assert app.extensions["runner"].wait(10)
    html = client.get(f"/assessments/{job_id}/status").get_data(as_text=True)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "not_charged")
    assert "No point was used" in html
    assert sql("SELECT kind FROM point_ledger WHERE job_id = %(j)s", j=job_id) == []
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_a_reap_during_the_charge_waits_for_it_and_refunds(make_app, sql):
    app, client, actions = signed_in(
        make_app, FAILPOINTS="after_running=sleep:1.5", JOB_MAX_RUNTIME_SECONDS=1
    )
    job_id = job_id_from(actions.submit())
    html = poll_until(client, job_id, settled, timeout=20)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "refunded")
    assert app.extensions["runner"].wait(10)
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_finalize_never_touches_a_job_that_did_not_fail(app, actions, sql):
    from app.extensions import db
    from app.points import billing

    actions.signup()
    job_id = stale_charged_job(actions, sql)
    sql("UPDATE assessment_jobs SET heartbeat_at = now()")  # alive after all
    failpoints.configure("consume_lookup=raise")
    with app.app_context():
        user_id = sql("SELECT id FROM users")[0][0]
        assert billing.finalize(job_id, user_id) is False
        db.session.remove()
    assert sql("SELECT count(*) FROM incidents") == [(0,)]
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'refund'") == [(0,)]


def test_support_cannot_refund_a_job_that_succeeded(app, actions, sql):
    from app.extensions import db
    from app.points import billing

    actions.signup()
    job_id = stale_charged_job(actions, sql)
    sql("UPDATE assessment_jobs SET status = 'succeeded', finished_at = now()")
    user_id = sql("SELECT id FROM users")[0][0]
    incident_id = sql(
        "INSERT INTO incidents (scope, code, severity, job_id, user_id)"
        " VALUES ('payment', 'X', 'critical', %(j)s, %(u)s) RETURNING id",
        j=job_id,
        u=user_id,
    )[0][0]
    with app.app_context():
        assert billing.settle_by_support(incident_id, job_id, user_id, True, "why") is False
        db.session.remove()
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'refund'") == [(0,)]
    assert sql("SELECT resolved_at FROM incidents") == [(None,)]


def test_an_orphaned_job_does_not_block_a_new_submit(client, actions, sql):
    # The worker died right after inserting: the user never saw the job's page.
    actions.signup()
    orphan = pending_job(sql, sql("SELECT id FROM users")[0][0], "1 hour")
    response = actions.submit()
    assert response.status_code == 303
    assert sql(
        "SELECT status, finalized_at IS NOT NULL FROM assessment_jobs WHERE id = %(j)s", j=orphan
    ) == [("failed", True)]


def test_a_live_job_still_blocks_a_new_submit(make_app):
    app = make_app(ASSESSMENT_WORK_SECONDS=2)
    actions = Actions(app.test_client())
    actions.signup()
    job_id_from(actions.submit())
    assert actions.submit("Osaka").status_code == 409


def test_a_job_picked_up_past_its_lease_is_never_started_or_charged(app, actions, sql):
    # A queue worker that takes a job only after its lease ran out must not charge it:
    # the job fails there and then, and says that nothing was used.
    from app.extensions import db
    from app.jobs import transitions

    actions.signup()
    job_id = pending_job(sql, sql("SELECT id FROM users")[0][0], "1 hour")
    with app.app_context():
        assert transitions.start(job_id, uuid.uuid4()) is None
        db.session.rollback()
    assert sql("SELECT status, error_code FROM assessment_jobs") == [
        ("failed", transitions.TOO_LATE)
    ]
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'consume'") == [(0,)]


def test_a_finalize_whose_commit_answer_was_lost_raises_no_incident(app, actions, sql, monkeypatch):
    # The refund's commit lands, then the connection drops before its answer comes back:
    # the point is settled, so support must not be alerted about it.
    from sqlalchemy.exc import OperationalError
    from sqlalchemy.orm import Session

    from app.extensions import db
    from app.jobs import transitions
    from app.points import billing

    actions.signup()
    job_id = stale_charged_job(actions, sql)
    real_commit = Session.commit

    def commit_then_lose_the_answer(self):
        real_commit(self)
        monkeypatch.setattr(Session, "commit", real_commit)
        raise OperationalError("COMMIT", {}, ConnectionError("server closed the connection"))

    with app.app_context():
        assert transitions.reap(job_id)
        monkeypatch.setattr(Session, "commit", commit_then_lose_the_answer)
        assert billing.finalize(job_id, sql("SELECT id FROM users")[0][0]) is False
        db.session.rollback()
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'refund'") == [(1,)]
    assert sql("SELECT finalized_at IS NOT NULL FROM assessment_jobs") == [(True,)]
    assert sql("SELECT count(*) FROM incidents") == [(0,)]
