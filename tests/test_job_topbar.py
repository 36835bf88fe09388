"""The job page's top bar moves with the job's billing: every poll carries the balance."""

import re
import uuid

from app.extensions import db
from app.jobs import transitions
from tests.conftest import signed_in
from tests.test_jobs import attr, insert_job


def poll(client, job_id):
    """Poll the status fragment as htmx does; return (billing, top bar balance, the OOB count)."""
    html = client.get(f"/assessments/{job_id}/status", headers={"HX-Request": "true"}).get_data(
        as_text=True
    )
    oob = re.findall(r'<(?:span|a) id="nav-balance"[^>]*hx-swap-oob="true"', html)
    return attr(html, "data-billing"), int(attr(html, "data-balance")), len(oob)


def test_the_top_bar_follows_each_billing_change(make_app, sql):
    # A long lease: only the transitions below move the job, never a reaper.
    app, client, _ = signed_in(make_app, JOB_LEASE_SECONDS=600)
    user_id = sql("SELECT id FROM users")[0][0]
    job_id = insert_job(sql, user_id, "pending")
    assert poll(client, job_id) == ("pending", 3, 1)

    with app.app_context():
        assert transitions.start(job_id, uuid.uuid4()) is not None  # running, and charged
    assert poll(client, job_id) == ("charged", 2, 1)

    with app.app_context():
        assert transitions.fail_and_settle(job_id, transitions.INTERRUPTED, "stopped")
        db.session.commit()
    assert poll(client, job_id) == ("refunded", 3, 1)


def test_the_top_bar_shows_the_charge_of_a_succeeded_job(make_app, sql):
    app, client, _ = signed_in(make_app, JOB_LEASE_SECONDS=600)
    user_id = sql("SELECT id FROM users")[0][0]
    job_id = insert_job(sql, user_id, "pending")
    with app.app_context():
        transitions.start(job_id, uuid.uuid4())
    assert poll(client, job_id) == ("charged", 2, 1)
    sql("UPDATE assessment_jobs SET status = 'succeeded', finished_at = now()")
    assert poll(client, job_id) == ("charged", 2, 1)
