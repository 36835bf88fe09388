"""A critical incident is posted to ALERT_WEBHOOK_URL once, however many polls retry."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.jobs import views
from app.operations import alerts
from tests.conftest import signed_in, wait_for
from tests.test_reaper import stale_charged_job


class Webhook:
    """A real HTTP server on 127.0.0.1 that records the alerts posted to it."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        self.answers: list[int] = []  # statuses to answer in turn; then 200
        self.url = ""


@pytest.fixture
def webhook():
    state = Webhook()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.posts.append(json.loads(body))
            self.send_response(state.answers.pop(0) if state.answers else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    yield state
    server.shutdown()
    server.server_close()


def critical_incident(make_app, sql, webhook, **config):
    """Route a charged, reaped job to support: its refund fails, a critical incident opens."""
    app, client, actions = signed_in(
        make_app, FAILPOINTS="before_refund=raise", ALERT_WEBHOOK_URL=webhook.url, **config
    )
    job_id = stale_charged_job(actions, sql)
    user_id = sql("SELECT id FROM users")[0][0]
    return app, job_id, user_id


def idle() -> bool:
    """No alert is being sent in this process."""
    if alerts._sending.acquire(blocking=False):
        alerts._sending.release()
        return True
    return False


def test_one_post_per_incident_however_many_polls(make_app, sql, webhook, monkeypatch):
    # Claims expire at once: only alerted_at stands between an incident and a second post.
    monkeypatch.setattr(alerts, "CLAIM_SECONDS", 0)
    app, job_id, user_id = critical_incident(make_app, sql, webhook)
    with app.app_context():
        for _ in range(5):
            assert views.view(job_id, user_id).billing == "support"
            wait_for(idle)
    wait_for(lambda: sql("SELECT alerted_at IS NOT NULL FROM incidents") == [(True,)])
    assert len(webhook.posts) == 1
    (post,) = webhook.posts
    assert post["incident"]["code"] == "REAP_CONSUME_LOOKUP_FAILED"
    assert post["incident"]["job_id"] == str(job_id)
    # Another process, or this one after a restart, finds nothing left to post.
    alerts.kick(make_app(ALERT_WEBHOOK_URL=webhook.url))
    wait_for(idle)
    assert len(webhook.posts) == 1


def test_a_failed_post_is_retried_by_the_next_poll(make_app, sql, webhook):
    webhook.answers = [500]
    app, job_id, user_id = critical_incident(make_app, sql, webhook)
    with app.app_context():
        views.view(job_id, user_id)
        wait_for(lambda: len(webhook.posts) == 1 and idle())
        assert sql("SELECT alerted_at, alert_attempt_at FROM incidents") == [(None, None)]
        views.view(job_id, user_id)  # the finalizer retries, the incident is there: post again
    wait_for(lambda: sql("SELECT alerted_at IS NOT NULL FROM incidents") == [(True,)])
    assert len(webhook.posts) == 2


def test_no_webhook_no_post_and_the_incident_is_logged_critical(make_app, sql, caplog):
    app, client, actions = signed_in(make_app, FAILPOINTS="before_refund=raise")
    job_id = stale_charged_job(actions, sql)
    with app.app_context():
        views.view(job_id, sql("SELECT id FROM users")[0][0])
    assert idle()
    assert sql("SELECT alert_attempt_at FROM incidents") == [(None,)]
    critical = [r for r in caplog.records if r.levelname == "CRITICAL"]
    assert len(critical) == 1 and critical[0].job_id == str(job_id)
    assert critical[0].transition == "incident" and critical[0].outcome == "opened"
