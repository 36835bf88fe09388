"""The real assessment inside the job: places at submit, providers, progress, report, cleanup."""

import re
import time
from datetime import timedelta

import pytest

from app.assessment import resolve_place
from app.assessment.report.analysis import LAYERS
from app.assessment.sources import coverage
from app.assessment.sources.providers import DATASETS
from app.assessment.work import keys_for
from app.jobs import housekeeping
from tests.conftest import Actions, Upstream, at_once, job_id_from, signed_in, wait_for
from tests.test_jobs import attr, poll_until, settled


def nothing_written(sql):
    return sql("SELECT count(*) FROM assessment_jobs") == [(0,)] and sql(
        "SELECT count(*) FROM point_ledger WHERE kind <> 'grant'"
    ) == [(0,)]


def test_http_provider_job_hits_each_upstream_key_once(make_app, upstream: Upstream, sql):
    app, client, actions = signed_in(
        make_app, LAYER_PROVIDER="http", LAYER_HTTP_BASE_URL=upstream.url
    )
    job_id = job_id_from(actions.submit("Sapporo"))
    html = poll_until(client, job_id, settled)
    assert attr(html, "data-status") == "succeeded"
    # Five layers ask for the same tiles and codes at once; the single-flight cache
    # sends each key upstream once.
    area = resolve_place("Sapporo")
    expected = {f"/{ds}/{key}" for ds in DATASETS for key in keys_for(area, ds)}
    assert set(upstream.hits) == expected
    assert set(upstream.hits.values()) == {1}
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "demonstration data" not in page and "<svg" in page


def test_upstream_error_fails_the_job_honestly(make_app, upstream: Upstream, sql):
    upstream.status, upstream.body = 500, b"{}"
    app, client, actions = signed_in(
        make_app, LAYER_PROVIDER="http", LAYER_HTTP_BASE_URL=upstream.url
    )
    job_id = job_id_from(actions.submit("Sapporo"))
    html = poll_until(client, job_id, settled)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "refunded")
    assert "HTTP 500" in html and "Your point was refunded." in html
    assert 'hazard dataset "' not in html  # the log's wording, with the tile key, stays there
    assert sql("SELECT error_code FROM assessment_jobs") == [("PROVIDER_ERROR",)]
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_upstream_timeout_fails_the_job_honestly(make_app, upstream: Upstream, sql):
    upstream.delay = 1.0
    app, client, actions = signed_in(
        make_app,
        LAYER_PROVIDER="http",
        LAYER_HTTP_BASE_URL=upstream.url,
        LAYER_HTTP_TIMEOUT_SECONDS=0.2,
    )
    job_id = job_id_from(actions.submit("Sapporo"))
    html = poll_until(client, job_id, settled)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "refunded")
    assert "no answer within" in html
    assert sql("SELECT point_balance FROM users") == [(3,)]


def test_ambiguous_place_offers_choices_and_writes_nothing(client, actions, sql):
    actions.signup()
    response = actions.submit("府中市")
    body = response.get_data(as_text=True)
    assert response.status_code == 400
    assert "matches 2 places" in body
    assert "(132063)" in body and "(342084)" in body  # Tokyo and Hiroshima
    assert nothing_written(sql)
    # Choosing fills in the form and charges nothing; starting it is a second step.
    form = client.get("/assessments/new?query=342084&lang=ja").get_data(as_text=True)
    assert 'value="342084"' in form and '<option selected value="ja">' in form
    assert nothing_written(sql)
    assert actions.submit("342084").status_code == 303


def test_unknown_place_suggests_and_writes_nothing(client, actions, sql):
    actions.signup()
    response = actions.submit("Sapporro")
    body = response.get_data(as_text=True)
    assert response.status_code == 400
    assert "Close matches to" in body and "Sapporo" in body
    assert nothing_written(sql)


