"""Points people buy: Stripe's webhook events, each handed to the room that acts on it.

The books move only in these rooms and only by the database's rules: a `purchase` ledger row per
Checkout Session (a partial unique index on its session id), a `purchase_refund` row
per session that takes back what is left of it (another one), both inserted with ON
CONFLICT DO NOTHING, so a webhook that Stripe re-delivers, delivers twice at once or
delivers out of order credits and reverses exactly once
(migrations/versions/10_purchases.py). Nothing here builds a response: app/web/payments.py
verifies the signature and answers Stripe.

This module reads an event and hands it to its room: credits.py (a paid session),
refunds.py (charge.refunded), restores.py (a refund that failed or was cancelled); a
dispute opens an incident here. checkout.py starts a purchase, receipts.py reads one back,
payment.py holds what they share.

checkout_sessions holds the sessions we created and where their payment stands (open,
awaiting a konbini payment, paid, failed, expired): the page after paying reads it. The
ledger, not that table, is what says a session was credited.
"""

import logging
from typing import Any

from psycopg.errors import UniqueViolation
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from ..extensions import db
from ..operations import metrics
from . import credits, payment, refunds, restores
from .checkout import Pack

log = logging.getLogger(__name__)

# The events the webhook acts on; every other type is answered 200 and ignored.
CREDITING = ("checkout.session.completed", "checkout.session.async_payment_succeeded")
HANDLED = (*CREDITING, "checkout.session.async_payment_failed", "checkout.session.expired")
REFUNDED = "charge.refunded"
DISPUTED = "charge.dispute.created"  # a chargeback: an incident, no point moves
# A refund that failed or was cancelled (konbini refunds wait for bank details and may
# never be paid out): the points it took back are given back.
REFUND_UNDONE = ("refund.failed", "charge.refund.updated")
# One payment intent belongs to one Checkout Session (a unique index): an event that
# names another session's is a conflict for support, never a 500 Stripe retries forever.
PAYMENT_INTENT_INDEX = "uq_checkout_sessions_payment_intent"


def handle(event: dict[str, Any], packs: dict[int, Pack]) -> str:
    """Act on a verified Stripe event (parsed JSON); return what was done, for the log.

    Commits what it writes. Raises only on a database error, so that Stripe re-delivers.
    """
    kind = event.get("type") if isinstance(event.get("type"), str) else ""
    data = event.get("data")
    obj = data.get("object") if isinstance(data, dict) else None
    if not isinstance(obj, dict):
        # Signed by Stripe, so not an attack, but nothing to act on: say so, answer 200.
        log.warning("stripe event %r of type %r has no object; ignored", event.get("id"), kind)
        metrics.webhook_event("other", "ignored", kind)
        return "ignored"
    try:
        outcome = _act(kind, obj, packs, payment.int_of(event.get("created")))
    except IntegrityError as exc:
        orig = exc.orig
        if not isinstance(orig, UniqueViolation):
            raise
        if orig.diag.constraint_name != PAYMENT_INTENT_INDEX:
            raise
        outcome = _payment_intent_conflict(obj)
    metrics.webhook_event(
        kind if kind in (*HANDLED, REFUNDED, DISPUTED, *REFUND_UNDONE) else "other", outcome, kind
    )
    return outcome


def _act(kind: str, obj: dict[str, Any], packs: dict[int, Pack], created: int | None) -> str:
    if kind in CREDITING:
        if kind == "checkout.session.completed" and obj.get("payment_status") != "paid":
            # Konbini, bank transfer: paid later, or never. async_payment_* will say.
            _set_status(obj, "awaiting_payment", only_from=("open",))
            return "awaiting_payment"
        return credits.credit(obj, packs)
    if kind == "checkout.session.async_payment_failed":
        _set_status(obj, "failed", only_from=("open", "awaiting_payment"))
        return "payment_failed"
    if kind == "checkout.session.expired":
        _set_status(obj, "expired", only_from=("open",))
        return "expired"
    if kind == REFUNDED:
        return refunds.reverse(obj, created)
    if kind in REFUND_UNDONE:
        return restores.undo_refund(obj, created)
    if kind == DISPUTED:
        return dispute(obj)
    return "ignored"


def _payment_intent_conflict(obj: dict[str, Any]) -> str:
    """An event names a payment intent another of our sessions holds: nothing is credited."""
    db.session.rollback()
    session_id, payment_intent = (
        payment.text_of(obj.get("id")),
        payment.text_of(obj.get("payment_intent")),
    )
    owner = db.session.execute(
        text("SELECT user_id FROM checkout_sessions WHERE id = :s"), {"s": session_id}
    ).scalar_one_or_none()
    db.session.rollback()
    payment.incident(
        "PAYMENT_INTENT_CONFLICT",
        "critical",
        user_id=owner,
        detail=f"Checkout Session {session_id} names payment {payment_intent}, which another"
        " Checkout Session already holds; nothing was credited: check both in Stripe",
        ref=session_id,
    )
    return "payment_intent_conflict"


def _set_status(obj: dict[str, Any], status: str, only_from: tuple[str, ...]) -> None:
    db.session.execute(
        text(
            "UPDATE checkout_sessions SET status = :st, updated_at = now(),"
            " payment_intent = coalesce(payment_intent, :pi)"
            " WHERE id = :s AND status = ANY(:from)"
        ),
        {
            "st": status,
            "s": payment.text_of(obj.get("id")),
            "pi": payment.text_of(obj.get("payment_intent")),
            "from": list(only_from),
        },
    )
    db.session.commit()


