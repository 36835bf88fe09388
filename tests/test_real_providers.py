"""J-SHIS and the hazard map portal, against constructed answers served by a local HTTP server.

The J-SHIS answers are constructed to its documented format (tests/recorded/README.md); the
portal's tiles are constructed here: PNGs painted with a legend colour over exactly the
pixels inside a real N03 outline, so a report that reads them must find that class alone.
"""

import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest.mock import ANY
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
import shapely
from mercantile import bounds as mercantile_bounds
from PIL import Image

from app.assessment import resolve_place
from app.assessment.errors import ProviderError
from app.assessment.grid import legends, tiles, zones
from app.assessment.grid.sampling import MESH_BUDGET, mesh250, mesh_centre
from app.assessment.registers import outlines
from app.assessment.report import analysis
from app.assessment.sources.evacuation import SAMPLE
from app.assessment.sources.http import RetryPolicy, retry_after_seconds
from app.assessment.sources.jshis import JshisProvider
from app.assessment.sources.portal import (
    PER_PREFECTURE,
    SAMPLE_TILES,
    UNCONFIRMED,
    ZONE_DATASETS,
)
from app.assessment.sources.providers import ZONES, RoutedProvider, make_provider
from tests.conftest import Answer, job_id_from, serve_http, signed_in, wait_for
from tests.test_jobs import attr, poll_until, settled

RECORDED = Path(__file__).parent / "recorded"
FAST = RetryPolicy(timeout=2, retries=2, backoff=0.01, retry_after_cap=0.3)


def recorded(name: str) -> bytes:
    return (RECORDED / name).read_bytes()


PAINTED = "札幌市中央区"  # the flood tiles are painted over exactly this ward's outline
PAINT = (0xFF, 0xD8, 0xC0, 255)  # the depth legend's 1-3 m


def painted_tile(key: str, paint: tuple[int, int, int, int] = PAINT) -> bytes | None:
    """A constructed flood tile: 0.5-3 m over the pixels inside the ward, else transparent."""
    tile = tiles.parse_tile_key(key)
    west, south, east, north = outlines.index()["areas"]["01101"]["bbox"]  # 札幌市中央区
    if not shapely.box(west, south, east, north).intersects(shapely.box(*mercantile_bounds(tile))):
        return None
    inside = tiles.inside_mask(tile, outlines.outline_of(resolve_place(PAINTED)).geometry)
    if not inside.any():
        return None
    pixels = np.zeros((tiles.TILE_SIZE, tiles.TILE_SIZE, 4), dtype=np.uint8)
    pixels[inside] = paint
    out = io.BytesIO()
    Image.fromarray(pixels, "RGBA").save(out, "PNG")
    return out.getvalue()


def sample_tile(colour: tuple[int, int, int]) -> bytes:
    """A sample tile constructed to the legend: its top quarter painted in one colour."""
    pixels = np.zeros((tiles.TILE_SIZE, tiles.TILE_SIZE, 4), dtype=np.uint8)
    pixels[:64] = (*colour, 255)
    out = io.BytesIO()
    Image.fromarray(pixels, "RGBA").save(out, "PNG")
    return out.getvalue()


SAMPLES = {
    f"/portal/{ZONE_DATASETS[dataset]}/{key}.png": legends.zones_of(
        legends.LEGENDS[ZONE_DATASETS[dataset]]
    )[-1].rgb
    for dataset, key in SAMPLE_TILES.items()
}


SITES_SAMPLE = "/gsi/skhb{:02d}/{}.geojson".format(*SAMPLE)
SITE = json.dumps(
    {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "geometry": {"type": "Point", "coordinates": [136.8844, 35.0905]},
                "properties": {"name": "港の避難ビル", "address": "名古屋市港区", "disaster5": 1},
            }
        ],
    }
).encode()


def normal(path: str) -> Answer:
    """Answer as the services do when all is well."""
    if "/pshm/" in path:
        return 200, recorded("jshis_pshm_ok.geojson"), {}
    if "/sstrct/" in path:
        return 200, recorded("jshis_sstrct_ok.geojson"), {}
    if path == SITES_SAMPLE:  # the evacuation sites' sample tile: one site, constructed
        return 200, SITE, {"Content-Type": "application/geo+json"}
    if path in SAMPLES:  # each layer's sample tile, painted, as the probe expects
        return 200, sample_tile(SAMPLES[path]), {"Content-Type": "image/png"}
    if path.startswith("/portal/" + ZONE_DATASETS["flood_zones"] + "/"):
        key = path.removeprefix("/portal/" + ZONE_DATASETS["flood_zones"] + "/")
        body = painted_tile(key.removesuffix(".png"))
        if body is not None:
            return 200, body, {"Content-Type": "image/png"}
    return 404, b"Not Found", {}  # the portal has no tile where no zone is mapped


