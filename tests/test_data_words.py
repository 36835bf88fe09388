"""What rows and reports store are codes; a reader sees words in their own language."""

import re

from app.assessment.report import analysis
from app.extensions import db
from app.points import ledger
from tests.conftest import job_id_from, signed_in, wait_for
from tests.test_jobs import attr

FAILURE = 'The "elevation" hazard data could not be fetched: GSI elevation API: unreachable.'


def failed_job(sql, message=FAILURE):
    return sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, status, error_code, message,"
        " finished_at, finalized_at) SELECT id, '仙台市', 'ja', 'failed', 'PROVIDER_ERROR',"
        " %(m)s, now(), now() FROM users RETURNING id",
        m=message,
    )[0][0]


def test_an_operators_grant_and_a_providers_failure_read_in_japanese(make_app, sql):
    app, client, actions = signed_in(make_app)
    ja = {"Accept-Language": "ja"}
    with app.app_context():
        ledger.grant(sql("SELECT id FROM users")[0][0], 2, "granted by an operator")
        db.session.commit()
    points = client.get("/points", headers=ja).get_data(as_text=True)
    assert '付与<span class="muted"> · 運営者より</span>' in points
    assert "granted by" not in points
    page = client.get(f"/assessments/{failed_job(sql)}", headers=ja).get_data(as_text=True)
    assert (
        "ハザードデータ「標高」を取得できませんでした（国土地理院の標高API：接続できませんでした）"
        in page
    )
    # A reason we have no words for is said in general terms, not in English.
    odd = failed_job(sql, FAILURE.replace("unreachable", 'the answer lacks "elevation"'))
    page = client.get(f"/assessments/{odd}", headers=ja).get_data(as_text=True)
    assert "国土地理院の標高API：応答の内容を読み取れませんでした" in page and "lacks" not in page
    english = client.get(f"/assessments/{odd}").get_data(as_text=True)
    assert 'GSI elevation API: the answer lacks "elevation"' in english.replace("&#34;", '"')


def test_a_japanese_report_names_its_sources_and_dates_itself_in_japanese(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id = job_id_from(actions.submit("Sapporo", "ja"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    # Read from the English interface: the report is still Japanese throughout.
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    report = page[page.index('<article class="report"') : page.index("</article>")]
    assert "<code>demo</code>" not in report and "デモ用データ" in report
    assert re.search(r"<dt>出典：洪水浸水想定区域（想定最大規模）</dt>", report)
    assert 'lang="en"' not in report  # no "FLOOD" beside 洪水, no romaji title
    assert "北緯" in report and "° N" not in report
    stamp = re.search(r"<dt>作成日時</dt><dd><time[^>]*>([^<]*)</time>", report)[1]
    assert re.fullmatch(r"\d{4}/\d{2}/\d{2} \d{1,2}:\d{2}:\d{2}", stamp), stamp
    assert attr(page, "data-status") == "succeeded"


def test_the_print_view_leaves_out_the_pages_heading_in_the_interfaces_language():
    from pathlib import Path

    css = (Path(__file__).parent.parent / "static/css/report.css").read_text()
    printed = css[css.index("@media print") :]
    assert ".page > .card:has(+ #report .report) { display: none !important; }" in printed


def test_the_other_languages_view_keeps_each_layers_demonstration_tag(make_app, sql):
    app, client, actions = signed_in(make_app)
    job_id = job_id_from(actions.submit("Sapporo", "en"))
    wait_for(lambda: sql("SELECT status FROM assessment_jobs") == [("succeeded",)])
    english = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    japanese = client.get(f"/assessments/{job_id}?lang=ja").get_data(as_text=True)
    layers = len(analysis.LAYERS)  # one tag per layer read
    assert english.count('class="report-provenance" data-real="no"') == layers
    assert japanese.count('class="report-provenance" data-real="no"') == layers
    assert japanese.count(">デモデータ</span>") == layers
