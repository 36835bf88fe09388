"""In Chromium: a report prints on at most three A4 pages, in both languages (issue 47).

Printed as a reader's browser does by default, without background graphics: what the page
says must be legible from text and borders alone.
"""

import re

import pytest

from app.assessment.report.analysis import LAYERS
from tests.test_browser import (  # noqa: F401 - the launch arguments are a fixture
    JOB_PAGE,
    browser_type_launch_args,
    sign_up,
    watch_csp,
)

pytestmark = pytest.mark.browser

# Where new users printed 6-7 pages: an address placed at its 町丁目 (every block a report
# has), another in Tokyo (no tsunami data published there), and a whole city.
PLACES = ["神奈川県横浜市中区山下町1-1", "東京都江東区豊洲3-2", "札幌市"]
MOST_PAGES = 3

# The visible elements that draw a box (a border or a background) around no text or picture.
EMPTY_BOXES = """() => [...document.querySelectorAll("body *")].filter((e) => {
  const box = e.getBoundingClientRect();
  if (!box.width || !box.height || e.closest("svg")) return false;
  const style = getComputedStyle(e);
  const cell = ["TR", "TD", "TH", "TABLE", "THEAD", "TBODY"].includes(e.tagName);
  const bordered = !cell && ["Top", "Right", "Bottom", "Left"].some((side) =>
    parseFloat(style["border" + side + "Width"]) > 0
      && style["border" + side + "Style"] !== "none");
  const filled = !["rgba(0, 0, 0, 0)", "rgb(255, 255, 255)"].includes(style.backgroundColor);
  return (bordered || filled) && !e.innerText.trim() && !e.querySelector("svg, img");
}).map((e) => e.tagName + "." + e.className)"""


def pages_of(pdf: bytes) -> int:
    """Count a PDF's pages (Chromium writes one /Type /Page object per page)."""
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf))


@pytest.mark.parametrize("place", PLACES, ids=["yamashita", "toyosu", "sapporo"])
@pytest.mark.parametrize("lang", ["ja", "en"])
def test_a_report_prints_on_at_most_three_a4_pages(page, kept_live, lang, place):
    server = kept_live(ASSESSMENT_WORK_SECONDS="0", POLL_INTERVAL_SECONDS="0.3")
    violations = watch_csp(page)
    sign_up(page, server, f"print-{lang}@example.com")
    page.goto(server.url + "/assessments/new")
    page.get_by_label("Place").fill(place)
    page.get_by_label("Report language").select_option(lang)
    page.get_by_role("button", name=re.compile("Start assessment")).click()
    page.wait_for_url(JOB_PAGE)
    page.wait_for_selector("#report .report")
    printing = page.get_by_role("button", name="Print", exact=True)  # the interface's words
    assert printing.is_visible()
    page.emulate_media(media="print")
    assert not printing.is_visible()
    # Everything the reader pays for is printed: the map, the spot, every layer, the sources.
    # A map with no zone in the circle adds nothing on paper: left out, and named instead.
    maps = page.eval_on_selector_all(
        ".report-map", "ms => ms.map(m => [m.dataset.state, m.offsetParent !== null])"
    )
    assert any(shown for _, shown in maps) and all(shown != (s == "no_zone") for s, shown in maps)
    if any(s == "no_zone" for s, _ in maps):
        assert page.locator("[data-blank-maps]").is_visible()
    if place != "札幌市":
        assert page.locator("[data-spot]").first.is_visible()
    assert page.locator(".report-table:not(.report-shares) tbody tr").count() == len(LAYERS)
    assert page.locator(".report-sources").is_visible()
    # The scoring notes are printed open, never as bare headings.
    for note in page.locator("details.report-how").all():
        assert note.get_attribute("open") is not None or not note.is_visible()
        if note.is_visible():
            assert note.locator("p").is_visible()
    # No heading left at the foot of a page, apart from what it heads.
    breaks = page.eval_on_selector_all(
        ".report h2, .report h3", "(hs) => hs.map((h) => getComputedStyle(h).breakAfter)"
    )
    assert set(breaks) == {"avoid"}, breaks
    # Level badges are read from their text and frame: the printer drops their colour.
    badges = page.eval_on_selector_all(
        ".report .report-level-badge",
        "(bs) => bs.map((b) => [getComputedStyle(b).color, getComputedStyle(b).borderTopWidth])",
    )
    assert badges and all(c == "rgb(0, 0, 0)" and float(w[:-2]) > 0 for c, w in badges), badges
    # No empty box: nothing printed with a border or a background and nothing inside.
    assert page.evaluate(EMPTY_BOXES) == []
    pdf = page.pdf(format="A4")  # as printed by default: no background graphics
    count = pages_of(pdf)
    print(f"{place} {lang}: {count} A4 pages")
    assert count <= MOST_PAGES, f"{place} {lang}: {count} pages"
    assert violations == []
