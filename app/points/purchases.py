"""Points people buy: packs, Stripe Checkout, and the webhook's credits and reversals.

The books move only here and only by the database's rules: a `purchase` ledger row per
Checkout Session (a partial unique index on its session id), a `purchase_refund` row
per session that takes back what is left of it (another one), both inserted with ON
CONFLICT DO NOTHING, so a webhook that Stripe re-delivers, delivers twice at once or
delivers out of order credits and reverses exactly once
(migrations/versions/10_purchases.py). Nothing here builds a response: app/web/payments.py
verifies the signature and answers Stripe.

checkout_sessions holds the sessions we created and where their payment stands (open,
awaiting a konbini payment, paid, failed, expired): the page after paying reads it. The
ledger, not that table, is what says a session was credited.
"""

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

import stripe
from psycopg.errors import UniqueViolation
from sqlalchemy import Row, text
from sqlalchemy.exc import IntegrityError

from ..config import is_on
from ..extensions import db
from ..operations import failpoints, metrics
from . import expiry, incidents

log = logging.getLogger(__name__)

CURRENCY = "jpy"  # a zero-decimal currency: amounts are whole yen
PURCHASE_REASON = "points purchase"
REFUND_REASON = "payment refunded"
RESTORE_REASON = "refund did not go through"
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


@dataclass(frozen=True)
class Pack:
    points: int
    yen: int  # tax included


class CheckoutUnavailable(Exception):
    """Stripe did not create the Checkout Session (down, refused, misconfigured)."""


def parse_packs(raw: str) -> dict[int, Pack]:
    """Read POINT_PACKS ("1:500,5:2000": points:yen, tax included); raise ValueError if bad."""
    packs: dict[int, Pack] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        points, sep, yen = item.partition(":")
        try:
            pack = Pack(int(points), int(yen))
        except ValueError:
            raise ValueError(f"POINT_PACKS: {item!r} is not points:yen") from None
        if not sep or pack.points < 1 or pack.yen < 50:  # Stripe's smallest JPY charge
            raise ValueError(f"POINT_PACKS: {item!r} needs points >= 1 and yen >= 50")
        if pack.points in packs:
            raise ValueError(f"POINT_PACKS: two packs of {pack.points} points")
        packs[pack.points] = pack
    return dict(sorted(packs.items()))


def configured(config: Any) -> bool:
    """Return whether purchases can be taken: packs, a secret key and a webhook secret."""
    return bool(config.get("POINT_PACKS") and config.get("STRIPE_SECRET_KEY")) and bool(
        config.get("STRIPE_WEBHOOK_SECRET")
    )


# The contact address shipped as SUPPORT_CONTACT's default: nobody reads it.
PLACEHOLDER_CONTACT = "support@example.com"


def seller_missing(config: Any) -> list[str]:
    """Name the seller's settings that selling needs but are unset (特定商取引法 第11条).

    The name, the representative and a contact email always; the address and the phone,
    or SELLER_DISCLOSE_ON_REQUEST: only those two may be "disclosed without delay on
    request", and only when the notice says so.
    """
    missing = [name for name in ("SELLER_NAME", "SELLER_REPRESENTATIVE") if not config.get(name)]
    contact = str(config.get("SUPPORT_CONTACT") or "")
    if "@" not in contact or contact == PLACEHOLDER_CONTACT:
        missing.append("SUPPORT_CONTACT")
    if not is_on(config.get("SELLER_DISCLOSE_ON_REQUEST")):
        missing += [name for name in ("SELLER_ADDRESS", "SELLER_PHONE") if not config.get(name)]
    return missing


def live_mode(config: Any) -> bool:
    """Return whether the Stripe key takes real money (a live key, not a test-mode one)."""
    return str(config.get("STRIPE_SECRET_KEY") or "").startswith(("sk_live_", "rk_live_"))


def client(config: Any) -> stripe.StripeClient:
    """Return a Stripe client; STRIPE_API_BASE points it elsewhere (a local test server)."""
    base = config.get("STRIPE_API_BASE") or None
    return stripe.StripeClient(
        config["STRIPE_SECRET_KEY"],
        base_addresses={"api": base} if base else None,
        # A request thread must not hang on Stripe: the user can press the button again.
        http_client=stripe.RequestsClient(timeout=config.get("STRIPE_TIMEOUT_SECONDS", 10)),
        max_network_retries=1,
    )


