"""The sweep: reap and settle the dead jobs of every user, whether or not anyone polls.

A job whose process died is settled by its owner's next poll; an owner who closed the
tab and never comes back would keep a point held by a dead job forever. The sweep runs
the poll's own statements over all users: transitions.reap (the STALE predicate in its
WHERE) and billing.finalize. Candidates are read in bounded batches that skip rows
another transaction holds (FOR UPDATE SKIP LOCKED); each reap and each finalize is its
own transaction, so a crash mid-sweep leaves every job untouched, reaped and not yet
finalized (the next sweep or poll finalizes it), or settled. Nothing is half done.

It runs from housekeeping (at most once per SWEEP_INTERVAL_SECONDS across processes),
at every worker start, and as `flask sweep`.
"""

import logging
import uuid
from collections.abc import Iterator
from typing import Any

from flask import current_app
from sqlalchemy import text

from ..extensions import db
from ..operations import alerts, failpoints
from ..points import billing
from . import transitions
from .transitions import STALE

log = logging.getLogger(__name__)

BATCH = 100

# Keyset pages by id: a job the sweep cannot settle (its ledger unreadable) is passed
# over instead of being read again and again.
STALE_BATCH = text(
    "SELECT j.id, j.user_id FROM assessment_jobs j"
    f" WHERE {STALE} AND j.id > :after ORDER BY j.id LIMIT :n FOR UPDATE SKIP LOCKED"
)
UNFINALIZED_BATCH = text(
    "SELECT j.id, j.user_id FROM assessment_jobs j"
    " WHERE j.status = 'failed' AND j.finalized_at IS NULL AND j.id > :after"
    " ORDER BY j.id LIMIT :n FOR UPDATE SKIP LOCKED"
)
NIL = uuid.UUID(int=0)


def sweep(batch: int = BATCH) -> tuple[int, int]:
    """Reap every stale job and settle every failed, unfinalized one; return both counts."""
    reaped = finalized = 0
    for job_id, _ in _batches(STALE_BATCH, batch):
        if transitions.reap(job_id):
            reaped += 1
            failpoints.hit("after_reap")
    for job_id, user_id in _batches(UNFINALIZED_BATCH, batch):
        if billing.finalize(job_id, user_id):
            finalized += 1
    if reaped or finalized:
        log.warning("sweep: reaped %d job(s), finalized %d", reaped, finalized)
    # A critical incident whose alert failed, or that settled before it went out, is
    # still owed its one post: the sweep runs whether or not anyone polls that job.
    alerts.kick()
    return reaped, finalized


def _batches(statement: Any, size: int) -> Iterator[tuple[uuid.UUID, int]]:
    after = NIL
    while True:
        rows = db.session.execute(
            statement, {"after": after, "n": size, **transitions.ages()}
        ).all()
        # The locks only steer this sweep past rows that a poll, a job thread or another
        # sweep holds right now; the reap and the finalize repeat their own conditions.
        db.session.rollback()
        yield from ((row.id, row.user_id) for row in rows)
        if len(rows) < size:
            return
        after = rows[-1].id


def overdue() -> list[str]:
    """Describe every job that holds a point past its lease: the sweep has not settled it."""
    lease = current_app.config["JOB_LEASE_SECONDS"]
    rows = db.session.execute(
        text(
            "SELECT j.id, j.user_id, j.status FROM assessment_jobs j"
            f" WHERE {STALE}"
            "    OR (j.status = 'failed' AND j.finalized_at IS NULL"
            "        AND j.finished_at < now() - make_interval(secs => :lease))"
            " ORDER BY j.created_at"
        ),
        transitions.ages(),
    ).all()
    db.session.rollback()
    return [
        f"job {r.id} of user {r.user_id} is {r.status} and unsettled past its lease ({lease:g} s)"
        for r in rows
    ]