class Service:
    """A local stand-in for J-SHIS and GSI whose answers each test chooses."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.answer: Callable[[str], Answer] = normal
        self.delay = 0.0
        self.url = ""
        self.lock = threading.Lock()

    def count(self, fragment: str) -> int:
        return sum(fragment in hit for hit in self.hits)

    def respond(self, path: str) -> Answer:
        with self.lock:
            self.hits.append(path)
        time.sleep(self.delay)
        return self.answer(path)


@pytest.fixture
def service() -> Iterator[Service]:
    with serve_http(Service()) as state:
        yield state


def jshis(service: Service, **kwargs) -> JshisProvider:
    return JshisProvider(service.url + "/jshis", policy=kwargs.pop("policy", FAST), **kwargs)


def config(service: Service, **extra) -> dict:
    return {
        "LAYER_PROVIDER": "real",
        "JSHIS_BASE_URL": service.url + "/jshis",
        "HAZARD_PORTAL_URL": service.url + "/portal",
        "EVACUATION_SITES_URL": service.url + "/gsi",
        "LAYER_HTTP_TIMEOUT_SECONDS": 2,
        "LAYER_RETRY_BACKOFF_SECONDS": 0.01,
        "LAYER_RETRY_AFTER_MAX_SECONDS": 0.3,
        **extra,
    }


# --- J-SHIS -------------------------------------------------------------------------------


def test_jshis_asks_the_documented_url_and_reads_the_probability(service: Service) -> None:
    provider = jshis(service, version="Y2022", case="MAX")
    assert provider.fetch("faults", "5339154113") == {"shaking_prob_30y": 0.40622}
    (hit,) = service.hits
    url = urlsplit(hit)
    assert url.path == "/jshis/pshm/Y2022/MAX/TTL_MTTL/meshinfo.geojson"
    assert parse_qs(url.query) == {"meshcode": ["5339154113"], "attr": ["T30_I55_PS"]}


def test_jshis_reads_amplification_and_soft_ground(service: Service) -> None:
    answer = jshis(service).fetch("ground", "5030330343")
    # AVS30 195.9 < 200; JCODE 15 三角州・海岸低地
    assert answer == {"amplification": 1.84, "soft_soil_ratio": 1.0, "jcode": 15}
    assert urlsplit(service.hits[0]).path == "/jshis/sstrct/V4/meshinfo.geojson"


def test_jshis_keys_are_meshes_inside_the_outline() -> None:
    area = resolve_place("Sapporo")
    outline = outlines.outline_of(area).geometry
    keys = JshisProvider().keys(area, "faults")
    assert 16 <= len(keys) <= MESH_BUDGET and len(set(keys)) == len(keys)
    for key in keys:
        lat, lon = mesh_centre(key)
        assert outline.contains(shapely.Point(lon, lat))
    # A small place: every mesh whose centre is inside.
    point = resolve_place("35.6812, 139.7671")
    assert 10 <= len(JshisProvider().keys(point, "ground")) <= 16
    assert mesh250(35.454, 139.638) == "5339154113"  # as J-SHIS names the Yokohama mesh


def test_jshis_no_data_at_a_mesh_is_no_answer(service: Service) -> None:
    service.answer = lambda path: (404, b'{"status":"Error"}', {})
    assert jshis(service).fetch("faults", "5339154113") is None


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ((400, recorded("jshis_error.geojson"), {}), "refused the request as malformed (HTTP 400)"),
        ((403, b"{}", {}), "its request limit is reached (HTTP 403)"),
        ((200, recorded("jshis_error.geojson"), {}), "the service answered an error"),
        ((200, b"<html>maintenance</html>", {}), "the answer is not valid JSON"),
        ((200, b"[]", {}), "the answer is not a GeoJSON object"),
        ((200, b'{"status":"Success","features":[]}', {}), "the answer holds no mesh"),
        (
            (200, b'{"status":"Success","features":[{"properties":{"T30_I55_PS":""}}]}', {}),
            'the answer lacks the number "T30_I55_PS"',
        ),
        (
            (200, b'{"status":"Success","features":[{"properties":{"T30_I55_PS":"7"}}]}', {}),
            "probability is not between 0 and 1",
        ),
    ],
)
def test_jshis_errors_become_provider_errors(service: Service, answer, reason) -> None:
    service.answer = lambda path: answer
    with pytest.raises(ProviderError) as info:
        jshis(service).fetch("faults", "5339154113")
    assert info.value.dataset == "faults" and info.value.reason.startswith("J-SHIS: ")
    assert reason in info.value.reason
    assert len(service.hits) == 1  # client errors and bad bodies are not retried


def test_jshis_retries_5xx_then_succeeds(service: Service) -> None:
    answers = iter([(503, b"", {}), (502, b"", {})])
    service.answer = lambda path: next(answers, None) or normal(path)
    assert jshis(service).fetch("faults", "5339154113") == {"shaking_prob_30y": 0.40622}
    assert len(service.hits) == 3


def test_a_lasting_5xx_gives_up_after_the_retries(service: Service) -> None:
    service.answer = lambda path: (500, b"", {})
    with pytest.raises(ProviderError, match=r"unavailable \(HTTP 500\)"):
        jshis(service).fetch("faults", "5339154113")
    assert len(service.hits) == 1 + FAST.retries


def test_429_honours_retry_after_within_the_cap(service: Service) -> None:
    answers = iter([(429, b"", {"Retry-After": "0.2"}), (429, b"", {"Retry-After": "3600"})])
    service.answer = lambda path: next(answers, None) or normal(path)
    started = time.monotonic()
    assert jshis(service).fetch("faults", "5339154113") is not None
    waited = time.monotonic() - started
    assert 0.2 + 0.3 <= waited < 1.5  # 0.2 s as asked, then an hour capped to 0.3 s
    assert len(service.hits) == 3


def test_retry_after_reads_seconds_and_dates() -> None:
    assert retry_after_seconds("2", cap=5) == 2
    assert retry_after_seconds("120", cap=5) == 5
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", cap=5) == 0  # in the past
    assert retry_after_seconds("soon", cap=5) is None and retry_after_seconds(None, 5) is None


def test_a_timeout_is_a_provider_error(service: Service) -> None:
    service.delay = 0.6
    provider = jshis(service, policy=RetryPolicy(timeout=0.2, retries=2, backoff=0.01))
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"no answer within 0\.2 s"):
        provider.fetch("faults", "5339154113")
    assert time.monotonic() - started < 0.5  # a timeout is not retried: the job is waiting


# --- configuration --------------------------------------------------------------------------


def test_real_turns_every_real_provider_on(service: Service) -> None:
    provider = make_provider(config(service))
    assert isinstance(provider, RoutedProvider)
    names = {ds: p.name for ds, p in provider.routes.items()}
    assert names == {"faults": "jshis", "ground": "jshis", **dict.fromkeys(ZONES, "portal")}
    assert sorted(p.name for p in provider.real_providers()) == ["jshis", "portal"]
    assert provider.is_demo is False
    # A mapping still routes per dataset; "*=jshis" means J-SHIS wherever it serves.
    mixed = make_provider({"LAYER_PROVIDER": "*=jshis"})
    assert mixed.routes["flood_zones"].name == "demo" and mixed.routes["faults"].name == "jshis"


@pytest.mark.parametrize(
    "mapping", ["volcano=jshis", "faults=magic", "flood_zones=jshis", "jshis", "faults:jshis"]
)
def test_a_bad_mapping_is_refused_at_start(mapping: str) -> None:
    with pytest.raises(ValueError):
        make_provider({"LAYER_PROVIDER": mapping})


# --- the job and the report -------------------------------------------------------------------


def test_a_job_with_real_providers_reads_the_zones_inside_the_outline(
    make_app, service: Service
) -> None:
    app, client, actions = signed_in(make_app, **config(service))
    job_id = job_id_from(actions.submit(PAINTED))
    html = settled_page(client, job_id)
    assert attr(html, "data-status") == "succeeded", html
    area = resolve_place(PAINTED)
    meshes = len(JshisProvider().keys(area, "faults"))
    planned = len(zones.plan(area).tiles)
    # Each mesh once per J-SHIS dataset, each tile once per zone dataset: the bound.
    assert service.count("/pshm/") == meshes and service.count("/sstrct/") == meshes
    for dataset, dataset_id in ZONE_DATASETS.items():
        # The landslide datasets per prefecture (Hokkaido's, 01), the others national.
        path = (
            f"/portal/{dataset_id}/01/" if dataset in PER_PREFECTURE else f"/portal/{dataset_id}/"
        )
        assert service.count(path) == planned
    report = client.get(f"/assessments/{job_id}/report.json").get_json()
    flood = next(layer for layer in report["layers"] if layer["key"] == "flood")
    # Painted over exactly the outline's pixels: every pixel read is 0.5-3 m.
    assert flood["shares"]["1-3"] == 1.0 and flood["shares"]["none"] == 0.0
    assert flood["worst"] == "1-3" and flood["level"] == 3 and flood["mapped"] is True
    (source,) = flood["source"]
    assert source["dataset_id"] == "01_flood_l2_shinsuishin_data"
    assert source["zoom"] == report["extent"]["zoom"] and source["real"] is True
    tsunami = next(layer for layer in report["layers"] if layer["key"] == "tsunami")
    assert tsunami["shares"]["none"] == 1.0 and tsunami["worst"] is None  # 404: no zone
    # No zone found: no level, never "very low", and the page says what it means.
    assert tsunami["state"] == "no_zone" and tsunami["level"] is None
    liquefaction = next(layer for layer in report["layers"] if layer["key"] == "liquefaction")
    assert liquefaction["shares"]["high"] == 1.0  # JCODE 15 at every mesh
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "probabilistic seismic hazard map, evaluated at 2024-01-01" in page
    assert "Hazard Map Portal Site" in page and "01_flood_l2_shinsuishin_data" in page
    japanese = client.get(f"/assessments/{job_id}?lang=ja").get_data(as_text=True)
    assert "確率論的地震動予測地図（2024年1月1日評価）" in japanese
    assert "ハザードマップポータルサイト" in japanese
    assert 'data-dataset="faults" data-real="yes"' in page
    assert "demonstration data" not in page.lower() and 'class="report-demo"' not in page
    assert "not the municipality&#39;s hazard map" in page
    assert "No designated zone found (not necessarily safe: the data may not be prepared)" in page
    assert (
        "指定区域は見つかりませんでした（安全とは限りません。データが未整備の場合があります）"
        in (japanese)
    )
    assert 'data-layer="tsunami" data-state="no_zone"' in page
    # A second job for the same place asks nothing again: the caches answer.
    before = len(service.hits)
    job_id = job_id_from(actions.submit(PAINTED, confirm="yes"))  # paying again, knowingly
    assert attr(settled_page(client, job_id), "data-status") == "succeeded"
    assert len(service.hits) == before


def settled_page(client, job_id) -> str:
    """Poll a real report against the stand-in until it settles: 5 s alone, 15-16 s beside
    the suite's browser and cluster tests on a two-core machine; a minute at most."""
    return poll_until(client, job_id, settled, timeout=60)


