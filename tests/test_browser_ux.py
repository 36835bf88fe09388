"""In Chromium, what a new user tripped over (issue 26): each check at the size and language
it was seen in, with axe-core and the CSP watching."""

import re

import pytest

from tests.test_browser import (  # noqa: F401 - the launch arguments are a fixture
    JOB_PAGE,
    PHONE,
    browser_type_launch_args,
    check_a11y,
    shot,
    sign_up,
    start_job,
    watch_csp,
)

pytestmark = pytest.mark.browser

DESKTOP = {"width": 1280, "height": 800}


def to_japanese(page, server):
    page.goto(server.url + "/")
    page.get_by_role("button", name="日本語").click()


def test_a_report_finished_while_watching_is_the_full_pages_report(page, live):
    server = live(ASSESSMENT_WORK_SECONDS="2", POLL_INTERVAL_SECONDS="0.3")
    violations = watch_csp(page)
    sign_up(page, server, "live@example.com")
    start_job(page, server, "Sapporo")
    assert page.locator(".report").count() == 0  # the page opened on a job still at work
    loads = []
    page.on("load", lambda _: loads.append(1))
    page.wait_for_selector('#job-status[data-status="succeeded"]', timeout=30_000)
    page.wait_for_selector("#report .report")
    assert loads == []
    report = page.locator("#report")
    assert report.get_by_role("link", name="Download the figures (JSON)").is_visible()
    assert "use your browser's Print" in report.inner_text()
    other = report.get_by_role("link", name="Read this report in Japanese")
    assert other.is_visible()
    check_a11y(page)
    shot(page, "report-finished-live")
    live_text = report.inner_text()

    page.reload()
    assert page.locator("#report").inner_text() == live_text
    other.click()
    page.wait_for_url(re.compile(r"lang=ja$"))
    assert page.locator(".report").get_attribute("lang") == "ja"
    assert violations == []
