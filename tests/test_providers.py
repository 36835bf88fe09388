"""Layer providers: the deterministic demo and the HTTP client, against a real local server."""

import socket
import time

import pytest

from app.assessment.sources.providers import (
    DATASETS,
    DemoProvider,
    HttpProvider,
    ProviderError,
    make_provider,
)
from tests.conftest import Upstream


def test_the_demo_is_deterministic_and_within_range() -> None:
    demo = DemoProvider()
    for dataset, spec in DATASETS.items():
        key = "15/29105/12903" if spec.scope == "zones" else "5339461132"
        first = demo.fetch(dataset, key)
        assert first == DemoProvider().fetch(dataset, key)
        if spec.scope == "zones":
            assert set(first) == {"png"}  # a painted tile, or None where nothing is
            continue
        assert set(first) == set(spec.fields)
        for field, (low, high) in spec.fields.items():
            assert low <= first[field] <= high
    # Smooth fields: far-apart meshes differ.
    assert demo.fetch("faults", "5339461132") != demo.fetch("faults", "6441427722")


def test_the_demo_refuses_an_unknown_dataset() -> None:
    with pytest.raises(ProviderError, match='"volcano"'):
        DemoProvider().fetch("volcano", "011002")


def test_the_demo_sleeps_its_share_of_the_work() -> None:
    demo = make_provider({"ASSESSMENT_WORK_SECONDS": 0.4})
    assert demo.pause("faults", 0.25) == pytest.approx(0.1)
    assert make_provider({"ASSESSMENT_WORK_SECONDS": 0}).pause("faults", 1.0) == 0


@pytest.mark.parametrize(
    ("config", "kind", "is_demo"),
    [
        ({}, DemoProvider, True),
        ({"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": "5"}, DemoProvider, True),
        ({"LAYER_PROVIDER": "HTTP", "LAYER_HTTP_BASE_URL": "http://x/"}, HttpProvider, False),
    ],
)
def test_make_provider_reads_the_config(config: dict, kind: type, is_demo: bool) -> None:
    provider = make_provider(config)
    assert isinstance(provider, kind)
    assert provider.is_demo is is_demo
    assert provider.name == ("demo" if is_demo else "http")


def test_make_provider_reads_the_http_timeout() -> None:
    config = {"LAYER_PROVIDER": "http", "LAYER_HTTP_BASE_URL": "http://x"}
    assert make_provider(config).timeout == 10
    assert make_provider({**config, "LAYER_HTTP_TIMEOUT_SECONDS": 0.5}).timeout == 0.5


@pytest.mark.parametrize(
    "config",
    [
        {"LAYER_PROVIDER": "magic"},
        {"LAYER_PROVIDER": "http"},
        {
            "LAYER_PROVIDER": "http",
            "LAYER_HTTP_BASE_URL": "http://x",
            "LAYER_HTTP_TIMEOUT_SECONDS": -1,
        },
        {"ASSESSMENT_WORK_SECONDS": -1},
    ],
)
def test_make_provider_refuses_a_bad_config(config: dict) -> None:
    with pytest.raises(ValueError):
        make_provider(config)


def test_http_fetches_the_dataset_at_its_path(upstream: Upstream) -> None:
    provider = HttpProvider(upstream.url + "/", timeout=2)
    assert provider.fetch("faults", "5339461132") == DemoProvider().fetch("faults", "5339461132")
    assert provider.fetch("flood_zones", "15/29105/12903") == DemoProvider().fetch(
        "flood_zones", "15/29105/12903"
    )
    assert upstream.hits == {"/faults/5339461132": 1, "/flood_zones/15/29105/12903": 1}


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (500, b"{}", "the server answered HTTP 500"),
        (404, b"{}", "the server answered HTTP 404"),
        (200, b"<html>oops</html>", "the answer is not valid JSON"),
        (200, b"\xff\xfe", "the answer is not valid JSON"),
        (200, b"[1, 2]", "the answer is not a JSON object"),
        (200, b'{"shaking_prob_30y": "high"}', 'the answer lacks the number "shaking_prob_30y"'),
        (200, b'{"shaking_prob_30y": true}', 'the answer lacks the number "shaking_prob_30y"'),
    ],
)
def test_http_failures_name_the_dataset_and_the_reason(
    upstream: Upstream, status: int, body: bytes, reason: str
) -> None:
    upstream.status, upstream.body = status, body
    with pytest.raises(ProviderError) as info:
        HttpProvider(upstream.url, timeout=2).fetch("faults", "011002")
    assert (info.value.dataset, info.value.key, info.value.reason) == ("faults", "011002", reason)
    assert str(info.value) == f'hazard dataset "faults" for 011002: {reason}'


def test_http_gives_up_after_the_timeout(upstream: Upstream) -> None:
    upstream.delay = 0.6
    started = time.monotonic()
    with pytest.raises(ProviderError, match=r"no answer within 0\.2 s"):
        HttpProvider(upstream.url, timeout=0.2).fetch("faults", "011002")
    assert time.monotonic() - started < 0.5


def test_http_reports_an_unreachable_server() -> None:
    with socket.socket() as sock:  # a port nobody listens on once it is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ProviderError, match="unreachable") as info:
        HttpProvider(f"http://127.0.0.1:{port}", timeout=1).fetch("faults", "011002")
    assert info.value.reason == "unreachable"  # what the user reads; the OS error is logged
    assert "refused" in str(info.value)
