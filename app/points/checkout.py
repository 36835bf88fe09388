"""Starting a checkout: the packs on sale, whether selling is set up, Stripe's Checkout
Session, and where a buyer's session stands.

start_checkout records the session it created in checkout_sessions (what was offered:
user, points, yen) before the buyer is sent to Stripe: that row, not the event, is what a
credit honours (credits.py).
"""

import logging
from dataclasses import dataclass
from typing import Any

import stripe
from sqlalchemy import Row, text

from ..config import is_on
from ..extensions import db
from ..operations import metrics

log = logging.getLogger(__name__)

CURRENCY = "jpy"  # a zero-decimal currency: amounts are whole yen


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