def painted_report(make_app, service: Service, painted: dict[str, tuple]) -> tuple:
    """Report PAINTED with each path prefix's tiles painted one colour over the ward's pixels.

    Return the client, the job's id and its report; every other path answers as normal.
    """

    def answer(path: str) -> Answer:
        for prefix, colour in painted.items():
            if path.startswith(prefix) and path not in SAMPLES:
                body = painted_tile(path.removeprefix(prefix).removesuffix(".png"), colour)
                if body is not None:
                    return 200, body, {"Content-Type": "image/png"}
        return normal(path)

    service.answer = answer
    app, client, actions = signed_in(make_app, **config(service))
    job_id = job_id_from(actions.submit(PAINTED))
    assert attr(settled_page(client, job_id), "data-status") == "succeeded"
    return client, job_id, client.get(f"/assessments/{job_id}/report.json").get_json()


def test_storm_surge_and_inland_flooding_are_read_on_their_paths_to_a_level(
    make_app, service: Service
) -> None:
    # Constructed to the published depth legend (tests/recorded/README.md): storm surge
    # 3-5 m on its national path, inland flooding 0.5-3 m on Hokkaido's (01) path, each over
    # exactly the ward's pixels. Before: neither was read.
    surge, inland = ZONE_DATASETS["storm_surge_zones"], ZONE_DATASETS["inland_flood_zones"]
    painted = {f"/portal/{surge}/": (0xFF, 0xB7, 0xB7, 255), f"/portal/{inland}/01/": PAINT}
    client, job_id, report = painted_report(make_app, service, painted)
    by_key = {layer["key"]: layer for layer in report["layers"]}
    storm, rain = by_key["storm_surge"], by_key["inland_flood"]
    assert (storm["state"], storm["worst"], storm["level"]) == ("zones", "3-5", 4)
    assert storm["shares"]["3-5"] == 1.0 and storm["source"][0]["dataset_id"] == surge
    assert (rain["state"], rain["worst"], rain["level"]) == ("zones", "0.5-3", 3)
    assert rain["source"][0]["dataset_id"] == inland and rain["real"] is True
    # Each says where its legend is published, beside every colour.
    assert all(c["source"].endswith("shinsui_legend3.png") for c in storm["legend"])
    assert all(c["source"].endswith("naisui_legend.png") for c in rain["legend"])
    # The partly-published notes, with their sources and dates.
    assert any("66" in note["en"] and note["date"] for note in rain["notes"])
    assert any("designated" in note["en"] and note["date"] for note in storm["notes"])
    # The headline's one rule: both count, weighing as flood does (liquefaction, JCODE 15
    # at every mesh, is the worst at 5).
    counted = [layer for layer in report["layers"] if layer["level"]]
    assert {"storm_surge", "inland_flood"} <= {layer["key"] for layer in counted}
    weights = analysis.WEIGHTS
    mean = sum(weights[r["key"]] * r["index"] for r in counted) / sum(
        weights[r["key"]] for r in counted
    )
    assert report["level"] == 5 and report["score"] == max(80, round(100 * mean))
    credit = report["provenance"]["services"][0]
    assert "高潮浸水想定区域" in credit["credit_ja"] and "内水" in credit["credit_ja"]
    assert surge in credit["datasets"] and inland in credit["datasets"]
    page = client.get(f"/assessments/{job_id}?lang=ja").get_data(as_text=True)
    assert 'data-layer="storm_surge" data-state="zones"' in page
    assert 'data-jusetsu-map="inland" data-state="zones"' in page


