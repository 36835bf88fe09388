"""Each counter moves by exactly one on its committed transition, and not on a rolled-back one."""

import uuid

import pytest
from prometheus_client import REGISTRY

from app.extensions import db
from app.jobs import transitions, views
from app.operations import failpoints
from app.points import billing
from tests.conftest import job_id_from, signed_in, wait_for
from tests.test_jobs import insert_job
from tests.test_reaper import stale_charged_job


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class Delta:
    """The change of some samples between construction and now."""

    def __init__(self, **samples: tuple[str, dict]):
        self.samples = samples
        self.before = {k: value(n, **ls) for k, (n, ls) in samples.items()}

    def __getitem__(self, key: str) -> float:
        name, labels = self.samples[key]
        return value(name, **labels) - self.before[key]


def submits(outcome: str) -> tuple[str, dict]:
    return "hazard_submits_total", {"outcome": outcome}


def user_id(sql) -> int:
    return sql("SELECT id FROM users ORDER BY id DESC LIMIT 1")[0][0]


def test_submits_are_counted_by_outcome(make_app, sql):
    app, client, actions = signed_in(make_app, SIGNUP_POINTS=2)
    delta = Delta(**{s: submits(s) for s in ("303", "400", "402", "409", "503")})
    job_id = job_id_from(actions.submit())
    wait_for(lambda: transitions_status(app, job_id) == "succeeded")
    assert actions.submit(query="").status_code == 400
    sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang) VALUES (%(u)s, 'x', 'en')",
        u=user_id(sql),
    )
    assert actions.submit("Sendai").status_code == 409
    sql("DELETE FROM assessment_jobs WHERE status = 'pending'")
    # The last point goes on a job of its own: only ledger rows move a balance.
    spent = insert_job(sql, user_id(sql), "succeeded")
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, job_id)"
        " VALUES (%(u)s, 'consume', -1, %(j)s)",
        u=user_id(sql),
        j=spent,
    )
    assert actions.submit("Sendai").status_code == 402
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, reason)"
        " VALUES (%(u)s, 'grant', 1, 'test')",
        u=user_id(sql),
    )
    app.extensions["runner"].stop_admitting()
    assert actions.submit("Sendai").status_code == 503
    assert {k: delta[k] for k in delta.samples} == {
        "303": 1,
        "400": 1,
        "402": 1,
        "409": 1,
        "503": 1,
    }


def transitions_status(app, job_id):
    with app.app_context():
        return transitions.status_of(job_id)


def test_a_finished_job_is_counted_once_with_its_duration(make_app):
    app, client, actions = signed_in(make_app)
    delta = Delta(
        done=("hazard_jobs_finished_total", {"status": "succeeded", "error_code": ""}),
        durations=("hazard_job_duration_seconds_count", {}),
    )
    job_id = job_id_from(actions.submit())
    wait_for(lambda: transitions_status(app, job_id) == "succeeded")
    assert app.extensions["runner"].wait(5)
    assert (delta["done"], delta["durations"]) == (1, 1)


def test_a_reap_counts_once_and_a_lost_or_rolled_back_reap_counts_nothing(
    make_app, sql, monkeypatch
):
    app, client, actions = signed_in(make_app)
    job_id = stale_charged_job(actions, sql)
    delta = Delta(
        reaps=("hazard_reaps_total", {}),
        delays=("hazard_reap_delay_seconds_count", {}),
        slow=("hazard_reap_delay_seconds_bucket", {"le": "1800.0"}),
        failed=("hazard_jobs_finished_total", {"status": "failed", "error_code": "INTERRUPTED"}),
    )
    with app.app_context():

        def commit_fails():
            raise RuntimeError("the commit did not happen")

        monkeypatch.setattr(db.session, "commit", commit_fails)
        with pytest.raises(RuntimeError):
            transitions.reap(job_id)
        monkeypatch.undo()
        db.session.rollback()
        assert delta["reaps"] == 0  # rolled back: nothing counted
        assert transitions.reap(job_id)
        assert not transitions.reap(job_id)  # the second reaper's UPDATE matched nothing
    assert (delta["reaps"], delta["delays"], delta["failed"]) == (1, 1, 1)
    assert delta["slow"] == 0  # silent for an hour: past the 30-minute bucket


