"""The time left comes from how long the recent jobs took, read at most once a minute."""

import json
import re

import pytest

from app.jobs import estimate
from tests.conftest import signed_in


def seed_finished(sql, user_id, seconds, area=None):
    for s in seconds:
        sql(
            "INSERT INTO assessment_jobs (user_id, query_text, lang, status, step, created_at,"
            " started_at, finished_at, area) VALUES (%(u)s, 'x', 'en', 'succeeded', 'Done',"
            " now() - make_interval(secs => %(s)s + 1), now() - make_interval(secs => %(s)s),"
            " now(), %(a)s)",
            u=user_id, s=s, a=None if area is None else json.dumps(area),
        )  # fmt: skip


def running_job_status(client, sql, user_id, step, progress=0, seconds=0, area=None) -> str:
    """Insert a job running for seconds at progress and step; return its status fragment,
    with the typical times read afresh."""
    job_id = sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, status, progress, step,"
        " started_at, heartbeat_at, area) VALUES (%(u)s, 'x', 'en', 'running', %(p)s, %(s)s,"
        " now() - make_interval(secs => %(t)s), now(), %(a)s) RETURNING id",
        u=user_id, p=progress, s=step, t=seconds, a=None if area is None else json.dumps(area),
    )[0][0]  # fmt: skip
    estimate.forget()
    return client.get(f"/assessments/{job_id}/status").get_data(as_text=True)


def test_the_time_left_is_the_recent_jobs_median_less_the_time_so_far(make_app, sql):
    app, client, actions = signed_in(make_app)
    user_id = sql("SELECT id FROM users")[0][0]
    assert "None yet." in client.get("/").get_data(as_text=True)
    seed_finished(sql, user_id, [28, 30, 32, 300])  # one slow outlier: the median holds
    # Twenty seconds in, 22 % done: the old guess from progress alone said "about 2 min".
    html = running_job_status(client, sql, user_id, progress=22, step="layers:flood", seconds=20)
    left = int(re.search(r"about (\d+) s left", html)[1])
    # 31 s typical with 20 s gone says 11; 22 % in 20 s says 71: between the two, the
    # job's own pace counting for most of it already.
    assert 11 < left < 71, html
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


def test_a_point_is_told_the_points_time_not_the_cities(make_app, sql):
    app, client, actions = signed_in(make_app)
    user_id = sql("SELECT id FROM users")[0][0]
    seed_finished(sql, user_id, [40, 42, 44])  # municipalities (no radius)
    seed_finished(sql, user_id, [3, 4, 5], area={"radius_m": 500.0})  # points
    html = running_job_status(client, sql, user_id, step="layers:", area={"radius_m": 500.0})
    assert int(re.search(r"about (\d+) s left", html)[1]) <= 4, html
    assert 'data-typical="4.0"' in html
    with app.app_context():
        assert estimate.typical_seconds("place") == 42
        assert estimate.typical_seconds() == 22.5  # the dashboard's: all of them


@pytest.mark.minimal_work
def test_another_work_s_jobs_are_timed_by_the_kinds_that_work_names(make_app, sql):
    # The minimal work has one kind: its point-like job is told the median of every job.
    app, client, actions = signed_in(make_app)
    user_id = sql("SELECT id FROM users")[0][0]
    seed_finished(sql, user_id, [40, 42, 44])
    seed_finished(sql, user_id, [3, 4, 5], area={"radius_m": 500.0})
    html = running_job_status(client, sql, user_id, step="parts:", area={"radius_m": 500.0})
    assert 'data-typical="22.5"' in html
    with app.app_context():
        assert estimate.typical_seconds("job") == estimate.typical_seconds() == 22.5
        assert estimate.typical_seconds("point") is None


def test_the_time_left_moves_from_the_typical_pace_to_the_job_s_own_without_a_jump():
    left = estimate.seconds_left
    # A job at the typical pace is told the typical time less the seconds so far, always.
    for t in range(0, 120, 6):  # whole per cents, as progress is
        assert abs(left(t, 100 * t // 120, 120.0) - (120 - t)) <= 1
    # A 31 s job among 120 s ones (the report that said "about 2 min" at 5 s and "about
    # 5 s" at 13 s): the figure only falls, and three quarters in it has learnt the job is
    # quick, where the typical time alone would still say 97 s.
    said = [left(t, 5 + 90 * t // 31, 120.0) for t in range(0, 31)]
    assert 90 <= said[0] <= 120  # at first, the typical time
    assert all(b <= a for a, b in zip(said, said[1:], strict=False)), said
    assert said[23] < 48, said
    # A job slower than the typical one is told so as it goes: the figure grows.
    assert left(60, 20, 60.0) > left(0, 0, 60.0)
    # With no typical time, a few per cent in a few seconds is no figure yet.
    assert left(1, 5, None) is None
    assert left(10, 25, None) == 30
    assert left(10, 100, 60.0) is None
    assert left(61, 0, 60.0) is None  # no progress past the typical time: no figure
