"""A credit: a paid Checkout Session's points, once, as the session was recorded."""

from typing import Any

from sqlalchemy import text

from ..extensions import db
from ..operations import failpoints, metrics
from . import payment, refunds
from .checkout import Pack

REASON = "points purchase"


def credit(obj: dict[str, Any], packs: dict[int, Pack]) -> str:
    """Credit a paid Checkout Session once, as recorded when it was created.

    The session's row (what was offered: user, points, yen) is the contract, not today's
    POINT_PACKS: a konbini payment settling after a price change still gets its pack. The
    event must agree with the row, or nothing is credited and an incident opens; a session
    we have no row for is never credited from the event's metadata alone. A refund of the
    payment delivered before this credit (remembered in payment_refunds) is applied in the
    same transaction: a full one reverses the pack at once, a partial one opens its incident.
    """
    session_id = payment.text_of(obj.get("id"))
    if session_id is None:
        return _mismatch(None, None, "no session id", ref=payment.unnamed_ref(obj))
    row = db.session.execute(
        text(
            "SELECT user_id, points, amount, currency, payment_intent"
            " FROM checkout_sessions WHERE id = :s"
        ),
        {"s": session_id},
    ).first()
    if row is None:
        # We did not create it (or did not record it): what was promised is unknown.
        return _mismatch(session_id, None, "no Checkout Session of ours has this id")
    payment_intent = row.payment_intent or payment.text_of(obj.get("payment_intent"))
    payment.lock(payment_intent)
    already = db.session.execute(
        text("SELECT 1 FROM point_ledger WHERE checkout_session = :s AND kind = 'purchase'"),
        {"s": session_id},
    ).first()
    if already is None:
        metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        event = (
            metadata.get("user_id"),
            metadata.get("points"),
            obj.get("client_reference_id"),
            payment.int_of(obj.get("amount_total")),
            obj.get("currency"),
        )
        recorded = (str(row.user_id), str(row.points), str(row.user_id), row.amount, row.currency)
        if event != recorded:
            return _mismatch(
                session_id,
                row.user_id,
                "the event (user, points, client_reference_id, amount, currency) says"
                f" {event}; the session was created for {recorded}",
            )
    inserted = db.session.execute(
        text(
            "INSERT INTO point_ledger (user_id, kind, amount, checkout_session, reason)"
            " VALUES (:u, 'purchase', :n, :s, :r)"
            " ON CONFLICT (checkout_session) WHERE kind = 'purchase' DO NOTHING RETURNING id"
        ),
        {"u": row.user_id, "n": row.points, "s": session_id, "r": REASON},
    ).scalar_one_or_none()
    db.session.execute(
        text(
            "UPDATE checkout_sessions SET status = 'paid', updated_at = now(),"
            " payment_intent = coalesce(payment_intent, :pi) WHERE id = :s"
        ),
        {"s": session_id, "pi": payment_intent},
    )
    if inserted is not None:
        # A wrong event before this right one said "no points credited": no longer so.
        db.session.execute(
            text(
                "UPDATE incidents SET resolved_at = now(),"
                " resolution = 'settled: a matching event credited the session later'"
                " WHERE payment_ref = :s AND code = 'PURCHASE_MISMATCH' AND resolved_at IS NULL"
            ),
            {"s": session_id},
        )
    refund = refunds.recorded(payment_intent)
    reversed_now = False
    if inserted is not None and refund and refund.full_refund and not refund.partial_seen:
        reversed_now = refunds.reverse_unspent(
            session_id, row.user_id, row.points, refund.charge_id
        )
    failpoints.hit("before_credit_commit")
    db.session.commit()
    if inserted is not None:
        metrics.purchased(session_id, row.user_id, row.points, row.amount)
    if reversed_now:
        metrics.purchase_reversed(session_id, row.user_id, row.points, row.points)
    if refund is not None and refund.full_refund and refund.partial_seen:
        refunds.full_after_partial_incident(session_id, row.user_id, row.points)
    elif refund is not None and not refund.full_refund and refund.amount_refunded:
        refunds.partial_incident(
            session_id, row.user_id, row.points, refund.amount_refunded, refund.amount
        )
    if inserted is None:
        return "already_credited"
    return "credited_and_reversed" if reversed_now else "credited"


def _mismatch(
    session_id: str | None, user_id: int | None, detail: str, ref: str | None = None
) -> str:
    db.session.rollback()
    payment.incident(
        "PURCHASE_MISMATCH",
        "critical",
        user_id=user_id,
        detail=f"Checkout Session {session_id}: {detail}; no points credited",
        ref=session_id or ref,
    )
    return "mismatch"
