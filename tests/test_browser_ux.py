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


@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_form_names_the_place_while_typing_in_japanese(browser, live, size):
    server = live()
    page = browser.new_page(viewport=size)
    violations = watch_csp(page)
    to_japanese(page, server)
    page.goto(server.url + "/signup")
    page.get_by_label("メールアドレス").fill(f"type{size['width']}@example.com")
    page.get_by_label("パスワード").fill("correct horse")
    page.get_by_role("button", name="新規登録").click()
    page.goto(server.url + "/assessments/new")
    page.get_by_label("場所").press_sequentially("〒430-0946")
    page.wait_for_selector("#place-preview strong")
    preview = page.locator("#place-preview").inner_text()
    assert "静岡県浜松市中央区" in preview and "郵便番号430-0946" in preview
    check_a11y(page)
    shot(page, f"form-preview-ja-{size['width']}")
    assert violations == []
