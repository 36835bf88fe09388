"""Points people buy: Checkout against a local Stripe stand-in, the webhook on a real gunicorn.

The Stripe objects and signatures are constructed to the documented format
(tests/fakestripe.py says from where); the database is the real PostgreSQL.
"""

import re
import threading
import time
import uuid

import pytest
import requests
from prometheus_client import REGISTRY

from tests import fakestripe
from tests.conftest import Actions, csrf_token, idle_in_transaction, wait_for

SECRET = "whsec_test_constructed"
# The seller as the 特定商取引法に基づく表記 needs it, and a test shop: the tests' reports are
# demonstration data, on which only a test shop sells.
SELLER = {
    "SELLER_NAME": "株式会社ハザード",
    "SELLER_REPRESENTATIVE": "山田太郎",
    "SELLER_DISCLOSE_ON_REQUEST": "1",
    "SUPPORT_CONTACT": "help@hazard.example",
}
PAY = {
    "POINT_PACKS": "1:500,5:2000",
    "STRIPE_SECRET_KEY": "sk_test_constructed",
    "STRIPE_WEBHOOK_SECRET": SECRET,
    **SELLER,
    "TEST_SHOP": "1",
}
WEBHOOK = "/payments/stripe/webhook"


@pytest.fixture
def stripe_api():
    fake = fakestripe.FakeStripe().start()
    yield fake
    fake.stop()


def new_user(sql, points: int = 0) -> int:
    user_id = sql(
        "INSERT INTO users (email, password_hash) VALUES (%(e)s, 'x') RETURNING id",
        e=f"buyer-{uuid.uuid4().hex[:10]}@example.com",
    )[0][0]
    if points:
        sql(
            "INSERT INTO point_ledger (user_id, kind, amount, reason)"
            " VALUES (%(u)s, 'grant', %(n)s, 'welcome points')",
            u=user_id,
            n=points,
        )
    return user_id


def spend(sql, user_id: int, points: int) -> None:
    """Spend points as jobs do: one consume row per job."""
    for _ in range(points):
        job = sql(
            "INSERT INTO assessment_jobs (user_id, query_text, lang, status)"
            " VALUES (%(u)s, '札幌市', 'en', 'succeeded') RETURNING id",
            u=user_id,
        )[0][0]
        sql(
            "INSERT INTO point_ledger (user_id, kind, amount, job_id)"
            " VALUES (%(u)s, 'consume', -1, %(j)s)",
            u=user_id,
            j=job,
        )


def balance(sql, user_id: int) -> int:
    return sql("SELECT point_balance FROM users WHERE id = %(u)s", u=user_id)[0][0]


def purchases(sql, user_id: int) -> list[tuple]:
    return sql(
        "SELECT kind, amount, checkout_session FROM point_ledger"
        " WHERE user_id = %(u)s AND kind LIKE 'purchase%%' ORDER BY id",
        u=user_id,
    )


def post(url: str, payload: bytes, header: str | None) -> requests.Response:
    headers = {"Content-Type": "application/json"}
    if header is not None:
        headers["Stripe-Signature"] = header
    return requests.post(url + WEBHOOK, data=payload, headers=headers, timeout=10)


def deliver(url: str, payload: bytes, secret: str = SECRET, **kw) -> requests.Response:
    return post(url, payload, fakestripe.signature(payload, secret, **kw))


def paid_event(session_id: str, user_id: int, points: int = 5, amount: int = 2000, **kw) -> bytes:
    obj = fakestripe.completed_session(session_id, user_id, points, amount, **kw)
    return fakestripe.event("checkout.session.completed", obj)


def session_id() -> str:
    return f"cs_test_{uuid.uuid4().hex}"


def checkout(sql, user_id: int, points: int = 5, amount: int = 2000) -> str:
    """Record a Checkout Session as start_checkout does once Stripe created it; its id."""
    sid = session_id()
    sql(
        "INSERT INTO checkout_sessions (id, user_id, points, amount, currency)"
        " VALUES (%(s)s, %(u)s, %(p)s, %(a)s, 'jpy')",
        s=sid,
        u=user_id,
        p=points,
        a=amount,
    )
    return sid


@pytest.fixture
def shop(kept_live):
    """A real gunicorn taking payments, the module's (a delivery needs no server of its own)."""
    return kept_live(**PAY)


# --- the webhook, on a real gunicorn ---------------------------------------------------


def test_good_signature_credits_the_pack_once(shop, sql):
    user = new_user(sql, 1)
    sid = checkout(sql, user)
    response = deliver(shop.url, paid_event(sid, user))
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "credited"
    assert purchases(sql, user) == [("purchase", 5, sid)]
    assert balance(sql, user) == 6


def test_bad_signature_is_refused_and_writes_nothing(shop, sql):
    user = new_user(sql)
    payload = paid_event(session_id(), user)
    for header in (
        fakestripe.signature(payload, "whsec_someone_else"),
        "t=1,v1=00",
        "",
        None,
    ):
        assert post(shop.url, payload, header).status_code == 400
    # A body changed after signing: the signature was for the other one.
    signed = fakestripe.signature(payload, SECRET)
    forged = payload.replace(b'"points": "5"', b'"points": "1"')
    assert post(shop.url, forged, signed).status_code == 400
    assert purchases(sql, user) == []
    assert balance(sql, user) == 0
    assert sql("SELECT count(*) FROM checkout_sessions") == [(0,)]


def test_stale_timestamp_is_refused(shop, sql):
    user = new_user(sql)
    payload = paid_event(session_id(), user)
    # Signed right, but ten minutes ago: past the library's five-minute tolerance (a replay).
    response = deliver(shop.url, payload, timestamp=int(time.time()) - 600)
    assert response.status_code == 400
    assert purchases(sql, user) == []


