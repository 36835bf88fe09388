"""Upstream calls and the interpreter's CPU per report, for the places of bench/zones.py.

`python -m bench.calls [REPORTS]` from a tree's root: the real providers against
`zones.StandIn(0.0)` (a process of its own: its CPU is not the report's), the pixel work in
the interpreter (`ZONE_PROCESSES=0`), each report on a fresh cache after one to warm up;
prints, per place, the portal's and J-SHIS's calls and the median CPU of REPORTS reports
(3). Run it from two trees in turn for a before/after ratio in one session (ZONES.md).
"""

import json
import sys
import time

from .zones import PLACES, StandIn


def main(reports: int = 3) -> dict:
    from app.assessment import resolve_place
    from app.assessment.sources.providers import make_provider
    from app.assessment.work import run_assessment
    from app.caches.singleflight import SingleFlightCache

    upstream = StandIn(0.0)
    settings = {"LAYER_PROVIDER": "real", "ZONE_PROCESSES": 0, "LAYER_HTTP_TIMEOUT_SECONDS": 5}
    for name, path in (("JSHIS_BASE_URL", "/jshis"), ("HAZARD_PORTAL_URL", "/portal"),
                       ("BASEMAP_URL", "/pale"), ("EVACUATION_SITES_URL", "/gsi")):  # fmt: skip
        settings[name] = upstream.url + path
    out = {}
    try:
        for label, query in PLACES.items():
            area = resolve_place(query)

            def report(area: object = area) -> float:
                began, cache = time.process_time(), SingleFlightCache(maxsize=8192)
                run_assessment(area, "en", provider=make_provider(settings), cache=cache,
                               progress=lambda *_: None)  # fmt: skip
                return time.process_time() - began

            report()  # the first pays for imports and per-place plans
            before = upstream.hits
            cpu = sorted(report() for _ in range(reports))
            hits = {k: (v - before[k]) // reports for k, v in upstream.hits.items()}
            out[label] = {"calls": hits.get("portal", 0) + hits.get("jshis", 0), "by_service": hits,
                          "cpu_s": round(cpu[len(cpu) // 2], 3)}  # fmt: skip
    finally:
        upstream.close()
    return out


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3), ensure_ascii=False))
