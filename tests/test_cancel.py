"""Cancelling a job: nothing charged before it starts, refunded after, one outcome in a race."""

import uuid

import pytest

from tests.conftest import Actions, csrf_token, job_id_from, signed_in, wait_for
from tests.test_jobs import attr

pytestmark = pytest.mark.minimal_work

REFUNDED = "You cancelled this assessment."


def pending_job(sql, progress=0):
    """A job waiting to start (no thread picks it up), as one in the gap before its start."""
    return sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, status, progress, area)"
        " SELECT id, 'Sapporo', 'en', 'pending', %(p)s, NULL FROM users RETURNING id",
        p=progress,
    )[0][0]


def cancel(client, job_id, **extra):
    token = csrf_token(client.get("/assessments/new").get_data(as_text=True))
    return client.post(f"/assessments/{job_id}/cancel", data={"csrf_token": token, **extra})


def test_a_pending_job_cancelled_costs_nothing(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id = pending_job(sql)
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "Cancel this assessment" in page
    response = cancel(client, job_id)
    assert response.status_code == 303
    html = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "not_charged")
    assert REFUNDED in html and "No point was used." in html
    assert "Cancel this assessment" not in html
    assert sql("SELECT error_code FROM assessment_jobs") == [("CANCELLED",)]
    assert sql("SELECT count(*) FROM point_ledger WHERE kind <> 'grant'") == [(0,)]


def test_a_running_job_cancelled_stops_and_is_refunded(make_app, sql):
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=20)
    job_id = job_id_from(actions.submit("Sapporo"))
    wait_for(lambda: sql("SELECT point_balance FROM users") == [(2,)])
    assert cancel(client, job_id).status_code == 303
    html = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "refunded")
    assert REFUNDED in html and "Your point was refunded." in html
    # The thread stops within a heartbeat (0.3 s), long before the rest of its 20 s of work
    # (the report's own stop inside a fetch: tests/test_offload.py).
    assert app.extensions["runner"].wait(5)
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert sql("SELECT status, result IS NULL FROM assessment_jobs") == [("failed", True)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_a_nearly_done_job_asks_before_cancelling(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id = pending_job(sql, progress=85)
    asked = cancel(client, job_id)
    assert asked.status_code == 200
    body = asked.get_data(as_text=True)
    assert "85% done" in body and 'name="confirm" value="yes"' in body
    assert sql("SELECT status FROM assessment_jobs") == [("pending",)]
    assert cancel(client, job_id, confirm="yes").status_code == 303
    assert sql("SELECT status, error_code FROM assessment_jobs") == [("failed", "CANCELLED")]


def test_a_cancel_after_success_says_the_report_won(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id = job_id_from(actions.submit("Sapporo"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    response = cancel(client, job_id)
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "It finished before the cancel arrived: here is your report." in page
    assert (attr(page, "data-status"), attr(page, "data-billing")) == ("succeeded", "charged")
    assert sql("SELECT point_balance FROM users") == [(2,)]


def test_a_cancel_racing_success_ends_in_exactly_one_outcome(make_app, sql):
    # The job holds its result for a moment before recording it; the cancel lands then.
    app, client, actions = signed_in(make_app, FAILPOINTS="before_success=sleep:1")
    job_id = job_id_from(actions.submit("Sapporo"))
    wait_for(lambda: sql("SELECT progress FROM assessment_jobs") == [(100,)])
    cancel(client, job_id, confirm="yes")  # 100 % done: the page asks first
    assert app.extensions["runner"].wait(5)
    html = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "refunded")
    assert sql("SELECT result IS NULL FROM assessment_jobs") == [(True,)]  # success lost
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_only_the_owner_cancels_and_only_with_a_token(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id = pending_job(sql)
    stranger = app.test_client()
    Actions(stranger).signup()
    assert cancel(stranger, job_id).status_code == 404
    assert cancel(stranger, uuid.uuid4()).status_code == 404
    assert client.post(f"/assessments/{job_id}/cancel").status_code == 400
    assert sql("SELECT status FROM assessment_jobs") == [("pending",)]
