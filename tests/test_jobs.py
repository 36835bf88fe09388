"""The core loop in-process: submit, run on a real thread, poll the fragment."""

import io
import re
import threading
import time
import uuid

import pytest

from app.points import billing, ledger
from app.web import history
from tests.conftest import Actions, csrf_token, job_id_from, signed_in, wait_for


def poll_until(client, job_id, predicate, timeout=15.0):
    """Poll the status fragment until predicate(html) holds; return the last html."""
    deadline = time.monotonic() + timeout
    while True:
        html = client.get(f"/assessments/{job_id}/status").get_data(as_text=True)
        if predicate(html) or time.monotonic() > deadline:
            return html
        time.sleep(0.05)


def attr(html, name):
    match = re.search(rf'{name}="([^"]*)"', html)
    return match.group(1) if match else None


def settled(html):
    return "hx-trigger" not in html


def clients_sharing_session(app, client, n):
    """Make n test clients signed in as the same user (one browser, many tabs)."""
    cookie = client.get_cookie("session")
    clients = []
    for _ in range(n):
        other = app.test_client()
        other.set_cookie("session", cookie.value)
        clients.append(other)
    return clients


def test_submit_runs_the_job_and_charges_one_point(client, actions, sql):
    actions.signup("a@example.com")
    job_id = job_id_from(actions.submit("札幌市"))
    html = poll_until(client, job_id, settled)
    assert attr(html, "data-status") == "succeeded"
    assert attr(html, "data-billing") == "charged"
    assert sql("SELECT point_balance FROM users") == [(2,)]
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "Sapporo" in page and 'id="report"' in page


def test_twenty_concurrent_submits_make_one_job(make_app, sql):
    app = make_app(ASSESSMENT_WORK_SECONDS=1.5)
    first = app.test_client()
    actions = Actions(first)
    actions.signup("double@example.com")
    token = actions.token("/assessments/new")
    tabs = clients_sharing_session(app, first, 20)
    barrier = threading.Barrier(20)
    codes = []

    def submit(tab):
        barrier.wait()
        codes.append(Actions(tab).submit("Sapporo", token=token).status_code)

    threads = [threading.Thread(target=submit, args=(tab,)) for tab in tabs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)

    assert sorted(codes) == [303] + [409] * 19
    assert app.extensions["runner"].wait(15)
    assert sql("SELECT count(*) FROM assessment_jobs") == [(1,)]
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'consume'") == [(1,)]
    assert sql("SELECT point_balance FROM users") == [(2,)]


def test_a_409_links_to_the_running_job(make_app):
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=2)
    job_id = job_id_from(actions.submit())
    second = actions.submit("Osaka")
    assert second.status_code == 409
    body = second.get_data(as_text=True)
    assert "already running" in body and f"/assessments/{job_id}" in body


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_back_to_the_form_mid_job_names_the_running_job_and_a_409_reloads_as_the_form(
    make_app, lang
):
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=2)
    client.post("/language", data={"lang": lang, "csrf_token": actions.token("/")})
    assert 'id="in-flight"' not in client.get("/assessments/new").get_data(as_text=True)
    job_id = job_id_from(actions.submit())
    form = client.get("/assessments/new").get_data(as_text=True)  # pressed back mid-job
    assert f'data-in-flight="{job_id}"' in form and f'href="/assessments/{job_id}"' in form
    said = "An assessment is already running." if lang == "en" else "実行中の評価がすでにあります。"
    assert said in form
    second = actions.submit("Osaka")
    assert second.status_code == 409
    body = second.get_data(as_text=True)
    assert 'data-reload-as="/assessments/new?query=Osaka&amp;lang=en"' in body
    assert 'data-place-code="271004"' in body  # what the kept form would assess: 大阪市
    assert "js/no-resend.js" in body
    # The notice names the running report and polls until it ends, then says so.
    notice = client.get(f"/assessments/{job_id}/in-flight").get_data(as_text=True)
    assert ("札幌市" if lang == "ja" else "Sapporo") in notice and "hx-get" in notice
    assert app.extensions["runner"].wait(15)
    notice = client.get(f"/assessments/{job_id}/in-flight").get_data(as_text=True)
    ended = "You can start the one below now." if lang == "en" else "下の評価を今すぐ開始できます。"
    assert ended in notice and "hx-get" not in notice
    form = client.get("/assessments/new").get_data(as_text=True)
    assert 'id="in-flight"' not in form  # settled: nothing is running
    other = signed_in(make_app)[1]
    assert other.get(f"/assessments/{job_id}/in-flight").status_code == 404


