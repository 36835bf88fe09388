"""A refund (charge.refunded): what is left of the pack's points is taken back, once.

Every refund is remembered by its payment (payment_refunds) before anything moves, so a
credit delivered after it applies it (credits.py) and a failure delivered before it is
weighed against it (restores.py).
"""

from typing import Any

from sqlalchemy import Row, text

from ..extensions import db
from ..operations import metrics
from . import expiry, payment

REASON = "payment refunded"


def reverse(charge: dict[str, Any], created: int | None = None) -> str:
    """Take back a refunded payment's points: all if unspent, else what is left (and an incident).

    Every refund is remembered by its payment first, so a credit that lands later (or is
    being written now: both hold the payment's lock) reverses itself. Only a full refund
    reverses a pack, and only if no partial refund came before it; a partial one is for
    support to settle, unless it arrives after the full one (then it is settled already).
    An event older than refund failures already recorded (`created`, Stripe's time of the
    event) is judged per refund: it takes nothing only if the failures of refunds made
    before it add up to what it says was refunded; otherwise the rest went back to the
    buyer, and support hears of it (_partly_undone). The user's row is
    locked first, so a consume cannot slip between reading the balance and taking from
    it, and the balance never goes below zero.
    """
    payment_intent = payment.text_of(charge.get("payment_intent"))
    charge_id = payment.text_of(charge.get("id")) or ""
    full = charge.get("refunded") is True
    if payment_intent is None:
        payment.incident(
            "REFUND_UNMATCHED",
            "warning",
            user_id=None,
            detail=f"charge {charge_id} was refunded, but names no payment",
            ref=charge_id or payment.unnamed_ref(charge),
        )
        return "unmatched"
    payment.lock(payment_intent)
    known = db.session.execute(
        text("SELECT full_refund FROM payment_refunds WHERE payment_intent = :pi"),
        {"pi": payment_intent},
    ).first()
    undone = _undone_since(payment_intent, created) if known is not None else None
    if undone is not None:
        refunded = payment.int_of(charge.get("amount_refunded"))
        if undone.unknown or refunded is None or undone.yen >= refunded:
            db.session.rollback()
            return "superseded"  # every yen it says was refunded came back
        return _partly_undone(charge, payment_intent, refunded, undone)
    if known is not None and known.full_refund and not full:
        # A partial refund's event delivered after the full one's: the full one settled it.
        db.session.rollback()
        return "already_settled"
    db.session.execute(
        text(
            "INSERT INTO payment_refunds"
            " (payment_intent, charge_id, amount, amount_refunded, full_refund, partial_seen)"
            " VALUES (:pi, :c, :a, :r, :full, NOT :full)"
            " ON CONFLICT (payment_intent) DO UPDATE SET updated_at = now(),"
            "  amount_refunded = greatest(payment_refunds.amount_refunded,"
            "                             EXCLUDED.amount_refunded),"
            "  full_refund = payment_refunds.full_refund OR EXCLUDED.full_refund,"
            # A partial refund counts as "seen before the full one" only while none was full.
            "  partial_seen = payment_refunds.partial_seen"
            "    OR (NOT EXCLUDED.full_refund AND NOT payment_refunds.full_refund)"
        ),
        {
            "pi": payment_intent,
            "c": charge_id,
            "a": payment.int_of(charge.get("amount")),
            "r": payment.int_of(charge.get("amount_refunded")),
            "full": full,
        },
    )
    purchase = db.session.execute(
        text(
            "SELECT l.id, l.user_id, l.amount, l.checkout_session FROM point_ledger l"
            " JOIN checkout_sessions c ON c.id = l.checkout_session"
            " WHERE l.kind = 'purchase' AND c.payment_intent = :pi"
        ),
        {"pi": payment_intent},
    ).first()
    if purchase is None:
        db.session.commit()  # remembered: the credit, if it comes, reads it
        payment.incident(
            "REFUND_UNMATCHED",
            "warning",
            user_id=None,
            detail=f"charge {charge_id} (payment {payment_intent}) was refunded, but no"
            " credited purchase has that payment yet; if one is credited later, a full"
            " refund is reversed then, a partial one raised",
            ref=charge_id or payment.unnamed_ref(charge),
        )
        return "unmatched"
    restored = db.session.execute(
        text(
            "SELECT 1 FROM point_ledger WHERE checkout_session = :s AND kind = 'purchase_restore'"
        ),
        {"s": purchase.checkout_session},
    ).first()
    if full and restored is not None:
        # Refunded again after a refund that came undone: its points were given back, and
        # the one reversal a session may have is spent. Support takes them back by hand.
        db.session.commit()
        payment.incident(
            "REFUND_AFTER_RESTORE",
            "critical",
            user_id=purchase.user_id,
            detail=f"Checkout Session {purchase.checkout_session} was refunded again after an"
            f" earlier refund failed and its points were given back; none of its"
            f" {purchase.amount} points were taken back automatically: settle them by hand",
            ref=purchase.checkout_session,
        )
        return "refunded_after_restore"
    partial_before = db.session.execute(
        text(
            "SELECT partial_seen OR EXISTS (SELECT 1 FROM incidents"
            "   WHERE code = 'PARTIAL_REFUND'"
            "     AND (payment_ref = :s OR starts_with(payment_ref, :s || ' ')))"
            " FROM payment_refunds WHERE payment_intent = :pi"
        ),
        {"pi": payment_intent, "s": purchase.checkout_session},
    ).scalar_one()
    if not full or partial_before:
        db.session.commit()
        if not full:
            partial_incident(
                purchase.checkout_session,
                purchase.user_id,
                purchase.amount,
                payment.int_of(charge.get("amount_refunded")),
                payment.int_of(charge.get("amount")),
            )
            return "partial"
        full_after_partial_incident(purchase.checkout_session, purchase.user_id, purchase.amount)
        return "refunded_after_partial"
    db.session.execute(
        text("SELECT 1 FROM users WHERE id = :u FOR UPDATE"), {"u": purchase.user_id}
    )
    # Only what is left of this pack's own lot: its spent or lapsed points are gone, and
    # the user's newer points are not this payment's to take.
    left = db.session.execute(text(expiry.LOT_LEFT), {"lot": purchase.id}).scalar_one()
    inserted = db.session.execute(
        text(
            "INSERT INTO point_ledger"
            " (user_id, kind, amount, checkout_session, refund_of, reason)"
            " VALUES (:u, 'purchase_refund', :n, :s, :p, :r)"
            " ON CONFLICT (checkout_session) WHERE kind = 'purchase_refund' DO NOTHING"
            " RETURNING id"
        ),
        {
            "u": purchase.user_id,
            "n": -left,
            "s": purchase.checkout_session,
            "p": purchase.id,
            "r": REASON,
        },
    ).scalar_one_or_none()
    taken = -db.session.execute(
        text(
            "SELECT amount FROM point_ledger"
            " WHERE checkout_session = :s AND kind = 'purchase_refund'"
        ),
        {"s": purchase.checkout_session},
    ).scalar_one()
    db.session.commit()
    if inserted is not None:
        metrics.purchase_reversed(
            purchase.checkout_session, purchase.user_id, taken, purchase.amount
        )
    if taken < purchase.amount:
        # Again on a re-delivery, in case the first delivery died before it: one per session.
        payment.incident(
            "REFUND_AFTER_SPEND",
            "warning",
            user_id=purchase.user_id,
            detail=f"Checkout Session {purchase.checkout_session} was refunded after"
            f" {purchase.amount - taken} of its {purchase.amount} points were spent or had lapsed;"
            f" {taken} taken back",
            ref=purchase.checkout_session,
        )
    return "reversed" if inserted is not None else "already_reversed"