def test_the_same_event_twice_credits_once(shop, sql):
    user = new_user(sql)
    sid = checkout(sql, user)
    payload = paid_event(sid, user)
    first, second = deliver(shop.url, payload), deliver(shop.url, payload)
    assert (first.json()["outcome"], second.json()["outcome"]) == ("credited", "already_credited")
    # A different event about the same session (async_payment_succeeded after a paid
    # completed, out of order or not) credits nothing more either.
    obj = fakestripe.completed_session(sid, user, 5, 2000)
    again = deliver(shop.url, fakestripe.event("checkout.session.async_payment_succeeded", obj))
    assert again.json()["outcome"] == "already_credited"
    assert purchases(sql, user) == [("purchase", 5, sid)]
    assert balance(sql, user) == 5


def test_concurrent_deliveries_credit_once(shop, sql):
    user = new_user(sql)
    sid = checkout(sql, user)
    payload = paid_event(sid, user)
    barrier = threading.Barrier(8)
    outcomes = []

    def one():
        barrier.wait()
        outcomes.append(deliver(shop.url, payload).json()["outcome"])

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["already_credited"] * 7 + ["credited"]
    assert purchases(sql, user) == [("purchase", 5, sid)]
    assert balance(sql, user) == 5


def test_async_payment_succeeded_after_an_unpaid_completed(shop, sql):
    user = new_user(sql)
    sid = checkout(sql, user)
    unpaid = paid_event(sid, user, payment_status="unpaid")
    assert deliver(shop.url, unpaid).json()["outcome"] == "awaiting_payment"
    assert purchases(sql, user) == []
    obj = fakestripe.completed_session(sid, user, 5, 2000)
    paid = fakestripe.event("checkout.session.async_payment_succeeded", obj)
    assert deliver(shop.url, paid).json()["outcome"] == "credited"
    # The unpaid completed re-delivered late changes nothing.
    assert deliver(shop.url, unpaid).json()["outcome"] == "awaiting_payment"
    assert purchases(sql, user) == [("purchase", 5, sid)]
    assert balance(sql, user) == 5


@pytest.mark.parametrize(
    "points,amount,currency",
    [(5, 500, "jpy"), (5, 2000, "usd"), (3, 2000, "jpy"), (1, 2000, "jpy")],
    ids=["amount", "currency", "no-such-pack", "another-packs-price"],
)
def test_a_payment_that_does_not_match_its_pack_credits_nothing(
    shop, sql, points, amount, currency
):
    user = new_user(sql)
    sid = checkout(sql, user)
    payload = paid_event(sid, user, points=points, amount=amount, currency=currency)
    assert deliver(shop.url, payload).json()["outcome"] == "mismatch"
    assert deliver(shop.url, payload).json()["outcome"] == "mismatch"  # re-delivered
    assert purchases(sql, user) == []
    assert balance(sql, user) == 0
    assert sql("SELECT code, severity, payment_ref FROM incidents") == [
        ("PURCHASE_MISMATCH", "critical", sid)
    ]


def test_other_event_types_are_ignored(shop, sql):
    user = new_user(sql)
    payload = fakestripe.event("customer.created", {"id": "cus_x", "object": "customer"})
    response = deliver(shop.url, payload)
    assert response.status_code == 200
    assert response.json()["outcome"] == "ignored"
    assert balance(sql, user) == 0
    assert sql("SELECT count(*) FROM point_ledger") == [(0,)]


def refund_setup(shop, sql, spent: int):
    user = new_user(sql)
    sid = checkout(sql, user)
    pi = f"pi_{uuid.uuid4().hex[:20]}"
    assert deliver(shop.url, paid_event(sid, user, payment_intent=pi)).json()["outcome"] == (
        "credited"
    )
    spend(sql, user, spent)
    return user, sid, fakestripe.event("charge.refunded", fakestripe.refunded_charge(pi, 2000))


def test_refund_of_an_unspent_pack_takes_its_points_back(shop, sql):
    user, sid, refund = refund_setup(shop, sql, spent=0)
    assert deliver(shop.url, refund).json()["outcome"] == "reversed"
    assert deliver(shop.url, refund).json()["outcome"] == "already_reversed"
    assert purchases(sql, user) == [("purchase", 5, sid), ("purchase_refund", -5, sid)]
    assert balance(sql, user) == 0
    assert sql("SELECT count(*) FROM incidents") == [(0,)]


def test_refund_of_a_partly_spent_pack_takes_what_is_left_and_opens_an_incident(shop, sql):
    user, sid, refund = refund_setup(shop, sql, spent=3)
    assert balance(sql, user) == 2
    assert deliver(shop.url, refund).json()["outcome"] == "reversed"
    assert deliver(shop.url, refund).json()["outcome"] == "already_reversed"
    assert purchases(sql, user) == [("purchase", 5, sid), ("purchase_refund", -2, sid)]
    assert balance(sql, user) == 0
    assert sql("SELECT code, user_id, payment_ref FROM incidents") == [
        ("REFUND_AFTER_SPEND", user, sid)
    ]


def test_refund_of_a_fully_spent_pack_never_goes_negative(shop, sql):
    user, sid, refund = refund_setup(shop, sql, spent=5)
    assert deliver(shop.url, refund).json()["outcome"] == "reversed"
    assert purchases(sql, user) == [("purchase", 5, sid), ("purchase_refund", 0, sid)]
    assert balance(sql, user) == 0
    assert sql("SELECT code FROM incidents") == [("REFUND_AFTER_SPEND",)]


def test_a_partial_money_refund_leaves_the_points_to_support(shop, sql):
    user = new_user(sql)
    sid, pi = checkout(sql, user), f"pi_{uuid.uuid4().hex[:20]}"
    deliver(shop.url, paid_event(sid, user, payment_intent=pi))
    charge = fakestripe.refunded_charge(pi, 2000, refunded_amount=500)
    assert deliver(shop.url, fakestripe.event("charge.refunded", charge)).json()["outcome"] == (
        "partial"
    )
    assert balance(sql, user) == 5
    assert sql("SELECT code FROM incidents") == [("PARTIAL_REFUND",)]


def test_the_webhook_is_not_there_without_payment_configuration(live, sql):
    server = live()
    user = new_user(sql)
    assert deliver(server.url, paid_event(session_id(), user)).status_code == 404
    assert purchases(sql, user) == []


# --- the database's rules ----------------------------------------------------------------