def start_checkout(
    config: Any,
    user_id: int,
    pack: Pack,
    *,
    name: str,
    locale: str,
    success_url: str,
    cancel_url: str,
) -> str:
    """Create a Checkout Session for a pack, remember it, and return Stripe's page to send to."""
    metadata = {"user_id": str(user_id), "points": str(pack.points)}
    try:
        session = client(config).v1.checkout.sessions.create(
            {
                "mode": "payment",
                "line_items": [
                    {
                        "quantity": 1,
                        "price_data": {
                            "currency": CURRENCY,
                            "unit_amount": pack.yen,
                            "tax_behavior": "inclusive",
                            "product_data": {"name": name},
                        },
                    }
                ],
                "client_reference_id": str(user_id),
                "metadata": metadata,
                # The charge carries them too, so a refund is traceable from Stripe's side.
                "payment_intent_data": {"metadata": metadata},
                "locale": locale,
                "success_url": success_url,
                "cancel_url": cancel_url,
            }
        )
    except stripe.StripeError as exc:
        log.warning("checkout not created for user %s: %s", user_id, exc)
        raise CheckoutUnavailable(str(exc)) from exc
    db.session.execute(
        text(
            "INSERT INTO checkout_sessions (id, user_id, points, amount, currency)"
            " VALUES (:id, :u, :p, :a, :c) ON CONFLICT (id) DO NOTHING"
        ),
        {"id": session.id, "u": user_id, "p": pack.points, "a": pack.yen, "c": CURRENCY},
    )
    db.session.commit()
    metrics.checkout_started(user_id, pack.points)
    return session.url


def _text(value: Any) -> str | None:
    """A non-empty string from an event's field, or None (an event is parsed JSON: any type)."""
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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
        outcome = _act(kind, obj, packs, _int(event.get("created")))
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
        return credit(obj, packs)
    if kind == "checkout.session.async_payment_failed":
        _set_status(obj, "failed", only_from=("open", "awaiting_payment"))
        return "payment_failed"
    if kind == "checkout.session.expired":
        _set_status(obj, "expired", only_from=("open",))
        return "expired"
    if kind == REFUNDED:
        return reverse(obj, created)
    if kind in REFUND_UNDONE:
        return undo_refund(obj, created)
    if kind == DISPUTED:
        return dispute(obj)
    return "ignored"


def _unnamed(obj: dict[str, Any]) -> str:
    """A reference for an event's object that names no id of its own: the same object
    re-delivered gives the same one, so its incident opens once (a NULL reference would
    escape the unique index and open one per delivery)."""
    digest = hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()
    return f"unnamed {obj.get('object') or 'object'} {digest[:24]}"


def _payment_intent_conflict(obj: dict[str, Any]) -> str:
    """An event names a payment intent another of our sessions holds: nothing is credited."""
    db.session.rollback()
    session_id, payment_intent = _text(obj.get("id")), _text(obj.get("payment_intent"))
    owner = db.session.execute(
        text("SELECT user_id FROM checkout_sessions WHERE id = :s"), {"s": session_id}
    ).scalar_one_or_none()
    db.session.rollback()
    _payment_incident(
        "PAYMENT_INTENT_CONFLICT",
        "critical",
        user_id=owner,
        detail=f"Checkout Session {session_id} names payment {payment_intent}, which another"
        " Checkout Session already holds; nothing was credited: check both in Stripe",
        ref=session_id,
    )
    return "payment_intent_conflict"


def _lock_payment(payment_intent: str | None) -> None:
    """Serialise the credit and the reversal of one payment (until the transaction ends)."""
    if payment_intent:
        db.session.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:pi, 0))"), {"pi": payment_intent}
        )


def credit(obj: dict[str, Any], packs: dict[int, Pack]) -> str:
    """Credit a paid Checkout Session once, as recorded when it was created.

    The session's row (what was offered: user, points, yen) is the contract, not today's
    POINT_PACKS: a konbini payment settling after a price change still gets its pack. The
    event must agree with the row, or nothing is credited and an incident opens; a session
    we have no row for is never credited from the event's metadata alone. A refund of the
    payment delivered before this credit (remembered in payment_refunds) is applied in the
    same transaction: a full one reverses the pack at once, a partial one opens its incident.
    """
    session_id = _text(obj.get("id"))
    if session_id is None:
        return _mismatch(None, None, "no session id", ref=_unnamed(obj))
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
    payment_intent = row.payment_intent or _text(obj.get("payment_intent"))
    _lock_payment(payment_intent)
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
            _int(obj.get("amount_total")),
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
        {"u": row.user_id, "n": row.points, "s": session_id, "r": PURCHASE_REASON},
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
    refund = _recorded_refund(payment_intent)
    reversed_now = False
    if inserted is not None and refund and refund.full_refund and not refund.partial_seen:
        reversed_now = _reverse_unspent(session_id, row.user_id, row.points, refund.charge_id)
    failpoints.hit("before_credit_commit")
    db.session.commit()
    if inserted is not None:
        metrics.purchased(session_id, row.user_id, row.points, row.amount)
    if reversed_now:
        metrics.purchase_reversed(session_id, row.user_id, row.points, row.points)
    if refund is not None and refund.full_refund and refund.partial_seen:
        _full_after_partial_incident(session_id, row.user_id, row.points)
    elif refund is not None and not refund.full_refund and refund.amount_refunded:
        _partial_refund_incident(
            session_id, row.user_id, row.points, refund.amount_refunded, refund.amount
        )
    if inserted is None:
        return "already_credited"
    return "credited_and_reversed" if reversed_now else "credited"