def test_a_partly_real_job_keeps_the_banner(make_app, service: Service) -> None:
    settings = config(service, LAYER_PROVIDER="faults=jshis,ground=jshis,*=demo")
    app, client, actions = signed_in(make_app, **settings)
    job_id = job_id_from(actions.submit(PAINTED))
    assert attr(settled_page(client, job_id), "data-status") == "succeeded"
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert 'data-dataset="faults" data-real="yes"' in page
    assert 'data-dataset="flood_zones" data-real="no"' in page
    assert "Some layers are built from demonstration data" in page


def failed_and_refunded(make_app, service: Service):
    """Run a job for the painted ward on the real providers, which must fail it and refund.

    Return the app and the job's last status fragment.
    """
    app, client, actions = signed_in(make_app, **config(service))
    job_id = job_id_from(actions.submit(PAINTED))
    # A report on every layer (about 7 s here alone, twice that beside the rest of the suite).
    html = settled_page(client, job_id)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "refunded")
    return app, html


def test_a_malformed_answer_fails_the_job_and_refunds(make_app, service: Service, sql) -> None:
    service.answer = lambda path: (
        (200, b"<html>maintenance</html>", {}) if "/pshm/" in path else normal(path)
    )
    app, html = failed_and_refunded(make_app, service)
    assert "J-SHIS: the answer is not valid JSON" in html and "Your point was refunded." in html
    assert sql("SELECT error_code FROM assessment_jobs") == [("PROVIDER_ERROR",)]
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_a_failing_portal_fails_the_job_and_refunds(make_app, service: Service, sql) -> None:
    service.answer = lambda path: (500, b"", {}) if "/portal/" in path else normal(path)
    app, html = failed_and_refunded(make_app, service)
    assert "hazard map portal: the service is unavailable (HTTP 500)" in html
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_a_tile_that_is_not_a_png_fails_the_job_honestly(make_app, service: Service, sql) -> None:
    service.answer = lambda path: (200, b"<html>", {}) if "/portal/" in path else normal(path)
    _, html = failed_and_refunded(make_app, service)
    assert "not a PNG tile" in html


