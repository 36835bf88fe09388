"""In Chromium: two homes chosen on the history page and read side by side (issue 47)."""

import re

import pytest

from tests.test_browser import (  # noqa: F401 - the launch arguments are a fixture
    browser_type_launch_args,
    check_a11y,
    sign_up,
    start_job,
    watch_csp,
)
from tests.test_browser_print import pages_of

pytestmark = pytest.mark.browser


def test_two_reports_ticked_on_the_history_open_side_by_side(page, live):
    server = live(ASSESSMENT_WORK_SECONDS="0", POLL_INTERVAL_SECONDS="0.3")
    violations = watch_csp(page)
    sign_up(page, server, "compare@example.com")
    for place in ("Sapporo", "福岡市"):
        start_job(page, server, place)
        page.wait_for_selector('#job-status[data-status="succeeded"]', timeout=30_000)
    page.goto(server.url + "/assessments")
    boxes = page.get_by_role("checkbox", name=re.compile("^Compare"))
    assert boxes.count() == 2
    boxes.nth(0).check()
    boxes.nth(1).check()
    page.get_by_role("button", name="Compare", exact=True).click()
    page.wait_for_url(re.compile(r"/assessments/compare\?ids=[0-9a-f-]{36}&ids=[0-9a-f-]{36}$"))
    columns = page.locator(".compare-table thead th[data-job]")
    assert columns.count() == 2
    names = [name.casefold() for name in columns.all_inner_texts()]  # headings print in capitals
    page.screenshot(path="/tmp/compare-desktop.png", full_page=True)
    assert any("sapporo" in name for name in names), names
    assert any("fukuoka" in name for name in names), names
    shaking = page.locator('.compare-layer[data-layer="seismic"] tr[data-row="probability"]')
    assert shaking.is_visible()
    assert page.get_by_role("button", name="Print").is_visible()
    check_a11y(page)
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: a card per row
    label = page.locator('.compare-layer[data-layer="flood"] tr[data-row="worst"] td').first
    shown = label.evaluate("(td) => getComputedStyle(td, '::before').content")
    assert names[0] in shown.casefold(), shown  # the place names the value
    page.screenshot(path="/tmp/compare-phone.png", full_page=False)
    page.emulate_media(media="print")
    assert not page.get_by_role("button", name="Print").is_visible()
    assert not page.locator(".topbar").is_visible()
    pages = pages_of(page.pdf(format="A4"))
    print(f"comparison of two: {pages} A4 pages")
    assert pages <= 2  # the table, printed on its own
    assert violations == []
