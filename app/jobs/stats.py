"""What the operations page shows, read from the database alone, on its clock.

Nothing here comes from a process's memory (a restart would erase it): jobs per hour
by outcome, refunds, reaps and the silence before them, open incidents, job duration
percentiles and the jobs running now, for a window of the last N hours.
"""

from typing import Any

from sqlalchemy import text

from ..extensions import db
from .transitions import REAP_MESSAGE

# A reaped job is INTERRUPTED with the reaper's message; a shutdown's has its own.
REAPED = "(j.status = 'failed' AND j.error_code = 'INTERRUPTED' AND j.message = :reap_message)"
SILENCE = "extract(epoch FROM j.finished_at - coalesce(j.heartbeat_at, j.started_at, j.created_at))"
DURATION = "extract(epoch FROM j.finished_at - coalesce(j.started_at, j.created_at))"
WINDOW = "j.finished_at >= now() - make_interval(hours => :hours)"

HOURLY_SQL = text(
    "SELECT h.hour,"
    " count(j.id) FILTER (WHERE j.status = 'succeeded') AS succeeded,"
    " count(j.id) FILTER (WHERE j.status = 'failed' AND j.error_code = 'INTERRUPTED')"
    "   AS interrupted,"
    " count(j.id) FILTER (WHERE j.status = 'failed'"
    "   AND j.error_code IS DISTINCT FROM 'INTERRUPTED'"
    "   AND j.error_code IS DISTINCT FROM 'CANCELLED') AS failed,"
    # A user's own cancel is its own outcome, not a failure.
    " count(j.id) FILTER (WHERE j.status = 'failed' AND j.error_code = 'CANCELLED')"
    "   AS cancelled"
    " FROM generate_series(date_trunc('hour', now()) - make_interval(hours => :hours - 1),"
    "   date_trunc('hour', now()), interval '1 hour') AS h(hour)"
    " LEFT JOIN assessment_jobs j"
    "   ON j.finished_at >= h.hour AND j.finished_at < h.hour + interval '1 hour'"
    " GROUP BY h.hour ORDER BY h.hour"
)

TOTALS_SQL = text(
    "SELECT count(*) AS finished,"
    " count(*) FILTER (WHERE j.status = 'succeeded') AS succeeded,"
    " count(*) FILTER (WHERE j.status = 'failed'"
    "   AND j.error_code IS DISTINCT FROM 'CANCELLED') AS failed,"
    " count(*) FILTER (WHERE j.status = 'failed' AND j.error_code = 'CANCELLED')"
    "   AS cancelled,"
    f" count(*) FILTER (WHERE {REAPED}) AS reaps,"
    f" percentile_cont(0.5) WITHIN GROUP (ORDER BY {SILENCE}) FILTER (WHERE {REAPED})"
    "   AS reap_delay_p50,"
    f" max({SILENCE}) FILTER (WHERE {REAPED}) AS reap_delay_max,"
    f" percentile_cont(0.5) WITHIN GROUP (ORDER BY {DURATION})"
    "   FILTER (WHERE j.status = 'succeeded') AS duration_p50,"
    f" percentile_cont(0.95) WITHIN GROUP (ORDER BY {DURATION})"
    "   FILTER (WHERE j.status = 'succeeded') AS duration_p95"
    f" FROM assessment_jobs j WHERE {WINDOW}"
)

REFUNDS_SQL = text(
    "SELECT count(*) AS refunds,"
    " count(*) FILTER (WHERE reason LIKE 'refund by support%') AS by_support"
    " FROM point_ledger"
    " WHERE kind = 'refund' AND created_at >= now() - make_interval(hours => :hours)"
)

NOW_SQL = text(
    "SELECT"
    " (SELECT count(*) FROM assessment_jobs WHERE status = 'running') AS running,"
    " (SELECT count(*) FROM assessment_jobs WHERE status = 'pending') AS pending,"
    " (SELECT count(*) FROM incidents WHERE resolved_at IS NULL) AS open_incidents,"
    " (SELECT count(*) FROM incidents WHERE resolved_at IS NULL AND severity = 'critical')"
    "   AS open_critical,"
    " now() AS at"
)


# Points sold (purchases, less what refunds of them took back, plus what refunds that
# failed gave back), spent (consumes, less the jobs' refunds) and lapsed (expire rows) per
# day, on Tokyo's calendar: the days the shop's books are kept in.
POINTS_DAILY_SQL = text(
    "SELECT d.day,"
    " coalesce(sum(l.amount) FILTER (WHERE l.kind IN"
    "   ('purchase', 'purchase_refund', 'purchase_restore')), 0) AS sold,"
    " count(l.id) FILTER (WHERE l.kind = 'purchase') AS purchases,"
    " coalesce(-sum(l.amount) FILTER (WHERE l.kind IN ('consume', 'refund')), 0) AS spent,"
    " coalesce(-sum(l.amount) FILTER (WHERE l.kind = 'expire'), 0) AS lapsed"
    " FROM generate_series((now() AT TIME ZONE 'Asia/Tokyo')::date - (:days - 1),"
    "   (now() AT TIME ZONE 'Asia/Tokyo')::date, interval '1 day') AS d(day)"
    " LEFT JOIN point_ledger l ON (l.created_at AT TIME ZONE 'Asia/Tokyo')::date = d.day"
    "   AND l.kind IN ('purchase', 'purchase_refund', 'purchase_restore', 'consume', 'refund',"
    "     'expire')"
    " GROUP BY d.day ORDER BY d.day DESC"
)


def points_daily(days: int = 7) -> list[dict[str, Any]]:
    """Return the points sold, spent and lapsed on each of the last `days` days, newest first."""
    return [row._asdict() for row in db.session.execute(POINTS_DAILY_SQL, {"days": days})]


def window(hours: int) -> dict[str, Any]:
    """Return the last `hours` hours: per-hour outcomes and the window's totals."""
    params = {"hours": hours, "reap_message": REAP_MESSAGE}
    totals = db.session.execute(TOTALS_SQL, params).one()._asdict()
    totals.update(db.session.execute(REFUNDS_SQL, params).one()._asdict())
    hourly = [row._asdict() for row in db.session.execute(HOURLY_SQL, params)]
    return {"hours": hours, "hourly": hourly, **totals}


def now() -> dict[str, Any]:
    """Return what is true right now: jobs running and pending, incidents open."""
    return db.session.execute(NOW_SQL).one()._asdict()


def overview() -> dict[str, Any]:
    """Return the operations page's numbers: now, the last day and the last week."""
    # One snapshot: the three reads agree with each other.
    db.session.commit()  # end the request's transaction (the user load) so this one is fresh
    db.session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
    try:
        return {
            "now": now(),
            "day": window(24),
            "week": window(24 * 7),
            "points_daily": points_daily(7),
        }
    finally:
        db.session.rollback()
