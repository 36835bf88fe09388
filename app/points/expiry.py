"""Points lapse POINTS_VALID_DAYS after they were added, oldest first.

Points are spent oldest first, so what a user holds is always their newest additions: the
part of the balance beyond what was added within the validity is what has lapsed. An
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

# Every point issued within the validity (a purchase, a grant, support's) is what the
# balance may still hold; anything beyond it is older, and has lapsed. A job's refund or a
# purchase's restore gives a point back, not a new one: it keeps the date it was issued,
# or a refund would renew a point past the validity the 資金決済法 exemption rests on.
LAPSED = (
    "u.point_balance - coalesce((SELECT sum(l.amount) FROM point_ledger l"
    "  WHERE l.user_id = u.id AND l.amount > 0"
    "    AND l.kind IN ('grant', 'purchase', 'support')"
    "    AND l.created_at > now() - make_interval(days => :days)), 0)"
)


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

    Read only, by the rule above: the balance is the newest additions within the validity
    (points are spent oldest first), each lapsing valid_days after it was added.
    """
    if valid_days <= 0:
        return []
    rows = db.session.execute(
        text(
            "SELECT l.created_at + make_interval(days => :days) AS expires_at,"
            "  least(l.amount, u.point_balance - (l.newer - l.amount)) AS points"
            " FROM (SELECT created_at, amount, user_id,"
            "         sum(amount) OVER (ORDER BY created_at DESC, id DESC) AS newer"
            "       FROM point_ledger WHERE user_id = :u AND amount > 0"
            "         AND kind IN ('grant', 'purchase', 'support')"
            "         AND created_at > now() - make_interval(days => :days)) l"
            " JOIN users u ON u.id = l.user_id"
            " WHERE l.newer - l.amount < u.point_balance"
            " ORDER BY l.created_at"
        ),
        {"u": user_id, "days": valid_days},
    ).all()
    return [(row.expires_at, int(row.points)) for row in rows]