def test_the_ledger_refuses_purchase_rows_of_the_wrong_shape(app, sql):
    import psycopg

    user, other = new_user(sql), new_user(sql)
    sid = session_id()
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, checkout_session)"
        " VALUES (%(u)s, 'purchase', 5, %(s)s)",
        u=user,
        s=sid,
    )
    purchase = sql("SELECT id FROM point_ledger WHERE kind = 'purchase'")[0][0]
    refused = [
        # no session id; a negative or zero purchase; a second credit for one session
        ("INSERT INTO point_ledger (user_id, kind, amount) VALUES (%(u)s, 'purchase', 5)", {}),
        (
            "INSERT INTO point_ledger (user_id, kind, amount, checkout_session)"
            " VALUES (%(u)s, 'purchase', -5, 'cs_x')",
            {},
        ),
        (
            "INSERT INTO point_ledger (user_id, kind, amount, checkout_session)"
            " VALUES (%(u)s, 'purchase', 5, %(s)s)",
            {"s": sid},
        ),
        # a reversal of more than was bought, of another user's, of another session's
        (
            "INSERT INTO point_ledger (user_id, kind, amount, checkout_session, refund_of)"
            " VALUES (%(u)s, 'purchase_refund', -6, %(s)s, %(p)s)",
            {"s": sid, "p": purchase},
        ),
        (
            "INSERT INTO point_ledger (user_id, kind, amount, checkout_session, refund_of)"
            " VALUES (%(o)s, 'purchase_refund', 0, %(s)s, %(p)s)",
            {"s": sid, "p": purchase},
        ),
        (
            "INSERT INTO point_ledger (user_id, kind, amount, checkout_session, refund_of)"
            " VALUES (%(u)s, 'purchase_refund', -1, 'cs_other', %(p)s)",
            {"p": purchase},
        ),
        # a support row without its operator or its reason
        ("INSERT INTO point_ledger (user_id, kind, amount) VALUES (%(u)s, 'support', 5)", {}),
        (
            "INSERT INTO point_ledger (user_id, kind, amount, operator_id, reason)"
            " VALUES (%(u)s, 'support', 5, %(o)s, '')",
            {},
        ),
        # a grant that names a session
        (
            "INSERT INTO point_ledger (user_id, kind, amount, checkout_session)"
            " VALUES (%(u)s, 'grant', 5, 'cs_y')",
            {},
        ),
    ]
    for statement, params in refused:
        with pytest.raises((psycopg.errors.CheckViolation, psycopg.errors.UniqueViolation)):
            sql(statement, u=user, o=other, **params)
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, checkout_session, refund_of)"
        " VALUES (%(u)s, 'purchase_refund', -5, %(s)s, %(p)s)",
        u=user,
        s=sid,
        p=purchase,
    )
    with pytest.raises(psycopg.errors.UniqueViolation):  # one reversal per session
        sql(
            "INSERT INTO point_ledger (user_id, kind, amount, checkout_session, refund_of)"
            " VALUES (%(u)s, 'purchase_refund', 0, %(s)s, %(p)s)",
            u=user,
            s=sid,
            p=purchase,
        )
    assert balance(sql, user) == 0
    assert balance(sql, other) == 0


def test_ledger_check_covers_purchases(app, sql):
    from app.points import checkout as checkouts
    from app.points import credits

    runner = app.test_cli_runner()
    user = new_user(sql)
    sid = checkout(sql, user)
    with app.app_context():
        packs = checkouts.parse_packs("5:2000")
        obj = fakestripe.completed_session(sid, user, 5, 2000)
        assert credits.credit(obj, packs) == "credited"
    result = runner.invoke(args=["ledger-check"])
    assert result.exit_code == 0, result.output
    # A purchase row with no session behind it (written by hand, say) is reported.
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, checkout_session)"
        " VALUES (%(u)s, 'purchase', 1, 'cs_by_hand')",
        u=user,
    )
    result = runner.invoke(args=["ledger-check"])
    assert result.exit_code == 1
    assert "cs_by_hand" in result.output


# --- the pages, in-process against the local Stripe stand-in -----------------------------


def shop_client(make_app, stripe_api, **config):
    app = make_app(**{**PAY, "STRIPE_API_BASE": stripe_api.url, **config})
    client = app.test_client()
    actions = Actions(client)
    actions.signup()
    return app, client, actions


def buy(client, points="5"):
    token = csrf_token(client.get("/points/buy").get_data(as_text=True))
    return client.post("/points/buy", data={"points": points, "csrf_token": token})


def test_the_buy_page_without_payment_configuration(client, actions, sql):
    actions.signup()
    page = client.get("/points/buy")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'id="not-on-sale" data-reason="payments"' in html and "support@example.com" in html
    assert 'name="points"' not in html
    response = client.post("/points/buy", data={"points": "5", "csrf_token": csrf_token(html)})
    assert response.status_code == 303
    assert response.headers["Location"].endswith("/points/buy")
    assert sql("SELECT count(*) FROM checkout_sessions") == [(0,)]
    for path in ("/legal/commerce", "/legal/terms", "/points", "/"):
        assert client.get(path).status_code == 200, path


def test_the_buy_page_is_linked_from_the_top_bar_points_page_and_zero_points(make_app, sql):
    app = make_app(SIGNUP_POINTS=0)
    client = app.test_client()
    Actions(client).signup()
    for path in ("/points", "/assessments/new"):
        html = client.get(path).get_data(as_text=True)
        assert html.count('href="/points/buy"') >= 2, path  # the top bar's, and the page's
    assert 'href="/legal/commerce"' in html and 'href="/legal/terms"' in html  # the footer


