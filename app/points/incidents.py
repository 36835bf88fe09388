"""Incidents: what an operator must look at, recorded once per job and code."""

import logging
import uuid

from sqlalchemy import Row, text

from ..extensions import db
from ..operations import alerts, metrics

log = logging.getLogger(__name__)


def record(
    *,
    scope: str,
    code: str,
    severity: str,
    job_id: uuid.UUID | None,
    user_id: int | None,
    detail: str,
    payment_ref: str | None = None,
) -> int | None:
    """Record an incident and alert; return its id, or None if the job already has one.

    An incident about a payment (payment_ref: its Checkout Session or charge) opens once
    per reference and code, however often the provider re-delivers the event.
    """
    conflict = (
        "(payment_ref, code) WHERE payment_ref IS NOT NULL" if payment_ref else "(job_id, code)"
    )
    new_id = db.session.execute(
        text(
            "INSERT INTO incidents (scope, code, severity, job_id, user_id, detail, payment_ref)"
            " VALUES (:scope, :code, :severity, :job, :user, :detail, :ref)"
            f" ON CONFLICT {conflict} DO NOTHING RETURNING id"
        ),
        {
            "ref": payment_ref,
            "scope": scope,
            "code": code,
            "severity": severity,
            "job": job_id,
            "user": user_id,
            "detail": detail,
        },
    ).scalar_one_or_none()
    db.session.commit()
    if new_id is not None:
        metrics.incident_opened(new_id, code, severity, job_id, user_id, f"{scope}: {detail}")
    if severity == "critical":
        alerts.kick()  # a new one, or an old one whose post failed: post what is due
    return new_id


def resolve_for_job(job_id: uuid.UUID, resolution: str) -> list[str]:
    """Close a job's open incidents (in the caller's transaction); return their codes."""
    return list(
        db.session.execute(
            text(
                "UPDATE incidents SET resolved_at = now(), resolution = :res"
                " WHERE job_id = :job AND resolved_at IS NULL RETURNING code"
            ),
            {"job": job_id, "res": resolution},
        ).scalars()
    )


def open_incidents() -> list[Row]:
    """Return the open incidents with their job and user, oldest first."""
    return db.session.execute(
        text(
            "SELECT i.id, i.scope, i.code, i.severity, i.detail, i.created_at, i.job_id,"
            " i.user_id, u.email, u.point_balance, j.status, j.query_text, j.error_code"
            " FROM incidents i LEFT JOIN users u ON u.id = i.user_id"
            " LEFT JOIN assessment_jobs j ON j.id = i.job_id"
            " WHERE i.resolved_at IS NULL ORDER BY i.created_at, i.id"
        )
    ).all()


def get(incident_id: int) -> Row | None:
    """Return one incident."""
    return db.session.execute(
        text("SELECT id, job_id, user_id, resolved_at FROM incidents WHERE id = :id"),
        {"id": incident_id},
    ).first()


def recently_resolved(limit: int = 20) -> list[Row]:
    """Return the most recently resolved incidents with who resolved them."""
    return db.session.execute(
        text(
            "SELECT i.id, i.code, i.job_id, i.resolved_at, i.resolution, s.email AS resolver"
            " FROM incidents i LEFT JOIN users s ON s.id = i.resolved_by"
            " WHERE i.resolved_at IS NOT NULL ORDER BY i.resolved_at DESC LIMIT :n"
        ),
        {"n": limit},
    ).all()


def resolve_payment(incident_id: int, support_id: int, reason: str) -> str | None:
    """Resolve a payment's incident (one with no job) with support's reason; commit.

    The points are settled apart (a support grant or correction), the money in Stripe.
    Return its code, or None if it was resolved meanwhile or is a job's.
    """
    code = db.session.execute(
        text(
            "UPDATE incidents SET resolved_at = now(), resolved_by = :by, resolution = :res"
            " WHERE id = :id AND job_id IS NULL AND resolved_at IS NULL RETURNING code"
        ),
        {"id": incident_id, "by": support_id, "res": f"settled: {reason}"},
    ).scalar_one_or_none()
    db.session.commit()
    if code is not None:
        metrics.incidents_resolved([code], None, None, by="support")
    return code