def test_refunds_are_counted_by_path_and_not_when_the_refund_rolls_back(make_app, sql):
    app, client, actions = signed_in(make_app, FAILPOINTS="before_refund=raise")
    job_id = stale_charged_job(actions, sql)
    code = billing.LOOKUP_FAILED
    delta = Delta(
        finalizer=("hazard_refunds_total", {"path": "finalizer"}),
        opened=("hazard_incidents_opened_total", {"code": code, "severity": "critical"}),
        resolved=("hazard_incidents_resolved_total", {"code": code}),
    )
    uid = user_id(sql)
    with app.app_context():
        assert views.view(job_id, uid).billing == "support"  # reaped; the refund rolled back
        views.view(job_id, uid)  # a second poll retries: one incident still
        assert (delta["finalizer"], delta["opened"], delta["resolved"]) == (0, 1, 0)
        failpoints.configure("")
        assert views.view(job_id, uid).billing == "refunded"
        views.view(job_id, uid)
    assert (delta["finalizer"], delta["opened"], delta["resolved"]) == (1, 1, 1)


def test_a_refund_at_shutdown_is_counted_as_shutdown(make_app, sql):
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=3)
    delta = Delta(
        shutdown=("hazard_refunds_total", {"path": "shutdown"}),
        slots=("hazard_runner_slots_in_use", {}),
    )
    job_id = job_id_from(actions.submit())
    wait_for(lambda: sql("SELECT 1 FROM point_ledger WHERE kind = 'consume'"))
    assert delta["slots"] == 1
    app.extensions["runner"].shutdown()
    assert delta["shutdown"] == 1
    assert app.extensions["runner"].wait(10)
    assert delta["slots"] == 0
    assert transitions_status(app, job_id) == "failed"


def test_a_refund_by_support_is_counted_as_support(make_app, sql):
    app, client, actions = signed_in(make_app, FAILPOINTS="before_refund=raise")
    job_id = stale_charged_job(actions, sql)
    uid = user_id(sql)
    with app.app_context():
        views.view(job_id, uid)
    failpoints.configure("")
    (incident_id,) = sql("SELECT id FROM incidents")[0]
    code = billing.LOOKUP_FAILED
    delta = Delta(
        support=("hazard_refunds_total", {"path": "support"}),
        resolved=("hazard_incidents_resolved_total", {"code": code}),
    )
    with app.app_context():
        assert billing.settle_by_support(incident_id, job_id, uid, True, "checked")
        assert not billing.settle_by_support(incident_id, job_id, uid, True, "again")
    assert (delta["support"], delta["resolved"]) == (1, 1)


def test_polls_are_timed_once_each_on_their_path(make_app, sql):
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=3)
    delta = Delta(
        fast=("hazard_status_poll_seconds_count", {"path": "fast"}),
        full=("hazard_status_poll_seconds_count", {"path": "full"}),
    )
    job_id = job_id_from(actions.submit())
    wait_for(lambda: transitions_status(app, job_id) == "running")
    assert client.get(f"/assessments/{job_id}/status").status_code == 200
    assert (delta["fast"], delta["full"]) == (1, 0)
    assert client.get(f"/assessments/{uuid.uuid4()}/status").status_code == 404
    assert (delta["fast"], delta["full"]) == (1, 1)
    app.extensions["runner"].shutdown()


def test_metrics_answer_loopback_or_the_token_only(make_app):
    app = make_app(METRICS_TOKEN="s3cret")
    client = app.test_client()
    assert client.get("/metrics").status_code == 200
    assert b"hazard_submits_total" in client.get("/metrics").data
    away = {"REMOTE_ADDR": "203.0.113.9"}
    assert client.get("/metrics", environ_base=away).status_code == 404
    bearer = {"Authorization": "Bearer s3cret"}
    assert client.get("/metrics", environ_base=away, headers=bearer).status_code == 200
    wrong = {"Authorization": "Bearer nope"}
    assert client.get("/metrics", environ_base=away, headers=wrong).status_code == 404
    relayed = {"X-Forwarded-For": "203.0.113.9"}
    assert client.get("/metrics", headers=relayed).status_code == 404
    assert make_app().test_client().get("/metrics", environ_base=away).status_code == 404
    # A wrong token is refused wherever it comes from, loopback included.
    assert client.get("/metrics", headers=wrong).status_code == 404
    assert client.get("/metrics", headers={"Authorization": "s3cret"}).status_code == 404
    assert client.get("/metrics", headers=bearer).status_code == 200
    untokened = make_app().test_client()
    assert untokened.get("/metrics").status_code == 200
    assert untokened.get("/metrics", headers=wrong).status_code == 404


@pytest.mark.server
def test_the_live_server_adds_up_its_workers_counts_from_the_multiprocess_dir(live, tmp_path):
    from tests.live import User

    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    server = live(PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    user = User(server)
    user.signup("counted@example.com")
    assert user.submit().status_code == 303
    text = user.http.get(server.url + "/metrics", timeout=5).text
    assert 'hazard_submits_total{outcome="303"} 1.0' in text
    assert list(metrics_dir.glob("*.db"))  # the values live in the shared files
