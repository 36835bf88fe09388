"""A user's own cancel is its own outcome, "Cancelled", everywhere it is shown or counted,
while the row stays 'failed' and the ledger says what it said before."""

import re

from tests.conftest import job_id_from, signed_in, wait_for
from tests.test_cancel import cancel, pending_job
from tests.test_jobs import attr
from tests.test_metrics import Delta
from tests.test_ops_page import stats_of


def test_a_cancel_reads_cancelled_in_the_badge_the_history_and_its_filter(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id = pending_job(sql)
    cancel(client, job_id)
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert (attr(page, "data-status"), attr(page, "data-outcome")) == ("failed", "cancelled")
    assert '<span class="badge status-cancelled">Cancelled</span>' in page
    assert "status-failed" not in page
    history = client.get("/assessments").get_data(as_text=True)
    assert '<span class="badge status-cancelled">Cancelled</span>' in history
    assert ">Failed</span>" not in history
    assert str(job_id) in client.get("/assessments?outcome=cancelled").get_data(as_text=True)
    failed = client.get("/assessments?outcome=failed").get_data(as_text=True)
    assert str(job_id) not in failed and "No assessments with this outcome." in failed
    assert client.get("/assessments?outcome=bogus").status_code == 400
    japanese = client.get("/assessments", headers={"Accept-Language": "ja"}).get_data(as_text=True)
    assert ">キャンセル</span>" in japanese and ">失敗</span>" not in japanese
    # The ledger is as it was: nothing charged, nothing refunded.
    assert sql("SELECT count(*) FROM point_ledger WHERE kind <> 'grant'") == [(0,)]
    assert sql("SELECT status, error_code FROM assessment_jobs") == [("failed", "CANCELLED")]


def test_a_cancel_is_counted_as_cancelled_not_failed(make_app, sql):
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=20)
    finished = "hazard_jobs_finished_total"
    delta = Delta(
        cancelled=(finished, {"status": "cancelled", "error_code": "CANCELLED"}),
        failed=(finished, {"status": "failed", "error_code": "CANCELLED"}),
    )
    job_id = job_id_from(actions.submit("Sapporo"))
    wait_for(lambda: sql("SELECT point_balance FROM users") == [(2,)])
    cancel(client, job_id)
    assert (delta["cancelled"], delta["failed"]) == (1, 0)
    assert app.extensions["runner"].wait(5)

    sql("UPDATE users SET role = 'support'")
    ops = client.get("/support/ops").get_data(as_text=True)
    day = stats_of(ops, "day")
    assert (day["cancelled"], day["failed"]) == ("1", "0")
    assert re.search(r'class="bar bar-cancelled"', ops)
    assert '<span class="legend legend-cancelled">cancelled by their user</span>' in ops
