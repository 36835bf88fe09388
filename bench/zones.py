"""Reading zones over real outlines: upstream calls, job time, memory, the neighbours' cache.

Runs the assessment's own work (run_assessment) with LAYER_PROVIDER=real against a local
server on 127.0.0.1 that stands in for the hazard map portal, J-SHIS and GSI's pale map and
answers every request after LATENCY_S (20 ms): tiles painted by the demo painter, J-SHIS
answers from tests/recorded, a flat tint for the pale map (all constructed). No database.

    .venv/bin/python -m bench.zones            # JSON on stdout, a table to bench/ZONES.md

Figures, in one run:
- upstream calls per job (base map tiles among them) for a small ward (東京都中央区), a
  large city (浜松市) and a point (with its spot: one z17 tile per zone dataset, cached);
- job time for each against the 20 ms server, next to the same job on the demo provider
  (no network: the CPU part) as the baseline;
- the process's peak RSS after 32 such jobs, 8 at a time (as MAX_CONCURRENT_JOBS), next to
  its RSS before them;
- the cache's hit rate when a job for 千代田区 follows one for its neighbour 中央区.
"""

import io
import json
import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

LATENCY_S = 0.020
ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "recorded"
PLACES = {"small ward": "東京都中央区", "large city": "浜松市", "point": "35.6812, 139.7671"}
NEIGHBOURS = [("東京都中央区", "千代田区"), ("35.6812, 139.7671", "35.6812, 139.7715")]


class Upstream:
    """The local stand-in: counts requests, answers after its latency (LATENCY_S)."""

    def __init__(self, latency: float = LATENCY_S) -> None:
        from PIL import Image

        from app.assessment.sources import portal

        self.hits: Counter[str] = Counter()  # by service: portal, jshis, pale
        self.lock = threading.Lock()
        ids = {dataset_id: name for name, dataset_id in portal.ZONE_DATASETS.items()}
        pshm = (RECORDED / "jshis_pshm_ok.geojson").read_bytes()
        sstrct = (RECORDED / "jshis_sstrct_ok.geojson").read_bytes()
        Image.new("RGB", (256, 256), (242, 240, 234)).save(pale := io.BytesIO(), "PNG")
        state, painted = self, {}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                if self.path != "/__hits":
                    with state.lock:
                        state.hits[self.path.split("/")[1]] += 1
                    time.sleep(latency)
                status, body = 404, b""
                if self.path.startswith("/pale/"):
                    status, body = 200, pale.getvalue()
                elif self.path == "/__hits":  # StandIn's count, read from its parent
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
        self.process = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
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


def print_nothing(step: str, percent: int) -> None:
    """Take a job's progress and keep none of it."""


