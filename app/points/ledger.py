"""The points ledger: every change to a balance is a ledger row, and only a ledger row.

These functions run inside the caller's transaction and never commit: the caller
decides what else belongs in the same unit (a refund and the job's final message,
for one). They only insert ledger rows: a trigger applies each row's amount to
users.point_balance in the same statement, and refuses any other balance change
(migrations/versions/03_ledger_enforced.py). The partial unique indexes make
consume and refund idempotent; ON CONFLICT DO NOTHING turns the second attempt into
a no-op that moves no balance.
"""

import uuid
from dataclasses import dataclass

from psycopg.errors import CheckViolation
from sqlalchemy import Row, text
from sqlalchemy.exc import IntegrityError

from ..extensions import db
from ..operations import failpoints

NONNEGATIVE = "ck_users_point_balance_nonnegative"


class InsufficientPoints(Exception):
    """The user has no point to spend."""


@dataclass(frozen=True)
class Mismatch:
    user_id: int
    email: str
    balance: int
    ledger_sum: int


def grant(user_id: int, amount: int, reason: str) -> int:
    """Add points to a user's balance and return the ledger row's id."""
    if amount <= 0:
        raise ValueError("a grant must be positive")
    return db.session.execute(
        text(
            "INSERT INTO point_ledger (user_id, kind, amount, reason)"
            " VALUES (:u, 'grant', :n, :r) RETURNING id"
        ),
        {"u": user_id, "n": amount, "r": reason},
    ).scalar_one()


def consume(user_id: int, job_id: uuid.UUID, reason: str = "area assessment") -> int:
    """Spend one point on a job, at most once per job, and return the consume's id.

    Raise InsufficientPoints when the balance is zero: the CHECK (point_balance >= 0)
    fails inside the ledger trigger's UPDATE, so the statement writes nothing, and the
    caller must roll its transaction back.
    """
    try:
        inserted = db.session.execute(
            text(
                "INSERT INTO point_ledger (user_id, kind, amount, job_id, reason)"
                " VALUES (:u, 'consume', -1, :j, :r)"
                " ON CONFLICT (job_id) WHERE kind = 'consume' DO NOTHING"
                " RETURNING id"
            ),
            {"u": user_id, "j": job_id, "r": reason},
        ).scalar_one_or_none()
    except IntegrityError as exc:
        orig = exc.orig
        if isinstance(orig, CheckViolation) and orig.diag.constraint_name == NONNEGATIVE:
            raise InsufficientPoints("no point left to spend") from exc
        raise
    if inserted is None:  # this job was charged already: charging again is a no-op
        return consume_for_job(job_id).id
    return inserted


def refund(consume_id: int, reason: str) -> int | None:
    """Give back the point of one consume; return the refund's id, or None if it had one."""
    failpoints.hit("before_refund")
    return db.session.execute(
        text(
            "INSERT INTO point_ledger (user_id, kind, amount, job_id, refund_of, reason)"
            " SELECT user_id, 'refund', 1, job_id, id, :r FROM point_ledger"
            " WHERE id = :c AND kind = 'consume'"
            " ON CONFLICT (refund_of) WHERE kind = 'refund' DO NOTHING"
            " RETURNING id"
        ),
        {"c": consume_id, "r": reason},
    ).scalar_one_or_none()


def consume_for_job(job_id: uuid.UUID) -> Row | None:
    """Return the job's consume row, if it was charged."""
    failpoints.hit("consume_lookup")
    return db.session.execute(
        text(
            "SELECT id, user_id, created_at FROM point_ledger"
            " WHERE job_id = :j AND kind = 'consume'"
        ),
        {"j": job_id},
    ).first()


def entries_for_job(job_id: uuid.UUID) -> list[Row]:
    """Return the ledger rows that belong to a job, oldest first."""
    return db.session.execute(
        text(
            "SELECT id, kind, amount, refund_of, reason, created_at FROM point_ledger"
            " WHERE job_id = :j ORDER BY id"
        ),
        {"j": job_id},
    ).all()


