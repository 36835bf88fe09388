"""Assessment jobs: their rows and their transitions, the reaping one included.

Every transition is one conditional UPDATE ... RETURNING whose WHERE names the state
it leaves: of two racing writers (a finishing thread and a reaper, two reapers from
two tabs) exactly one matches, and an empty RETURNING means "not mine". Ages are
compared on the database clock. What pages show of a job is in views.py.
"""

import functools
import json
import logging
import threading
import uuid
from typing import Any

import psycopg
from flask import current_app
from psycopg.errors import UniqueViolation
from psycopg.rows import namedtuple_row
from sqlalchemy import Row, TextClause, text
from sqlalchemy.dialects.postgresql import psycopg as postgresql_psycopg

from ..extensions import db
from ..operations import failpoints, metrics
from ..points import billing, ledger

log = logging.getLogger(__name__)

IN_FLIGHT_INDEX = "uq_assessment_jobs_one_in_flight"
INTERRUPTED = "INTERRUPTED"
# What a reaped job says; it also tells a reap from a shutdown on the operations page.
REAP_MESSAGE = "The assessment was interrupted before it finished."


class AssessmentInFlight(Exception):
    """The user already has an assessment pending or running."""

    def __init__(self, job_id: uuid.UUID | None):
        super().__init__("an assessment is already running")
        self.job_id = job_id


class JobCancelled(Exception):
    """The job's row is no longer running (reaped or shut down): stop working."""


# A job is stale when its last sign of life (heartbeat, else start, else creation) is
# older than the lease, or when it has outlived the hard deadline: a running job counts
# it from its start (the time it waited in a queue is not run time), a pending one from
# its creation (so a queue wait is bounded too, and such a job is never charged). The
# same predicate is computed by the poll's SELECT and repeated in the reaping UPDATE's WHERE.
STALE = (
    "(j.status IN ('pending', 'running') AND ("
    " coalesce(j.heartbeat_at, j.started_at, j.created_at) < now() - make_interval(secs => :lease)"
    " OR coalesce(j.started_at, j.created_at) < now() - make_interval(secs => :deadline)))"
)


# The moment a job ends, on the clock, not now(): now() is the start of the caller's
# transaction, which may be older than the job's start (the cancel route runs in the
# transaction the user loader opened). Never before the start: a CHECK says so too.
FINISHED_NOW = "greatest(clock_timestamp(), started_at)"


def ages() -> dict[str, float]:
    """Return the STALE predicate's parameters from the app's configuration."""
    return {
        "lease": current_app.config["JOB_LEASE_SECONDS"],
        "deadline": current_app.config["JOB_MAX_RUNTIME_SECONDS"],
    }


class NotEnoughPoints(Exception):
    """The user has no point to spend on an assessment."""


def create(
    user_id: int, query_text: str, lang: str, area: dict[str, Any] | None, generation: int
) -> uuid.UUID:
    """Insert a pending job for a user who has a point to spend.

    Raise NotEnoughPoints if the balance is zero or the session's generation is not the
    user's (nothing is written, nothing charged: the job consumes its point when it
    starts) and AssessmentInFlight if the user has a job pending or running. One
    autocommit statement: the balance check and the one-in-flight index decide inside
    it, and it is durable when this returns.
    """
    try:
        row = execute_one(
            CREATE_SQL,
            {"u": user_id, "g": generation, "q": query_text, "l": lang, "a": _json(area)},
        )
    except UniqueViolation as exc:
        # Only the one-in-flight index means "already running"; any other
        # integrity error is a real error and propagates.
        if exc.diag.constraint_name == IN_FLIGHT_INDEX:
            raise AssessmentInFlight(in_flight_job(user_id)) from exc
        raise
    if row is None:
        raise NotEnoughPoints()
    return row.id


CREATE_SQL = text(
    "INSERT INTO assessment_jobs (user_id, query_text, lang, area, step)"
    " SELECT :u, :q, :l, CAST(:a AS jsonb), 'Waiting to start'"
    # A session revoked by logout (or of a deleted user) inserts nothing.
    " WHERE EXISTS (SELECT 1 FROM users WHERE id = :u AND session_generation = :g"
    "   AND point_balance >= 1)"
    " RETURNING id"
)


def discard_unstarted(job_id: uuid.UUID) -> None:
    """Delete a job that was never started (no thread, no charge), as if never submitted."""
    db.session.execute(
        text("DELETE FROM assessment_jobs WHERE id = :id AND status = 'pending'"),
        {"id": job_id},
    )
    db.session.commit()


