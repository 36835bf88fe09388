"""The operations page in Debian's Chromium at phone width: charts fit, numbers refresh."""

import pytest

from tests.conftest import wait_for
from tests.test_browser import PHONE, browser_type_launch_args, shot, sign_up  # noqa: F401
from tests.test_ops_page import seed

pytestmark = pytest.mark.browser


def test_the_ops_page_fits_a_phone_and_refreshes_itself(page, live, sql):
    server = live()
    page.set_viewport_size(PHONE)
    sign_up(page, server, "ops@example.com")
    sql("UPDATE users SET role = 'support'")
    seed(sql, sql("SELECT id FROM users")[0][0])
    page.goto(server.url + "/support/ops")

    assert page.locator("svg.chart-svg").count() == 2
    assert page.locator("svg.chart-svg").first.bounding_box()["width"] <= PHONE["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert page.locator('[data-window="day"] [data-stat="finished"]').inner_text() == "6"
    shot(page, "ops-phone")

    # A job ends while the page is open: the fragment's next refresh shows it.
    sql(
        "UPDATE assessment_jobs SET status = 'succeeded', finished_at = now()"
        " WHERE status = 'running'"
    )
    wait_for(
        lambda: page.locator('[data-window="day"] [data-stat="finished"]').inner_text() == "7",
        timeout=15,
    )