def test_user_can_submit_again_once_the_job_is_terminal(client, actions, app, sql):
    actions.signup()
    first = job_id_from(actions.submit())
    assert app.extensions["runner"].wait(10)
    second = job_id_from(actions.submit("Osaka"))
    assert second != first
    assert app.extensions["runner"].wait(10)
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'consume'") == [(2,)]


def test_busy_runner_answers_503_and_writes_nothing(make_app, sql):
    app = make_app(MAX_CONCURRENT_JOBS=1, ASSESSMENT_WORK_SECONDS=2)
    alice, bob = Actions(app.test_client()), Actions(app.test_client())
    alice.signup()
    bob.signup()
    job_id_from(alice.submit())
    wait_for(lambda: sql("SELECT 1 FROM point_ledger WHERE kind = 'consume'"))  # alice's runs
    before = sql("SELECT count(*) FROM assessment_jobs"), sql("SELECT count(*) FROM point_ledger")

    busy = bob.submit()

    assert busy.status_code == 503
    assert int(busy.headers["Retry-After"]) > 0
    assert "Nothing was charged" in busy.get_data(as_text=True)
    after = sql("SELECT count(*) FROM assessment_jobs"), sql("SELECT count(*) FROM point_ledger")
    assert after == before


def test_not_enough_points_is_402_and_writes_nothing(make_app, sql):
    app, client, actions = signed_in(make_app, SIGNUP_POINTS=0)
    assert sql("SELECT point_balance FROM users") == [(0,)]
    response = actions.submit()
    assert response.status_code == 402
    assert sql("SELECT count(*) FROM assessment_jobs") == [(0,)]


def test_a_job_whose_work_raises_is_refunded_once(make_app, sql):
    app, client, actions = signed_in(make_app, FAILPOINTS="before_success=raise")
    job_id = job_id_from(actions.submit())
    html = poll_until(client, job_id, settled)
    assert attr(html, "data-status") == "failed"
    assert attr(html, "data-billing") == "refunded"
    assert "Your point was refunded." in html
    assert sql("SELECT kind FROM point_ledger WHERE job_id = %(j)s ORDER BY id", j=job_id) == [
        ("consume",),
        ("refund",),
    ]
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_a_job_reaped_while_finishing_is_not_overwritten(make_app, sql):
    app, client, actions = signed_in(make_app, FAILPOINTS="before_success=sleep:2")
    job_id = job_id_from(actions.submit())
    wait_for(lambda: sql("SELECT 1 FROM point_ledger WHERE kind = 'consume'"))  # running
    # The reaper's conditional UPDATE, run while the work sleeps before recording success.
    reaped = sql(
        "UPDATE assessment_jobs SET status = 'failed', error_code = 'INTERRUPTED',"
        " finished_at = now() WHERE id = %(j)s AND status IN ('pending', 'running')",
        j=job_id,
    )
    assert reaped == 1
    assert app.extensions["runner"].wait(10)

    html = poll_until(client, job_id, settled)  # the poll finalizes the reaped job
    assert attr(html, "data-status") == "failed"
    assert attr(html, "data-billing") == "refunded"
    assert sql("SELECT status, result FROM assessment_jobs") == [("failed", None)]
    kinds = sql("SELECT kind FROM point_ledger WHERE job_id = %(j)s ORDER BY id", j=job_id)
    assert kinds == [("consume",), ("refund",)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


@pytest.mark.parametrize(
    "status, finalized, charged, refunded, support, expected",
    [
        ("pending", False, False, False, False, "pending"),
        ("running", False, False, False, False, "pending"),
        ("running", False, True, False, False, "charged"),
        ("succeeded", False, True, False, False, "charged"),
        ("failed", False, True, False, False, "pending"),
        ("failed", False, False, False, False, "pending"),
        ("failed", True, True, True, False, "refunded"),
        ("failed", True, False, False, False, "not_charged"),
        ("failed", False, True, False, True, "support"),
        ("failed", True, True, False, False, "charged"),  # support decided: no refund due
    ],
)
def test_billing_follows_the_ledger(status, finalized, charged, refunded, support, expected):
    assert billing.billing_state(status, finalized, charged, refunded, support) == expected


def insert_job(sql, user_id, status="pending"):
    return sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, status, started_at, heartbeat_at)"
        " VALUES (%(u)s, 'x', 'en', %(s)s, now(), now()) RETURNING id",
        u=user_id,
        s=status,
    )[0][0]


def fragment(client, job_id):
    html = client.get(f"/assessments/{job_id}/status").get_data(as_text=True)
    return attr(html, "data-status"), attr(html, "data-billing"), "hx-trigger" in html, html


