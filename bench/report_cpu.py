"""The interpreter's CPU per report on the real providers, the stand-in in its own process.

Not in `make bench`: `python -m bench.report_cpu [--reports 3]` prints JSON. The local
stand-in (bench/zones.py's Upstream, 20 ms) runs in a child process, so the figure is the
report's own: the process CPU (every thread) of run_assessment for a ward, a large city
and a point, each with a fresh layer cache (every tile and mesh asked upstream), the
median of --reports runs after a warm-up, and the requests the pooled client sent.
--processes N works the pixels in a pool of N (ZONE_PROCESSES): cpu_s is then the
interpreter's own (what the status poll competes with for the GIL) and tree_cpu_s adds
the pool's. Run it on two trees in turn for a before/after (bench/ZONES.md says how).
"""

import json
import os
import statistics
import time

from .zones import PLACES, StandIn, print_nothing


def run(reports: int = 3, processes: int = 0) -> dict:
    """Return each place's median CPU seconds and requests per report."""
    from app.assessment import resolve_place
    from app.assessment.sources.http import shared_client
    from app.assessment.sources.providers import make_provider
    from app.assessment.work import run_assessment
    from app.caches.singleflight import SingleFlightCache

    from .common import cpu_seconds, tree_sum

    me = os.getpid()

    stand_in = StandIn()
    try:
        url = stand_in.url
        at = {"JSHIS_BASE_URL": "jshis", "HAZARD_PORTAL_URL": "portal", "BASEMAP_URL": "pale"}
        urls = {k: f"{url}/{v}" for k, v in at.items()}
        real = make_provider({"LAYER_PROVIDER": "real", "ZONE_PROCESSES": processes} | urls)
        client = shared_client()
        out: dict = {"places": {}}
        for label, query in PLACES.items():
            area = resolve_place(query)
            cpus, trees, calls, walls = [], [], [], []
            for i in range(reports + 1):
                sent, cpu, wall = client.requests, time.process_time(), time.monotonic()
                tree = tree_sum(me, cpu_seconds) - stand_in.cpu_s()
                run_assessment(
                    area, "en", provider=real, cache=SingleFlightCache(4096), progress=print_nothing
                )
                if i:  # the first made the place's plan and masks: kept for later reports
                    cpus.append(time.process_time() - cpu)
                    after = tree_sum(me, cpu_seconds) - stand_in.cpu_s()
                    trees.append(after - tree)
                    walls.append(time.monotonic() - wall)
                    calls.append(client.requests - sent)
            out["places"][label] = {
                "cpu_s": round(statistics.median(cpus), 3),
                "tree_cpu_s": round(statistics.median(trees), 3),
                "wall_s": round(statistics.median(walls), 2),
                "requests": statistics.median(calls),
            }
        return out
    finally:
        stand_in.close()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=3)
    parser.add_argument("--processes", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(run(args.reports, args.processes), indent=2))
