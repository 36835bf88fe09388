"""End to end in Debian's Chromium: what a user sees, with the fragment refreshing itself."""

import math
import os
import re
from pathlib import Path

import pytest
import requests
from axe_playwright_python.sync_playwright import Axe

from app.assessment.report.analysis import LAYERS
from tests.conftest import wait_for

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(os.environ.get("SCREENSHOT_DIR", Path(__file__).parent.parent / "test-artifacts"))
PHONE = {"width": 390, "height": 844}

if not os.path.exists(CHROMIUM):
    pytest.skip(
        "Debian's chromium is not installed: `apt-get install -y chromium` (make test does it"
        " when run as root). Playwright's own browser download is never used.",
        allow_module_level=True,
    )

JOB_PAGE = re.compile(r"/assessments/[0-9a-f-]{36}$")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


AXE = Axe()  # axe-core, as shipped inside the package: nothing is downloaded


def check_a11y(page):
    """Fail on any accessibility violation axe-core finds on the page as it is now.

    Playwright hands the script to the browser over the devtools protocol, which the
    page's CSP does not govern, and axe itself needs no eval: no CSP is bypassed.
    """
    results = AXE.run(page)
    assert results.violations_count == 0, f"{page.url}\n{results.generate_report()}"


def shot(page, name):
    """Check the page with axe-core, then keep a screenshot of it."""
    check_a11y(page)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"{name}.png", full_page=True)


def sign_up(page, server, email):
    page.goto(server.url + "/signup")
    check_a11y(page)
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill("correct horse")
    page.get_by_role("button", name="Sign up").click()
    page.wait_for_url(server.url + "/")


def submit(page, server, place):
    page.goto(server.url + "/assessments/new")
    check_a11y(page)
    page.get_by_label("Place").fill(place)
    page.get_by_role("button", name=re.compile("Start assessment")).click()


def start_job(page, server, place):
    """Submit a place and wait for the job's own page."""
    submit(page, server, place)
    page.wait_for_url(JOB_PAGE)


def balance(page, server):
    page.goto(server.url + "/")
    return int(page.locator("#balance").get_attribute("data-balance"))


def status_of(page):
    box = page.locator("#job-status")
    return box.get_attribute("data-status"), box.get_attribute("data-billing")


def watch_csp(page):
    """Collect every Content-Security-Policy violation the browser reports, on any page."""
    violations = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    page.expose_function("reportCspViolation", lambda text: violations.append(text))
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', e =>"
        " window.reportCspViolation(e.violatedDirective + ' ' + e.blockedURI));"
    )
    return violations


def test_a_job_from_submit_to_report_without_a_reload(page, live):
    server = live(ASSESSMENT_WORK_SECONDS="4", POLL_INTERVAL_SECONDS="0.5")
    violations = watch_csp(page)
    sign_up(page, server, "ada@example.com")
    assert (
        "script-src 'self'" in page.request.get(server.url + "/").headers["content-security-policy"]
    )
    assert page.locator("#balance").inner_text() == "3"
    shot(page, "dashboard")

    page.goto(server.url + "/assessments/new")
    page.get_by_role("button", name=re.compile("Start assessment")).click()
    assert (
        page.locator(".field-error")
        .first.inner_text()
        .endswith("Type a place: a city, a municipality code or an address.")
    )
    shot(page, "form-error")

    polls = []
    page.on("request", lambda r: polls.append(r.url) if r.url.endswith("/status") else None)
    loads = []
    page.on("load", lambda _: loads.append(1))
    start_job(page, server, "東京都千代田区")
    loads.clear()

    page.wait_for_selector('#job-status[data-status="running"]')
    first = int(page.locator("#job-status progress").get_attribute("value"))
    # A function, not an expression string: Playwright would eval() the string, which
    # the page's CSP (rightly) refuses.
    page.wait_for_function(
        "first => Number(document.querySelector('#job-status progress')?.value) > first",
        arg=max(first, 22),  # well under way, for the picture
    )
    assert page.locator("#job-status .step").inner_text().startswith("Fetching hazard data")
    layers = page.locator("#job-status .layer-ticks li")
    assert layers.all_inner_texts() and len(layers.all_inner_texts()) == len(LAYERS)
    # The bar moved with the calls done; a layer not published here (Tokyo's tsunami) was
    # ticked from the start (the demo's layers read ones end together, at the end).
    assert "✓" in page.locator('#job-status .layer-ticks li[data-done="yes"]').first.inner_text()
    shot(page, "job-running")

    page.wait_for_selector('#job-status[data-status="succeeded"]', timeout=30_000)
    assert status_of(page) == ("succeeded", "charged")
    assert page.locator(".report").is_visible()  # arrived out of band with the last poll
    assert "Chiyoda" in page.locator(".report").inner_text()
    assert loads == []  # all of it without a page load
    shot(page, "report")

    settled_at = len(polls)
    page.wait_for_timeout(2_000)  # four poll intervals
    assert len(polls) == settled_at, "the settled fragment kept polling"
    assert balance(page, server) == 2
    assert violations == [], "the browser refused something under the CSP"


