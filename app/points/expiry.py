"""Points lapse POINTS_VALID_DAYS after they were added, oldest first, lot by lot.

Points are spent oldest first, so what a user holds is always their newest lots: the
part of the balance beyond the lots added within the validity is what has lapsed. A
refund takes from its own lot only (LOT_LEFT). An
`expire` ledger row takes exactly that, under the user's row lock, so a job's consume
cannot slip between reading the balance and taking from it; run again, it finds nothing.
Kept inside six months (180 days by default), the points stay exempt from 資金決済法
(発行の日から6月以内に限り使用できる前払式支払手段は適用除外).
"""

import logging
from typing import Any

from sqlalchemy import text

from ..extensions import db

log = logging.getLogger(__name__)

REASON = "points expired"

# A lot is a row that issued points (a grant, a purchase, support's), less what its own
# reversal took back and plus what its restore gave back: a pack bought and refunded is a
# lot of nothing, not a fresh one that keeps older points alive. Points are spent oldest
# first, so a user holds their newest lots; whatever they hold beyond the lots issued within
# the validity is older, and has lapsed. A job's refund gives a point back, not a new one:
# it keeps the date it was issued, or a refund would renew a point past the validity the
# 資金決済法 exemption rests on.
LOTS = (
    "SELECT l.id, l.user_id, l.created_at, l.amount + coalesce((SELECT sum(x.amount)"
    "   FROM point_ledger x WHERE x.checkout_session = l.checkout_session"
    "     AND x.kind IN ('purchase_refund', 'purchase_restore')), 0) AS size"
    " FROM point_ledger l WHERE l.amount > 0 AND l.kind IN ('grant', 'purchase', 'support')"
)

LAPSED = (
    "u.point_balance - coalesce((SELECT sum(lot.size) FROM (" + LOTS + ") lot"
    "  WHERE lot.user_id = u.id"
    "    AND lot.created_at > now() - make_interval(days => :days)), 0)"
)

# What is left of one lot (:lot, a purchase row) of the user it belongs to: the balance
# is held newest lot first, so the lot holds what the newer ones leave of it, at most its
# own points. Its lapsed or spent points are not there to take, and a newer lot's are not its.
LOT_LEFT = (
    "SELECT greatest(0, least(p.amount, u.point_balance - coalesce((SELECT sum(lot.size)"
    "   FROM (" + LOTS + ") lot WHERE lot.user_id = p.user_id"
    "     AND (lot.created_at, lot.id) > (p.created_at, p.id)), 0)))"
    " FROM point_ledger p JOIN users u ON u.id = p.user_id WHERE p.id = :lot"
)


def lapsing(user_id: int, valid_days: int) -> int:
    """Return how many of the user's points are past their validity but not yet taken.

    A point a job's refund or a failed refund gives back keeps the date it was issued: one
    given back after its validity lapses at the purge chore's next run, and the pages say so.
    """
    if valid_days <= 0:
        return 0
    held = db.session.execute(
        text(f"SELECT greatest(0, {LAPSED}) FROM users u WHERE u.id = :u"),
        {"u": user_id, "days": valid_days},
    ).scalar_one_or_none()
    return int(held or 0)  # a sum: numeric in SQL


def expire_lapsed(valid_days: int, batch: int = 500) -> int:
    """Take back every user's lapsed points as `expire` rows; return how many users lost some."""
    if valid_days <= 0:
        return 0
    users = (
        db.session.execute(
            text(f"SELECT u.id FROM users u WHERE {LAPSED} > 0 ORDER BY u.id LIMIT :n"),
            {"days": valid_days, "n": batch},
        )
        .scalars()
        .all()
    )
    db.session.rollback()
    expired = 0
    for user_id in users:
        db.session.execute(text("SELECT 1 FROM users WHERE id = :u FOR UPDATE"), {"u": user_id})
        taken = db.session.execute(
            text(
                "INSERT INTO point_ledger (user_id, kind, amount, reason)"
                f" SELECT u.id, 'expire', -({LAPSED}), :r FROM users u"
                f" WHERE u.id = :u AND {LAPSED} > 0 RETURNING -amount"
            ),
            {"u": user_id, "days": valid_days, "r": REASON},
        ).scalar_one_or_none()
        db.session.commit()
        if taken:
            expired += 1
            log.info("user %s: %s point(s) older than %s days expired", user_id, taken, valid_days)
    return expired


def held(user_id: int, valid_days: int) -> list[tuple[Any, int]]:
    """Return when the points a user holds expire: (expiry time, points), soonest first.

    Read only, by the rule above: the balance is held newest lot first (LOTS: a lot less
    its reversal, plus its restore), each lot lapsing valid_days after it was issued; what
    is held beyond the lots within the validity has lapsed already (lapsing()).
    """
    if valid_days <= 0:
        return []
    rows = db.session.execute(
        text(
            "SELECT l.created_at + make_interval(days => :days) AS expires_at,"
            "  least(l.size, u.point_balance - (l.newer - l.size)) AS points"
            " FROM (SELECT lot.created_at, lot.size, lot.user_id,"
            "         sum(lot.size) OVER (ORDER BY lot.created_at DESC, lot.id DESC) AS newer"
            "       FROM (" + LOTS + ") lot WHERE lot.user_id = :u AND lot.size > 0"
            "         AND lot.created_at > now() - make_interval(days => :days)) l"
            " JOIN users u ON u.id = l.user_id"
            " WHERE l.newer - l.size < u.point_balance"
            " ORDER BY l.created_at"
        ),
        {"u": user_id, "days": valid_days},
    ).all()
    return [(row.expires_at, int(row.points)) for row in rows]