def in_flight_job(user_id: int) -> uuid.UUID | None:
    """Return the id of the user's pending or running job, if any."""
    return db.session.execute(
        text(
            "SELECT id FROM assessment_jobs WHERE user_id = :u AND status IN ('pending', 'running')"
        ),
        {"u": user_id},
    ).scalar_one_or_none()


def start(job_id: uuid.UUID, run_id: uuid.UUID, stop: threading.Event | None = None) -> Row | None:
    """Move a job from pending to running and charge its point, in one transaction.

    Return the job's row, or None if it is no longer pending (reaped meanwhile) or is
    stale already (a queued job picked up past its lease or deadline: it is failed
    here, uncharged, with "no point was used"). The
    UPDATE locks the row until the commit, so a reaper or the shutdown hook that comes
    in between waits and then sees a running, charged job: a job is running only if it
    was charged, and nothing can settle it before the charge lands. The run that
    starts it writes its run_id: only that run may carry on with it or finish it.

    A stop signal set by then (its process is shutting down) is read under the row's
    lock: the UPDATE is rolled back and the job stays pending, uncharged, for another
    worker. Read after the lock, it cannot miss a shutdown that settles running jobs.
    """
    row = db.session.execute(
        text(
            "UPDATE assessment_jobs j SET status = 'running', started_at = clock_timestamp(),"
            " heartbeat_at = now(), step = 'Starting', run_id = :run, draining = false"
            f" WHERE j.id = :id AND j.status = 'pending' AND NOT {STALE}"
            " RETURNING j.user_id, j.lang, j.area"
        ),
        {"id": job_id, "run": run_id, **ages()},
    ).first()
    if row is None:
        db.session.rollback()
        if too_late(job_id):
            return None
        # A running row with this run's id is this run's earlier attempt, whose commit
        # (start and charge) landed before its connection dropped: it is started and
        # charged, carry on with it. Another run's id: a second delivery of the task,
        # which must not run the paid work again.
        mine = db.session.execute(
            text(
                "SELECT user_id, lang, area FROM assessment_jobs"
                " WHERE id = :id AND status = 'running' AND run_id = :run"
            ),
            {"id": job_id, "run": run_id},
        ).first()
        db.session.rollback()
        return mine
    try:
        failpoints.hit("after_running")
        if stop is not None and stop.is_set():
            db.session.rollback()
            return None
        ledger.consume(row.user_id, job_id)
    except BaseException:
        db.session.rollback()
        raise
    db.session.commit()
    metrics.job_started(job_id, row.user_id)
    return row


TOO_LATE = "NOT_STARTED"
TOO_LATE_MESSAGE = "Your assessment could not start in time. No point was used."


def too_late(job_id: uuid.UUID) -> bool:
    """Fail and settle a job still pending past its lease or deadline; True if this did.

    Nothing was charged: the user reads at once that no point was used, instead of a
    reap's "interrupted" a lease later.
    """
    failed = db.session.execute(
        text(
            f"UPDATE assessment_jobs j SET status = 'failed', finished_at = {FINISHED_NOW},"
            " error_code = :c, message = :m"
            f" WHERE j.id = :id AND j.status = 'pending' AND {STALE}"
            f" RETURNING j.user_id, {DURATION}"
        ),
        {"id": job_id, "c": TOO_LATE, "m": TOO_LATE_MESSAGE, **ages()},
    ).first()
    db.session.commit()
    if failed is None:
        return False
    metrics.job_finished(job_id, failed.user_id, "failed", TOO_LATE, failed.duration)
    billing.finalize(job_id, failed.user_id, path="start")
    return True


PROGRESS = text(
    "UPDATE assessment_jobs j SET step = :s, progress = :p, heartbeat_at = now()"
    f" WHERE j.id = :id AND j.status = 'running' AND NOT {STALE} RETURNING j.id"
)


def report_progress(job_id: uuid.UUID, step: str, progress: int) -> None:
    """Record the step a running job is on; raise JobCancelled if it is not running.

    A job whose lease ran out (the database was out of reach for longer) is the
    reaper's: this write does not revive it.
    """
    # One autocommit statement, as the poll's: a job writes this every second or so, and
    # through the ORM session its BEGIN and COMMIT cost the worker's GIL several times over.
    alive = execute_one(
        PROGRESS, {"id": job_id, "s": step[:200], "p": max(0, min(100, progress)), **ages()}
    )
    if alive is None:
        raise JobCancelled(str(job_id))


DONE_STEP = "Done"
CACHED_STEP = "Done from cache"


def done_step(result: dict[str, Any]) -> str:
    """Return the finished job's step: from cache when it asked no upstream service itself."""
    # Such a report took no time worth telling: the page says it came from a recent one.
    cache = result.get("cache") or {}
    return CACHED_STEP if cache.get("misses") == 0 and cache.get("hits") else DONE_STEP


