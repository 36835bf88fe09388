"""What a job's points are, read from the ledger, and how a failed job is settled.

Job state and money state are separate axes: the status says what happened to the
work, the ledger says what happened to the point. The billing state shown to a user
is derived from ledger rows and incidents at read time, never stored, so it cannot
drift from the ledger.
"""

import logging
import time
import uuid
from enum import StrEnum

from sqlalchemy import text

from ..database import dbretry
from ..extensions import db
from ..models import JobStatus
from ..operations import metrics
from . import incidents, ledger

log = logging.getLogger(__name__)

LOOKUP_FAILED = "REAP_CONSUME_LOOKUP_FAILED"


class Billing(StrEnum):
    PENDING = "pending"  # not yet charged, or a failed job whose ledger is being checked
    CHARGED = "charged"
    REFUNDED = "refunded"
    NOT_CHARGED = "not_charged"
    SUPPORT = "support"  # the ledger could not be read: support decides


def billing_state(
    status: str,
    finalized: bool,
    charged: bool,
    refunded: bool,
    support_open: bool,
    late: bool = False,
) -> Billing:
    """Derive what a job's point is from its ledger facts."""
    if refunded:
        return Billing.REFUNDED
    if support_open:
        return Billing.SUPPORT
    if status == JobStatus.FAILED:
        if not finalized:
            return Billing.PENDING
        return Billing.CHARGED if charged else Billing.NOT_CHARGED
    if late:  # the job may have died with its point: not known until the lease runs out
        return Billing.PENDING
    return Billing.CHARGED if charged else Billing.PENDING


def is_settled(status: str, finalized: bool) -> bool:
    """Tell whether nothing about this job will change any more."""
    return status == JobStatus.SUCCEEDED or (status == JobStatus.FAILED and finalized)


RETRY_SECONDS = 2.0  # how long a finalizer without a lease of its own retries a blip


def finalize(
    job_id: uuid.UUID, user_id: int, path: str = "finalizer", until: float | None = None
) -> bool:
    """Settle a failed job's point by the ledger; return True if this call settled it.

    Found a consume: refund it. None: nothing to give back. Either way finalized_at is
    set in the same transaction as the refund, so a crash in between leaves the job
    unfinalized for the next poll to complete. A transient database error (a dropped
    connection, a deadlock) is retried until `until` (monotonic; the job's lease, or
    RETRY_SECONDS from now). When the ledger cannot be read (any other error, or a
    transient one past `until`), nothing is guessed: one critical incident routes the
    job to support, and later calls retry.
    """
    if until is None:
        until = time.monotonic() + RETRY_SECONDS
    try:
        return dbretry.retry(lambda: _settle(job_id, user_id, path), until=until)
    except Exception as exc:  # noqa: BLE001 - any failure here is routed to support
        dbretry.rollback()
        # Every failure is logged, a repeat too: its incident exists already and says nothing.
        log.exception("could not finalize job %s; support decides until a retry succeeds", job_id)
        try:
            _route_to_support(job_id, user_id, exc)
        except Exception:  # noqa: BLE001 - still "checking": the next poll tries again
            dbretry.rollback()
            log.exception("could not record an incident for job %s", job_id)
        return False


def _settle(job_id: uuid.UUID, user_id: int, path: str) -> bool:
    # The row lock makes finalizers take turns; the WHERE makes every one after the
    # first (and any call on a job that is not failed) a no-op. LOCK ORDER, here and
    # in settle_by_support: the job row first, then its incidents.
    locked = db.session.execute(
        text(
            "SELECT id FROM assessment_jobs"
            " WHERE id = :id AND status = 'failed' AND finalized_at IS NULL FOR UPDATE"
        ),
        {"id": job_id},
    ).first()
    if locked is None:
        db.session.rollback()
        return False
    consume = ledger.consume_for_job(job_id)
    refund_id = None
    if consume is not None:
        refund_id = ledger.refund(consume.id, reason="refund: assessment did not complete")
    db.session.execute(
        text("UPDATE assessment_jobs SET finalized_at = now() WHERE id = :id"),
        {"id": job_id},
    )
    resolved = incidents.resolve_for_job(
        job_id, resolution="settled automatically: the ledger answered on a later try"
    )
    db.session.commit()
    if refund_id is not None:
        metrics.refunded(job_id, user_id, path)
    metrics.incidents_resolved(resolved, job_id, user_id, by=path)
    return True


def _route_to_support(job_id: uuid.UUID, user_id: int, exc: BaseException) -> None:
    """Open the job's critical incident, unless the job was settled meanwhile.

    The check and the insert are one transaction under the job's row lock (the job row
    first, then its incidents): a finalizer that settles the job either committed
    before this lock (finalized_at is set, nothing is recorded) or waits for this
    commit and resolves the incident in its own. Either way no incident stays open on
    a settled job, where nothing would ever resolve it.
    """
    # A commit whose answer was lost may have landed too: then there is nothing to alert.
    unsettled = db.session.execute(
        text(
            "SELECT id FROM assessment_jobs"
            " WHERE id = :id AND status = 'failed' AND finalized_at IS NULL FOR UPDATE"
        ),
        {"id": job_id},
    ).first()
    if unsettled is None:
        db.session.rollback()
        log.warning("job %s was settled after all: no incident", job_id)
        return
    incidents.record(  # inserts and commits, releasing the lock
        scope="payment",
        code=LOOKUP_FAILED,
        severity="critical",
        job_id=job_id,
        user_id=user_id,
        detail=f"{type(exc).__name__}: {exc}",
    )


def settle_by_support(
    incident_id: int, job_id: uuid.UUID, support_id: int, refund: bool, reason: str
) -> bool:
    """Settle a failed job routed to support: refund its point or record that none is due.

    Return False, changing nothing, if the incident was resolved meanwhile or the job
    is not a failed one (a job that succeeded is never refunded).
    """
    resolution = ("refund" if refund else "no refund due") + f": {reason}"
    # LOCK ORDER: the job row first, then its incidents, as in finalize(); the opposite
    # order let a finalizer and a support agent each hold what the other waited for.
    failed = db.session.execute(
        text("SELECT id FROM assessment_jobs WHERE id = :id AND status = 'failed' FOR UPDATE"),
        {"id": job_id},
    ).first()
    resolved = db.session.execute(
        text(
            "UPDATE incidents SET resolved_at = now(), resolved_by = :by, resolution = :res"
            " WHERE id = :id AND job_id = :job AND resolved_at IS NULL RETURNING code, user_id"
        ),
        {"id": incident_id, "job": job_id, "by": support_id, "res": resolution},
    ).first()
    if resolved is None or failed is None:
        db.session.rollback()
        return False
    consume = ledger.consume_for_job(job_id)
    refund_id = None
    if refund and consume is not None:
        refund_id = ledger.refund(consume.id, reason=f"refund by support: {reason}")
    db.session.execute(
        text(
            "UPDATE assessment_jobs SET finalized_at = coalesce(finalized_at, now()),"
            " message = :m WHERE id = :id"
        ),
        {"id": job_id, "m": f"Support reviewed this assessment: {reason}"},
    )
    db.session.commit()
    if refund_id is not None:
        metrics.refunded(job_id, resolved.user_id, "support")
    metrics.incidents_resolved([resolved.code], job_id, resolved.user_id, by="support")
    return True
