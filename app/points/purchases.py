"""Points people buy: packs, Stripe Checkout, and the webhook's credits and reversals.

The books move only here and only by the database's rules: a `purchase` ledger row per
Checkout Session (a partial unique index on its session id), a `purchase_refund` row
per session that takes back what is left of it (another one), both inserted with ON
CONFLICT DO NOTHING, so a webhook that Stripe re-delivers, delivers twice at once or
delivers out of order credits and reverses exactly once
(migrations/versions/i27_purchases.py). Nothing here builds a response: app/web/payments.py
verifies the signature and answers Stripe.

checkout_sessions holds the sessions we created and where their payment stands (open,
awaiting a konbini payment, paid, failed, expired): the page after paying reads it. The
ledger, not that table, is what says a session was credited.
"""

import logging
from dataclasses import dataclass
from typing import Any

import stripe
from sqlalchemy import Row, text

from ..extensions import db
from ..operations import metrics
from . import incidents

log = logging.getLogger(__name__)

CURRENCY = "jpy"  # a zero-decimal currency: amounts are whole yen
PURCHASE_REASON = "points purchase"
REFUND_REASON = "payment refunded"
# The events the webhook acts on; every other type is answered 200 and ignored.
CREDITING = ("checkout.session.completed", "checkout.session.async_payment_succeeded")
HANDLED = (*CREDITING, "checkout.session.async_payment_failed", "checkout.session.expired")
REFUNDED = "charge.refunded"


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


def handle(event: dict[str, Any], packs: dict[int, Pack]) -> str:
    """Act on a verified Stripe event (parsed JSON); return what was done, for the log.

    Commits what it writes. Raises only on a database error, so that Stripe re-delivers.
    """
    kind = event.get("type", "")
    obj = (event.get("data") or {}).get("object") or {}
    if kind in CREDITING:
        if kind == "checkout.session.completed" and obj.get("payment_status") != "paid":
            # Konbini, bank transfer: paid later, or never. async_payment_* will say.
            _set_status(obj, "awaiting_payment", only_from=("open",))
            outcome = "awaiting_payment"
        else:
            outcome = credit(obj, packs)
    elif kind == "checkout.session.async_payment_failed":
        _set_status(obj, "failed", only_from=("open", "awaiting_payment"))
        outcome = "payment_failed"
    elif kind == "checkout.session.expired":
        _set_status(obj, "expired", only_from=("open",))
        outcome = "expired"
    elif kind == REFUNDED:
        outcome = reverse(obj)
    else:
        outcome = "ignored"
    metrics.webhook_event(kind if kind in (*HANDLED, REFUNDED) else "other", outcome, kind)
    return outcome


def credit(obj: dict[str, Any], packs: dict[int, Pack]) -> str:
    """Credit a paid Checkout Session's pack once; open an incident if it does not match."""
    session_id = str(obj.get("id") or "")
    metadata = obj.get("metadata") or {}
    try:
        user_id, points = int(metadata["user_id"]), int(metadata["points"])
    except (KeyError, TypeError, ValueError):
        return _mismatch(session_id, None, f"metadata without user_id and points: {metadata}")
    known = db.session.execute(text("SELECT 1 FROM users WHERE id = :u"), {"u": user_id}).first()
    if known is None:  # an incident cannot name a user who is not there
        return _mismatch(session_id, None, f"no user {user_id}")
    pack = packs.get(points)
    paid = (obj.get("amount_total"), obj.get("currency"))
    if str(obj.get("client_reference_id")) != str(user_id):
        return _mismatch(
            session_id, user_id, f"client_reference_id {obj.get('client_reference_id')!r}"
        )
    if pack is None or paid != (pack.yen, CURRENCY):
        expected = f"{pack.yen} {CURRENCY}" if pack else "no such pack"
        return _mismatch(
            session_id,
            user_id,
            f"{points} points paid {paid[0]} {paid[1]}; the pack is {expected}",
        )
    inserted = db.session.execute(
        text(
            "INSERT INTO point_ledger (user_id, kind, amount, checkout_session, reason)"
            " VALUES (:u, 'purchase', :n, :s, :r)"
            " ON CONFLICT (checkout_session) WHERE kind = 'purchase' DO NOTHING RETURNING id"
        ),
        {"u": user_id, "n": pack.points, "s": session_id, "r": PURCHASE_REASON},
    ).scalar_one_or_none()
    db.session.execute(
        text(
            "INSERT INTO checkout_sessions"
            " (id, user_id, points, amount, currency, status, payment_intent)"
            " VALUES (:s, :u, :n, :a, :c, 'paid', :pi)"
            " ON CONFLICT (id) DO UPDATE SET status = 'paid', updated_at = now(),"
            "  payment_intent = coalesce(checkout_sessions.payment_intent, EXCLUDED.payment_intent)"
        ),
        {
            "s": session_id,
            "u": user_id,
            "n": pack.points,
            "a": pack.yen,
            "c": CURRENCY,
            "pi": obj.get("payment_intent"),
        },
    )
    db.session.commit()
    if inserted is None:
        return "already_credited"
    metrics.purchased(session_id, user_id, pack.points, pack.yen)
    return "credited"


