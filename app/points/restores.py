"""A refund that did not go through (refund.failed, charge.refund.updated): what it took
is given back once, and support hears of what it cannot settle by itself.
"""

import logging
from typing import Any

from sqlalchemy import Row, text

from ..extensions import db
from ..operations import metrics
from . import payment

log = logging.getLogger(__name__)

REASON = "refund did not go through"


def undo_refund(refund: dict[str, Any], created: int | None = None) -> str:
    """Give back what a refund took, once, when Stripe says it failed or was cancelled.

    A konbini refund waits for the buyer's bank details and may fail or be cancelled
    (`refund.failed`, `charge.refund.updated`); the money stays with us, so the points
    do too. The failure is remembered by its payment (each Refund id once) before
    anything else, so a `charge.refunded` delivered after it but older than it takes
    nothing. A reversal of the session is given back as a `purchase_restore` row (one
    per session, by the database); a failed refund that moved no points but may have
    moved support's hand (a partial one) opens an incident instead.
    """
    if refund.get("status") not in ("failed", "canceled"):
        return "ignored"  # pending, requires_action, succeeded: charge.refunded says
    payment_intent, refund_id = (
        payment.text_of(refund.get("payment_intent")),
        payment.text_of(refund.get("id")),
    )
    amount, charge_id = (
        payment.int_of(refund.get("amount")),
        payment.text_of(refund.get("charge")) or "",
    )
    if payment_intent is None or refund_id is None:
        return _refund_failed_incident(
            None,
            refund_id,
            payment_intent,
            amount,
            "names no payment",
            ref=payment.unnamed_ref(refund),
        )
    payment.lock(payment_intent)
    seen = db.session.execute(
        text("SELECT :re = ANY(failed_refunds) FROM payment_refunds WHERE payment_intent = :pi"),
        {"pi": payment_intent, "re": refund_id},
    ).scalar()  # this Refund's failure delivered before (None: no refund of it known)
    db.session.execute(
        text(
            "INSERT INTO payment_refunds (payment_intent, charge_id, amount_refunded,"
            "   full_refund, partial_seen, failed_refunds, failed_until)"
            " VALUES (:pi, :c, 0, false, false, ARRAY[CAST(:re AS text)], to_timestamp(:t))"
            " ON CONFLICT (payment_intent) DO UPDATE SET updated_at = now(),"
            # Each failed Refund counts once, however often its event is delivered.
            "  amount_refunded = CASE WHEN :re = ANY(payment_refunds.failed_refunds)"
            "    THEN payment_refunds.amount_refunded"
            "    ELSE greatest(0, payment_refunds.amount_refunded - coalesce(:a, 0)) END,"
            "  full_refund = payment_refunds.full_refund"
            "    AND :re = ANY(payment_refunds.failed_refunds),"
            "  failed_refunds = CASE WHEN :re = ANY(payment_refunds.failed_refunds)"
            "    THEN payment_refunds.failed_refunds"
            "    ELSE payment_refunds.failed_refunds || CAST(:re AS text) END,"
            "  failed_until = greatest(payment_refunds.failed_until, to_timestamp(:t))"
        ),
        {"pi": payment_intent, "c": charge_id, "re": refund_id, "a": amount, "t": created or 0},
    )
    # Each failure by itself, with its amount and when its refund was made: an older
    # charge.refunded is judged by the refunds it can contain (_undone_since).
    db.session.execute(
        text(
            "INSERT INTO refund_failures"
            " (refund_id, payment_intent, amount, refund_created, failed_at)"
            " VALUES (:re, :pi, :a, to_timestamp(:made), to_timestamp(:t))"
            " ON CONFLICT (refund_id) DO NOTHING"
        ),
        {
            "re": refund_id,
            "pi": payment_intent,
            "a": amount if amount is not None and amount >= 0 else None,
            "made": payment.int_of(refund.get("created")),
            "t": created or 0,
        },
    )
    purchase = db.session.execute(
        text(
            "SELECT p.user_id, p.amount AS points, p.checkout_session, c.amount AS yen,"
            " r.id AS reversal, r.amount AS taken FROM point_ledger p"
            " JOIN checkout_sessions c ON c.id = p.checkout_session"
            " LEFT JOIN point_ledger r ON r.checkout_session = p.checkout_session"
            "   AND r.kind = 'purchase_refund'"
            " WHERE p.kind = 'purchase' AND c.payment_intent = :pi"
        ),
        {"pi": payment_intent},
    ).first()
    if purchase is None:
        db.session.commit()  # remembered: a late charge.refunded older than it takes nothing
        return _refund_failed_incident(
            None, refund_id, payment_intent, amount, "no credited purchase has that payment"
        )
    if purchase.reversal is None:
        after_partial = _hand_settled(purchase.checkout_session, "REFUND_AFTER_PARTIAL")
        db.session.commit()
        if amount is not None and amount >= purchase.yen and after_partial is None:
            return "nothing_taken"  # a full refund that never took points: nothing to give
        if amount is not None and amount >= purchase.yen:
            # Support was asked to settle this full refund by hand: what it took for a
            # refund that never paid out is the buyer's again.
            _refund_failed_incident(
                purchase.user_id,
                refund_id,
                payment_intent,
                amount,
                f"Checkout Session {purchase.checkout_session}'s full refund after a partial"
                f" one was left to support (REFUND_AFTER_PARTIAL), which has taken"
                f" {after_partial.taken} point(s) from this user by hand since: give back"
                f" what was taken for this refund, up to its {purchase.points} points",
                severity="critical",
            )
            return "failed_after_partial"
        return _refund_failed_incident(
            purchase.user_id,
            refund_id,
            payment_intent,
            amount,
            f"it was a partial refund of Checkout Session {purchase.checkout_session}, which"
            " moved no points by itself; give back any correction made for it",
        )
    if amount is None or amount < purchase.yen:
        # The pack was taken back for a full refund, but this failed refund was only a part
        # of it: the rest of the money stays refunded, so giving the whole pack back would
        # invent points. Support decides what is owed.
        db.session.commit()
        return _refund_failed_incident(
            purchase.user_id,
            refund_id,
            payment_intent,
            amount,
            f"it was a partial refund of Checkout Session {purchase.checkout_session}, whose"
            " points were taken back for a full refund; the rest stays refunded, so nothing"
            " was given back: decide what is owed",
        )
    inserted = db.session.execute(
        text(
            "INSERT INTO point_ledger"
            " (user_id, kind, amount, checkout_session, refund_of, reason)"
            " VALUES (:u, 'purchase_restore', :n, :s, :r, :why)"
            " ON CONFLICT (checkout_session) WHERE kind = 'purchase_restore' DO NOTHING"
            " RETURNING id"
        ),
        {
            "u": purchase.user_id,
            "n": -purchase.taken,
            "s": purchase.checkout_session,
            "r": purchase.reversal,
            "why": REASON,
        },
    ).scalar_one_or_none()
    if inserted is None:
        if seen:
            db.session.commit()
            return "already_restored"
        # Another Refund of a session already given back (one restore per session): it
        # moved no points, but support may have taken some by hand for it. The incident
        # is written in this failure's own transaction: a re-delivery finds both or neither.
        _refund_failed_incident(
            purchase.user_id,
            refund_id,
            payment_intent,
            amount,
            f"Checkout Session {purchase.checkout_session}'s points were given back"
            " already for an earlier refund that failed; nothing moved: give back any"
            " points taken by hand for this refund (REFUND_AFTER_RESTORE)",
        )
        return "failed_after_restore"
    # The points a spent pack's reversal could not take are no longer owed: the refund
    # that asked support to chase them did not go through. If support chased them already
    # (closed the incident, or took points by hand since), it hears what to give back.
    chased = _hand_settled(purchase.checkout_session, "REFUND_AFTER_SPEND")
    if chased is not None and (chased.by_support or chased.taken):
        spent = purchase.points + purchase.taken  # taken is negative: what it could not take
        payment.incident(
            "REFUND_FAILED",
            "critical",
            user_id=purchase.user_id,
            detail=f"refund {refund_id} of {amount} yen (payment {payment_intent}) failed or"
            f" was cancelled after support was asked to take back the {spent} spent"
            f" point(s) of Checkout Session {purchase.checkout_session} (REFUND_AFTER_SPEND);"
            f" the {-purchase.taken} points the reversal took were given back by themselves;"
            f" support has taken {chased.taken} point(s) from this user by hand since:"
            f" give back {min(spent, chased.taken)} point(s) taken for this refund",
            ref=refund_id,  # committed with the restore: a re-delivery finds both or neither
        )
    settled = list(
        db.session.execute(
            text(
                "UPDATE incidents SET resolved_at = now(), resolution = :why"
                " WHERE payment_ref = :s AND code = 'REFUND_AFTER_SPEND'"
                "   AND resolved_at IS NULL RETURNING code"
            ),
            {"s": purchase.checkout_session, "why": f"auto: refund {refund_id} {REASON}"},
        ).scalars()
    )
    db.session.commit()
    metrics.incidents_resolved(settled, None, purchase.user_id, by="system")
    log.info(
        "refund %s of %s did not go through: %s points given back to user %s",
        refund_id,
        purchase.checkout_session,
        -purchase.taken,
        purchase.user_id,
    )
    return "restored"


