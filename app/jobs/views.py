"""What pages show of a job: the status fragment's one SELECT, the poll-time reaper, the outcomes.

A healthy poll is one read. The transitions it may set off (reap, finalize) are the
transitions and billing modules' conditional statements; this module only decides when.
"""

import hashlib
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from flask import current_app
from sqlalchemy import text

from ..extensions import db
from ..operations import failpoints
from ..points import billing
from ..points.billing import Billing
from . import estimate, transitions
from .transitions import STALE

log = logging.getLogger(__name__)
LATE_HEARTBEATS = 2.5  # missed heartbeats before the page says it is checking


@dataclass(frozen=True)
class JobView:
    """What the status fragment needs to know about a job."""

    id: uuid.UUID
    status: str
    billing: Billing
    settled: bool
    late: bool  # running, but no heartbeat for a while: the page says it is checking
    message: str
    step: str
    progress: int
    query_text: str
    lang: str
    area: dict[str, Any] | None
    elapsed: float
    balance: int  # the owner's balance, for the page's top bar
    version: str = ""  # the row but for the clock (see row_version): the fragment's ETag
    error_code: str | None = None  # why it failed: CANCELLED is the user's own cancel
    typical: float | None = None  # seconds the recent jobs took (estimate.py), if known
    draining: bool = False  # the process running it is finishing before a restart

    @property
    def layers(self) -> list[tuple[Any, bool]]:
        """Return each part of the work and whether it is done, as the step says."""
        return current_app.extensions["work"].steps(self.step, self.status)

    @property
    def outcome(self) -> str:
        """Return the status as the reader sees it: a user's own cancel is "cancelled"."""
        return outcome_of(self.status, self.error_code)

    @property
    def fetching(self) -> bool:
        """Tell whether the job is on its parts (the step names those done: work.PARTS_STEP)."""
        parts = current_app.extensions["work"].PARTS_STEP
        return parts is not None and self.step.startswith(parts)

    @property
    def cached(self) -> bool:
        """Tell whether the report came whole from the cache of recent fetches."""
        return self.status == "succeeded" and self.step == transitions.CACHED_STEP

    @property
    def seconds_left(self) -> int | None:
        """Return a running job's seconds left (estimate.seconds_left), else None."""
        if self.status != "running":
            return None
        return estimate.seconds_left(self.elapsed, self.progress, self.typical)


# What a job's point is, read from the ledger and incidents in the same statement.
BILLING_COLUMNS = (
    " j.finalized_at IS NOT NULL AS finalized,"
    " c.id IS NOT NULL AS charged,"
    " EXISTS (SELECT 1 FROM point_ledger r WHERE r.refund_of = c.id AND r.kind = 'refund')"
    "   AS refunded,"
    " EXISTS (SELECT 1 FROM incidents i WHERE i.job_id = j.id AND i.resolved_at IS NULL)"
    "   AS support_open"
)
WITH_CONSUME = (
    " FROM assessment_jobs j LEFT JOIN point_ledger c ON c.job_id = j.id AND c.kind = 'consume'"
)


def outcome_of(status: str, error_code: str | None) -> str:
    """Return a job's outcome: its status, except a cancel, which is its own outcome.

    The row keeps status 'failed' (the ledger's rules and the fragment's data-status read
    it); only what the reader is shown, and what is counted, tells a cancel apart.
    """
    return "cancelled" if status == "failed" and error_code == transitions.CANCELLED else status


OUTCOMES = ("pending", "running", "succeeded", "failed", "cancelled")

VIEW_SQL = text(
    "SELECT j.id, j.status, j.error_code, j.message, j.step, j.progress, j.query_text,"
    " j.lang, j.area,"
    " j.draining,"
    " u.point_balance AS balance,"
    " extract(epoch FROM coalesce(j.finished_at, now())"
    "   - coalesce(j.started_at, j.created_at))::float AS elapsed,"
    f" {STALE} AS stale,"
    # Late: no sign of life for a few heartbeats, but the lease has not run out. The
    # job may be gone; until the reaper can tell, the page says it is checking.
    " (j.status = 'running' AND j.heartbeat_at < now() - make_interval(secs => :late))"
    "   AS late,"
    f"{BILLING_COLUMNS}{WITH_CONSUME}"
    # The session's generation is checked in this same read: a session revoked by logout
    # (or of a deleted user) finds no row. NULL: the caller's user was loaded and checked.
    " JOIN users u ON u.id = j.user_id"
    " WHERE j.id = :id AND j.user_id = :user"
    "   AND (u.session_generation = :gen OR CAST(:gen AS integer) IS NULL)"
)


# The poll's columns that move with the clock alone. The page counts the elapsed seconds on
# by itself (static/js/job-elapsed.js), so a row that differs only there shows nothing new.
CLOCK_COLUMNS = frozenset({"elapsed"})


def row_version(row: Any) -> str:
    """Digest every column of the poll's row but the clock's: what the fragment shows.

    The poll's ETag starts from it (app/web/poll.py), so a column added to VIEW_SQL for the
    page to show joins it by itself; only a column that moves with the clock must be
    named in CLOCK_COLUMNS, and then the page must count it on as it does the seconds.
    """
    named = zip(row._fields, row, strict=True)
    values = [value for name, value in named if name not in CLOCK_COLUMNS]
    return hashlib.blake2b(repr(values).encode(), digest_size=12).hexdigest()