def _undone_since(payment_intent: str, created: int | None) -> Row | None:
    """The refunds that failed after an event of `created` and were made before it; or None.

    Only these can be inside the amount the event says was refunded: a refund made after
    the event is not in it, and one that failed before it was already taken off by Stripe.
    A failure recorded with no amount (before 15_refund_failures) explains anything.
    """
    if created is None:
        return None
    row = db.session.execute(
        text(
            "SELECT count(*) AS n, coalesce(sum(amount), 0) AS yen,"
            " bool_or(amount IS NULL) AS unknown,"
            " string_agg(refund_id || ' (' || coalesce(amount::text, '?') || ' yen)', ', '"
            "   ORDER BY failed_at, refund_id) AS refunds"
            " FROM refund_failures WHERE payment_intent = :pi"
            "   AND failed_at >= to_timestamp(:t)"
            "   AND (refund_created IS NULL OR refund_created <= to_timestamp(:t))"
        ),
        {"pi": payment_intent, "t": created},
    ).first()
    return row if row.n else None


def _partly_undone(charge: dict[str, Any], payment_intent: str, refunded: int, undone) -> str:
    """An old charge.refunded whose refunds failed only in part: the rest went back.

    No point moves: the money still refunded is a part of the payment, which support
    settles, as any partial refund. The payment remembers it (a later full refund is then
    one after a partial), and a critical incident names the refunds and the amount.
    """
    charge_id = payment.text_of(charge.get("id")) or ""
    kept = refunded - undone.yen
    db.session.execute(
        text(
            "UPDATE payment_refunds SET updated_at = now(), partial_seen = true,"
            " amount_refunded = greatest(coalesce(amount_refunded, 0), :kept)"
            " WHERE payment_intent = :pi"
        ),
        {"pi": payment_intent, "kept": kept},
    )
    owner = db.session.execute(
        text("SELECT c.id, c.user_id FROM checkout_sessions c WHERE c.payment_intent = :pi"),
        {"pi": payment_intent},
    ).first()
    db.session.commit()
    named = (
        charge.get("refunds", {}).get("data") if isinstance(charge.get("refunds"), dict) else None
    )
    went = [
        r.get("id")
        for r in named or []
        if isinstance(r, dict) and r.get("id") and r.get("status") not in ("failed", "canceled")
    ]
    payment.incident(
        "REFUND_PARTLY_UNDONE",
        "critical",
        user_id=owner.user_id if owner else None,
        detail=f"charge {charge_id} (payment {payment_intent}, Checkout Session"
        f" {owner.id if owner else None}) said {refunded} yen were refunded, in an event"
        f" older than the failure of refund(s) {undone.refunds}; the other {kept} yen went"
        f" back to the buyer{' (refunds ' + ', '.join(went) + ')' if went else ''} and no"
        " points were taken for them: settle the points by hand",
        ref=f"{charge_id} refunded {refunded}",
    )
    return "partly_undone"