def test_fragment_attributes_in_every_state(client, actions, sql):
    actions.signup()
    user_id = sql("SELECT id FROM users")[0][0]
    job = insert_job(sql, user_id, "running")
    assert fragment(client, job)[:3] == ("running", "pending", True)
    # Not charged yet and not quiet: the badge says so, as the text under it does.
    for html in (fragment(client, job)[3], client.get("/assessments").get_data(as_text=True)):
        assert '<span class="badge billing-pending">Not used yet</span>' in html
        assert ">Checking<" not in html

    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, job_id)"
        " VALUES (%(u)s, 'consume', -1, %(j)s)",
        u=user_id,
        j=job,
    )
    status, bill, polling, html = fragment(client, job)
    assert (status, bill, polling) == ("running", "charged", True)
    assert 'hx-swap="outerHTML"' in html and 'aria-live="polite"' in html

    sql("UPDATE assessment_jobs SET status = 'succeeded', finished_at = now()")
    status, bill, polling, html = fragment(client, job)
    assert (status, bill, polling) == ("succeeded", "charged", False)
    assert "hx-get" not in html

    other = insert_job(sql, user_id, "running")
    sql(
        "UPDATE assessment_jobs SET status = 'failed', finished_at = now() WHERE id = %(j)s",
        j=other,
    )
    status, bill, polling, html = fragment(client, other)  # the poll finalizes it
    assert (status, bill, polling) == ("failed", "not_charged", False)
    assert "No point was used." in html


def test_fresh_pending_job_polls(client, actions, sql):
    actions.signup()
    user_id = sql("SELECT id FROM users")[0][0]
    job_id = insert_job(sql, user_id, "pending")
    html = client.get(f"/assessments/{job_id}/status").get_data(as_text=True)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("pending", "pending")
    assert "hx-trigger" in html


@pytest.mark.parametrize(
    "query, lang, message",
    [
        ("", "en", "Type a place"),
        ("   ", "en", "Type a place"),
        ("x" * 10_000, "en", "under 200 characters"),
        ("札幌市", "fr", "Not a valid choice"),
    ],
)
def test_bad_submit_input_is_400_and_writes_nothing(client, actions, sql, query, lang, message):
    actions.signup()
    response = actions.submit(query, lang)
    assert response.status_code == 400
    assert message in response.get_data(as_text=True)
    assert sql("SELECT count(*) FROM assessment_jobs") == [(0,)]
    assert sql("SELECT count(*) FROM point_ledger WHERE kind <> 'grant'") == [(0,)]


def test_a_file_or_json_where_text_belongs_is_400_and_writes_nothing(client, actions, sql):
    actions.signup()
    token = actions.token("/assessments/new")
    upload = {"query": (io.BytesIO("札幌市".encode()), "place.txt"), "lang": "en"}
    response = client.post("/assessments", data={**upload, "csrf_token": token})
    assert response.status_code == 400
    assert "Type a place" in response.get_data(as_text=True)
    for body in ({"query": 5, "lang": "en"}, [1], "札幌市", 5, None):
        response = client.post("/assessments", json=body, headers={"X-CSRFToken": token})
        assert response.status_code == 400, body
    assert sql("SELECT count(*) FROM assessment_jobs") == [(0,)]


def test_submit_without_csrf_is_400(client, actions, sql):
    actions.signup()
    response = client.post("/assessments", data={"query": "札幌市", "lang": "en"})
    assert response.status_code == 400
    assert sql("SELECT count(*) FROM assessment_jobs") == [(0,)]


def test_malformed_and_foreign_job_ids_are_404(make_app, sql):
    app = make_app()
    owner, other = Actions(app.test_client()), Actions(app.test_client())
    owner.signup()
    other.signup()
    job_id = job_id_from(owner.submit())
    for path in (f"/assessments/{job_id}", f"/assessments/{job_id}/status"):
        assert other.client.get(path).status_code == 404
    for raw in ("nope", "1", str(uuid.uuid4()), "%00", "x" * 5000):
        assert other.client.get(f"/assessments/{raw}/status").status_code == 404
    assert owner.client.get(f"/assessments/{job_id}").status_code == 200


def test_history_lists_jobs_with_billing(client, actions, app):
    actions.signup()
    job_id = job_id_from(actions.submit())
    assert app.extensions["runner"].wait(10)
    page = client.get("/assessments").get_data(as_text=True)
    row = page.split(f'href="/assessments/{job_id}"', 1)[1].split("</tr>", 1)[0]
    assert "Done" in row and 'class="badge billing-charged">1 point<' in row


def test_job_page_has_noscript_refresh_while_running(make_app):
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=2)
    job_id = job_id_from(actions.submit())
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert '<noscript><meta http-equiv="refresh"' in page
    assert csrf_token(page)


def _commit_between_reads(monkeypatch, module, name, write):
    """Make module.name commit write() on another connection, once, before it reads."""
    real = getattr(module, name)
    pending = [write]

    def read(*args, **kwargs):
        while pending:
            pending.pop()()
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, read)


