"""The time left comes from how long the recent jobs took, read at most once a minute."""

import re

from app.jobs import estimate
from tests.conftest import signed_in


def seed_finished(sql, user_id, seconds):
    for s in seconds:
        sql(
            "INSERT INTO assessment_jobs (user_id, query_text, lang, status, step, created_at,"
            " started_at, finished_at) VALUES (%(u)s, 'x', 'en', 'succeeded', 'Done',"
            " now() - make_interval(secs => %(s)s + 1), now() - make_interval(secs => %(s)s),"
            " now())",
            u=user_id, s=s,
        )  # fmt: skip


def test_the_time_left_is_the_recent_jobs_median_less_the_time_so_far(make_app, sql):
    app, client, actions = signed_in(make_app)
    user_id = sql("SELECT id FROM users")[0][0]
    assert "None yet." in client.get("/").get_data(as_text=True)
    seed_finished(sql, user_id, [28, 30, 32, 300])  # one slow outlier: the median holds
    # Twenty seconds in, 22 % done: the old guess from progress alone said "about 2 min".
    job_id = sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, status, progress, step,"
        " started_at, heartbeat_at) VALUES (%(u)s, 'Sapporo', 'en', 'running', 22,"
        " 'layers:flood', now() - interval '20 s', now()) RETURNING id",
        u=user_id,
    )[0][0]
    estimate.forget()
    html = client.get(f"/assessments/{job_id}/status").get_data(as_text=True)
    left = int(re.search(r"about (\d+) s left", html)[1])
    assert 9 <= left <= 12, html  # 31 s typical, 20 s (and a little) gone
    dashboard = client.get("/").get_data(as_text=True)
    assert "One takes about 31 s at the moment." in dashboard


def test_the_figure_is_read_once_a_minute_not_per_poll(make_app, sql):
    app, client, actions = signed_in(make_app)
    user_id = sql("SELECT id FROM users")[0][0]
    seed_finished(sql, user_id, [40])
    with app.app_context():
        estimate.forget()
        assert estimate.typical_seconds() == 40
        seed_finished(sql, user_id, [10, 10])  # within the minute: not read again
        assert estimate.typical_seconds() == 40
        estimate._state["read_at"] -= estimate.REFRESH_SECONDS
        assert estimate.typical_seconds() == 10