def test_no_data_at_any_mesh_fails_the_job_honestly(make_app, service: Service, sql) -> None:
    service.answer = lambda path: (404, b"{}", {}) if "/sstrct/" in path else normal(path)
    _, html = failed_and_refunded(make_app, service)
    meshes = len(JshisProvider().keys(resolve_place(PAINTED), "ground"))
    assert f"no data at any of the {meshes} places asked" in html
    assert sql("SELECT point_balance FROM users") == [(3,)]


def test_tiles_in_colours_of_no_legend_fail_the_job_refund_and_alert(
    make_app, service: Service, sql
) -> None:
    # The portal changed its flood colours: every painted pixel is off the published legend.
    def recoloured(path: str) -> Answer:
        status, body, headers = normal(path)
        if status == 200 and path.startswith("/portal/" + ZONE_DATASETS["flood_zones"]):
            pixels = np.asarray(Image.open(io.BytesIO(body)).convert("RGBA")).copy()
            pixels[pixels[..., 3] > 0] = (0x00, 0x66, 0xCC, 255)
            out = io.BytesIO()
            Image.fromarray(pixels, "RGBA").save(out, "PNG")
            return 200, out.getvalue(), headers
        return status, body, headers

    service.answer = recoloured
    assert "flood_zones" not in UNCONFIRMED  # its legend is the published one: off it is broken
    app, html = failed_and_refunded(make_app, service)
    assert "colours its published legend does not have" in html  # never "no zone"
    assert sql("SELECT error_code FROM assessment_jobs") == [("PROVIDER_ERROR",)]
    assert sql("SELECT point_balance FROM users") == [(3,)]
    ((severity, detail),) = sql("SELECT severity, detail FROM incidents")
    assert severity == "critical" and "01_flood_l2_shinsuishin_data" in detail
    assert "#0066CCFF" in detail
    metrics = app.test_client().get("/metrics").get_data(as_text=True)
    assert 'hazard_unknown_colour_layers_total{dataset="01_flood_l2_shinsuishin_data"}' in metrics
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_an_unconfirmed_layer_off_its_legend_is_uncertain_the_report_delivered_and_alerted(
    make_app, service: Service, sql
) -> None:
    # Constructed (tests/recorded/README.md): bank-erosion tiles painted pink (#FFB3B3, the
    # fill one third party records for 河岸侵食) over the ward, where the report reads the
    # red others record. Before: the job failed and refunded like a broken portal.
    bank = ZONE_DATASETS["house_collapse_bank_zones"]
    assert "house_collapse_bank_zones" in UNCONFIRMED
    client, job_id, report = painted_report(
        make_app, service, {f"/portal/{bank}/": (0xFF, 0xB3, 0xB3, 255)}
    )
    assert sql("SELECT point_balance FROM users") == [(2,)]  # delivered, and paid for
    by_key = {layer["key"]: layer for layer in report["layers"]}
    collapse = by_key["house_collapse"]
    # Uncertain: no level (never a lower one), left out of the headline, said why.
    assert (collapse["state"], collapse["level"]) == ("uncertain", None)
    assert collapse["stray"] == {"house_collapse_bank_zones": {"#FFB3B3FF": ANY}}
    assert collapse["unreadable"]["house_collapse_bank_zones"]["path"] == bank
    assert "house_collapse" not in report["worst"] and report["zones_found"]
    assert "The level of house-collapse zone could not be determined" in report["narrative"]
    assert any(bank in note["en"] and "operators" in note["en"] for note in collapse["notes"])
    # The flood layer, read on its published legend, is read as before.
    assert (by_key["flood"]["state"], by_key["flood"]["worst"]) == ("zones", "1-3")
    page = client.get(f"/assessments/{job_id}?lang=ja").get_data(as_text=True)
    assert 'data-layer="house_collapse" data-state="uncertain"' in page
    assert "判定できません：凡例にない色があり" in page and "運営者に確認を依頼します" in page
    # The operator learns the recorded legend is wrong, as with a failing layer.
    ((severity, code, detail),) = sql("SELECT severity, code, detail FROM incidents")
    assert (severity, code) == ("critical", "UNKNOWN_COLOURS")
    assert bank in detail and "#FFB3B3FF" in detail
    metrics = client.get("/metrics").get_data(as_text=True)
    assert f'hazard_unknown_colour_layers_total{{dataset="{bank}"}}' in metrics
    assert client.application.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_a_cache_filled_by_the_demo_is_never_read_back_as_real(service: Service) -> None:
    from app.assessment.work import run_assessment
    from app.caches.singleflight import SingleFlightCache

    cache = SingleFlightCache(maxsize=4096, ttl=3600)
    area = resolve_place(PAINTED)
    for name in ("demo", "real"):  # the demo unpaced: its pauses prove nothing here
        provider = make_provider(config(service, LAYER_PROVIDER=name, ASSESSMENT_WORK_SECONDS=0))
        report = run_assessment(area, "en", provider=provider, cache=cache, progress=lambda *a: 0)
    # The real run asked the portal for every tile, whatever the demo had cached.
    assert service.count("/portal/" + ZONE_DATASETS["flood_zones"]) == len(zones.plan(area).tiles)
    flood = next(layer for layer in report["layers"] if layer["key"] == "flood")
    assert flood["shares"]["1-3"] == 1.0 and flood["real"] is True