def test_checkout_is_created_against_the_local_server(make_app, stripe_api, sql):
    app, client, _ = shop_client(make_app, stripe_api)
    html = client.get("/points/buy").get_data(as_text=True)
    assert "¥2,000" in html and "¥500" in html
    response = buy(client, "5")
    assert response.status_code == 303
    assert response.headers["Location"].startswith("https://checkout.stripe.com/c/pay/cs_test_")
    (sent,) = stripe_api.requests
    user = sql("SELECT id FROM users")[0][0]
    assert sent["_path"] == "/v1/checkout/sessions"
    assert sent["_authorization"] == "Bearer sk_test_constructed"
    assert sent["mode"] == "payment"
    assert sent["line_items[0][price_data][currency]"] == "jpy"
    assert sent["line_items[0][price_data][unit_amount]"] == "2000"
    assert sent["line_items[0][quantity]"] == "1"
    assert sent["client_reference_id"] == str(user)
    assert (sent["metadata[user_id]"], sent["metadata[points]"]) == (str(user), "5")
    assert sent["success_url"].endswith("/points/buy/done?session_id={CHECKOUT_SESSION_ID}")
    assert sql("SELECT user_id, points, amount, currency, status FROM checkout_sessions") == [
        (user, 5, 2000, "jpy", "open")
    ]


def test_checkout_refuses_a_pack_that_is_not_on_sale(make_app, stripe_api, sql):
    app, client, _ = shop_client(make_app, stripe_api)
    for points in ("3", "", "x", "-1"):
        assert buy(client, points).status_code == 400
    token = csrf_token(client.get("/points/buy").get_data(as_text=True))
    assert client.post("/points/buy", data={"points": "5"}).status_code == 400  # no CSRF token
    assert token
    assert stripe_api.requests == []
    assert sql("SELECT count(*) FROM checkout_sessions") == [(0,)]


def test_checkout_when_stripe_fails_says_so_and_charges_nothing(make_app, stripe_api, sql):
    app, client, _ = shop_client(make_app, stripe_api)
    stripe_api.status = 500
    response = buy(client)
    assert response.status_code == 303
    assert response.headers["Location"].endswith("/points/buy")
    assert "could not be opened" in client.get("/points/buy").get_data(as_text=True)
    assert sql("SELECT count(*) FROM checkout_sessions") == [(0,)]


def test_checkout_is_braked_per_user(make_app, stripe_api):
    app, client, _ = shop_client(make_app, stripe_api, BUY_RATE_LIMIT="2 per hour")
    assert [buy(client).status_code for _ in range(3)] == [303, 303, 429]
    other = app.test_client()
    Actions(other).signup()
    assert buy(other).status_code == 303  # another user is not held
    assert len(stripe_api.requests) == 3


def test_anonymous_cannot_buy(make_app, stripe_api):
    app = make_app(**{**PAY, "STRIPE_API_BASE": stripe_api.url})
    client = app.test_client()
    assert client.get("/points/buy").status_code == 302
    token = csrf_token(client.get("/signup").get_data(as_text=True))
    assert client.post("/points/buy", data={"points": "5", "csrf_token": token}).status_code == 302
    assert stripe_api.requests == []


def webhook_via(client, payload: bytes):
    return client.post(
        WEBHOOK,
        data=payload,
        headers={"Stripe-Signature": fakestripe.signature(payload, SECRET)},
        content_type="application/json",
    )


def test_the_page_after_paying_polls_until_the_points_arrive(make_app, stripe_api, sql):
    app, client, _ = shop_client(make_app, stripe_api)
    buy(client)
    sid, user = sql("SELECT id, user_id FROM checkout_sessions")[0]
    page = client.get(f"/points/buy/done?session_id={sid}").get_data(as_text=True)
    assert 'data-credited="no"' in page and "hx-trigger" in page
    status_url = f"/points/buy/{sid}/status"
    assert f'hx-get="{status_url}"' in page
    assert webhook_via(client, paid_event(sid, user)).status_code == 200
    fragment = client.get(status_url, headers={"HX-Request": "true"}).get_data(as_text=True)
    assert 'data-credited="yes"' in fragment
    assert "hx-trigger" not in fragment  # settled: the polling stops
    assert "5 points were added" in fragment
    assert 'id="nav-balance"' in fragment and 'data-balance="8"' in fragment  # 3 + 5
    # Another user's session is nobody else's business.
    other = app.test_client()
    Actions(other).signup()
    assert other.get(status_url).status_code == 404
    assert other.get(f"/points/buy/done?session_id={sid}").status_code == 404


def test_a_konbini_payer_sees_waiting_for_the_payment(make_app, stripe_api, sql):
    app, client, _ = shop_client(make_app, stripe_api)
    buy(client)
    sid, user = sql("SELECT id, user_id FROM checkout_sessions")[0]
    webhook_via(client, paid_event(sid, user, payment_status="unpaid"))
    fragment = client.get(f"/points/buy/{sid}/status").get_data(as_text=True)
    assert 'data-status="awaiting_payment"' in fragment
    assert "Waiting for your payment" in fragment and "hx-trigger" in fragment
    obj = fakestripe.completed_session(sid, user, 5, 2000)
    webhook_via(client, fakestripe.event("checkout.session.async_payment_succeeded", obj))
    fragment = client.get(f"/points/buy/{sid}/status").get_data(as_text=True)
    assert 'data-credited="yes"' in fragment


def test_purchases_and_refunds_are_counted(make_app, stripe_api, sql):
    app, client, _ = shop_client(make_app, stripe_api)
    user = sql("SELECT id FROM users")[0][0]

    def value(name, **labels):
        return REGISTRY.get_sample_value(name, labels) or 0

    before = (value("hazard_purchases_total", points="5"), value("hazard_purchased_points_total"))
    refunds = value("hazard_purchase_refunds_total", outcome="unspent")
    sid, pi = checkout(sql, user), "pi_counted_" + uuid.uuid4().hex[:8]
    webhook_via(client, paid_event(sid, user, payment_intent=pi))
    webhook_via(client, paid_event(sid, user, payment_intent=pi))  # once only
    assert value("hazard_purchases_total", points="5") == before[0] + 1
    assert value("hazard_purchased_points_total") == before[1] + 5
    charge = fakestripe.event("charge.refunded", fakestripe.refunded_charge(pi, 2000))
    webhook_via(client, charge)
    webhook_via(client, charge)
    assert value("hazard_purchase_refunds_total", outcome="unspent") == refunds + 1


# --- support, history, legal pages ------------------------------------------------------


def support_client(app, sql):
    from app.models import Role
    from app.points import accounts

    with app.app_context():
        accounts.create_user("help@example.com", "correct horse", points=0, role=Role.SUPPORT)
    client = app.test_client()
    Actions(client).login("help@example.com")
    return client