def _recorded_refund(payment_intent: str | None) -> Row | None:
    if not payment_intent:
        return None
    return db.session.execute(
        text(
            "SELECT charge_id, amount, amount_refunded, full_refund, partial_seen"
            " FROM payment_refunds WHERE payment_intent = :pi"
        ),
        {"pi": payment_intent},
    ).first()


def _reverse_unspent(session_id: str, user_id: int, points: int, charge_id: str) -> bool:
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
        {"u": user_id, "n": points, "s": session_id, "p": purchase_id, "r": REFUND_REASON},
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


def _payment_incident(code: str, severity: str, *, user_id, detail: str, ref) -> None:
    """Record an incident about a payment (never a job's): support settles it."""
    incidents.record(
        scope="payment",
        code=code,
        severity=severity,
        job_id=None,
        user_id=user_id,
        detail=detail,
        payment_ref=ref,
    )


def _mismatch(
    session_id: str | None, user_id: int | None, detail: str, ref: str | None = None
) -> str:
    db.session.rollback()
    _payment_incident(
        "PURCHASE_MISMATCH",
        "critical",
        user_id=user_id,
        detail=f"Checkout Session {session_id}: {detail}; no points credited",
        ref=session_id or ref,
    )
    return "mismatch"


def _set_status(obj: dict[str, Any], status: str, only_from: tuple[str, ...]) -> None:
    db.session.execute(
        text(
            "UPDATE checkout_sessions SET status = :st, updated_at = now(),"
            " payment_intent = coalesce(payment_intent, :pi)"
            " WHERE id = :s AND status = ANY(:from)"
        ),
        {
            "st": status,
            "s": _text(obj.get("id")),
            "pi": _text(obj.get("payment_intent")),
            "from": list(only_from),
        },
    )
    db.session.commit()


def _partial_refund_incident(
    session_id: str, user_id: int, points: int, refunded: int | None, of: int | None
) -> None:
    # One per amount refunded so far: a second partial refund is raised again, even once
    # support has resolved the first.
    _payment_incident(
        "PARTIAL_REFUND",
        "warning",
        user_id=user_id,
        detail=f"Checkout Session {session_id}: {refunded} of {of} yen refunded;"
        f" the {points} points were left as they are",
        ref=f"{session_id} refunded {refunded}",
    )


