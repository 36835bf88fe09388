"""What a job's points are, read from the ledger, and how a failed job is settled.

Job state and money state are separate axes: the status says what happened to the
work, the ledger says what happened to the point. The billing state shown to a user
is derived from ledger rows and incidents at read time, never stored, so it cannot
drift from the ledger.
"""

import logging
import uuid
from enum import StrEnum

from sqlalchemy import text

from . import incidents, ledger
from .extensions import db
from .models import JobStatus

log = logging.getLogger(__name__)

LOOKUP_FAILED = "REAP_CONSUME_LOOKUP_FAILED"


class Billing(StrEnum):
    PENDING = "pending"  # not yet charged, or a failed job whose ledger is being checked
    CHARGED = "charged"
    REFUNDED = "refunded"
    NOT_CHARGED = "not_charged"
    SUPPORT = "support"  # the ledger could not be read: support decides


def billing_state(
    status: str, finalized: bool, charged: bool, refunded: bool, support_open: bool
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
    return Billing.CHARGED if charged else Billing.PENDING


def is_settled(status: str, finalized: bool) -> bool:
    """Tell whether nothing about this job will change any more."""
    return status == JobStatus.SUCCEEDED or (status == JobStatus.FAILED and finalized)


def finalize(job_id: uuid.UUID, user_id: int) -> bool:
    """Settle a failed job's point by the ledger; return True if this call settled it.

    Found a consume: refund it. None: nothing to give back. Either way finalized_at is
    set in the same transaction as the refund, so a crash in between leaves the job
    unfinalized for the next poll to complete. When the ledger cannot be read, nothing
    is guessed: one critical incident routes the job to support, and later calls retry.
    """
    try:
        consume = ledger.consume_for_job(job_id)
        if consume is not None:
            ledger.refund(consume.id, reason="refund: assessment did not complete")
        # finalized_at IS NULL is the lock: of two finalizers, one sets it, the other
        # matches nothing and rolls back (its refund was a no-op under the unique index).
        settled = db.session.execute(
            text(
                "UPDATE assessment_jobs SET finalized_at = now()"
                " WHERE id = :id AND status = 'failed' AND finalized_at IS NULL RETURNING id"
            ),
            {"id": job_id},
        ).first()
        if settled is None:
            db.session.rollback()
            return False
        incidents.resolve_for_job(
            job_id, resolution="settled automatically: the ledger answered on a later try"
        )
        db.session.commit()
        return True
    except Exception as exc:  # noqa: BLE001 - any failure here is routed to support
        db.session.rollback()
        incidents.record(
            scope="payment",
            code=LOOKUP_FAILED,
            severity="critical",
            job_id=job_id,
            user_id=user_id,
            detail=f"{type(exc).__name__}: {exc}",
        )
        return False


def settle_by_support(job_id: uuid.UUID, support_id: int, refund: bool, reason: str) -> bool:
    """Settle a job routed to support: refund its point or record that none is due."""
    consume = ledger.consume_for_job(job_id)
    if refund and consume is not None:
        ledger.refund(consume.id, reason=f"refund by support: {reason}")
    db.session.execute(
        text(
            "UPDATE assessment_jobs SET finalized_at = coalesce(finalized_at, now()),"
            " message = :m WHERE id = :id AND status = 'failed'"
        ),
        {"id": job_id, "m": f"Support reviewed this assessment: {reason}"},
    )
    resolved = incidents.resolve_for_job(
        job_id,
        resolution=("refund" if refund else "no refund due") + f": {reason}",
        resolved_by=support_id,
    )
    db.session.commit()
    return resolved > 0
