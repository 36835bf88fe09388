"""The poll's fast path (app/web/poll.py): a live job's poll is answered before Flask, exactly
as Flask answers it, and every other request goes on to Flask."""

import re
import time
import uuid

import psycopg
import pytest
from flask import request
from itsdangerous import TimestampSigner
from werkzeug.test import Client

from app.jobs import views
from tests.conftest import Actions, wait_for
from tests.test_assessment_jobs import finished_job
from tests.test_jobs import attr, insert_job


@pytest.fixture
def polled(make_app, sql):
    """An app that records the paths Flask itself handled, and a signed-up user."""
    return recording(make_app, sql)


def recording(make_app, sql, **config):
    """Build an app that records the paths Flask itself handled; sign a user up."""
    app = make_app(HOUSEKEEPING_INTERVAL_SECONDS=0.001, **config)
    seen = []

    @app.before_request
    def record():
        seen.append(request.path)

    actions = Actions(app.test_client())
    actions.signup()
    user_id = sql("SELECT id FROM users ORDER BY id DESC LIMIT 1")[0][0]
    seen.clear()
    return app, actions.client, user_id, seen


def flask_only(app, client):
    """A client of the same app without the fast path, carrying the same session."""
    name = app.config["SESSION_COOKIE_NAME"]
    other = Client(app.wsgi_app.wsgi_app)
    other.set_cookie(name, client.get_cookie(name).value)
    return other


def same_answer(fast, slow):
    """The two responses match, but for the whole seconds a job has run."""

    def seconds_free(response):
        html = re.sub(
            r'class="elapsed">\d+<', 'class="elapsed">N<', response.get_data(as_text=True)
        )
        # The tenths the page counts down from: the two answers are made moments apart.
        return re.sub(r'data-elapsed-exact="[\d.]+"', 'data-elapsed-exact="E"', html)

    assert fast.status_code == slow.status_code == 200
    assert seconds_free(fast) == seconds_free(slow)
    headers = {k: v for k, v in fast.headers.items() if k != "Content-Length"}
    assert headers == {k: v for k, v in slow.headers.items() if k != "Content-Length"}
    assert int(fast.headers["Content-Length"]) == len(fast.get_data())


@pytest.mark.parametrize(
    "status, heartbeat_age, charged, expected",
    [
        ("pending", 0, False, ("pending", "pending")),
        ("running", 0, True, ("running", "charged")),
        ("running", 1.2, True, ("running", "pending")),  # late, inside its lease: "checking"
    ],
)
def test_a_live_job_is_polled_without_flask_and_answered_as_flask_would(
    polled, sql, status, heartbeat_age, charged, expected
):
    app, client, user_id, seen = polled
    job_id = insert_job(sql, user_id, status)
    sql(
        "UPDATE assessment_jobs SET heartbeat_at = now() - make_interval(secs => %(a)s)",
        a=heartbeat_age,
    )
    if charged:
        sql(
            "INSERT INTO point_ledger (user_id, kind, amount, job_id)"
            " VALUES (%(u)s, 'consume', -1, %(j)s)",
            u=user_id,
            j=job_id,
        )
    path = f"/assessments/{job_id}/status"
    fast = client.get(path, headers={"HX-Request": "true"})
    assert seen == []  # Flask never saw it
    html = fast.get_data(as_text=True)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == expected
    assert attr(html, "hx-get") == path and "hx-trigger" in html
    assert ("We lost contact" in html) == (heartbeat_age > 0)
    same_answer(fast, flask_only(app, client).get(path, headers={"HX-Request": "true"}))
    assert seen == [path]


def test_the_fast_path_starts_cleanup_too(polled, sql):
    app, client, user_id, seen = polled
    old = finished_job(sql, user_id, 40)
    live = insert_job(sql, user_id, "running")
    client.get(f"/assessments/{live}/status")
    assert seen == []
    wait_for(
        lambda: (
            sql("SELECT result IS NULL FROM assessment_jobs WHERE id = %(j)s", j=old) == [(True,)]
        )
    )


