"""J-SHIS and the GSI elevation API, against recorded answers served by a local HTTP server."""

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from app.assessment import resolve_place
from app.assessment.gsi import GsiElevationProvider
from app.assessment.jshis import JshisProvider
from app.assessment.providers import DemoProvider, RoutedProvider, make_provider
from app.assessment.sampling import MAX_POINTS, mesh250, sample_points
from app.assessment.upstream import ProviderError, RetryPolicy, retry_after_seconds
from tests.conftest import job_id_from, signed_in
from tests.test_jobs import attr, poll_until, settled

RECORDED = Path(__file__).parent / "recorded"
FAST = RetryPolicy(timeout=2, retries=2, backoff=0.01, retry_after_cap=0.3)
Answer = tuple[int, bytes, dict[str, str]]


def recorded(name: str) -> bytes:
    return (RECORDED / name).read_bytes()


def normal(path: str) -> Answer:
    """Answer as the services do when all is well."""
    if "/pshm/" in path:
        return 200, recorded("jshis_pshm_ok.geojson"), {}
    if "/sstrct/" in path:
        return 200, recorded("jshis_sstrct_ok.geojson"), {}
    return 200, recorded("gsi_ok.json"), {}


class Service:
    """A local stand-in for J-SHIS and GSI whose answers each test chooses."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.answer: Callable[[str], Answer] = normal
        self.delay = 0.0
        self.url = ""

    def count(self, fragment: str) -> int:
        return sum(fragment in hit for hit in self.hits)


@pytest.fixture
def service() -> Iterator[Service]:
    state = Service()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            with lock:
                state.hits.append(self.path)
            time.sleep(state.delay)
            status, body, headers = state.answer(self.path)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up waiting

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield state
    server.shutdown()
    server.server_close()


def jshis(service: Service, **kwargs) -> JshisProvider:
    return JshisProvider(service.url + "/jshis", policy=kwargs.pop("policy", FAST), **kwargs)


def gsi(service: Service) -> GsiElevationProvider:
    return GsiElevationProvider(service.url + "/gsi/getelevation.php", policy=FAST)


def config(service: Service, **extra) -> dict:
    return {
        "LAYER_PROVIDER": "faults=jshis,ground=jshis,elevation=gsi,*=demo",
        "JSHIS_BASE_URL": service.url + "/jshis",
        "GSI_ELEVATION_URL": service.url + "/gsi/getelevation.php",
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
    assert answer == {"amplification": 1.84, "soft_soil_ratio": 1.0}  # AVS30 195.9 < 200
    assert urlsplit(service.hits[0]).path == "/jshis/sstrct/V4/meshinfo.geojson"


def test_jshis_keys_are_the_meshes_of_the_sample_points() -> None:
    area = resolve_place("Sapporo")
    points = sample_points(area)
    assert len(points) == MAX_POINTS and points[0] == (round(area.lat, 5), round(area.lon, 5))
    keys = JshisProvider().keys(area, "faults")
    assert keys == list(dict.fromkeys(mesh250(*p) for p in points))
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


# --- GSI ----------------------------------------------------------------------------------


def test_gsi_reads_elevation_and_derives_the_slope(service: Service) -> None:
    heights = iter(["10.0", "10.0", "110.0"])  # here, 100 m east, 100 m north

    def answer(path: str) -> Answer:
        return (
            200,
            b'{"elevation":%s,"hsrc":"5m\\uff08\\u30ec\\u30fc\\u30b6\\uff09"}'
            % next(heights).encode(),
            {},
        )

    service.answer = answer
    reading = gsi(service).fetch("elevation", "35.68124,139.76712")
    assert reading == {"min_m": 10.0, "max_slope_deg": 45.0, "source": "5m（レーザ）"}
    query = parse_qs(urlsplit(service.hits[0]).query)
    assert query == {"lon": ["139.767120"], "lat": ["35.681240"], "outtype": ["JSON"]}


def test_gsi_no_value_at_sea_is_no_answer(service: Service) -> None:
    service.answer = lambda path: (200, recorded("gsi_no_value.json"), {})
    assert gsi(service).fetch("elevation", "35.0,139.9") is None
    assert len(service.hits) == 1  # no slope asked for a point at sea


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"hsrc":"5m"}', 'the answer lacks "elevation"'),
        (b'{"elevation":"high"}', '"elevation" is not a number'),
        (b"not json", "the answer is not valid JSON"),
    ],
)
def test_gsi_malformed_answers_are_provider_errors(service: Service, body, reason) -> None:
    service.answer = lambda path: (200, body, {})
    with pytest.raises(ProviderError, match=reason) as info:
        gsi(service).fetch("elevation", "35.68124,139.76712")
    assert info.value.reason.startswith("GSI elevation API: ")


# --- configuration --------------------------------------------------------------------------


def test_a_mapping_routes_each_dataset(service: Service) -> None:
    provider = make_provider(config(service))
    assert isinstance(provider, RoutedProvider)
    names = {ds: p.name for ds, p in provider.routes.items()}
    assert names == {
        "faults": "jshis",
        "ground": "jshis",
        "elevation": "gsi",
        "rainfall": "demo",
        "coast": "demo",
    }
    assert [p.name for p in provider.real_providers()] == ["gsi", "jshis"]
    assert make_provider({"LAYER_PROVIDER": "*=jshis"}).routes["elevation"].name == "demo"


@pytest.mark.parametrize(
    "mapping", ["volcano=jshis", "faults=magic", "elevation=jshis", "jshis", "faults:jshis"]
)
def test_a_bad_mapping_is_refused_at_start(mapping: str) -> None:
    with pytest.raises(ValueError):
        make_provider({"LAYER_PROVIDER": mapping})


# --- the job and the report -------------------------------------------------------------------


def test_a_job_with_real_providers_names_each_source(make_app, service: Service) -> None:
    app, client, actions = signed_in(make_app, **config(service))
    job_id = job_id_from(actions.submit("Sapporo"))
    html = poll_until(client, job_id, settled)
    assert attr(html, "data-status") == "succeeded", html
    area = resolve_place("Sapporo")
    meshes = len(JshisProvider().keys(area, "faults"))
    # Each mesh once per J-SHIS dataset, each GSI point three times (slope): the bound.
    assert service.count("/pshm/") == meshes and service.count("/sstrct/") == meshes
    assert service.count("/gsi/") == 3 * MAX_POINTS
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert "J-SHIS, National Research Institute for Earth Science" in page
    assert "Y2024 AVR" in page and "Geospatial Information Authority of Japan" in page
    assert f"{meshes} of {meshes} points, the worst one counts" in page
    assert "5m（レーザ）" in page
    # Seismic reads only J-SHIS: real. Flood still reads demo rainfall: the banner stays.
    assert 'data-dataset="faults" data-real="yes"' in page
    assert 'data-dataset="rainfall" data-real="no"' in page
    assert "Some layers are built from demonstration data" in page
    # A second job for the same place asks nothing again: the cache answers.
    before = len(service.hits)
    job_id = job_id_from(actions.submit("Sapporo", confirm="yes"))  # paying again, knowingly
    assert attr(poll_until(client, job_id, settled), "data-status") == "succeeded"
    assert len(service.hits) == before


def test_the_banner_goes_when_every_layer_is_real(make_app, service: Service) -> None:
    def answer(path: str) -> Answer:
        if path.startswith(("/http/rainfall/", "/http/coast/")):
            dataset, key = path.removeprefix("/http/").split("/", 1)
            return 200, json.dumps(DemoProvider().fetch(dataset, key)).encode(), {}
        return normal(path)

    service.answer = answer
    settings = config(service, LAYER_HTTP_BASE_URL=service.url + "/http")
    settings["LAYER_PROVIDER"] = "faults=jshis,ground=jshis,elevation=gsi,*=http"
    app, client, actions = signed_in(make_app, **settings)
    job_id = job_id_from(actions.submit("Sapporo"))
    assert attr(poll_until(client, job_id, settled), "data-status") == "succeeded"
    page = client.get(f"/assessments/{job_id}").get_data(as_text=True)
    assert page.count('class="report-provenance" data-real="yes"') == 5
    assert "demonstration data" not in page.lower() and 'class="report-demo"' not in page


def test_a_malformed_answer_fails_the_job_and_refunds(make_app, service: Service, sql) -> None:
    service.answer = lambda path: (
        (200, b"<html>maintenance</html>", {}) if "/pshm/" in path else normal(path)
    )
    app, client, actions = signed_in(make_app, **config(service))
    job_id = job_id_from(actions.submit("Sapporo"))
    html = poll_until(client, job_id, settled)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "refunded")
    assert "J-SHIS: the answer is not valid JSON" in html and "Your point was refunded." in html
    assert sql("SELECT error_code FROM assessment_jobs") == [("PROVIDER_ERROR",)]
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert app.test_cli_runner().invoke(args=["ledger-check"]).exit_code == 0


def test_no_data_at_any_point_fails_the_job_honestly(make_app, service: Service, sql) -> None:
    service.answer = lambda path: (
        (200, recorded("gsi_no_value.json"), {}) if "/gsi/" in path else normal(path)
    )
    app, client, actions = signed_in(make_app, **config(service))
    job_id = job_id_from(actions.submit("Sapporo"))
    html = poll_until(client, job_id, settled)
    assert (attr(html, "data-status"), attr(html, "data-billing")) == ("failed", "refunded")
    assert "no data at any of the 5 places asked" in html
    assert sql("SELECT point_balance FROM users") == [(3,)]


# --- flask providers-check -------------------------------------------------------------------


def test_providers_check_prints_each_answer_and_its_time(make_app, service: Service) -> None:
    app = make_app(**config(service))
    result = app.test_cli_runner().invoke(args=["providers-check"])
    assert result.exit_code == 0, result.output
    assert "gsi: {'elevation_m': 39.8, 'hsrc': '5m（レーザ）'} (" in result.output
    assert "jshis: {'shaking_prob_30y': 0.40622} (" in result.output and " ms)" in result.output


def test_providers_check_fails_loudly(make_app, service: Service) -> None:
    service.answer = lambda path: (403, b"{}", {})
    app = make_app(**config(service))
    result = app.test_cli_runner().invoke(args=["providers-check"])
    assert result.exit_code == 1
    assert "jshis: FAILED" in result.output and "request limit" in result.output


def test_providers_check_with_the_demo_says_so(make_app) -> None:
    result = make_app().test_cli_runner().invoke(args=["providers-check"])
    assert result.exit_code == 0 and "no real provider configured" in result.output