def test_address_resolves_and_report_names_the_place(client, actions, app):
    actions.signup()
    job_id = job_id_from(actions.submit("北海道札幌市中央区北1条西2丁目", "ja"))
    assert app.extensions["runner"].wait(10)
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "札幌市中央区" in page and "<svg" in page
    assert "デモ用のデータ" in page  # a demo report says so, in the report's language


def test_progress_names_the_step(make_app):
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=2)
    job_id = job_id_from(actions.submit())
    steps, progress = set(), []

    def record(html):
        if attr(html, "data-status") == "running":
            steps.add(html.split('class="step">', 1)[1].split("<", 1)[0])
            progress.append(int(attr(html, "value")))
        return settled(html)

    poll_until(client, job_id, record)
    assert any(
        step.startswith("Fetching hazard data: ") and f"of {len(LAYERS)} layers" in step
        for step in steps
    )
    assert progress == sorted(progress) and progress[-1] > progress[0]


def ticks(html):
    """Return the layer names the fragment lists, with whether each is marked done."""
    items = html.split('class="layer-ticks">', 1)[1].split("</ul>", 1)[0].split("<li ")[1:]
    return {
        item.split("</span> ", 1)[1].split("<", 1)[0]: 'data-done="yes"' in item for item in items
    }


def test_the_running_fragment_ticks_each_layer_as_it_is_fetched(make_app, upstream: Upstream, sql):
    # Earthquake shaking alone reads the fault data: held upstream, it is the one not done.
    upstream.held = {"faults"}
    app, client, actions = signed_in(
        make_app, LAYER_PROVIDER="http", LAYER_HTTP_BASE_URL=upstream.url
    )
    job_id = job_id_from(actions.submit("Sapporo"))
    status = f"/assessments/{job_id}/status"
    done = f"{len(LAYERS) - 1} of {len(LAYERS)} layers done"
    wait_for(lambda: done in client.get(status).get_data(as_text=True))
    html = client.get(status).get_data(as_text=True)
    assert ticks(html) == {
        "Flood": True,
        "Flood (planned scale)": True,
        "Tsunami": True,
        "Storm surge": True,
        "Inland flooding": True,
        "House-collapse zone": True,
        "Flood duration": True,
        "Liquefaction": True,
        "Landslide": True,
        "Earthquake shaking": False,
    }
    # Four fifths of the fetching took this long: the page says about how long is left.
    # (In a span of its own, which the page counts down between polls.)
    assert re.search(r'\d+%<span class="left"[^>]*> · about \d+ (s|min) left</span>', html)
    upstream.released.set()
    html = poll_until(client, job_id, settled)
    assert attr(html, "data-status") == "succeeded"
    assert "Finished in" in html and "from a recent report" not in html


