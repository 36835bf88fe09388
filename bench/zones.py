"""The local stand-in for the hazard map portal and J-SHIS, and the places read against it.

It answers every request on 127.0.0.1 after LATENCY_S (20 ms), with tiles painted by the
demo painter and J-SHIS answers from tests/recorded (all constructed), and counts them.
bench/memory.py and the rows 2d-2j of bench/poll_open.py run the real providers against
it; bench/ZONES.md keeps what reading zones over real outlines cost when it was measured
with it (upstream calls, job time, peak RSS, the neighbours' cache).
"""

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

LATENCY_S = 0.020
ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "recorded"
PLACES = {"small ward": "東京都中央区", "large city": "浜松市", "point": "35.6812, 139.7671"}


class Upstream:
    """The local stand-in: counts requests, answers after its latency (LATENCY_S)."""

    def __init__(self, latency: float = LATENCY_S) -> None:
        from app.assessment.sources import portal

        self.hits: Counter[str] = Counter()  # by service: portal, jshis
        self.lock = threading.Lock()
        ids = {dataset_id: name for name, dataset_id in portal.ZONE_DATASETS.items()}
        pshm = (RECORDED / "jshis_pshm_ok.geojson").read_bytes()
        sstrct = (RECORDED / "jshis_sstrct_ok.geojson").read_bytes()
        state, painted = self, {}

        class Handler(BaseHTTPRequestHandler):
            # Connections kept alive, as HTTP/1.1 services keep them; the head and body in
            # one write and no Nagle delay, so a kept connection is not a slower one.
            protocol_version = "HTTP/1.1"
            wbufsize = 65536
            disable_nagle_algorithm = True

            def do_GET(self) -> None:  # noqa: N802
                if self.path != "/__hits":
                    with state.lock:
                        state.hits[self.path.split("/")[1]] += 1
                    time.sleep(latency)
                status, body = 404, b""
                if self.path == "/__hits":  # StandIn's count, read from its parent
                    status, body = 200, json.dumps(state.hits).encode()
                elif not self.path.startswith(("/portal/", "/jshis/")):
                    status, body = 200, b'"ok"'  # any other upstream (bench/scale.py)
                elif "/pshm/" in self.path:
                    status, body = 200, pshm
                elif "/sstrct/" in self.path:
                    status, body = 200, sstrct
                elif self.path.startswith("/portal/"):
                    dataset_id, key = self.path.removeprefix("/portal/").split("/", 1)
                    if self.path not in painted:  # each tile's bytes prepared once
                        painted[self.path] = portal.paint(ids[dataset_id], key[:-4])
                    png = painted[self.path]
                    if png is not None:
                        status, body = 200, png
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


class StandIn:
    """The Upstream in a process of its own, so its CPU is never the measured process's.

    Its CPU is read from /proc (cpu_s) and its counts over HTTP (hits), beside the worker's.
    """

    def __init__(self, latency: float = LATENCY_S) -> None:
        import subprocess
        import sys

        code = (
            "import sys; from bench.zones import Upstream\n"
            f"print(Upstream({latency!r}).url, flush=True); sys.stdin.read()\n"
        )
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True}
        self.process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, **pipes)
        self.url = self.process.stdout.readline().strip()

    @property
    def hits(self) -> Counter[str]:
        import urllib.request

        with urllib.request.urlopen(self.url + "/__hits", timeout=10) as answer:
            return Counter(json.loads(answer.read()))

    def cpu_s(self) -> float:
        from .common import cpu_seconds

        return cpu_seconds(self.process.pid)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(10)


def upstream_floor(queries, cached, latency: float = LATENCY_S) -> float:
    """Return the seconds the reports of queries wait on the stand-in at the least (issue
    43's floor): their distinct portal and J-SHIS calls, less those the reports of cached
    made first, each taking latency, as many at once as the client's slots per host (the
    stand-in is one host; the bench points the base map elsewhere)."""
    from app.assessment import resolve_place
    from app.assessment.report.analysis import LAYERS
    from app.assessment.sources import coverage, http
    from app.assessment.sources.providers import make_provider
    from app.assessment.work import keys_for

    provider = make_provider({"LAYER_PROVIDER": "real"})

    def calls(query: str) -> set:
        area = resolve_place(query)
        layers = [layer for layer in LAYERS if not coverage.unread(layer.key, area)[0]]
        read = [ds for layer in layers for ds in layer.datasets]
        return {(ds, key) for ds in read for key in keys_for(area, ds, provider)}

    made = set().union(*map(calls, cached))
    return len(set().union(*map(calls, queries)) - made) * latency / http.DEFAULT_PER_HOST