def recorded(payment_intent: str | None) -> Row | None:
    if not payment_intent:
        return None
    return db.session.execute(
        text(
            "SELECT charge_id, amount, amount_refunded, full_refund, partial_seen"
            " FROM payment_refunds WHERE payment_intent = :pi"
        ),
        {"pi": payment_intent},
    ).first()


def reverse_unspent(session_id: str, user_id: int, points: int, charge_id: str) -> bool:
    """Reverse a pack credited in this transaction (so unspent); settle the unmatched refund."""
    purchase_id = db.session.execute(
        text("SELECT id FROM point_ledger WHERE checkout_session = :s AND kind = 'purchase'"),
        {"s": session_id},
    ).scalar_one()
    inserted = db.session.execute(
        text(
            "INSERT INTO point_ledger"
            " (user_id, kind, amount, checkout_session, refund_of, reason)"
            " SELECT :u, 'purchase_refund', -least(:n, point_balance), :s, :p, :r"
            "   FROM users WHERE id = :u"
            " ON CONFLICT (checkout_session) WHERE kind = 'purchase_refund' DO NOTHING"
            " RETURNING amount"
        ),
        {"u": user_id, "n": points, "s": session_id, "p": purchase_id, "r": REASON},
    ).scalar_one_or_none()
    db.session.execute(
        text(
            "UPDATE incidents SET resolved_at = now(),"
            " resolution = 'settled: the payment was credited and reversed when it arrived'"
            " WHERE payment_ref = :c AND code = 'REFUND_UNMATCHED' AND resolved_at IS NULL"
        ),
        {"c": charge_id},
    )
    return inserted is not None


def partial_incident(
    session_id: str, user_id: int, points: int, refunded: int | None, of: int | None
) -> None:
    # One per amount refunded so far: a second partial refund is raised again, even once
    # support has resolved the first.
    payment.incident(
        "PARTIAL_REFUND",
        "warning",
        user_id=user_id,
        detail=f"Checkout Session {session_id}: {refunded} of {of} yen refunded;"
        f" the {points} points were left as they are",
        ref=f"{session_id} refunded {refunded}",
    )


def full_after_partial_incident(session_id: str, user_id: int, points: int) -> None:
    payment.incident(
        "REFUND_AFTER_PARTIAL",
        "critical",
        user_id=user_id,
        detail=f"Checkout Session {session_id} was refunded in full after a partial refund;"
        f" none of its {points} points were taken back automatically (support corrections"
        " for the partial refund may already have): settle the rest by hand",
        ref=session_id,
    )