def test_every_other_poll_goes_to_flask(polled, make_app, sql):
    app, client, user_id, seen = polled
    stale = insert_job(sql, user_id, "running")
    sql("UPDATE assessment_jobs SET heartbeat_at = now() - interval '1 minute'")
    stale_path = f"/assessments/{stale}/status"
    html = client.get(stale_path).get_data(as_text=True)
    assert seen == [stale_path]  # Flask reaped and refunded it
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "not_charged")

    seen.clear()
    live = insert_job(sql, user_id, "running")
    live_path = f"/assessments/{live}/status"
    forged = app.test_client()
    forged.set_cookie("session", client.get_cookie("session").value[:-2] + "xx")
    stranger = Actions(app.test_client())
    stranger.signup()
    seen.clear()
    for who, path, code in [
        (app.test_client(), live_path, 302),  # no session: to the login page
        (forged, live_path, 302),
        (stranger.client, live_path, 404),  # another user's job
        (client, f"/assessments/{uuid.uuid4()}/status", 404),
        (client, "/assessments/not-a-job/status", 404),
    ]:
        assert who.get(path).status_code == code, (path, code)
    assert len(seen) == 5
    assert client.head(live_path).status_code == 200
    assert len(seen) == 6

    sql(
        "UPDATE assessment_jobs SET status = 'succeeded', finished_at = now() WHERE id = %(j)s",
        j=live,
    )
    html = client.get(live_path, headers={"HX-Request": "true"}).get_data(as_text=True)
    assert len(seen) == 7  # the finished job and its report come from Flask
    assert attr(html, "data-status") == "succeeded" and "hx-trigger" not in html


def test_the_fast_path_reads_the_session_as_flask_does(make_app, sql, monkeypatch):
    # Its own cookie name, and a cookie signed with a key that is being rotated out.
    old = recording(make_app, sql, SECRET_KEY="old key", SESSION_COOKIE_NAME="hp")
    _, old_client, user_id, _ = old
    app, _, _, seen = recording(
        make_app,
        sql,
        SECRET_KEY="new key",
        SECRET_KEY_FALLBACKS=["old key"],
        SESSION_COOKIE_NAME="hp",
        PERMANENT_SESSION_LIFETIME=60,
    )
    client = app.test_client()
    client.set_cookie("hp", old_client.get_cookie("hp").value)
    path = f"/assessments/{insert_job(sql, user_id, 'running')}/status"
    assert attr(client.get(path).get_data(as_text=True), "data-status") == "running"
    assert seen == []

    # A cookie older than the session lifetime is refused, as Flask refuses it.
    serializer = app.session_interface.get_signing_serializer(app)
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda self: int(time.time()) - 3600)
    expired = serializer.dumps({"_user_id": str(user_id)})
    monkeypatch.undo()
    client.set_cookie("hp", expired)
    assert client.get(path).status_code == 302  # to the login page
    assert seen == [path]


def test_an_error_in_the_fast_path_leaves_the_poll_to_flask(polled, sql, monkeypatch):
    app, client, user_id, seen = polled
    path = f"/assessments/{insert_job(sql, user_id, 'running')}/status"
    real = views.live_view

    def lost_connection(*args):
        monkeypatch.setattr(views, "live_view", real)
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(views, "live_view", lost_connection)
    response = client.get(path)
    assert seen == [path]  # Flask ran the poll again and answered it
    assert attr(response.get_data(as_text=True), "data-status") == "running"


def test_an_unchanged_fragment_is_answered_304_without_rendering(polled, sql, monkeypatch):
    from tests.test_headers import assert_guarded

    app, client, user_id, seen = polled
    job_id = insert_job(sql, user_id, "running")
    path = f"/assessments/{job_id}/status"
    hx = {"HX-Request": "true"}
    first = client.get(path, headers=hx)
    etag = first.headers["ETag"]
    assert first.status_code == 200 and first.headers["Cache-Control"] == "no-cache, private"

    def again(tag=etag, **headers):
        return client.get(path, headers={**hx, "If-None-Match": tag, **headers})

    # Seconds pass (the page counts them itself): the same fragment, not rendered again.
    sql("UPDATE assessment_jobs SET started_at = started_at - interval '7 seconds'")
    render = app.jinja_env.get_template
    monkeypatch.setattr(app.jinja_env, "get_template", lambda name: pytest.fail("rendered"))
    unchanged = again()
    assert unchanged.status_code == 304 and unchanged.get_data() == b""
    assert unchanged.headers["ETag"] == etag and "Content-Type" not in unchanged.headers
    assert unchanged.headers["Cache-Control"] == "no-cache, private"
    assert_guarded(unchanged)
    assert again(f'"other", W/{etag}').status_code == 304  # as RFC 9110 compares
    assert seen == []  # and Flask never saw any of it
    monkeypatch.setattr(app.jinja_env, "get_template", render)

    # Whatever the fragment shows that changed gives a new fragment and a new ETag.
    tags = {etag}
    for change in (
        "UPDATE assessment_jobs SET step = 'Fetching hazard data: flood', progress = 20",
        "INSERT INTO point_ledger (user_id, kind, amount, job_id)"
        " SELECT user_id, 'consume', -1, id FROM assessment_jobs",  # charged: billing, balance
        "UPDATE assessment_jobs SET heartbeat_at = now() - interval '1.2 seconds'",  # late
    ):
        sql(change)
        changed = again()
        assert changed.status_code == 200 and changed.headers["ETag"] not in tags, change
        tags.add(etag := changed.headers["ETag"])
    # With progress made, the time left moves with the clock: the page counts it on.
    sql("UPDATE assessment_jobs SET started_at = started_at - interval '20 seconds'")
    assert again(etag).status_code == 304
    japanese = again(etag, **{"Accept-Language": "ja"})
    assert japanese.status_code == 200 and japanese.headers["ETag"] not in tags
    assert "ポイント" in japanese.get_data(as_text=True)
    assert seen == []

    # Flask answers a live job's poll the same way, 304 included.
    flask = flask_only(app, client)
    assert flask.get(path, headers={**hx, "If-None-Match": etag}).status_code == 304
    assert flask.get(path, headers=hx).headers["ETag"] == etag
    assert seen == [path, path]

    # A settled fragment is not kept at all.
    sql("UPDATE assessment_jobs SET status = 'succeeded', finished_at = now(), progress = 100")
    done = again(etag)
    assert done.status_code == 200 and "ETag" not in done.headers
    assert done.headers["Cache-Control"] == "no-store"


