"""A receipt: what was bought, when, for how much tax included, and what refunds moved."""

from sqlalchemy import Row, text

from ..extensions import db

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
