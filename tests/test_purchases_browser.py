"""Buying points in Debian's Chromium: the buy page's form reaches Stripe under the CSP, and
the page after paying updates itself when the webhook lands."""

import pytest

from tests import fakestripe
from tests.test_browser import (  # noqa: F401 - the fixture Playwright reads
    browser_type_launch_args,
    check_a11y,
    sign_up,
    watch_csp,
)
from tests.test_purchases import PAY, deliver, paid_event

pytestmark = pytest.mark.browser


def test_buy_then_the_page_after_paying_waits_for_the_webhook(page, live, sql):
    stripe_api = fakestripe.FakeStripe().start()
    try:
        server = live(**PAY, STRIPE_API_BASE=stripe_api.url, POLL_INTERVAL_SECONDS="0.5")
        violations = watch_csp(page)
        sign_up(page, server, "buyer@example.com")
        for path in ("/legal/commerce", "/legal/terms"):
            page.goto(server.url + path)
            check_a11y(page)
        page.goto(server.url + "/")
        page.locator("#nav-buy").click()
        page.wait_for_url(server.url + "/points/buy")
        check_a11y(page)
        # Stripe's hosted page is not reachable from here: the browser's request for it is
        # answered locally, which shows the redirect left the site as the CSP allows.
        reached = []
        page.route(
            "https://checkout.stripe.com/**",
            lambda route: (reached.append(route.request.url), route.fulfill(body="Stripe")),
        )
        page.get_by_role("button", name="5 points for ¥2,000").click()
        page.wait_for_url("https://checkout.stripe.com/**")
        (sid, user) = sql("SELECT id, user_id FROM checkout_sessions")[0]
        assert reached == [f"https://checkout.stripe.com/c/pay/{sid}"]

        page.goto(f"{server.url}/points/buy/done?session_id={sid}")
        status = page.locator("#purchase-status")
        assert status.get_attribute("data-credited") == "no"
        assert "Thank you" in status.inner_text()
        check_a11y(page)
        assert deliver(server.url, paid_event(sid, user)).status_code == 200
        page.wait_for_selector('#purchase-status[data-credited="yes"]', timeout=10_000)
        assert "5 points were added" in status.inner_text()
        assert page.locator("#nav-balance").get_attribute("data-balance") == "8"
        check_a11y(page)
        assert violations == []
    finally:
        stripe_api.stop()