def balance_snapshot(user_id: int) -> int:
    """Return a user's balance, read first in a REPEATABLE READ snapshot that stays open.

    A page that shows a balance beside ledger rows or job badges reads them all in this
    snapshot, so a charge or a refund that commits between two of its reads cannot make
    them disagree. It commits what the request wrote before it (settling jobs, say); the
    snapshot's own transaction ends with the request.
    """
    db.session.commit()
    db.session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
    return db.session.execute(
        text("SELECT point_balance FROM users WHERE id = :u"), {"u": user_id}
    ).scalar_one()


def history(user_id: int, limit: int = 50, offset: int = 0) -> list[Row]:
    """Return a user's ledger rows, newest first, with the place and language of their job."""
    return db.session.execute(
        text(
            "SELECT l.id, l.kind, l.amount, l.job_id, l.reason, l.created_at, j.area,"
            " j.query_text, j.lang, l.checkout_session FROM point_ledger l"
            " LEFT JOIN assessment_jobs j ON j.id = l.job_id"
            " WHERE l.user_id = :u ORDER BY l.id DESC LIMIT :n OFFSET :o"
        ),
        {"u": user_id, "n": limit, "o": offset},
    ).all()


def balance_mismatches() -> list[Mismatch]:
    """Return every user whose balance differs from the sum of their ledger rows."""
    rows = db.session.execute(
        text(
            "SELECT u.id, u.email, u.point_balance, COALESCE(SUM(l.amount), 0) AS total"
            " FROM users u LEFT JOIN point_ledger l ON l.user_id = u.id"
            " GROUP BY u.id HAVING u.point_balance <> COALESCE(SUM(l.amount), 0)"
            " ORDER BY u.id"
        )
    ).all()
    return [Mismatch(r.id, r.email, r.point_balance, r.total) for r in rows]


def job_violations() -> list[str]:
    """Describe every job whose ledger rows break the billing invariants."""
    problems = []
    for r in db.session.execute(
        text(
            "SELECT r.id, r.job_id, c.kind, c.job_id AS consume_job, r.user_id, c.user_id AS cu"
            " FROM point_ledger r LEFT JOIN point_ledger c ON c.id = r.refund_of"
            " WHERE r.kind = 'refund' AND (c.kind IS DISTINCT FROM 'consume'"
            "   OR c.job_id IS DISTINCT FROM r.job_id OR c.user_id <> r.user_id)"
        )
    ):
        problems.append(f"refund {r.id} does not reverse a consume of its own job")
    for r in db.session.execute(
        text(
            "SELECT j.id, j.status,"
            "  (SELECT count(*) FROM point_ledger c WHERE c.job_id = j.id"
            "     AND c.kind = 'consume') AS consumes,"
            "  (SELECT count(*) FROM point_ledger f WHERE f.job_id = j.id"
            "     AND f.kind = 'refund') AS refunds,"
            # Only support's decision ("no refund due") keeps a settled job's point.
            "  EXISTS (SELECT 1 FROM incidents i WHERE i.job_id = j.id"
            "     AND i.resolved_by IS NOT NULL) AS by_support,"
            # Nothing resolves an incident left open on a settled job.
            "  EXISTS (SELECT 1 FROM incidents i WHERE i.job_id = j.id"
            "     AND i.resolved_at IS NULL) AS open_incident"
            " FROM assessment_jobs j"
            " WHERE (j.status = 'succeeded')"
            "    OR (j.status = 'failed' AND j.finalized_at IS NOT NULL)"
        )
    ):
        if r.status == "succeeded" and (r.consumes != 1 or r.refunds != 0):
            problems.append(f"job {r.id} succeeded with {r.consumes} consumes, {r.refunds} refunds")
        if r.status == "failed" and r.consumes > r.refunds and not r.by_support:
            problems.append(f"job {r.id} failed and was charged without a refund")
        if r.open_incident:
            problems.append(f"job {r.id} is settled but has an open incident")
    return problems
