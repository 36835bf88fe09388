"""Poll path, closed loop (wrk): the status fragment with its metrics on against off.

One server, one gthread worker, 32 users with one running job each, as in
bench/poll_closed.py. In every round wrk drives each endpoint in turn (the order
rotates between rounds):

- status: GET /assessments/<id>/status, the product's poll, timed into its histogram
- status_nometrics: the same code with the histogram's observe replaced by a no-op
  (bench/benchapp.py)

The ratio status/status_nometrics is taken per round and its median reported; the
target is at least 0.95.
"""

from . import wrk
from .common import Database, count_running, loaded
from .poll_closed import with_etags
from .table import Row, check, compare, get

ENDPOINTS = ("status", "status_nometrics")


def run(
    db: Database,
    rounds: int = 4,
    duration: float = 5,
    warmup: float = 2,
    connections: int = 16,
    n_users: int = 32,
) -> dict:
    wrk.require()
    with loaded(db, "poll_metrics", n_users, "metrics") as (server, users):
        paths = {
            "status": "/assessments/{}/status",
            "status_nometrics": "/bench/status-nometrics/{}",
        }
        lines = {ep: [(p.format(u.job_id), u.cookie) for u in users] for ep, p in paths.items()}
        for ep in ENDPOINTS:  # both answer the running job's fragment before timing
            r = users[0].http.get(server.url + lines[ep][0][0])
            if r.status_code != 200 or 'data-status="running"' not in r.text:
                raise RuntimeError(f"{ep}: {r.status_code} {r.text[:200]}")
        # Both ask as a browser that kept the fragment asks (bench/poll_closed.py).
        lines = {ep: with_etags(server.url, lines[ep]) for ep in ENDPOINTS}
        endpoints = wrk.rounds(
            server.url, lines, rounds, duration, warmup, connections, "poll_metrics"
        )
        running_after = count_running(db, users)
    ratio = wrk.ratio(endpoints, "status", "status_nometrics")
    out = {"rounds": rounds, "duration_s": duration, "connections": connections, "users": n_users}
    out |= {"endpoints": endpoints}
    out |= {"ratios": {"status/status_nometrics": ratio}, "jobs_running_after": running_after}
    return out


NUMBER, NAME = "1f", "poll latency histogram"


def summary(r: dict) -> list[Row]:
    """Row 1f: the poll's req/s with its histogram against without (target: within 5 %)."""
    ratio = get(r, "ratios", "status/status_nometrics", "median")
    rps = {ep: get(r, "endpoints", ep, "rps_median") for ep in ENDPOINTS}
    ok = check(ratio, lambda v: v >= 0.95)
    figure = "status fragment with its latency histogram vs without, req/s"
    return [compare("1f", figure, rps["status"], rps["status_nometrics"], "no histogram", 0,
                    ratio=ratio, target="within 5 %", ok=ok)]  # fmt: skip


def details(r: dict) -> list[str]:
    """Its section: both endpoints' rounds and the ratio's."""
    v = r["ratios"]["status/status_nometrics"]
    return [
        "### The poll's latency histogram on against off",
        "",
        "bench/poll_metrics.py: one gthread worker, 32 users with one running job each"
        + (", PROMETHEUS_MULTIPROC_DIR set" if r.get("multiproc") else "")
        + f"; wrk, {r['connections']} connections, {r['rounds']} round(s) of"
        f" {r['duration_s']:g} s per endpoint (order rotating). status_nometrics is the"
        " same poll with the histogram's observe replaced by a no-op (bench/benchapp.py).",
        "",
        *wrk.endpoints_table(r["endpoints"]),
        "",
        f"Ratio status/status_nometrics: median {v['median']:.2f}, per round"
        f" {', '.join(f'{x:.2f}' for x in v['rounds'])}. Jobs still running after the"
        f" measurement: {r.get('jobs_running_after')} of {r.get('users')}.",
        "",
    ]