def test_the_journey_in_japanese(page, live):
    server = live(ASSESSMENT_WORK_SECONDS="4", POLL_INTERVAL_SECONDS="0.5")
    page.goto(server.url + "/")
    page.get_by_role("button", name="日本語").click()  # the switch: a form, no script needed
    assert page.locator("html").get_attribute("lang") == "ja"
    page.goto(server.url + "/signup")
    page.get_by_label("メールアドレス").fill("hanako@example.com")
    page.get_by_label("パスワード").fill("correct horse")
    page.get_by_role("button", name="新規登録").click()
    page.wait_for_url(server.url + "/")
    assert "3ポイントをご利用いただけます" in page.locator(".flash").inner_text()
    shot(page, "dashboard-ja")

    page.goto(server.url + "/assessments/new")
    page.get_by_label("場所").fill("府中市")
    page.get_by_role("button", name=re.compile("評価を開始")).click()
    choices = page.locator(".choice-list a")
    assert choices.all_inner_texts() == ["東京都府中市 (132063)", "広島県府中市 (342084)"]
    shot(page, "choices-ja")
    choices.first.click()
    assert page.get_by_label("レポートの言語").input_value() == "ja"  # follows the interface
    page.get_by_role("button", name=re.compile("評価を開始")).click()
    page.wait_for_url(JOB_PAGE)
    assert page.locator("h1").inner_text() == "東京都府中市"

    page.wait_for_selector('#job-status[data-status="running"]')
    # A function, not an expression string, which the page's CSP would refuse to eval().
    page.wait_for_selector('#job-status .layer-ticks li[data-done="yes"]')
    assert "ハザードデータを取得しています" in page.locator("#job-status .step").inner_text()
    ticks = page.locator("#job-status .layer-ticks").inner_text()
    assert all(name in ticks for name in (layer.name_ja for layer in LAYERS)), ticks
    shot(page, "job-running-ja")

    page.wait_for_selector('#job-status[data-status="succeeded"]', timeout=30_000)
    assert "1ポイントを使用しました。" in page.locator("#job-status").inner_text()
    assert page.locator(".report").get_attribute("lang") == "ja"
    assert "総合スコア" in page.locator(".report").inner_text()
    shot(page, "report-ja")


def test_a_killed_worker_shows_checking_then_refunded(page, live):
    # The worker dies right after charging the point; the page finds out by itself.
    server = live(
        FAILPOINTS="after_running=sleep:0.5,after_consume=kill",
        JOB_LEASE_SECONDS="2",
        POLL_INTERVAL_SECONDS="0.4",
    )
    sign_up(page, server, "crash@example.com")
    start_job(page, server, "Sendai")

    # Quiet past a few heartbeats, inside the lease: the page says it is checking.
    page.wait_for_selector('#job-status[data-status="running"][data-billing="pending"]')
    assert "Checking your points…" in page.locator("#job-status").inner_text()
    shot(page, "job-checking")
    page.wait_for_selector('#job-status[data-billing="refunded"]')
    assert "Your point was refunded." in page.locator("#job-status").inner_text()
    shot(page, "job-refunded")
    assert balance(page, server) == 3


