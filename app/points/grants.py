"""Support grants and corrections: points added or taken back from the console, by a named
operator, with the reason the user reads in their history."""

from psycopg.errors import CheckViolation
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from ..extensions import db
from .ledger import NONNEGATIVE, InsufficientPoints


class AlreadyApplied(Exception):
    """This operator's form (its nonce) was already recorded: a double submit."""


def adjust(
    user_id: int, amount: int, operator_id: int, reason: str, nonce: str | None = None
) -> int:
    """Add (or, negative, take back) points as a `support` ledger row; return the new balance.

    Commits. Raises InsufficientPoints, writing nothing, when a correction would take the
    balance below zero; ValueError for a zero amount or an empty reason; AlreadyApplied,
    writing nothing, when the operator's nonce (the console form's one-time value) was
    used already (unique per operator: migrations/versions/11_purchases_fix.py).
    """
    if amount == 0 or not reason.strip():
        raise ValueError("a support adjustment needs a non-zero amount and a reason")
    try:
        written = db.session.execute(
            text(
                "INSERT INTO point_ledger"
                " (user_id, kind, amount, operator_id, reason, support_nonce)"
                " VALUES (:u, 'support', :n, :op, :r, :nonce)"
                " ON CONFLICT (operator_id, support_nonce) WHERE support_nonce IS NOT NULL"
                " DO NOTHING RETURNING id"
            ),
            {"u": user_id, "n": amount, "op": operator_id, "r": reason.strip(), "nonce": nonce},
        ).scalar_one_or_none()
    except IntegrityError as exc:
        db.session.rollback()
        orig = exc.orig
        if isinstance(orig, CheckViolation) and orig.diag.constraint_name == NONNEGATIVE:
            raise InsufficientPoints("the correction would take the balance below zero") from exc
        raise
    if written is None:
        db.session.rollback()
        raise AlreadyApplied(nonce)
    balance = db.session.execute(
        text("SELECT point_balance FROM users WHERE id = :u"), {"u": user_id}
    ).scalar_one()
    db.session.commit()
    return balance


def recent(limit: int = 20):
    """Return the latest support rows with their user and operator, newest first."""
    return db.session.execute(
        text(
            "SELECT l.id, l.amount, l.reason, l.created_at, u.email, o.email AS operator"
            " FROM point_ledger l JOIN users u ON u.id = l.user_id"
            " JOIN users o ON o.id = l.operator_id"
            " WHERE l.kind = 'support' ORDER BY l.id DESC LIMIT :n"
        ),
        {"n": limit},
    ).all()