def test_support_grants_and_corrects_points_shown_in_the_users_language(app, sql):
    user_client = app.test_client()
    Actions(user_client).signup("reader@example.com")
    support = support_client(app, sql)
    token = csrf_token(support.get("/support").get_data(as_text=True))

    def adjust(amount, reason="goodwill for the outage"):
        page = support.get("/support").get_data(as_text=True)
        return support.post(
            "/support/points",
            data={
                "email": "reader@example.com",
                "amount": amount,
                "reason": reason,
                "csrf_token": token,
                "nonce": re.search(r'name="nonce"[^>]*value="([0-9a-f]+)"', page).group(1),
            },
        )

    assert adjust("2").status_code == 303
    assert adjust("-1", "granted twice by mistake").status_code == 303
    assert adjust("-100").status_code == 409  # below zero: nothing written
    assert adjust("0").status_code == 400
    assert adjust("x").status_code == 400
    assert (
        support.post(
            "/support/points",
            data={"email": "nobody@example.com", "amount": "1", "reason": "r", "csrf_token": token},
        ).status_code
        == 400
    )
    rows = sql(
        "SELECT l.kind, l.amount, l.reason, o.email FROM point_ledger l"
        " JOIN users o ON o.id = l.operator_id ORDER BY l.id"
    )
    assert rows == [
        ("support", 2, "goodwill for the outage", "help@example.com"),
        ("support", -1, "granted twice by mistake", "help@example.com"),
    ]
    assert balance(sql, sql("SELECT id FROM users WHERE email = 'reader@example.com'")[0][0]) == 4
    html = user_client.get("/points").get_data(as_text=True)
    assert "Added by support" in html and "Corrected by support" in html
    assert "goodwill for the outage" in html
    ja = user_client.get("/points", headers={"Accept-Language": "ja"}).get_data(as_text=True)
    assert "サポートによる追加" in ja and "サポートによる訂正" in ja
    # Only support may.
    assert (
        user_client.post(
            "/support/points",
            data={
                "email": "reader@example.com",
                "amount": "5",
                "reason": "me",
                "csrf_token": csrf_token(html),
            },
        ).status_code
        == 403
    )


def test_purchases_show_in_the_history_in_the_readers_language(make_app, stripe_api, sql):
    app, client, _ = shop_client(make_app, stripe_api)
    user = sql("SELECT id FROM users")[0][0]
    sid, pi = checkout(sql, user), "pi_hist_" + uuid.uuid4().hex[:8]
    webhook_via(client, paid_event(sid, user, payment_intent=pi))
    webhook_via(client, fakestripe.event("charge.refunded", fakestripe.refunded_charge(pi, 2000)))
    en = client.get("/points").get_data(as_text=True)
    assert "Bought" in en and "Payment refunded" in en
    ja = client.get("/points", headers={"Accept-Language": "ja"}).get_data(as_text=True)
    assert "購入" in ja and "支払いの返金" in ja


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_legal_pages_from_configuration(make_app, lang):
    app = make_app(POINT_PACKS="1:500,5:2000", **SELLER, SELLER_ADDRESS="")
    client = app.test_client()
    headers = {"Accept-Language": lang}
    commerce = client.get("/legal/commerce", headers=headers).get_data(as_text=True)
    assert "特定商取引法に基づく表記" in commerce
    assert "株式会社ハザード" in commerce and "山田太郎" in commerce
    assert "help@hazard.example" in commerce
    assert "¥2,000" in commerce and "¥500" in commerce
    on_request = {"en": "Disclosed without delay on request", "ja": "請求があれば遅滞なく開示"}
    assert on_request[lang] in commerce  # the address and the phone, left empty
    terms = client.get("/legal/terms", headers=headers).get_data(as_text=True)
    assert {"en": "30 days", "ja": "30日"}[lang] in terms
    assert re.search(r'href="/legal/commerce"', terms)


def test_the_ops_page_shows_points_sold_and_spent_per_day(make_app, sql):
    from tests.conftest import signed_in

    app, client, _ = signed_in(make_app, email="ops@example.com")
    sql("UPDATE users SET role = 'support'")
    user = new_user(sql)

    def purchase(sid, points, ago="0"):
        sql(
            "INSERT INTO point_ledger (user_id, kind, amount, checkout_session, created_at)"
            " VALUES (%(u)s, 'purchase', %(n)s, %(s)s, now() - %(a)s::interval) RETURNING id",
            u=user,
            n=points,
            s=sid,
            a=ago,
        )
        return sql("SELECT id FROM point_ledger WHERE checkout_session = %(s)s", s=sid)[0][0]

    purchase("cs_a", 5)
    refunded = purchase("cs_b", 1)
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, checkout_session, refund_of)"
        " VALUES (%(u)s, 'purchase_refund', -1, 'cs_b', %(p)s)",
        u=user,
        p=refunded,
    )
    purchase("cs_c", 5, "1 day")  # yesterday, on any clock
    spend(sql, user, 2)
    job = sql("SELECT job_id, id FROM point_ledger WHERE kind = 'consume' LIMIT 1")[0]
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, job_id, refund_of)"
        " VALUES (%(u)s, 'refund', 1, %(j)s, %(c)s)",
        u=user,
        j=job[0],
        c=job[1],
    )
    html = client.get("/support/ops").get_data(as_text=True)
    rows = re.findall(
        r'<tr data-day="[^"]+"><td>[^<]*</td><td class="num" data-stat="purchases">(\d+)</td>'
        r'<td class="num" data-stat="sold">(-?\d+)</td><td class="num" data-stat="spent">(-?\d+)',
        html,
    )
    assert len(rows) == 7
    # Today: two packs (6 points) less the refunded one (1); 2 spent less 1 refunded.
    assert rows[0] == ("2", "5", "1")
    assert rows[1] == ("1", "5", "0")
    assert all(r == ("0", "0", "0") for r in rows[2:])