def _hand_settled(session_id: str, code: str) -> Row | None:
    """A session's incident that asked support to settle points by hand; or None.

    With whether a support user closed it, and how many points support has taken from the
    user by hand (negative `support` rows) since it opened: what a refund that then fails
    may owe back.
    """
    return db.session.execute(
        text(
            "SELECT i.resolved_by IS NOT NULL AS by_support,"
            " coalesce((SELECT -sum(l.amount) FROM point_ledger l WHERE l.user_id = i.user_id"
            "   AND l.kind = 'support' AND l.amount < 0 AND l.created_at >= i.created_at),"
            "   0) AS taken"
            " FROM incidents i WHERE i.payment_ref = :s AND i.code = :c"
        ),
        {"s": session_id, "c": code},
    ).first()


def _refund_failed_incident(
    user_id,
    refund_id,
    payment_intent,
    amount,
    why: str,
    severity: str = "warning",
    ref: str | None = None,
) -> str:
    # What the payment still has refunded once this failure is taken off: support reads
    # the money that went back without adding up the refunds itself.
    left = (
        db.session.execute(
            text("SELECT amount_refunded FROM payment_refunds WHERE payment_intent = :pi"),
            {"pi": payment_intent},
        ).scalar()
        if payment_intent
        else None
    )
    still = f"; {left} yen of the payment stay refunded" if left is not None else ""
    payment.incident(
        "REFUND_FAILED",
        severity,
        user_id=user_id,
        detail=f"refund {refund_id} of {amount} yen (payment {payment_intent}) failed or was"
        f" cancelled; {why}{still}",
        ref=refund_id or ref,
    )
    return "unmatched" if user_id is None else "partial_failed"
