"""Points lapse as promised (issue #45, item 3): a pack is a lot, and what a refund, a
reversal or an expiry takes comes from the lot it belongs to, oldest first for expiry.
Each case is written as 200 days of ledger rows, dated in the database, then the till or
the expiry runs today."""

import uuid

from tests import fakestripe
from tests.test_purchases import balance, new_user, spend

DAYS = 180  # POINTS_VALID_DAYS, as the pages cite it
PACK, YEN = 5, 2000


def bought(sql, user: int, days_ago: int) -> tuple[str, str]:
    """A pack of 5 paid `days_ago`: its Checkout Session and purchase row; (session, payment)."""
    sid, pi = f"cs_test_{uuid.uuid4().hex}", f"pi_{uuid.uuid4().hex[:20]}"
    sql(
        "INSERT INTO checkout_sessions (id, user_id, points, amount, currency, status,"
        " payment_intent) VALUES (%(s)s, %(u)s, %(n)s, %(y)s, 'jpy', 'paid', %(pi)s)",
        s=sid,
        u=user,
        n=PACK,
        y=YEN,
        pi=pi,
    )
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, checkout_session, reason, created_at)"
        " VALUES (%(u)s, 'purchase', %(n)s, %(s)s, 'points purchase',"
        "   now() - make_interval(days => %(d)s))",
        u=user,
        n=PACK,
        s=sid,
        d=days_ago,
    )
    return sid, pi


def reversed_(sql, user: int, sid: str, taken: int, days_ago: int) -> None:
    """The pack's refund, `days_ago`, as the till writes it."""
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, checkout_session, refund_of, reason,"
        " created_at) SELECT %(u)s, 'purchase_refund', %(n)s, %(s)s, id, 'payment refunded',"
        " now() - make_interval(days => %(d)s) FROM point_ledger"
        " WHERE checkout_session = %(s)s AND kind = 'purchase'",
        u=user,
        n=-taken,
        s=sid,
        d=days_ago,
    )


def expire(app) -> int:
    with app.app_context():
        from app.points import expiry

        return expiry.expire_lapsed(DAYS)


def refund_now(app, pi: str) -> str:
    with app.app_context():
        from app.points import purchases

        charge = fakestripe.refunded_charge(pi, YEN)
        return purchases.handle({"type": "charge.refunded", "data": {"object": charge}}, {})


def test_a_pack_bought_and_refunded_does_not_renew_older_points(make_app, sql):
    # Day -200: a pack. Day -30: another, refunded on day -20 (all 5 taken back). Today
    # the first pack is past 180 days: it lapses, whatever was bought and refunded since.
    app = make_app(POINTS_VALID_DAYS=DAYS)
    user = new_user(sql)
    bought(sql, user, 200)
    later, _ = bought(sql, user, 30)
    reversed_(sql, user, later, PACK, 20)
    assert balance(sql, user) == PACK

    assert expire(app) == 1

    assert balance(sql, user) == 0
    assert sql("SELECT amount FROM point_ledger WHERE kind = 'expire'") == [(-PACK,)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_a_refund_of_a_lapsed_pack_takes_nothing_of_a_newer_one(make_app, sql):
    # Day -200: pack A; it lapsed (expired today). Day -10: pack B. A's payment is
    # refunded today: A's points are gone already, B's are not A's to take.
    app = make_app(POINTS_VALID_DAYS=DAYS)
    user = new_user(sql)
    old_sid, old_pi = bought(sql, user, 200)
    assert expire(app) == 1
    bought(sql, user, 10)
    assert balance(sql, user) == PACK

    refund_now(app, old_pi)

    assert balance(sql, user) == PACK
    assert sql(
        "SELECT amount FROM point_ledger WHERE kind = 'purchase_refund' AND checkout_session"
        " = %(s)s",
        s=old_sid,
    ) == [(0,)]
    assert sql("SELECT code FROM incidents") == [("REFUND_AFTER_SPEND",)]


def test_a_refund_takes_what_is_left_of_its_own_pack_not_of_newer_points(make_app, sql):
    # Day -20: a pack; one point of it spent. Day -10: 3 points granted. The refund takes
    # the 4 left of the pack, and support hears of the one spent; the grant stays.
    app = make_app(POINTS_VALID_DAYS=DAYS)
    user = new_user(sql)
    _, pi = bought(sql, user, 20)
    spend(sql, user, 1)
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, reason, created_at)"
        " VALUES (%(u)s, 'grant', 3, 'goodwill', now() - interval '10 days')",
        u=user,
    )

    assert refund_now(app, pi) == "reversed"

    assert balance(sql, user) == 3
    assert sql("SELECT code FROM incidents") == [("REFUND_AFTER_SPEND",)]