def test_another_users_job_is_the_404_page(browser, live):
    server = live(ASSESSMENT_WORK_SECONDS="0")
    owner, stranger = browser.new_page(), browser.new_page()
    sign_up(owner, server, "owner@example.com")
    start_job(owner, server, "Nagoya")
    sign_up(stranger, server, "stranger@example.com")
    response = stranger.goto(owner.url)
    assert response.status == 404
    assert "Not found" in stranger.locator("h1").inner_text()
    check_a11y(stranger)


def tab_to(page, selector, limit=30):
    """Press Tab until the element matching selector has the focus."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate(f"document.activeElement.matches({selector!r})"):
            return
    raise AssertionError(f"Tab never reached {selector}")


def test_the_keyboard_alone_signs_up_and_submits(page, live):
    server = live(ASSESSMENT_WORK_SECONDS="1")
    page.goto(server.url + "/signup")
    tab_to(page, "#email")
    page.keyboard.type("keys@example.com")
    tab_to(page, "#password")
    page.keyboard.type("correct horse")
    page.keyboard.press("Enter")
    page.wait_for_url(server.url + "/")

    tab_to(page, "a[href='/assessments/new']")
    page.keyboard.press("Enter")
    page.wait_for_url(server.url + "/assessments/new")
    tab_to(page, "#query")
    page.keyboard.type("Fukuoka")
    tab_to(page, "#lang")
    page.keyboard.press("ArrowDown")  # 日本語
    tab_to(page, "button[type=submit]:not(.link)")
    page.keyboard.press("Enter")
    page.wait_for_url(JOB_PAGE)
    region = page.locator("#job-status")
    assert region.get_attribute("aria-live") == "polite"
    assert region.get_attribute("role") == "status"
    page.wait_for_selector('#job-status[data-status="succeeded"]', timeout=30_000)
    assert page.locator(".report").get_attribute("lang") == "ja"
    check_a11y(page)


def test_pages_fit_a_phone_and_the_support_console(browser, live, sql):
    # No sweep after the first request's: it would settle the job below by itself, the
    # ledger being readable again, before support could.
    server = live(ASSESSMENT_WORK_SECONDS="0", SWEEP_INTERVAL_SECONDS="600")
    phone = browser.new_page(viewport=PHONE)
    sign_up(phone, server, "phone@example.com")
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    shot(phone, "dashboard-phone")

    # A job whose ledger could not be read: routed to support.
    user_id = sql("SELECT id FROM users")[0][0]
    job_id = sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, status, finished_at, error_code,"
        " message) VALUES (%(u)s, '札幌市', 'en', 'failed', now(), 'INTERRUPTED',"
        " 'The assessment was interrupted before it finished.') RETURNING id",
        u=user_id,
    )[0][0]
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, job_id, reason)"
        " VALUES (%(u)s, 'consume', -1, %(j)s, 'area assessment')",
        u=user_id,
        j=job_id,
    )
    sql(
        "INSERT INTO incidents (scope, code, severity, job_id, user_id, detail) VALUES"
        " ('payment', 'REAP_CONSUME_LOOKUP_FAILED', 'critical', %(j)s, %(u)s,"
        " 'OperationalError: connection to the ledger timed out')",
        j=job_id,
        u=user_id,
    )
    staff = browser.new_page()
    sign_up(staff, server, "staff@example.com")
    sql("UPDATE users SET role = 'support' WHERE email = 'staff@example.com'")
    staff.goto(server.url + "/support")
    assert "phone@example.com" in staff.locator("main").inner_text()
    shot(staff, "support-console")
    staff.get_by_role("button", name="Refund the point").click()
    staff.wait_for_url(server.url + "/support")
    assert "resolved" in staff.locator(".flash").inner_text()
    phone.goto(f"{server.url}/assessments/{job_id}")
    assert phone.locator("#job-status").get_attribute("data-billing") == "refunded"
    check_a11y(phone)
    assert balance(phone, server) == 3


def test_a_deploy_while_watching_settles_the_open_page_at_once(page, live):
    # A lease far longer than the test: only the shutdown hook can settle the job.
    # The charge waits two seconds, so the page opens on a job not charged yet.
    server = live(
        ASSESSMENT_WORK_SECONDS="60", JOB_LEASE_SECONDS="600", FAILPOINTS="after_running=sleep:2"
    )
    sign_up(page, server, "deploy@example.com")
    start_job(page, server, "Kobe")
    assert page.locator("#job-status").get_attribute("data-billing") == "pending"
    assert page.locator("#nav-balance").get_attribute("data-balance") == "3"
    page.wait_for_selector('#job-status[data-billing="charged"]')
    # The top bar moved with the charge, before anything settled.
    assert page.locator("#nav-balance").get_attribute("data-balance") == "2"
    server.stop()  # SIGTERM: settled before the worker drains its last polls
    page.wait_for_selector('#job-status[data-billing="refunded"]')
    assert "The service restarted" in page.locator("#job-status").inner_text()
    assert page.locator("#nav-balance").get_attribute("data-balance") == "3"


def test_a_server_that_vanished_says_so_then_tells_the_truth(page, live):
    server = live(ASSESSMENT_WORK_SECONDS="60", JOB_LEASE_SECONDS="2")
    sign_up(page, server, "power@example.com")
    start_job(page, server, "Nara")
    page.wait_for_selector('#job-status[data-billing="charged"]')

    server.kill()  # the machine lost power, say
    page.wait_for_selector("#connection-note", state="visible")
    assert "can't reach the server" in page.locator("#connection-note").inner_text()
    # With no server to ask, the elapsed time still counts on.
    before = int(page.locator("#job-status .elapsed").inner_text())
    page.wait_for_function(
        "before => Number(document.querySelector('#job-status .elapsed').textContent) > before",
        arg=before,
    )

    live(port=server.port, JOB_LEASE_SECONDS="2")
    page.wait_for_selector('#job-status[data-billing="refunded"]', timeout=30_000)
    # htmx settles the swap a moment after it: the note hides then, not with the swap.
    page.wait_for_selector("#connection-note", state="hidden")
    assert page.locator("#nav-balance").get_attribute("data-balance") == "3"


def test_a_database_outage_keeps_the_page_polling_then_tells_the_truth(
    page, proxied_live, db_proxy, sql
):
    s = proxied_live(
        ASSESSMENT_WORK_SECONDS="60", JOB_LEASE_SECONDS="2", POLL_INTERVAL_SECONDS="0.5"
    )
    sign_up(page, s, "outage@example.com")
    start_job(page, s, "Nara")
    page.wait_for_selector('#job-status[data-billing="charged"]')

    db_proxy.down()  # the database, not the server, is gone: polls get the 503 page
    page.wait_for_selector("#connection-note", state="visible")
    assert page.locator("#job-status").get_attribute("data-status") == "running"
    shot(page, "job-database-outage")
    wait_for(
        lambda: sql("SELECT heartbeat_at < now() - interval '2.5 s' FROM assessment_jobs")[0][0]
    )
    db_proxy.up()

    # The 503s did not end the polling: the next poll reaps, refunds and says so.
    page.wait_for_selector('#job-status[data-billing="refunded"]')
    # htmx settles the swap a moment after it: the note hides then, not with the swap.
    page.wait_for_selector("#connection-note", state="hidden")
    assert page.locator("#nav-balance").get_attribute("data-balance") == "3"


def test_cancel_a_running_job_and_the_zero_point_form(page, live):
    server = live(ASSESSMENT_WORK_SECONDS="20", POLL_INTERVAL_SECONDS="0.5", SIGNUP_POINTS="1")
    sign_up(page, server, "cancel@example.com")
    start_job(page, server, "Sapporo")
    page.wait_for_selector('#job-status[data-billing="charged"]')
    page.get_by_role("button", name="Cancel this assessment").click()
    page.wait_for_selector('#job-status[data-billing="refunded"]')
    text = page.locator("#job-status").inner_text()
    assert "You cancelled this assessment." in text and "Your point was refunded." in text
    assert page.get_by_role("button", name="Cancel this assessment").count() == 0
    shot(page, "job-cancelled")

    # Spend the only point, then the form says so once, with a disabled button.
    start_job(page, server, "Sendai")
    page.goto(server.url + "/assessments/new")
    assert page.locator(".alert").count() == 1
    assert "support@example.com" in page.locator(".alert").inner_text()
    assert page.get_by_role("button", name=re.compile("Start assessment")).is_disabled()
    shot(page, "form-no-points")


def test_tables_become_cards_on_a_phone(browser, live):
    server = live(ASSESSMENT_WORK_SECONDS="0")
    phone = browser.new_page(viewport=PHONE)
    sign_up(phone, server, "cards@example.com")
    start_job(phone, server, "府中市 東京都")
    phone.wait_for_selector('#job-status[data-status="succeeded"]')
    for path in ("/assessments", "/points"):
        phone.goto(server.url + path)
        assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        assert phone.locator("thead").first.bounding_box()["height"] <= 1
        assert (
            phone.locator("td[data-label]").first.evaluate("el => getComputedStyle(el).display")
            == "block"
        )
        check_a11y(phone)
    shot(phone, "history-phone")


def test_the_same_place_twice_warns_then_starts_only_when_asked(page, live):
    server = live(ASSESSMENT_WORK_SECONDS="0", POLL_INTERVAL_SECONDS="0.5")
    sign_up(page, server, "twice@example.com")
    start_job(page, server, "Sapporo")
    page.wait_for_selector('#job-status[data-status="succeeded"]')
    first = page.url

    submit(page, server, "Sapporo")
    warning = page.locator(".notice.duplicate")
    assert "You already have a finished report of Sapporo, Hokkaido" in warning.inner_text()
    assert warning.get_by_role("link", name="Read your report").get_attribute("href") in first
    assert balance_here(page) == 2  # the warning charged nothing
    shot(page, "form-duplicate")

    page.get_by_role("button", name="Start a new one anyway (1 point)").click()
    page.wait_for_url(JOB_PAGE)
    assert page.url != first
    page.wait_for_selector('#job-status[data-status="succeeded"]')
    # Its figures were fetched a moment ago for the first report: it says so.
    assert "from a recent report" in page.locator("#job-status").inner_text()
    assert balance(page, server) == 1


def balance_here(page):
    return int(page.locator("#nav-balance").get_attribute("data-balance"))


def test_cancel_a_job_that_has_not_started(browser, live, sql):
    # The submit holds its job pending for three seconds; another tab cancels it then.
    server = live(FAILPOINTS="after_insert=sleep:3", POLL_INTERVAL_SECONDS="0.5")
    tabs = browser.new_context()
    first = tabs.new_page()
    sign_up(first, server, "pending@example.com")
    first.goto(server.url + "/assessments/new")
    first.get_by_label("Place").fill("Sendai")
    first.get_by_role("button", name=re.compile("Start assessment")).click(no_wait_after=True)
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("pending",)])
    job_id = sql("SELECT id FROM assessment_jobs")[0][0]

    second = tabs.new_page()
    second.goto(f"{server.url}/assessments/{job_id}")
    assert status_of(second) == ("pending", "pending")
    second.get_by_role("button", name="Cancel this assessment").click()
    second.wait_for_selector('#job-status[data-billing="not_charged"]')
    text = second.locator("#job-status").inner_text()
    assert "You cancelled this assessment." in text and "No point was used." in text
    check_a11y(second)

    # The submitting tab lands on the same truth: never started, never charged.
    first.wait_for_url(JOB_PAGE)
    assert status_of(first) == ("failed", "not_charged")
    assert balance(first, server) == 3


def test_a_cancel_racing_success_ends_in_one_outcome_and_says_which(page, live, sql):
    # The job holds its finished result for two seconds; the cancel arrives in between.
    server = live(
        ASSESSMENT_WORK_SECONDS="0.5",
        FAILPOINTS="before_success=sleep:2",
        POLL_INTERVAL_SECONDS="0.3",
    )
    sign_up(page, server, "race@example.com")
    start_job(page, server, "Kobe")
    job_url = page.url
    page.wait_for_selector('#job-status[data-status="running"] progress[value="100"]')
    page.get_by_role("button", name="Cancel this assessment").click()
    # 100 % done: the page asks first.
    check_a11y(page)
    page.get_by_role("button", name="Yes, cancel it").click()
    page.wait_for_url(job_url)
    page.wait_for_selector('#job-status:not([data-status="running"])')
    wait_for(lambda: requests.get(server.url + "/healthz").json()["jobs_running"] == 0)

    page.reload()  # the job's thread is gone: whatever the page says now is final
    outcome = status_of(page)
    text = page.locator("main").inner_text()
    if outcome == ("failed", "refunded"):
        assert "You cancelled this assessment." in text and "Your point was refunded." in text
        assert page.locator(".report").count() == 0
        assert balance(page, server) == 3
    else:
        assert outcome == ("succeeded", "charged")
        assert "It finished before the cancel arrived" in text
        assert page.locator(".report").is_visible()
        assert balance(page, server) == 2
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'refund'") == [
        (1 if outcome[0] == "failed" else 0,)
    ]


def test_an_unchanged_poll_is_answered_304_and_the_page_goes_on(page, live):
    """Chromium keeps the live fragment and asks with If-None-Match; htmx 2 gets the kept
    copy as a 200: the fragment stays, keeps polling, its seconds never go back, and a
    change (a layer fetched) still comes through."""
    # The job is held running, its point consumed, for 8 s before its work begins (the
    # after_consume failpoint): nothing in its fragment changes meanwhile, whatever the
    # work's own pace, so the first polls see the same fragment again and again.
    server = live(
        FAILPOINTS="after_consume=sleep:8",
        ASSESSMENT_WORK_SECONDS="4",
        POLL_INTERVAL_SECONDS="0.5",
        GUNICORN_ACCESSLOG="-",
    )
    violations = watch_csp(page)
    sign_up(page, server, "kept@example.com")
    polls = []
    page.on("response", lambda r: polls.append(r) if r.url.endswith("/status") else None)
    start_job(page, server, "札幌市")
    page.wait_for_selector('#job-status[data-status="running"]')
    job_path = page.url.removeprefix(server.url)

    def answered(code):
        log = server.log_path.read_text()
        return len(re.findall(rf'"GET {re.escape(job_path)}/status HTTP/1.1" {code} ', log))

    def shown():  # what the fragment says but for the seconds the page counts itself
        return page.evaluate(
            """() => {
                const live = document.querySelector('#job-status');
                const copy = live.cloneNode(true);
                copy.querySelectorAll('.elapsed').forEach(e => e.remove());
                return [live.dataset.status, live.querySelector('progress')?.value,
                        copy.textContent].join('|');
            }"""
        )

    held = shown()
    seconds = []
    for _ in range(12):  # 3 s: six polls, all within the hold
        seconds.append(int(page.locator("#job-status .elapsed").inner_text()))
        page.wait_for_timeout(250)
    assert shown() == held  # the kept copy stands: the same step, the same progress
    assert page.locator("#job-status progress").get_attribute("value") == "0"
    assert answered(304) >= 3, server.log_path.read_text()[-2000:]
    assert seconds == sorted(seconds) and seconds[-1] >= seconds[0] + 2, seconds
    assert all(r.ok for r in polls)  # the browser hands the kept copy on as a 200
    assert page.locator("#job-status").get_attribute("hx-trigger") == "every 0.5s"

    # A change is not hidden by the kept copy: once the work begins, the bar moves.
    page.wait_for_function(
        "() => Number(document.querySelector('#job-status progress')?.value) > 0",
        timeout=20_000,
    )
    assert answered(200) >= 1
    # The seconds went on from where they were, not back to the first answer's.
    assert int(page.locator("#job-status .elapsed").inner_text()) >= seconds[-1]
    page.wait_for_selector('#job-status[data-status="succeeded"]', timeout=40_000)
    assert page.locator(".report").is_visible()
    assert violations == []


@pytest.mark.minimal_work  # its progress holds at 50 % for half its time: polls stay 304
def test_the_time_left_counts_on_in_the_page_while_polls_are_304(page, live):
    """Once a part is in, the time left is estimated from the progress and the seconds
    so far; the page works it out as the server does, so the polls between two parts
    stay 304 while the estimate moves."""
    server = live(ASSESSMENT_WORK_SECONDS="20", POLL_INTERVAL_SECONDS="0.5", GUNICORN_ACCESSLOG="-")
    sign_up(page, server, "countdown@example.com")
    start_job(page, server, "a job of minutes")
    page.wait_for_selector('#job-status .layer-ticks li[data-done="yes"]', timeout=60_000)
    job_path = page.url.removeprefix(server.url)

    def answered(code):
        log = server.log_path.read_text()
        return len(re.findall(rf'"GET {re.escape(job_path)}/status HTTP/1.1" {code} ', log))

    def shown():
        return page.evaluate(
            """() => [document.querySelector('#job-status progress').value,
                      document.querySelector('#job-status .left').textContent,
                      Number(document.querySelector('#job-status .elapsed').textContent),
                      document.querySelector('#job-status progress')
                          .getAttribute('aria-valuetext')]"""
        )

    # Wait for a second with no new progress, then watch the next seconds, within one step.
    progress, left, *_ = shown()
    while True:
        page.wait_for_timeout(1_000)
        if (now := shown())[0] == progress:
            break
        progress, left, *_ = now
    rendered, kept = answered(200), answered(304)
    page.wait_for_timeout(2_500)
    progress_after, left_after, elapsed, spoken = shown()

    assert progress_after == progress > 0  # no new part meanwhile
    assert answered(200) == rendered and answered(304) >= kept + 3
    # The estimate moved with the seconds, and reads as the server words it: from the
    # exact seconds, which the whole ones shown are the floor of.
    words = re.fullmatch(r" · (about (\d+) (s|min) left)", left_after)
    assert words and left_after != left, (left, left_after)
    assert spoken == f"{progress}%, {words[1]}"  # what a screen reader hears on the bar
    bounds = [math.floor(e * (100 - progress) / progress + 0.5) for e in (elapsed, elapsed + 1)]
    if words[3] == "min":
        bounds = [math.ceil(b / 60) for b in bounds]
    assert bounds[0] <= int(words[2]) <= bounds[1], (left_after, elapsed, progress)


def test_a_point_report_s_map_has_its_base_map_pin_and_scale(page, live):
    from tests.conftest import serve_http
    from tests.test_spot import AT_SPOT, RING, SPOT, Stand, real

    with serve_http(Stand()) as stand:
        server = live(**{k: str(v) for k, v in real(stand).items()})
        violations = watch_csp(page)
        sign_up(page, server, "mapper@example.com")
        start_job(page, server, f"{SPOT[0]}, {SPOT[1]}")
        page.wait_for_selector('#job-status[data-status="succeeded"]', timeout=30_000)
    maps = page.locator('.report-maps[data-base-map="yes"]')
    assert maps.is_visible()
    flood = page.locator('.report-map[data-layer="flood"]')
    flood.scroll_into_view_if_needed()
    # The base map is drawn (the browser decoded the data: picture under the CSP), and
    # the pin, the scale bar and north lie on it.
    drawn = flood.locator("use.report-base-map").bounding_box()
    assert drawn and drawn["width"] > 250 and drawn["height"] > 250
    pin = flood.locator(".report-pin").bounding_box()
    assert pin and drawn["x"] < pin["x"] < drawn["x"] + drawn["width"]
    assert flood.locator(".report-scale text").text_content() == "200 m"
    assert flood.locator(".report-north").is_visible()
    here = flood.locator(".report-spot").inner_text()
    assert here.startswith(f"At the spot: {AT_SPOT.label_en}")
    nearest = flood.locator(".report-nearest li").all_inner_texts()
    assert nearest[0] == f"{AT_SPOT.label_en}: At the spot"  # in the legend's order
    assert nearest[1].startswith(f"{RING.label_en}: about 200 m")
    assert page.locator("[data-credit]").inner_text().startswith("GSI Tiles")
    assert violations == [], "the browser refused something under the CSP"
    check_a11y(page)
    SHOTS.mkdir(parents=True, exist_ok=True)
    flood.screenshot(path=SHOTS / "point-map.png")
    page.locator('.report-map[data-layer="landslide"]').screenshot(
        path=SHOTS / "point-map-landslide.png"
    )
    page.set_viewport_size(PHONE)
    flood.scroll_into_view_if_needed()
    shot(page, "point-report-phone")