def test_a_place_across_two_prefectures_reads_each_ones_landslide_tiles(service: Service) -> None:
    from app.assessment.work import run_assessment
    from app.caches.singleflight import SingleFlightCache

    slides = ZONE_DATASETS["landslide_zones"]
    # Kanagawa (14) paints every tile special warning; Tokyo (13) has none (404).
    special = sample_tile((0xB4, 0x00, 0x28))
    service.answer = lambda path: (
        (200, special, {}) if path.startswith(f"/portal/{slides}/14/") else normal(path)
    )
    area = resolve_place("35.5517, 139.7008")  # on the Tama river, 大田区 and 川崎市
    provider = make_provider(config(service))
    report = run_assessment(
        area, "en", provider=provider, cache=SingleFlightCache(), progress=lambda *a: 0
    )
    tiles_read = len(zones.plan(area).tiles)
    assert service.count(f"/portal/{slides}/13/") == tiles_read
    assert service.count(f"/portal/{slides}/14/") == tiles_read
    landslide = next(layer for layer in report["layers"] if layer["key"] == "landslide")
    assert landslide["worst"] == "landslide_special" and landslide["level"] == 5
    assert 0 < landslide["shares"]["landslide_special"] < 1
    assert report["extent"]["prefectures"] == [
        area.code[:2],
        "14" if area.code[:2] == "13" else "13",
    ]


def test_no_such_tile_is_cached_a_day_at_most_and_a_tile_a_week() -> None:
    from app.assessment.sources.portal import tile_ttl
    from app.caches.singleflight import SingleFlightCache

    now = [0.0]
    cache = SingleFlightCache(ttl=7 * 86400, timer=lambda: now[0], ttl_of=tile_ttl)
    calls = []

    def answer(png):
        return lambda: calls.append(png) or {"png": png}

    cache.get(("flood_zones", "1", "portal x"), answer(None))
    cache.get(("flood_zones", "2", "portal x"), answer("iVBO"))
    now[0] = 86400 + 1
    cache.get(("flood_zones", "1", "portal x"), answer(None))  # asked again after a day
    cache.get(("flood_zones", "2", "portal x"), answer("iVBO"))  # still cached
    assert calls == [None, "iVBO", None]


# --- flask providers-check -------------------------------------------------------------------


def test_providers_check_asks_each_layers_sample_tile(make_app, service: Service) -> None:
    app = make_app(**config(service))
    result = app.test_cli_runner().invoke(args=["providers-check"])
    assert result.exit_code == 0, result.output
    assert "J-SHIS: {'shaking_prob_30y': 0.40622}" in result.output
    for dataset, dataset_id in ZONE_DATASETS.items():
        key = SAMPLE_TILES[dataset]
        assert service.count(f"/portal/{dataset_id}/{key}.png") == 1
        line = f"ok     {dataset}: portal {dataset_id} {key}: HTTP 200, painted 25.0%"
        assert line in result.output and "unknown colours 0.0%: available" in result.output
    # Storm surge on its national path, inland flooding on a prefecture's (Osaka, 27).
    assert service.count("/portal/03_hightide_l2_shinsuishin_data/12/") == 1
    assert service.count("/portal/02_naisui_pref_data/27/12/") == 1
    # GSI's evacuation sites: tsunami's sample tile by Nagoya's port holds a site.
    assert service.count(SITES_SAMPLE) == 1
    assert "ok     evacuation_sites: GSI skhb05/10/901/405.geojson: 1 sites: available" in (
        result.output
    )


def test_providers_check_fails_when_the_site_sample_holds_no_site(make_app, service) -> None:
    service.answer = lambda path: (404, b"", {}) if path == SITES_SAMPLE else normal(path)
    app = make_app(**config(service))
    result = app.test_cli_runner().invoke(args=["providers-check"])
    assert result.exit_code == 1 and "ok     flood_zones" in result.output
    assert "FAILED evacuation_sites: GSI skhb05/10/901/405.geojson: 0 sites" in result.output
    # The start probe never asks it: the sites never decide which data a process serves.
    app = make_app(**config(service, LAYER_PROVIDER=""))
    assert app.extensions["provider_choice"]["mode"] == "real"
    assert service.count(SITES_SAMPLE) == 1  # providers-check's one ask