def _full_after_partial_incident(session_id: str, user_id: int, points: int) -> None:
    _payment_incident(
        "REFUND_AFTER_PARTIAL",
        "critical",
        user_id=user_id,
        detail=f"Checkout Session {session_id} was refunded in full after a partial refund;"
        f" none of its {points} points were taken back automatically (support corrections"
        " for the partial refund may already have): settle the rest by hand",
        ref=session_id,
    )


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
    payment_intent = _text(charge.get("payment_intent"))
    charge_id = _text(charge.get("id")) or ""
    full = charge.get("refunded") is True
    if payment_intent is None:
        _payment_incident(
            "REFUND_UNMATCHED",
            "warning",
            user_id=None,
            detail=f"charge {charge_id} was refunded, but names no payment",
            ref=charge_id or _unnamed(charge),
        )
        return "unmatched"
    _lock_payment(payment_intent)
    known = db.session.execute(
        text("SELECT full_refund FROM payment_refunds WHERE payment_intent = :pi"),
        {"pi": payment_intent},
    ).first()
    undone = _undone_since(payment_intent, created) if known is not None else None
    if undone is not None:
        refunded = _int(charge.get("amount_refunded"))
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
            "a": _int(charge.get("amount")),
            "r": _int(charge.get("amount_refunded")),
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
        _payment_incident(
            "REFUND_UNMATCHED",
            "warning",
            user_id=None,
            detail=f"charge {charge_id} (payment {payment_intent}) was refunded, but no"
            " credited purchase has that payment yet; if one is credited later, a full"
            " refund is reversed then, a partial one raised",
            ref=charge_id or _unnamed(charge),
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
        _payment_incident(
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
            _partial_refund_incident(
                purchase.checkout_session,
                purchase.user_id,
                purchase.amount,
                _int(charge.get("amount_refunded")),
                _int(charge.get("amount")),
            )
            return "partial"
        _full_after_partial_incident(purchase.checkout_session, purchase.user_id, purchase.amount)
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
            "r": REFUND_REASON,
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
        _payment_incident(
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
    charge_id = _text(charge.get("id")) or ""
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
    _payment_incident(
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
    payment_intent, refund_id = _text(refund.get("payment_intent")), _text(refund.get("id"))
    amount, charge_id = _int(refund.get("amount")), _text(refund.get("charge")) or ""
    if payment_intent is None or refund_id is None:
        return _refund_failed_incident(
            None, refund_id, payment_intent, amount, "names no payment", ref=_unnamed(refund)
        )
    _lock_payment(payment_intent)
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
            "made": _int(refund.get("created")),
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
            "why": RESTORE_REASON,
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
        _payment_incident(
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
            {"s": purchase.checkout_session, "why": f"auto: refund {refund_id} {RESTORE_REASON}"},
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
    _payment_incident(
        "REFUND_FAILED",
        severity,
        user_id=user_id,
        detail=f"refund {refund_id} of {amount} yen (payment {payment_intent}) failed or was"
        f" cancelled; {why}{still}",
        ref=refund_id or ref,
    )
    return "unmatched" if user_id is None else "partial_failed"


def dispute(obj: dict[str, Any]) -> str:
    """A chargeback: the bank took the money back. Support decides; no point moves here."""
    payment_intent = _text(obj.get("payment_intent"))
    owner = db.session.execute(
        text("SELECT id, user_id FROM checkout_sessions WHERE payment_intent = :pi"),
        {"pi": payment_intent},
    ).first()
    db.session.rollback()
    dispute_id = _text(obj.get("id"))
    _payment_incident(
        "CHARGEBACK",
        "critical",
        user_id=owner.user_id if owner else None,
        detail=f"dispute {dispute_id} ({obj.get('reason')!r}) on charge {obj.get('charge')}"
        f" (payment {payment_intent}, Checkout Session {owner.id if owner else None}) for"
        f" {obj.get('amount')} yen: answer it in Stripe; no points were moved",
        ref=dispute_id or _unnamed(obj),
    )
    return "disputed"


def session_state(session_id: str, user_id: int) -> Row | None:
    """Return a user's Checkout Session, whether it was credited, and their balance; or None."""
    return db.session.execute(
        text(
            "SELECT c.id, c.points, c.amount, c.status, u.point_balance AS balance,"
            " EXISTS (SELECT 1 FROM point_ledger l WHERE l.checkout_session = c.id"
            "   AND l.kind = 'purchase') AS credited"
            " FROM checkout_sessions c JOIN users u ON u.id = c.user_id"
            " WHERE c.id = :s AND c.user_id = :u"
        ),
        {"s": session_id, "u": user_id},
    ).first()


TAX_RATE_PERCENT = 10  # Japan's standard consumption tax; packs are priced tax included


def tax_included(yen: int) -> int:
    """Return the consumption tax inside a tax-included price, rounded down once per receipt."""
    return yen * TAX_RATE_PERCENT // (100 + TAX_RATE_PERCENT)


def receipt(session_id: str, user_id: int) -> Row | None:
    """Return a credited purchase of the user's for its receipt (what, when, for how much)."""
    return db.session.execute(
        text(
            "SELECT c.id, c.points, c.amount, c.currency, p.created_at AS paid_at, u.email,"
            " coalesce(-r.amount, 0) AS taken_back, coalesce(s.amount, 0) AS given_back,"
            " coalesce(f.amount_refunded, 0) AS refunded"
            " FROM checkout_sessions c JOIN users u ON u.id = c.user_id"
            # The money, as Stripe last said and less the refunds that failed since: a
            # refund that moved no points (all spent, partial) is on the receipt too.
            " LEFT JOIN payment_refunds f ON f.payment_intent = c.payment_intent"
            " JOIN point_ledger p ON p.checkout_session = c.id AND p.kind = 'purchase'"
            " LEFT JOIN point_ledger r ON r.checkout_session = c.id AND r.kind = 'purchase_refund'"
            " LEFT JOIN point_ledger s ON s.checkout_session = c.id"
            "   AND s.kind = 'purchase_restore'"
            " WHERE c.id = :s AND c.user_id = :u"
        ),
        {"s": session_id, "u": user_id},
    ).first()


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