def _mismatch(session_id: str, user_id: int | None, detail: str) -> str:
    db.session.rollback()
    incidents.record(
        scope="payment",
        code="PURCHASE_MISMATCH",
        severity="critical",
        job_id=None,
        user_id=user_id,
        detail=f"Checkout Session {session_id}: {detail}; no points credited",
        payment_ref=session_id or None,
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
            "s": obj.get("id"),
            "pi": obj.get("payment_intent"),
            "from": list(only_from),
        },
    )
    db.session.commit()


def reverse(charge: dict[str, Any]) -> str:
    """Take back a refunded payment's points: all if unspent, else what is left (and an incident).

    Only a full refund reverses a pack; a partial one is for support to settle. The
    user's row is locked first, so a consume cannot slip between reading the balance
    and taking from it, and the balance never goes below zero.
    """
    purchase = db.session.execute(
        text(
            "SELECT l.id, l.user_id, l.amount, l.checkout_session FROM point_ledger l"
            " JOIN checkout_sessions c ON c.id = l.checkout_session"
            " WHERE l.kind = 'purchase' AND c.payment_intent = :pi"
        ),
        {"pi": charge.get("payment_intent")},
    ).first()
    if purchase is None:
        db.session.rollback()
        incidents.record(
            scope="payment",
            code="REFUND_UNMATCHED",
            severity="warning",
            job_id=None,
            user_id=None,
            detail=f"charge {charge.get('id')} (payment {charge.get('payment_intent')}) was"
            " refunded, but no credited purchase has that payment (yet: if one is credited"
            " later, take its points back with a correction)",
            payment_ref=str(charge.get("id")),
        )
        return "unmatched"
    if not charge.get("refunded"):
        db.session.rollback()
        incidents.record(
            scope="payment",
            code="PARTIAL_REFUND",
            severity="warning",
            job_id=None,
            user_id=purchase.user_id,
            detail=f"Checkout Session {purchase.checkout_session}:"
            f" {charge.get('amount_refunded')} of {charge.get('amount')} yen refunded;"
            f" the {purchase.amount} points were left as they are",
            payment_ref=purchase.checkout_session,
        )
        return "partial"
    balance = db.session.execute(
        text("SELECT point_balance FROM users WHERE id = :u FOR UPDATE"), {"u": purchase.user_id}
    ).scalar_one()
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
            "n": -min(purchase.amount, balance),
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
        incidents.record(
            scope="payment",
            code="REFUND_AFTER_SPEND",
            severity="warning",
            job_id=None,
            user_id=purchase.user_id,
            detail=f"Checkout Session {purchase.checkout_session} was refunded after"
            f" {purchase.amount - taken} of its {purchase.amount} points were spent;"
            f" {taken} taken back",
            payment_ref=purchase.checkout_session,
        )
    return "reversed" if inserted is not None else "already_reversed"


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
    return problems