def test_support_settles_a_payment_incident(make_app, stripe_api, sql):
    app, client, _ = shop_client(make_app, stripe_api)
    user = sql("SELECT id FROM users")[0][0]
    sid = session_id()
    webhook_via(client, paid_event(sid, user, amount=1))  # does not match the pack
    (incident,) = sql("SELECT id FROM incidents WHERE resolved_at IS NULL")
    support = support_client(app, sql)
    html = support.get("/support").get_data(as_text=True)
    assert "PURCHASE_MISMATCH" in html and f"/support/incidents/{incident[0]}/settled" in html
    token = csrf_token(html)
    url = f"/support/incidents/{incident[0]}/settled"
    assert support.post(url, data={"reason": "", "csrf_token": token}).status_code == 303
    assert sql("SELECT count(*) FROM incidents WHERE resolved_at IS NULL") == [(1,)]
    response = support.post(url, data={"reason": "refunded in Stripe", "csrf_token": token})
    assert response.status_code == 303
    assert sql("SELECT resolution, resolved_by IS NOT NULL FROM incidents") == [
        ("settled: refunded in Stripe", True)
    ]
    assert (
        support.post(
            "/support/incidents/999/settled", data={"reason": "x", "csrf_token": token}
        ).status_code
        == 404
    )
    assert client.post(url, data={"reason": "x", "csrf_token": token}).status_code in (400, 403)


def test_a_konbini_payment_that_fails_stops_the_page_waiting(make_app, stripe_api, sql):
    app, client, _ = shop_client(make_app, stripe_api)
    buy(client)
    sid, user = sql("SELECT id, user_id FROM checkout_sessions")[0]
    webhook_via(client, paid_event(sid, user, payment_status="unpaid"))
    obj = fakestripe.completed_session(sid, user, 5, 2000, payment_status="unpaid")
    webhook_via(client, fakestripe.event("checkout.session.async_payment_failed", obj))
    fragment = client.get(f"/points/buy/{sid}/status").get_data(as_text=True)
    assert 'data-status="failed"' in fragment and "hx-trigger" not in fragment
    assert "did not go through" in fragment
    assert purchases(sql, user) == []


def test_a_payment_for_an_unknown_user_opens_an_incident_and_answers(make_app, stripe_api, sql):
    app, client, _ = shop_client(make_app, stripe_api)
    for points, amount in ((5, 2000), (5, 1)):  # matching its pack or not
        sid = session_id()
        response = webhook_via(client, paid_event(sid, 424242, points=points, amount=amount))
        assert response.status_code == 200
        assert response.get_json()["outcome"] == "mismatch"
    assert sql("SELECT code, user_id FROM incidents") == [("PURCHASE_MISMATCH", None)] * 2
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'purchase'") == [(0,)]
    # No metadata at all (as `stripe trigger checkout.session.completed` sends).
    obj = {"id": session_id(), "object": "checkout.session", "payment_status": "paid"}
    response = webhook_via(client, fakestripe.event("checkout.session.completed", obj))
    assert response.get_json()["outcome"] == "mismatch"


@pytest.mark.parametrize("raw", ["5", "5:abc", "0:500", "5:10", "5:500,5:600"])
def test_packs_that_do_not_read_stop_the_server_naming_the_setting(make_app, raw):
    with pytest.raises(ValueError, match="POINT_PACKS"):
        make_app(POINT_PACKS=raw)


def test_a_refund_of_a_payment_never_credited_opens_one_incident(make_app, stripe_api, sql):
    app, client, _ = shop_client(make_app, stripe_api)
    charge = fakestripe.event("charge.refunded", fakestripe.refunded_charge("pi_unknown", 2000))
    for _ in range(2):  # re-delivered
        response = webhook_via(client, charge)
        assert response.status_code == 200
        assert response.get_json()["outcome"] == "unmatched"
    assert sql("SELECT code, severity FROM incidents") == [("REFUND_UNMATCHED", "warning")]
    assert sql("SELECT count(*) FROM point_ledger WHERE kind LIKE 'purchase%%'") == [(0,)]


# --- the review's defects (each test failed before its fix) -------------------------------


def test_a_refund_delivered_before_its_credit_reverses_the_credit(make_app, stripe_api, sql):
    app, client, _ = shop_client(make_app, stripe_api)
    user = new_user(sql)
    sid, pi = checkout(sql, user), f"pi_{uuid.uuid4().hex[:20]}"
    refund = fakestripe.event("charge.refunded", fakestripe.refunded_charge(pi, 2000))
    assert webhook_via(client, refund).get_json()["outcome"] == "unmatched"
    paid = paid_event(sid, user, payment_intent=pi)
    assert webhook_via(client, paid).get_json()["outcome"] == "credited_and_reversed"
    assert webhook_via(client, paid).get_json()["outcome"] == "already_credited"
    assert webhook_via(client, refund).get_json()["outcome"] == "already_reversed"
    assert purchases(sql, user) == [("purchase", 5, sid), ("purchase_refund", -5, sid)]
    assert balance(sql, user) == 0
    # The unmatched refund's incident is settled by the reversal; nothing is left to do.
    assert sql("SELECT code, resolved_at IS NOT NULL FROM incidents") == [
        ("REFUND_UNMATCHED", True)
    ]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_a_refund_while_its_credit_is_uncommitted_waits_and_reverses_it(live, sql):
    # The credit pauses (a configured failpoint) after writing, before committing.
    shop = live(**PAY, FAILPOINTS="before_credit_commit=sleep:2")
    user = new_user(sql)
    sid, pi = checkout(sql, user), f"pi_{uuid.uuid4().hex[:20]}"
    outcomes = {}

    def pay():
        outcomes["paid"] = deliver(shop.url, paid_event(sid, user, payment_intent=pi)).json()

    payer = threading.Thread(target=pay)
    payer.start()
    # The credit has written its purchase row and waits, in its open transaction.
    wait_for(lambda: idle_in_transaction(sql, "%FROM payment_refunds%") == 1)
    refund = fakestripe.event("charge.refunded", fakestripe.refunded_charge(pi, 2000))
    outcomes["refund"] = deliver(shop.url, refund).json()
    payer.join(30)
    assert (outcomes["paid"]["outcome"], outcomes["refund"]["outcome"]) == (
        "credited",
        "reversed",
    )
    assert purchases(sql, user) == [("purchase", 5, sid), ("purchase_refund", -5, sid)]
    assert balance(sql, user) == 0