def test_providers_check_fails_loudly(make_app, service: Service) -> None:
    service.answer = lambda path: (403, b"{}", {})
    app = make_app(**config(service))
    result = app.test_cli_runner().invoke(args=["providers-check"])
    assert result.exit_code == 1
    assert "FAILED J-SHIS" in result.output and "request limit" in result.output
    assert "FAILED flood_zones: portal" in result.output


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ((404, b"Not Found", {}), "the sample tile is missing (HTTP 404)"),
        ((200, b"", {}), "the sample is not a readable PNG tile"),
        (None, "the sample tile is all transparent"),
    ],
)
def test_a_layer_whose_sample_is_missing_or_blank_is_not_available(
    make_app, service: Service, answer, verdict
) -> None:
    # One layer's path moved (404), or its sample came back blank: that layer is out.
    blank = (200, _transparent(), {})
    moved = ZONE_DATASETS["steep_slope_zones"]
    service.answer = lambda path: (answer or blank) if moved in path else normal(path)
    app = make_app(**config(service))
    result = app.test_cli_runner().invoke(args=["providers-check"])
    assert result.exit_code == 1
    assert f"FAILED steep_slope_zones: portal {moved}" in result.output
    assert verdict in result.output and "ok     flood_zones" in result.output
    # The start probe, unset, serves the demo and says which layer and why.
    app = make_app(**config(service, LAYER_PROVIDER=""))
    choice = app.extensions["provider_choice"]
    assert choice["mode"] == "demo" and f"steep_slope_zones: {verdict}" in choice["reason"]


def _transparent() -> bytes:
    out = io.BytesIO()
    Image.new("RGBA", (tiles.TILE_SIZE, tiles.TILE_SIZE), (0, 0, 0, 0)).save(out, "PNG")
    return out.getvalue()


def test_providers_check_with_the_demo_says_so(make_app) -> None:
    result = make_app().test_cli_runner().invoke(args=["providers-check"])
    assert result.exit_code == 0 and "no real provider configured" in result.output


# --- LAYER_PROVIDER unset: real data when the services answer --------------------------------


def test_unset_the_services_are_asked_once_and_real_data_is_served(make_app, service) -> None:
    app, client, actions = signed_in(make_app, **config(service, LAYER_PROVIDER=""))
    assert app.extensions["provider_choice"]["mode"] == "real"
    assert not app.extensions["layer_provider"].is_demo
    # J-SHIS once, and the portal once per layer: its sample tile.
    assert service.count("/pshm/") == 1 and service.count("/portal/") == len(ZONE_DATASETS)
    page = client.get("/").get_data(as_text=True)
    assert 'data-provider-mode="real"' in page and "Reports read real public data, since" in page
    assert 'data-provider-mode="real"' in client.get("/assessments/new").get_data(as_text=True)


def test_unset_a_silent_service_means_the_demo_and_says_why(make_app, service, caplog) -> None:
    service.answer = lambda path: (503, b"", {}) if "/portal/" in path else normal(path)
    app, client, actions = signed_in(make_app, **config(service, LAYER_PROVIDER=""))
    choice = app.extensions["provider_choice"]
    assert choice["mode"] == "demo" and app.extensions["layer_provider"].is_demo
    assert "hazard map portal: the service is unavailable (HTTP 503)" in choice["reason"]
    page = client.get("/assessments/new").get_data(as_text=True)
    assert 'data-provider-mode="demo"' in page and "HTTP 503" in page
    assert "serving demo data" in caplog.text


def test_unset_the_services_are_asked_again_and_real_data_follows_them(make_app, service, caplog):
    from app.assessment.sources.probe import serving

    down = lambda path: (503, b"", {}) if "/portal/" in path else normal(path)  # noqa: E731
    service.answer = down
    settings = config(service, LAYER_PROVIDER="", PROVIDER_RECHECK_SECONDS=0.2)
    app, client, actions = signed_in(make_app, **settings)
    try:
        assert app.extensions["provider_choice"]["mode"] == "demo"
        mode, since, reason = serving()
        assert mode == "demo" and "HTTP 503" in reason
        ja = client.get("/", headers={"Accept-Language": "ja"}).get_data(as_text=True)
        # The reason in the reader's language, not the English of the log.
        assert "ハザードマップポータルサイト：サービスが停止中です（HTTP 503）" in ja
        assert "the service is unavailable" not in ja
        service.answer = normal  # the portal is back: the next recheck switches to real
        wait_for(lambda: app.extensions["provider_choice"]["mode"] == "real", timeout=20)
        assert not app.extensions["layer_provider"].is_demo
        assert serving()[0] == "real" and serving()[1] > since
        assert caplog.text.count("now serving real data") == 1  # once per change
        page = client.get("/").get_data(as_text=True)
        assert (
            'data-provider-mode="real"' in page and "Reports read real public data, since" in page
        )
        service.answer = down  # and down again: back to the demo, saying so
        wait_for(lambda: app.extensions["provider_choice"]["mode"] == "demo", timeout=20)
        assert "now serving demo data" in caplog.text
    finally:
        app.extensions["provider_recheck"]["stop"].set()


def test_an_explicit_provider_always_wins(make_app, service) -> None:
    app = make_app(**config(service, LAYER_PROVIDER="demo"))
    assert app.extensions["provider_choice"] == {
        "mode": "demo",
        "explicit": True,
        "setting": "demo",
        "reason": "",
    }
    assert service.hits == []  # nothing asked
    page = app.test_client().get("/").get_data(as_text=True)
    assert "data-provider-mode" not in page