def succeed(job_id: uuid.UUID, result: dict[str, Any], run_id: uuid.UUID, message: str) -> bool:
    """Record a job's result and the work's message; False if it was reaped meanwhile.

    A job reaped meanwhile drops its result.

    Only the run that started the job sets 'succeeded': a row found so with this run's
    id is this run's earlier attempt, whose commit landed before its connection
    dropped. That is done, not lost.
    """
    done = db.session.execute(
        text(
            f"UPDATE assessment_jobs SET status = 'succeeded', finished_at = {FINISHED_NOW},"
            " step = :step, progress = 100, result = CAST(:r AS jsonb),"
            " message = :message"
            " WHERE id = :id AND status = 'running' AND run_id = :run"
            f" RETURNING user_id, {DURATION}"
        ),
        {
            "id": job_id,
            "r": _json(result),
            "step": done_step(result),
            "run": run_id,
            "message": message,
        },  # fmt: skip
    ).first()
    db.session.commit()
    if done is None:
        # An earlier attempt's commit landed but raised before it was counted: count it.
        if _succeeded_by(job_id, run_id) is None:
            return False
        done = _finished_row(job_id)
    metrics.job_finished(job_id, done.user_id, "succeeded", None, done.duration)
    return True


# A job's run time, in RETURNING (where finished_at is the value just written).
DURATION = "extract(epoch FROM finished_at - coalesce(started_at, created_at))::float AS duration"


def _finished_row(job_id: uuid.UUID) -> Row:
    row = db.session.execute(
        text(f"SELECT user_id, {DURATION} FROM assessment_jobs WHERE id = :id"), {"id": job_id}
    ).one()
    db.session.rollback()
    return row


def _succeeded_by(job_id: uuid.UUID, run_id: uuid.UUID) -> uuid.UUID | None:
    found = db.session.execute(
        text(
            "SELECT id FROM assessment_jobs"
            " WHERE id = :id AND status = 'succeeded' AND run_id = :run"
        ),
        {"id": job_id, "run": run_id},
    ).scalar_one_or_none()
    db.session.rollback()
    return found


def status_of(job_id: uuid.UUID) -> str | None:
    """Return a job's status as committed."""
    status = db.session.execute(
        text("SELECT status FROM assessment_jobs WHERE id = :id"), {"id": job_id}
    ).scalar_one_or_none()
    db.session.rollback()
    return status


def fail(
    job_id: uuid.UUID, error_code: str, message: str, started_only: bool = False
) -> int | None:
    """Mark a pending or running job failed; return its owner, or None if already ended.

    started_only leaves a pending job alone: a queue task's, which goes back to the queue.
    """
    leaves = "'running'" if started_only else "'pending', 'running'"
    done = db.session.execute(
        text(
            f"UPDATE assessment_jobs SET status = 'failed', finished_at = {FINISHED_NOW},"
            " error_code = :c, message = :m"
            f" WHERE id = :id AND status IN ({leaves}) RETURNING user_id, {DURATION}"
        ),
        {"id": job_id, "c": error_code, "m": message},
    ).first()
    db.session.commit()
    if done is None:
        return None
    metrics.job_finished(job_id, done.user_id, "failed", error_code, done.duration)
    return done.user_id


CANCELLED = "CANCELLED"


def cancel(job_id: uuid.UUID, user_id: int) -> bool:
    """Cancel the user's pending or running job and settle its point; False if it had ended.

    The same conditional UPDATE as every transition: against the job's own success
    exactly one wins. A running job's thread sees its row leave running at its next
    progress report or heartbeat and stops; its point is refunded by the finalizer.
    """
    done = db.session.execute(
        text(
            f"UPDATE assessment_jobs SET status = 'failed', finished_at = {FINISHED_NOW},"
            " error_code = :c, message = 'You cancelled this assessment.'"
            " WHERE id = :id AND user_id = :u AND status IN ('pending', 'running')"
            f" RETURNING id, {DURATION}"
        ),
        {"id": job_id, "u": user_id, "c": CANCELLED},
    ).first()
    db.session.commit()
    if done is None:
        return False
    metrics.job_finished(job_id, user_id, "failed", CANCELLED, done.duration)
    billing.finalize(job_id, user_id, path="cancel")
    return True