@pytest.mark.parametrize("work_process", ["off", "on"])
def test_the_bar_never_goes_back_and_moves_by_each_read_layer_s_share(make_app, work_process):
    # 長野市 is inland: tsunami and storm surge are not published there and tick at once,
    # counted in no share; each of the seven layers read is a seventh of the bar's way.
    # The same in the job's thread and in the work's process.
    nagano = resolve_place("長野市")
    read = {layer.name_en for layer in LAYERS if not coverage.unread(layer.key, nagano)[0]}
    assert len(read) == len(LAYERS) - 2
    app, client, actions = signed_in(make_app, ASSESSMENT_WORK_SECONDS=2, WORK_PROCESS=work_process)
    assert (app.extensions.get("work_host") is not None) == (work_process == "on")
    job_id = job_id_from(actions.submit("長野市"))
    seen = []

    def record(html):
        if attr(html, "data-status") == "running":
            ticked = {name for name, done in ticks(html).items() if done}
            step = html.split('class="step">', 1)[1].split("<", 1)[0]
            seen.append((len(ticked & read), int(attr(html, "value")), step))
        return settled(html)

    html = poll_until(client, job_id, record)
    assert attr(html, "data-status") == "succeeded"
    bars = [bar for _, bar, _ in seen]
    assert bars == sorted(bars), seen
    assert all(bar < 100 or step == "Report ready" for _, bar, step in seen), seen
    assert all(bar >= 90 * n // len(read) for n, bar, _ in seen), seen
    assert len(set(seen)) > 2, seen  # the polls saw the bar on its way


def test_a_report_made_from_recent_fetches_says_so(make_app, upstream: Upstream, sql):
    app, client, actions = signed_in(
        make_app, LAYER_PROVIDER="http", LAYER_HTTP_BASE_URL=upstream.url
    )
    poll_until(client, job_id_from(actions.submit("Sapporo")), settled)
    asked = sum(upstream.hits.values())
    # Another user's report of the same place, a moment later: every figure is cached.
    other = app.test_client()
    Actions(other).signup("second@example.com")
    job_id = job_id_from(Actions(other).submit("Sapporo"))
    html = poll_until(other, job_id, settled)
    assert sum(upstream.hits.values()) == asked  # nothing asked upstream again
    assert attr(html, "data-status") == "succeeded"
    assert "Ready at once: made from a recent report of this area." in html
    assert "Finished in" not in html
    page = other.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "from a recent report" in page


def test_the_succeeded_fragment_brings_the_report_out_of_band(client, actions, app):
    actions.signup()
    job_id = job_id_from(actions.submit())
    assert app.extensions["runner"].wait(10)
    html = client.get(f"/assessments/{job_id}/status", headers={"HX-Request": "true"}).get_data(
        as_text=True
    )
    assert 'id="report" hx-swap-oob="true"' in html and "<svg" in html


def finished_job(sql, user_id, age_days):
    return sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, status, created_at, finished_at,"
        " message, result) VALUES (%(u)s, 'x', 'en', 'succeeded', now() - %(age)s,"
        " now() - %(age)s, 'Your report is ready.', '{\"score\": 1}') RETURNING id",
        u=user_id,
        age=timedelta(days=age_days),
    )[0][0]


def test_concurrent_cleanup_triggers_purge_once(app, sql):
    # A user made without a request: any request could start the purge itself.
    user_id = sql(
        "INSERT INTO users (email, password_hash) VALUES ('purge@example.com', 'x') RETURNING id"
    )[0][0]
    old, recent = finished_job(sql, user_id, 40), finished_job(sql, user_id, 5)
    ledger_before = sql("SELECT * FROM point_ledger ORDER BY id")

    results = at_once(app, 20, lambda: housekeeping.purge_if_due(600, 30))

    assert sorted(results, key=str) == [1] + [None] * 19
    rows = dict(sql("SELECT id, result IS NULL FROM assessment_jobs"))
    assert rows == {old: True, recent: False}
    assert sql("SELECT status, message FROM assessment_jobs WHERE id = %(j)s", j=old) == [
        ("succeeded", "Your report is ready.")
    ]
    assert sql("SELECT * FROM point_ledger ORDER BY id") == ledger_before


def test_status_handler_starts_cleanup_and_the_page_explains(app, client, actions, sql):
    actions.signup()  # a request: it ran the purge before the old job below existed
    wait_for(
        lambda: (
            sql("SELECT last_run_at IS NOT NULL FROM housekeeping WHERE name = 'purge_reports'")
            == [(True,)]
        )
    )
    sql("UPDATE housekeeping SET last_run_at = NULL")
    app.extensions["housekeeping"][housekeeping.PURGE] = housekeeping.Throttle()
    user_id = sql("SELECT id FROM users")[0][0]
    old = finished_job(sql, user_id, 40)
    client.get(f"/assessments/{old}/status")
    deadline = time.monotonic() + 10
    while sql("SELECT result IS NULL FROM assessment_jobs") != [(True,)]:
        assert time.monotonic() < deadline, "the fire-and-forget purge never ran"
        time.sleep(0.05)
    page = client.get(f"/assessments/{old}").get_data(as_text=True)
    assert "This report was removed after 30 days" in page


def test_the_throttle_opens_once_per_interval():
    throttle = housekeeping.Throttle()
    assert throttle.ready(600)  # a fresh process may try at once
    assert not throttle.ready(600)