def test_a_verified_session_is_still_refused_once_too_old(make_app, sql, monkeypatch):
    app, client, user_id, seen = recording(make_app, sql, PERMANENT_SESSION_LIFETIME=60)
    path = f"/assessments/{insert_job(sql, user_id, 'running')}/status"
    assert client.get(path).status_code == 200  # its cookie verified and kept
    assert seen == []
    now = time.time()
    monkeypatch.setattr(time, "time", lambda: now + 120)
    assert client.get(path).status_code == 302  # to the login page, as Flask says
    assert seen == [path]


@pytest.mark.parametrize(
    "status, progress, late",
    [("pending", 0, False), ("running", 0, False), ("running", 40, False), ("running", 7, True)],
)
def test_a_kept_fragment_differs_from_a_new_one_only_in_the_seconds(
    make_app, status, progress, late
):
    """Whatever the fragment shows as the clock moves must be counted on by the page: with
    the row the same but for the time, a fragment differs from the kept one only in the
    elapsed seconds and the time left (static/js/job-elapsed.js works both out), so one
    ETag serves every poll. Fails if the template derives anything else from the clock
    that the page does not count on, or if the ETag moves with the clock."""
    from dataclasses import replace

    from flask import g

    from app.jobs.views import JobView
    from app.web import poll

    app = make_app()
    job = JobView(
        id=uuid.uuid4(), status=status, billing="charged", settled=False, late=late,
        message="", step="Fetched layer 2 of 5 (flood)", progress=progress,
        query_text="札幌市", lang="en", area=None, elapsed=0.0, balance=2, version="row",
    )  # fmt: skip
    fragment = app.jinja_env.get_template(poll.FRAGMENT)
    url = f"/assessments/{job.id}/status"

    def answer(seconds, language, typical=None):
        shown = replace(job, elapsed=seconds, typical=typical)
        with app.app_context():
            g.locale = language
            html = fragment.render(
                job=shown, report=None, oob=True, config=app.config, status_url=url
            )
            etag = poll.fragment_etag(app, shown, language, url)
        html = re.sub(r'data-elapsed="\d+">\d+<', "N<", html)
        html = re.sub(r'data-elapsed-exact="[\d.]+"', "E", html)
        return etag, re.sub(r'(class="left"[^>]*>)[^<]*<', r"\1T<", html)

    seconds = (0.4, 1.0, 1.6, 5, 59.2, 61, 90, 150, 151, 600, 3599, 3601, 7200.5)
    for language in ("en", "ja"):
        for typical in (None, 95.0):
            seen = {}
            for elapsed in seconds:
                etag, html = answer(elapsed, language, typical)
                assert seen.setdefault(etag, html) == html, (language, typical, elapsed)
            assert len(seen) == 1  # nothing moves but what the page counts: the kept copy
        # A new typical time (read once a minute) is a new fragment and a new ETag.
        if status == "running":
            assert answer(5, language, 95.0)[0] != answer(5, language, 120.0)[0]