def fail_and_settle(
    job_id: uuid.UUID,
    error_code: str,
    message: str,
    path: str = "finalizer",
    until: float | None = None,
    started_only: bool = False,
) -> bool:
    """Fail a pending or running job and settle its point; False if it had ended already.

    A failed job that is not settled yet is settled either way: it may be this call's
    own retry, whose fail() committed before its answer was lost. `until` bounds how
    long the finalizer retries a blip (the job's lease); started_only is fail()'s.
    """
    user_id = fail(job_id, error_code, message, started_only)
    if user_id is None:
        if (owner := _unsettled_owner(job_id)) is not None:
            billing.finalize(job_id, owner, path=path, until=until)
        return False
    billing.finalize(job_id, user_id, path=path, until=until)
    return True


def _unsettled_owner(job_id: uuid.UUID) -> int | None:
    owner = db.session.execute(
        text(
            "SELECT user_id FROM assessment_jobs"
            " WHERE id = :id AND status = 'failed' AND finalized_at IS NULL"
        ),
        {"id": job_id},
    ).scalar_one_or_none()
    db.session.rollback()
    return owner


def heartbeat(job_ids: list[uuid.UUID], draining: bool = False) -> set[uuid.UUID]:
    """Refresh the heartbeat of live jobs; return the ids that are still pending or running.

    A job whose lease ran out (the database was out of reach for longer) is the
    reaper's: a late heartbeat does not revive it, and its thread is told to stop.
    The beat also says whether the process running them is draining: their job pages
    read it from the row, whichever process answers the poll.

    One multi-row UPDATE for every job of the process: a row that another transaction
    holds locked (a stalled one, say) is skipped, not waited for, so it cannot hold up
    the beat of all the others. A skipped job is not known to have ended: it counts as
    alive, and the next beat tries it again.
    """
    rows = db.session.execute(
        text(
            "WITH free AS (SELECT id FROM assessment_jobs WHERE id = ANY(:ids)"
            "   FOR UPDATE SKIP LOCKED),"
            " beat AS (UPDATE assessment_jobs j SET heartbeat_at = now(), draining = :draining"
            f"   FROM free WHERE j.id = free.id AND NOT {STALE}"
            "   AND j.status IN ('pending', 'running') RETURNING j.id)"
            # Ended: free but not beaten (no longer live), or no row at all.
            " SELECT i.id FROM unnest(CAST(:ids AS uuid[])) AS i(id)"
            " WHERE (i.id IN (SELECT id FROM free) AND i.id NOT IN (SELECT id FROM beat))"
            "   OR NOT EXISTS (SELECT 1 FROM assessment_jobs a WHERE a.id = i.id)"
        ),
        {"ids": job_ids, "draining": draining, **ages()},
    ).scalars()
    ended = set(rows)
    db.session.commit()
    return set(job_ids) - ended


def reap(job_id: uuid.UUID) -> bool:
    """Fail a stale job in one conditional UPDATE; True only for the one caller that did."""
    reaped = db.session.execute(
        text(
            "UPDATE assessment_jobs j SET status = 'failed', error_code = 'INTERRUPTED',"
            f" message = :m, finished_at = {FINISHED_NOW}"
            f" WHERE j.id = :id AND {STALE} RETURNING j.user_id, {DURATION},"
            # The reap left heartbeat_at as it was: how long the job had been silent.
            " extract(epoch FROM now() - coalesce(j.heartbeat_at, j.started_at, j.created_at))"
            "   ::float AS silent_for"
        ),
        {"id": job_id, "m": REAP_MESSAGE, **ages()},
    ).first()
    db.session.commit()
    if reaped is not None:
        metrics.reaped(job_id, reaped.user_id, reaped.silent_for, reaped.duration)
    return reaped is not None


def execute_one(statement: TextClause, params: dict[str, Any]) -> Any:
    """Run one statement in autocommit on a pooled connection; return its first row.

    For the two hot statements, the poll's SELECT and the submit's INSERT. Through the
    ORM session or Core the poll's SELECT cost 0.86-0.89 ms a call, with BEGIN and
    ROLLBACK around it; as one autocommit statement on the pooled psycopg connection,
    0.12 ms (bench/poll_parts.py). The SQL is still SQLAlchemy's, compiled once.
    """
    conn = db.engine.raw_connection()
    pg = conn.driver_connection
    try:
        pg.autocommit = True
        try:
            with pg.cursor(row_factory=namedtuple_row) as cur:
                cur.execute(_compiled(statement), params)
                return cur.fetchone()
        finally:
            pg.autocommit = False
    except psycopg.Error:
        if pg.broken:  # the database went away: drop the connection, do not pool it
            conn.invalidate()
        raise
    finally:
        conn.close()  # back to the pool


@functools.cache
def _compiled(statement: TextClause) -> str:
    return str(statement.compile(dialect=postgresql_psycopg.dialect()))


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)