def test_a_partial_refund_delivered_before_its_credit_is_raised_when_it_lands(
    make_app, stripe_api, sql
):
    app, client, _ = shop_client(make_app, stripe_api)
    user = new_user(sql)
    sid, pi = checkout(sql, user), f"pi_{uuid.uuid4().hex[:20]}"
    charge = fakestripe.refunded_charge(pi, 2000, refunded_amount=500)
    webhook_via(client, fakestripe.event("charge.refunded", charge))
    assert webhook_via(client, paid_event(sid, user, payment_intent=pi)).get_json()["outcome"] == (
        "credited"
    )
    assert balance(sql, user) == 5  # a partial refund is support's to settle
    assert sorted(sql("SELECT code, user_id FROM incidents")) == [
        ("PARTIAL_REFUND", user),
        ("REFUND_UNMATCHED", None),
    ]


def test_partial_then_full_refunds_before_the_credit_leave_the_pack_to_support(
    make_app, stripe_api, sql
):
    app, client, _ = shop_client(make_app, stripe_api)
    user = new_user(sql)
    sid, pi = checkout(sql, user), f"pi_{uuid.uuid4().hex[:20]}"
    for refunded in (500, 2000):
        charge = fakestripe.refunded_charge(pi, 2000, refunded_amount=refunded)
        webhook_via(client, fakestripe.event("charge.refunded", charge))
    outcome = webhook_via(client, paid_event(sid, user, payment_intent=pi)).get_json()
    assert outcome["outcome"] == "credited"
    assert purchases(sql, user) == [("purchase", 5, sid)]
    assert sql("SELECT code FROM incidents WHERE payment_ref = %(s)s", s=sid) == [
        ("REFUND_AFTER_PARTIAL",)
    ]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_a_konbini_payment_after_a_price_change_gets_the_pack_it_was_sold(live, sql):
    shop = live(**{**PAY, "POINT_PACKS": "1:500,5:2500"})  # the 5-pack was 2000 yen then
    user = new_user(sql)
    sid = checkout(sql, user, 5, 2000)
    response = deliver(shop.url, paid_event(sid, user, points=5, amount=2000))
    assert response.json()["outcome"] == "credited"
    assert purchases(sql, user) == [("purchase", 5, sid)]
    assert sql("SELECT count(*) FROM incidents") == [(0,)]


def test_an_event_that_differs_from_its_session_credits_nothing(shop, sql):
    buyer, other = new_user(sql), new_user(sql)
    sid = checkout(sql, buyer, 5, 2000)
    # Another user's id in the metadata and client_reference_id, the right amount.
    assert deliver(shop.url, paid_event(sid, other)).json()["outcome"] == "mismatch"
    assert deliver(shop.url, paid_event(sid, buyer, points=1, amount=2000)).json()["outcome"] == (
        "mismatch"
    )
    assert purchases(sql, other) == [] and purchases(sql, buyer) == []
    assert sql("SELECT user_id, points, status FROM checkout_sessions") == [(buyer, 5, "open")]
    assert sql("SELECT code, user_id FROM incidents") == [("PURCHASE_MISMATCH", buyer)]
    # The right event then credits, and the incident no longer says nothing was.
    assert deliver(shop.url, paid_event(sid, buyer)).json()["outcome"] == "credited"
    assert sql("SELECT resolved_at IS NOT NULL FROM incidents") == [(True,)]


def test_a_session_we_did_not_create_is_not_credited(shop, sql):
    user = new_user(sql)
    sid = session_id()  # signed by Stripe, but no row of ours: what was sold is unknown
    assert deliver(shop.url, paid_event(sid, user)).json()["outcome"] == "mismatch"
    assert purchases(sql, user) == []
    assert sql("SELECT count(*) FROM checkout_sessions") == [(0,)]
    assert sql("SELECT code, payment_ref FROM incidents") == [("PURCHASE_MISMATCH", sid)]


@pytest.mark.parametrize(
    "body",
    [
        {"type": "checkout.session.completed", "data": ["x"]},
        {"type": "checkout.session.completed", "data": {"object": "cs_x"}},
        {"type": "charge.refunded", "data": {"object": [1, 2]}},
        {"type": "charge.refunded"},
        {"type": ["charge.refunded"], "data": {"object": {}}},
        {"type": "checkout.session.completed", "data": None},
    ],
    ids=["data-list", "object-string", "object-list", "no-data", "type-list", "data-null"],
)
def test_a_signed_event_without_an_object_is_answered_not_a_500(shop, sql, body):
    import json

    response = deliver(shop.url, json.dumps(body).encode())
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "ignored"
    assert sql("SELECT count(*) FROM point_ledger") == [(0,)]


def test_a_signed_event_with_fields_of_the_wrong_type_is_answered(shop, sql):
    user = new_user(sql)
    sid = checkout(sql, user)
    obj = fakestripe.completed_session(sid, user, 5, 2000)
    obj["payment_intent"] = {"id": "pi_x"}
    obj["metadata"] = ["not", "a", "dict"]
    response = deliver(shop.url, fakestripe.event("checkout.session.completed", obj))
    assert response.status_code == 200 and response.json()["outcome"] == "mismatch"
    charge = {"id": 5, "payment_intent": ["pi"], "refunded": "yes", "amount": "x"}
    response = deliver(shop.url, fakestripe.event("charge.refunded", charge))
    assert response.status_code == 200 and response.json()["outcome"] == "unmatched"
    assert purchases(sql, user) == []