def dispute(obj: dict[str, Any]) -> str:
    """A chargeback: the bank took the money back. Support decides; no point moves here."""
    payment_intent = payment.text_of(obj.get("payment_intent"))
    owner = db.session.execute(
        text("SELECT id, user_id FROM checkout_sessions WHERE payment_intent = :pi"),
        {"pi": payment_intent},
    ).first()
    db.session.rollback()
    dispute_id = payment.text_of(obj.get("id"))
    payment.incident(
        "CHARGEBACK",
        "critical",
        user_id=owner.user_id if owner else None,
        detail=f"dispute {dispute_id} ({obj.get('reason')!r}) on charge {obj.get('charge')}"
        f" (payment {payment_intent}, Checkout Session {owner.id if owner else None}) for"
        f" {obj.get('amount')} yen: answer it in Stripe; no points were moved",
        ref=dispute_id or payment.unnamed_ref(obj),
    )
    return "disputed"


def violations() -> list[str]:
    """Describe every purchase row that breaks the purchase invariants (flask ledger-check)."""
    problems = []
    for r in db.session.execute(
        text(
            "SELECT p.id, p.checkout_session, p.user_id, p.amount, c.user_id AS cu,"
            " c.points AS cp, c.status"
            " FROM point_ledger p LEFT JOIN checkout_sessions c ON c.id = p.checkout_session"
            " WHERE p.kind = 'purchase'"
            "   AND (c.id IS NULL OR c.user_id <> p.user_id OR c.points <> p.amount"
            "        OR c.status <> 'paid')"
        )
    ):
        problems.append(
            f"purchase {r.id} ({r.checkout_session}) does not match its Checkout Session:"
            f" user {r.user_id}/{r.cu}, points {r.amount}/{r.cp}, status {r.status}"
        )
    for r in db.session.execute(
        text(
            "SELECT r.id, r.checkout_session FROM point_ledger r"
            " LEFT JOIN point_ledger p ON p.id = r.refund_of"
            " WHERE r.kind = 'purchase_refund' AND (p.kind IS DISTINCT FROM 'purchase'"
            "   OR p.checkout_session IS DISTINCT FROM r.checkout_session"
            "   OR p.user_id <> r.user_id OR -r.amount > p.amount)"
        )
    ):
        problems.append(
            f"purchase refund {r.id} ({r.checkout_session}) does not reverse its own purchase"
        )
    for r in db.session.execute(
        text(
            "SELECT r.id, r.checkout_session, r.amount, p.amount AS credited FROM point_ledger r"
            " JOIN point_ledger p ON p.id = r.refund_of"
            " WHERE r.kind = 'purchase_refund' AND -r.amount < p.amount"
            "   AND NOT EXISTS (SELECT 1 FROM incidents i WHERE i.payment_ref = r.checkout_session"
            "     AND i.code = 'REFUND_AFTER_SPEND')"
        )
    ):
        problems.append(
            f"purchase refund {r.id} ({r.checkout_session}) took back {-r.amount} of"
            f" {r.credited} points without an incident"
        )
    for (sid,) in db.session.execute(
        text(
            "SELECT c.id FROM checkout_sessions c WHERE c.status = 'paid' AND NOT EXISTS"
            " (SELECT 1 FROM point_ledger p WHERE p.checkout_session = c.id"
            "   AND p.kind = 'purchase')"
        )
    ):
        problems.append(f"Checkout Session {sid} is marked paid but was never credited")
    for r in db.session.execute(
        text(
            "SELECT p.id, p.checkout_session, c.payment_intent FROM point_ledger p"
            " JOIN checkout_sessions c ON c.id = p.checkout_session"
            " JOIN payment_refunds f ON f.payment_intent = c.payment_intent"
            " WHERE p.kind = 'purchase' AND f.full_refund AND NOT EXISTS"
            "  (SELECT 1 FROM point_ledger r WHERE r.checkout_session = p.checkout_session"
            "    AND r.kind = 'purchase_refund')"
            " AND NOT EXISTS (SELECT 1 FROM incidents i WHERE i.code = 'REFUND_AFTER_PARTIAL'"
            "    AND i.payment_ref = p.checkout_session)"
        )
    ):
        problems.append(
            f"purchase {r.id} ({r.checkout_session}): payment {r.payment_intent} was refunded"
            " in full, but the points were not reversed and no incident says why"
        )
    for r in db.session.execute(
        text(
            "SELECT i.id, i.payment_ref FROM incidents i WHERE i.code = 'PURCHASE_MISMATCH'"
            " AND i.resolved_at IS NULL AND EXISTS (SELECT 1 FROM point_ledger p"
            "   WHERE p.kind = 'purchase' AND p.checkout_session = i.payment_ref)"
        )
    ):
        problems.append(
            f"incident {r.id} says Checkout Session {r.payment_ref} was not credited, but it was"
        )
    for r in db.session.execute(
        text(
            "SELECT l.id, l.operator_id FROM point_ledger l JOIN users o ON o.id = l.operator_id"
            " WHERE l.kind = 'support' AND o.role <> 'support'"
        )
    ):
        problems.append(f"support row {r.id} names operator {r.operator_id}, not a support user")
    for (row_id,) in db.session.execute(
        text(
            "SELECT 'ledger row ' || id FROM point_ledger WHERE checkout_session = ''"
            " UNION ALL SELECT 'a Checkout Session row' FROM checkout_sessions WHERE id = ''"
        )
    ):
        problems.append(f"{row_id} has an empty Checkout Session id")
    return problems