def main() -> dict:
    from app.assessment import resolve_place
    from app.assessment.sources.providers import make_provider
    from app.assessment.work import run_assessment
    from app.caches.singleflight import SingleFlightCache
    from app.operations import arenas

    from .common import rss_kib

    arenas.cap()  # as the worker does (MALLOC_ARENA_MAX=16 in the environment: glibc's own)

    upstream = Upstream()
    at = {"JSHIS_BASE_URL": "jshis", "HAZARD_PORTAL_URL": "portal", "BASEMAP_URL": "pale"}
    real = make_provider(
        {"LAYER_PROVIDER": "real"} | {k: f"{upstream.url}/{v}" for k, v in at.items()}
    )
    demo = make_provider({"LAYER_PROVIDER": "demo", "ASSESSMENT_WORK_SECONDS": 0})

    def job(provider, area, cache=None) -> tuple[dict, float]:
        started, cache = time.monotonic(), SingleFlightCache(4096) if cache is None else cache
        report = run_assessment(area, "en", provider=provider, cache=cache, progress=print_nothing)
        return report, time.monotonic() - started

    areas = {label: resolve_place(query) for label, query in PLACES.items()}
    for area in areas.values():  # warm: outlines read, plans made, demo tiles painted once
        job(demo, area)
    results: dict = {"latency_ms": LATENCY_S * 1000, "places": {}}
    for label, area in areas.items():
        before = Counter(upstream.hits)
        report, seconds = job(real, area)
        _, baseline = job(demo, area)
        calls = upstream.hits - before
        results["places"][label] = {
            "query": PLACES[label],
            "zoom": report["extent"]["zoom"],
            "tiles_per_dataset": report["extent"]["tiles"],
            "upstream_calls": sum(calls.values()),
            "base_map_calls": calls["pale"],
            "report_kib": round(len(json.dumps(report)) / 1024, 1),
            "job_seconds": round(seconds, 2),
            "demo_job_seconds": round(baseline, 2),
        }
    # Memory: 32 jobs, 8 at a time, each with its own cache (no sharing helps).
    rss_before = rss_kib(os.getpid())["VmHWM"] / 1024
    queries = [PLACES[label] for label in PLACES] * 11
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda q: job(real, resolve_place(q)), queries[:32]))
    results["memory"] = {"jobs": 32, "at_once": 8, "peak_rss_mib_before": round(rss_before, 1)}
    results["memory"]["peak_rss_mib_after"] = round(rss_kib(os.getpid())["VmHWM"] / 1024, 1)
    # Neighbours on one cache: two wards (each at its own zoom), two points 400 m apart.
    results["neighbours"] = []
    for first, second in NEIGHBOURS:
        cache = SingleFlightCache(maxsize=4096)
        one, _ = job(real, resolve_place(first), cache)
        report, _ = job(real, resolve_place(second), cache)
        stats = report["cache"]
        looked = stats["hits"] + stats["joins"] + stats["misses"]
        zooms = [one["extent"]["zoom"], report["extent"]["zoom"]]
        hit_rate = round((stats["hits"] + stats["joins"]) / looked, 3)
        results["neighbours"].append(
            {"first": first, "second": second, "zooms": zooms, **stats, "hit_rate": hit_rate}
        )
    upstream.server.shutdown()
    return results


KEPT_FROM = "\n## The interpreter's CPU per report"


def write(results: dict) -> None:
    """Write the figures as bench/ZONES.md, keeping the sections other benchmarks wrote."""
    from .table import table

    header = ("place", "zoom", "tiles per dataset", "upstream calls (base map)", "job s",
              "demo job s", "report KiB")  # fmt: skip
    rows = (
        (f"{label} ({p['query']})", p["zoom"], p["tiles_per_dataset"],
         f"{p['upstream_calls']} ({p['base_map_calls']})", p["job_seconds"],
         p["demo_job_seconds"], p["report_kib"])
        for label, p in results["places"].items()
    )  # fmt: skip
    lines = [
        "# Zones over real outlines (bench/zones.py)",
        "",
        f"Against a local stand-in answering after {results['latency_ms']:.0f} ms "
        "(constructed tiles and J-SHIS answers); the demo provider's time for the same job "
        "(no network) is the baseline.",
        "",
        *table(header, rows),
    ]
    memory = results["memory"]
    lines += [
        "",
        f"Peak RSS of the process: {memory['peak_rss_mib_before']} MiB before, "
        f"{memory['peak_rss_mib_after']} MiB after {memory['jobs']} jobs "
        f"({memory['at_once']} at a time).",
        "",
    ]
    for near in results["neighbours"]:
        lines.append(
            f"Neighbours: {near['second']} after {near['first']} on one cache (zooms "
            f"{near['zooms'][0]}, {near['zooms'][1]}): {near['hits']} hits, {near['joins']} "
            f"joins, {near['misses']} misses, hit rate {near['hit_rate']:.1%}."
        )
    lines.append("")
    # The sections written after it (the CPU per report, measured once) are kept.
    path = ROOT / "bench" / "ZONES.md"
    kept = path.read_text().partition(KEPT_FROM)[1:] if path.exists() else ("", "")
    path.write_text("\n".join(lines) + "".join(kept))


if __name__ == "__main__":
    figures = main()
    write(figures)
    print(json.dumps(figures, ensure_ascii=False, indent=2))