@pytest.mark.parametrize("path", ["/", "/points"])
def test_a_balance_and_the_ledger_rows_beside_it_are_one_moment(
    client, actions, sql, monkeypatch, path
):
    actions.signup()
    user_id = sql("SELECT id FROM users")[0][0]

    def grant():
        sql(
            "INSERT INTO point_ledger (user_id, kind, amount, reason)"
            " VALUES (%(u)s, 'grant', 1, 'elsewhere')",
            u=user_id,
        )

    # A grant commits after the page has started reading, before its ledger rows.
    _commit_between_reads(monkeypatch, ledger, "history", grant)
    html = client.get(path).get_data(as_text=True)
    shown = sum(int(n) for n in re.findall(r'<td class="num"[^>]*>([+-]\d+)</td>', html))
    big = re.search(r'id="balance" data-balance="(\d+)"', html).group(1)
    # Two rows, all shown: the nav, the page's balance and the rows must add up.
    assert int(attr(html, "data-balance")) == int(big) == shown


def test_history_badges_and_balance_are_one_moment(client, actions, sql, monkeypatch):
    actions.signup()
    user_id = sql("SELECT id FROM users")[0][0]
    before = sql("SELECT point_balance FROM users")[0][0]
    job = insert_job(sql, user_id, "running")
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, job_id, reason)"
        " VALUES (%(u)s, 'consume', -1, %(j)s, 'area assessment')",
        u=user_id,
        j=job,
    )

    def fail_and_refund():  # what the reaper and the finalizer of another tab commit
        sql(
            "WITH f AS (UPDATE assessment_jobs SET status = 'failed', finished_at = now(),"
            "   finalized_at = now() WHERE id = %(j)s)"
            " INSERT INTO point_ledger (user_id, kind, amount, job_id, refund_of, reason)"
            " SELECT user_id, 'refund', 1, job_id, id, 'refund' FROM point_ledger"
            " WHERE job_id = %(j)s AND kind = 'consume'",
            j=job,
        )

    _commit_between_reads(monkeypatch, history, "assessments", fail_and_refund)
    html = client.get("/assessments").get_data(as_text=True)
    seen = (int(attr(html, "data-balance")), "billing-refunded" in html)
    assert seen in [(before - 1, False), (before, True)]


def test_history_and_points_pages_show_every_row_a_page_at_a_time(client, actions, sql):
    actions.signup()
    user_id = sql("SELECT id FROM users")[0][0]
    sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, status, created_at)"
        " SELECT %(u)s, 'job ' || n, 'en', 'succeeded', now() - n * interval '1 minute'"
        " FROM generate_series(1, 120) n",
        u=user_id,
    )
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, reason)"
        " SELECT %(u)s, 'grant', 1, 'grant ' || n FROM generate_series(1, 109) n",
        u=user_id,
    )  # 110 rows with the signup grant
    lists = (("/assessments", r"job \d+", 120), ("/points", r"grant \d+|welcome points", 110))
    for path, row, total in lists:
        seen, page = [], 1
        while True:
            response = client.get(f"{path}?page={page}")
            assert response.status_code == 200, (path, page)
            html = response.get_data(as_text=True)
            rows = re.findall(row, html)
            seen += rows
            assert len(rows) <= 50
            if 'rel="next"' not in html:
                break
            page += 1
        assert (page, len(seen), len(set(seen))) == (3, total, total), path
        assert client.get(f"{path}?page=4").status_code == 404
        for bad in ("0", "-1", "abc", "1.5", "²", "9" * 50):
            assert client.get(f"{path}?page={bad}").status_code == 400, (path, bad)
    html = client.get("/points").get_data(as_text=True)
    assert attr(html, "data-balance") == str(sql("SELECT point_balance FROM users")[0][0])
    dashboard = client.get("/").get_data(as_text=True)
    assert 'href="/points"' in dashboard
    assert dashboard.count('<tr class="ledger-') == 10  # the latest; /points has them all


def test_lists_name_the_prefecture_of_places_that_share_a_name(client, actions):
    actions.signup()
    job_id = job_id_from(actions.submit("132063"))  # 府中市, Tokyo (Hiroshima has one too)
    for path in ("/assessments", "/", f"/assessments/{job_id}"):
        html = client.get(path).get_data(as_text=True)
        assert "Fuchu, Tokyo" in html and "東京都府中市" in html, path


def test_a_work_that_lacks_part_of_the_contract_is_refused_at_start(make_app):
    # Found only when a job needed it, a missing part would fail that job late.
    with pytest.raises(TypeError, match="tests.live is not a job's work: no Refundable"):
        make_app(JOB_WORK="tests.live")
