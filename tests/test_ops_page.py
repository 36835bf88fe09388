"""The operations page: its numbers against SQL on a seeded database, for support only."""

import re

from app.jobs.transitions import REAP_MESSAGE
from tests.conftest import signed_in

# (status, error_code, message, hours ago it ended, seconds it ran, seconds silent at its end)
SEEDED = [
    ("succeeded", None, "done", 1, 10, 1),
    ("succeeded", None, "done", 2, 20, 1),
    ("succeeded", None, "done", 5, 60, 1),
    ("succeeded", None, "done", 72, 100, 1),  # this week, not today
    ("succeeded", None, "done", 24 * 9, 5, 1),  # older than a week: in neither window
    ("failed", "INTERRUPTED", REAP_MESSAGE, 3, 50, 40),  # reaped after 40 s of silence
    ("failed", "INTERRUPTED", REAP_MESSAGE, 100, 90, 70),
    ("failed", "INTERRUPTED", "The service restarted.", 3, 30, 0.5),  # a shutdown, not a reap
    ("failed", "PROVIDER_ERROR", "no data", 4, 15, 1),
]


def seed(sql, user_id: int) -> None:
    ids = []
    for status, code, message, ago, ran, silent in SEEDED:
        ids += sql(
            "INSERT INTO assessment_jobs (user_id, query_text, lang, status, error_code, message,"
            " created_at, started_at, heartbeat_at, finished_at, finalized_at)"
            " SELECT %(u)s, 'x', 'en', %(s)s, %(c)s, %(m)s, e - make_interval(secs => %(r)s + 1),"
            " e - make_interval(secs => %(r)s), e - make_interval(secs => %(q)s), e,"
            " CASE WHEN %(s)s = 'failed' THEN e END"
            " FROM (SELECT now() - make_interval(hours => %(a)s) AS e) t RETURNING id",
            u=user_id, s=status, c=code, m=message, a=ago, r=ran, q=silent,
        )  # fmt: skip
    # Two refunds today, one of them by support, and one last week.
    for job, reason, ago in ((5, "refund: x", 1), (8, "refund by support: y", 2), (6, "z", 80)):
        sql(
            "WITH c AS (INSERT INTO point_ledger"
            " (user_id, kind, amount, job_id, reason, created_at)"
            " VALUES (%(u)s, 'consume', -1, %(j)s, 'x', now() - make_interval(hours => %(a)s))"
            " RETURNING id)"
            " INSERT INTO point_ledger"
            " (user_id, kind, amount, job_id, refund_of, reason, created_at)"
            " SELECT %(u)s, 'refund', 1, %(j)s, id, %(r)s, now() - make_interval(hours => %(a)s)"
            " FROM c",
            u=user_id, j=ids[job][0], r=reason, a=ago,
        )  # fmt: skip
    sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, status, started_at)"
        " VALUES (%(u)s, 'x', 'en', 'running', now())",
        u=user_id,
    )
    sql(
        "INSERT INTO incidents (scope, code, severity, detail) VALUES"
        " ('payment', 'A', 'critical', ''), ('payment', 'B', 'warning', '')"
    )


def stats_of(html: str, window: str) -> dict[str, str]:
    section = re.search(rf'data-window="{window}".*?</section>', html, re.S).group(0)
    return dict(re.findall(r'data-stat="([^"]+)"[^>]*>([^<]*)<', section))


def percentile(values: list[float], p: float) -> float:
    """Linear interpolation between closest ranks: what percentile_cont computes."""
    values = sorted(values)
    rank = p * (len(values) - 1)
    low = int(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (rank - low)


def expected(hours: float) -> dict[str, str]:
    within = [row for row in SEEDED if row[3] < hours]
    ran = [r[4] for r in within if r[0] == "succeeded"]
    silent = [r[5] for r in within if r[2] == REAP_MESSAGE]
    return {
        "finished": str(len(within)),
        "succeeded": str(len(ran)),
        "failed": str(len(within) - len(ran)),
        "reaps": str(len(silent)),
        "reap-delay-p50": f"{percentile(silent, 0.5):.1f} s",
        "reap-delay-max": f"{max(silent):.1f} s",
        "duration-p50": f"{percentile(ran, 0.5):.1f} s",
        "duration-p95": f"{percentile(ran, 0.95):.1f} s",
    }


def test_the_numbers_match_the_seeded_database(make_app, sql):
    app, client, actions = signed_in(make_app, email="ops@example.com")
    (user_id,) = sql("SELECT id FROM users")[0]
    sql("UPDATE users SET role = 'support'")
    seed(sql, user_id)

    html = client.get("/support/ops").get_data(as_text=True)

    day, week = stats_of(html, "day"), stats_of(html, "week")
    assert {k: day[k] for k in expected(24)} == expected(24)
    assert {k: week[k] for k in expected(24 * 7)} == expected(24 * 7)
    assert (day["refunds"], day["refunds-support"]) == ("2", "1")
    assert (week["refunds"], week["refunds-support"]) == ("3", "1")
    now = dict(
        re.findall(r'data-stat="(running|pending|open-incidents|open-critical)"[^>]*>(\d+)<', html)
    )
    assert now == {"running": "1", "pending": "0", "open-incidents": "2", "open-critical": "1"}
    # One bar segment per hour and outcome that had jobs (the reap and the shutdown
    # 3 hours ago share one): 5 today, 7 this week.
    day_svg = re.search(r'data-window="day".*?</svg>', html, re.S).group(0)
    assert day_svg.count("<rect") == 5
    assert re.search(r'data-window="week".*?</svg>', html, re.S).group(0).count("<rect") == 7


def test_the_page_refreshes_its_fragment_without_script_or_style(make_app, sql):
    app, client, actions = signed_in(make_app)
    sql("UPDATE users SET role = 'support'")
    page = client.get("/support/ops").get_data(as_text=True)
    fragment = client.get("/support/ops/live", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    body = fragment.get_data(as_text=True)
    assert 'id="ops"' in body and 'hx-trigger="every 10s"' in body
    assert 'hx-get="/support/ops/live"' in page
    for html in (page, body):
        assert "style=" not in html
        assert "<script>" not in html and "<style" not in html


def test_only_support_sees_the_page(make_app, sql):
    app, client, actions = signed_in(make_app)
    assert client.get("/support/ops").status_code == 403
    assert client.get("/support/ops/live").status_code == 403
    assert app.test_client().get("/support/ops").status_code in (302, 401)