@pytest.mark.parametrize("dataset", ["inland_flood_zones", "flood_planned_zones"])
def test_an_unconfirmed_layer_s_missing_sample_is_said_but_keeps_the_real_data(
    make_app, service: Service, dataset: str
) -> None:
    # Inland flooding's path is recorded by third parties only, and the planned scale's
    # sample tile was chosen, not fetched: their sample missing is what providers-check
    # reports, not a reason to serve the demo for every layer.
    moved = ZONE_DATASETS[dataset]
    service.answer = lambda path: (404, b"Not Found", {}) if moved in path else normal(path)
    app = make_app(**config(service))
    result = app.test_cli_runner().invoke(args=["providers-check"])
    assert result.exit_code == 1 and f"FAILED {dataset}: portal {moved}" in result.output
    app = make_app(**config(service, LAYER_PROVIDER=""))
    choice = app.extensions["provider_choice"]
    assert choice["mode"] == "real"
    assert f"not confirmed: {dataset}: the sample tile is missing" in choice["reason"]


def test_the_planned_scale_is_read_on_its_national_path_and_shown_not_weighed(
    make_app, service: Service
) -> None:
    # Constructed to the depth legend (tests/recorded/README.md): the planned scale 5-10 m
    # (#FF9191) over the ward, deeper than the 1-3 m normal() paints for the planned maximum,
    # which a real portal would not do: so the test tells weighed from not. Before: not read.
    planned = ZONE_DATASETS["flood_planned_zones"]
    assert planned == "01_flood_l1_shinsuishin_newlegend_data"
    client, job_id, report = painted_report(
        make_app, service, {f"/portal/{planned}/": (0xFF, 0x91, 0x91, 255)}
    )
    by_key = {layer["key"]: layer for layer in report["layers"]}
    at_scale, flood = by_key["flood_planned"], by_key["flood"]
    assert (at_scale["state"], at_scale["worst"], at_scale["level"]) == ("shown", "5-10", None)
    assert at_scale["shares"]["5-10"] == 1.0 and at_scale["real"] is True
    assert at_scale["source"][0]["dataset_id"] == planned
    assert service.count(f"/portal/{planned}/") == len(zones.plan(resolve_place(PAINTED)).tiles)
    # Its legend, beside every colour: the image GSI's layer configuration gives it.
    assert {c["source"] for c in at_scale["legend"]} == {
        "https://disaportal.gsi.go.jp/maps/image/legend/shinsui_legend3.png"
    }
    # Never weighed: flood stays level 3 and the planned scale heads nothing.
    assert (flood["worst"], flood["level"]) == ("1-3", 3)
    assert "flood_planned" not in report["worst"]
    # GSI's note (still being prepared, the old legend), with its source and date.
    assert any("旧凡例" in note["ja"] and note["date"] for note in at_scale["notes"])
    credit = report["provenance"]["services"][0]
    assert "洪水浸水想定区域（計画規模）" in credit["credit_ja"] and planned in credit["datasets"]
    page = client.get(f"/assessments/{job_id}?lang=ja").get_data(as_text=True)
    assert 'data-layer="flood_planned" data-state="shown"' in page
    assert "最も深い区分：5m以上10m未満" in page
    english = client.get(f"/assessments/{job_id}?lang=en").get_data(as_text=True)
    assert "Deepest: 5 to 10 m (a detail of flood: shown, not weighed)" in english


def test_house_collapse_and_flood_duration_are_read_on_their_national_paths(
    make_app, service: Service
) -> None:
    # Constructed, not recorded (tests/recorded/README.md): flood flow's red (#FF0000) and
    # flood duration's "4 weeks or more" (#600060), in the colours public projects record
    # (unconfirmed), each over exactly the ward's pixels. Before: neither was read.
    flow, duration = (
        ZONE_DATASETS["house_collapse_flow_zones"],
        ZONE_DATASETS["flood_duration_zones"],
    )
    painted = {f"/portal/{flow}/": (0xFF, 0, 0, 255), f"/portal/{duration}/": (0x60, 0, 0x60, 255)}
    client, job_id, report = painted_report(make_app, service, painted)
    by_key = {layer["key"]: layer for layer in report["layers"]}
    collapse, lasting = by_key["house_collapse"], by_key["flood_duration"]
    # A house-collapse zone is the most severe level, and heads the report.
    assert (collapse["state"], collapse["worst"], collapse["level"]) == (
        "zones",
        "house_collapse_flow",
        5,
    )
    assert collapse["shares"]["house_collapse_flow"] == 1.0
    assert {s["dataset_id"] for s in collapse["source"]} >= {flow}
    assert report["level"] == 5 and "house_collapse" in report["worst"]
    # Flood duration is shown, with the longest class, and never weighed.
    assert (lasting["state"], lasting["worst"], lasting["level"]) == ("shown", "ge4w", None)
    assert "flood_duration" not in report["worst"]
    assert all(c["source"].startswith("unconfirmed") for c in lasting["legend"])
    assert any(note["date"] for note in collapse["notes"])
    credit = report["provenance"]["services"][0]
    assert "家屋倒壊等氾濫想定区域（氾濫流）" in credit["credit_ja"] and flow in credit["datasets"]
    page = client.get(f"/assessments/{job_id}?lang=ja").get_data(as_text=True)
    assert 'data-layer="house_collapse" data-state="zones"' in page
    assert 'data-layer="flood_duration" data-state="shown"' in page
    assert "4週間以上" in page