def _params(job_id: uuid.UUID, user_id: int, generation: int | None) -> dict[str, Any]:
    late = LATE_HEARTBEATS * current_app.config["JOB_HEARTBEAT_SECONDS"]
    return {"id": job_id, "user": user_id, "gen": generation, "late": late, **transitions.ages()}


def parse_id(raw: str) -> uuid.UUID | None:
    """Return the job id in a URL, or None when it is not a UUID."""
    try:
        return uuid.UUID(raw)
    except ValueError:
        return None


def view(job_id: uuid.UUID, user_id: int, generation: int | None = None) -> JobView | None:
    """Return the user's job as the status fragment shows it, settling it if it needs it.

    A healthy poll is this one SELECT: staleness, lateness and billing are computed in it
    on the database clock. Only a stale-looking row runs the reaping UPDATE, which repeats
    the condition itself, and only a job that a fresh read shows failed and unfinalized
    runs the finalizer, in the same request: the poll that reaps tells the truth at once.
    A generation (from a session not yet checked) must match the user's, or it is None.
    """
    row = _select(job_id, user_id, generation)
    if row is None:
        return None
    if row.stale:
        if transitions.reap(job_id):
            failpoints.hit("after_reap")
        # The reap may have lost to a heartbeat or a finish (or the session to a logout).
        row = _select(job_id, user_id, generation)
    if row is not None and row.status == "failed" and not row.finalized:
        billing.finalize(job_id, user_id)
        row = _select(job_id, user_id, generation)
    return _as_view(row) if row is not None else None


def live_view(job_id: uuid.UUID, user_id: int, generation: int | None = None) -> JobView | None:
    """Return the user's job if it is pending or running and not stale, else None.

    For the poll's fast path (app/web/poll.py): such a job needs nothing but this read.
    None sends the poll to view(), which reaps, settles or says 404 as it must.
    """
    row = _select(job_id, user_id, generation)
    if row is None or row.stale or row.status not in ("pending", "running"):
        return None
    return _as_view(row)


def _as_view(row: Any) -> JobView:
    return JobView(
        id=row.id,
        status=row.status,
        billing=billing.billing_state(
            row.status, row.finalized, row.charged, row.refunded, row.support_open, row.late
        ),
        settled=billing.is_settled(row.status, row.finalized),
        late=row.late,
        message=row.message,
        step=row.step,
        error_code=row.error_code,
        progress=row.progress,
        query_text=row.query_text,
        lang=row.lang,
        area=row.area,
        elapsed=row.elapsed,
        balance=row.balance,
        version=row_version(row),
        # Read at most once a minute per process: no query of its own on a poll.
        typical=(
            _tenths(estimate.typical_seconds(current_app.extensions["work"].kind(row.area)))
            if row.status == "running"
            else None
        ),
        draining=row.draining,
    )


def _tenths(seconds: float | None) -> float | None:
    # As the fragment gives it to the page (and the ETag digests it): to a tenth of a second.
    return None if seconds is None else round(seconds, 1)


def _select(job_id: uuid.UUID, user_id: int, generation: int | None) -> Any:
    return transitions.execute_one(VIEW_SQL, _params(job_id, user_id, generation))


def settle_user_jobs(user_id: int) -> int:
    """Reap and finalize the user's unsettled jobs (for pages that list them); count them."""
    ids = (
        db.session.execute(
            text(
                "SELECT id FROM assessment_jobs"
                " WHERE user_id = :u AND (status IN ('pending', 'running')"
                "   OR (status = 'failed' AND finalized_at IS NULL))"
            ),
            {"u": user_id},
        )
        .scalars()
        .all()
    )
    db.session.rollback()
    for job_id in ids:
        view(job_id, user_id)
    return len(ids)


def result(job_id: uuid.UUID, user_id: int) -> dict[str, Any] | None:
    """Return a succeeded job's report, if it is still kept."""
    return db.session.execute(
        text("SELECT result FROM assessment_jobs WHERE id = :id AND user_id = :u"),
        {"id": job_id, "u": user_id},
    ).scalar_one_or_none()


# The history's outcome filter, as SQL on the row (a cancel is a failed row, CANCELLED).
OUTCOME_SQL = {
    None: "TRUE",
    "pending": "j.status = 'pending'",
    "running": "j.status = 'running'",
    "succeeded": "j.status = 'succeeded'",
    "failed": f"j.status = 'failed' AND j.error_code IS DISTINCT FROM '{transitions.CANCELLED}'",
    "cancelled": f"j.status = 'failed' AND j.error_code = '{transitions.CANCELLED}'",
}


def chosen_reports(user_id: int, job_ids: list[uuid.UUID]) -> list[Any]:
    """Return the user's jobs among job_ids, in the order asked, with their kept reports.

    Another user's job and an unknown id are simply absent: the caller answers 404 for both.
    """
    rows = db.session.execute(
        text(
            "SELECT id, status, error_code, query_text, area, result FROM assessment_jobs"
            " WHERE user_id = :u AND id = ANY(:ids)"
        ),
        {"u": user_id, "ids": list(job_ids)},
    ).all()
    by_id = {row.id: row for row in rows}
    return [by_id[job_id] for job_id in job_ids if job_id in by_id]