def test_two_partial_refunds_then_the_rest_are_left_to_support(shop, sql):
    user, sid, _ = refund_setup(shop, sql, spent=0)
    pi = sql("SELECT payment_intent FROM checkout_sessions WHERE id = %(s)s", s=sid)[0][0]

    def refund(amount):
        charge = fakestripe.refunded_charge(pi, 2000, refunded_amount=amount)
        return deliver(shop.url, fakestripe.event("charge.refunded", charge)).json()["outcome"]

    assert refund(500) == "partial"
    # Support settles the first one (a correction of 1 point, say) and resolves it.
    sql("UPDATE incidents SET resolved_at = now(), resolution = 'settled: -1'")
    assert refund(1000) == "partial"  # a new amount: raised again
    assert refund(1000) == "partial"  # re-delivered: once
    assert sql("SELECT code, resolved_at IS NULL FROM incidents ORDER BY id") == [
        ("PARTIAL_REFUND", False),
        ("PARTIAL_REFUND", True),
    ]
    assert refund(2000) == "refunded_after_partial"
    assert purchases(sql, user) == [("purchase", 5, sid)]  # nothing taken automatically
    assert balance(sql, user) == 5
    assert sql("SELECT code, severity FROM incidents ORDER BY id")[-1] == (
        "REFUND_AFTER_PARTIAL",
        "critical",
    )


def test_a_chargeback_opens_a_critical_incident_and_moves_no_point(shop, sql):
    user, sid, _ = refund_setup(shop, sql, spent=0)
    pi = sql("SELECT payment_intent FROM checkout_sessions WHERE id = %(s)s", s=sid)[0][0]
    # A Dispute object (https://docs.stripe.com/api/disputes/object), constructed.
    dispute = {
        "id": "dp_" + uuid.uuid4().hex[:20],
        "object": "dispute",
        "amount": 2000,
        "charge": "ch_" + uuid.uuid4().hex[:20],
        "currency": "jpy",
        "payment_intent": pi,
        "reason": "fraudulent",
        "status": "needs_response",
    }
    payload = fakestripe.event("charge.dispute.created", dispute)
    assert deliver(shop.url, payload).json()["outcome"] == "disputed"
    assert deliver(shop.url, payload).json()["outcome"] == "disputed"  # re-delivered: once
    assert sql("SELECT code, severity, user_id FROM incidents") == [
        ("CHARGEBACK", "critical", user)
    ]
    assert balance(sql, user) == 5


def test_ledger_check_covers_what_the_review_found(app, sql):
    import psycopg

    from app.points import checkout as checkouts
    from app.points import credits

    runner = app.test_cli_runner()

    def check():
        result = runner.invoke(args=["ledger-check"])
        return result.exit_code, result.output

    user = new_user(sql)
    sid = checkout(sql, user)
    pi = f"pi_{uuid.uuid4().hex[:20]}"
    with app.app_context():
        obj = fakestripe.completed_session(sid, user, 5, 2000, payment_intent=pi)
        assert credits.credit(obj, checkouts.parse_packs("5:2000")) == "credited"
    assert check() == (0, "ledger ok\n")
    unpaid = checkout(sql, user)
    ids = {"s": sid, "unpaid": unpaid, "pi": pi, "u": user, "other": new_user(sql)}
    # The books broken by hand one way at a time: how, what ledger-check says, the mend.
    for breaking, said, mend in (
        (  # a session marked paid that was never credited
            "UPDATE checkout_sessions SET status = 'paid' WHERE id = %(unpaid)s",
            f"{unpaid} is marked paid but was never credited",
            "UPDATE checkout_sessions SET status = 'expired' WHERE id = %(unpaid)s",
        ),
        (  # a purchase whose payment was refunded in full, with no reversal
            "INSERT INTO payment_refunds (payment_intent, charge_id, full_refund, partial_seen)"
            " VALUES (%(pi)s, 'ch_x', true, false)",
            f"payment {pi} was refunded in full",
            "DELETE FROM payment_refunds",
        ),
        (  # an open PURCHASE_MISMATCH for a session that was credited
            "INSERT INTO incidents (scope, code, severity, detail, payment_ref)"
            " VALUES ('payment', 'PURCHASE_MISMATCH', 'critical', 'no points credited', %(s)s)",
            f"Checkout Session {sid} was not credited, but it was",
            "UPDATE incidents SET resolved_at = now()",
        ),
        (  # a support row whose operator is not (or no longer) support
            "INSERT INTO point_ledger (user_id, kind, amount, operator_id, reason)"
            " VALUES (%(u)s, 'support', 1, %(other)s, 'by hand')",
            "not a support user",
            None,
        ),
    ):
        sql(breaking, **ids)
        code, output = check()
        assert code == 1 and said in output, output
        if mend:
            sql(mend, **ids)
    # An empty session id is refused by the database itself.
    for statement in (
        "INSERT INTO point_ledger (user_id, kind, amount, checkout_session)"
        " VALUES (%(u)s, 'purchase', 1, '')",
        "INSERT INTO checkout_sessions (id, user_id, points, amount, currency)"
        " VALUES ('', %(u)s, 1, 500, 'jpy')",
    ):
        with pytest.raises(psycopg.errors.CheckViolation):
            sql(statement, u=user)


def test_a_support_grant_submitted_twice_is_recorded_once(app, sql):
    user_client = app.test_client()
    Actions(user_client).signup("twice@example.com")
    support = support_client(app, sql)
    html = support.get("/support").get_data(as_text=True)
    nonce = re.search(r'name="nonce"[^>]*value="([0-9a-f]+)"', html)
    assert nonce, "the form carries a one-time value"
    data = {
        "email": "twice@example.com",
        "amount": "2",
        "reason": "goodwill",
        "csrf_token": csrf_token(html),
        "nonce": nonce.group(1),
    }
    assert support.post("/support/points", data=data).status_code == 303
    again = support.post("/support/points", data=data, follow_redirects=True)
    assert again.status_code == 200
    assert "already recorded" in again.get_data(as_text=True)
    assert sql("SELECT amount FROM point_ledger WHERE kind = 'support'") == [(2,)]
    # Without the one-time value nothing is written.
    assert support.post("/support/points", data={**data, "nonce": ""}).status_code == 400
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'support'") == [(1,)]
    # A new page, a new value: a second grant on purpose is recorded.
    html = support.get("/support").get_data(as_text=True)
    fresh = re.search(r'name="nonce"[^>]*value="([0-9a-f]+)"', html).group(1)
    assert fresh != nonce.group(1)
    assert support.post("/support/points", data={**data, "nonce": fresh}).status_code == 303
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'support'") == [(2,)]
