"""Poll path, closed loop (wrk): the status fragment of running jobs against baselines.

One server, one gthread worker, 32 users with one running job each. In every round wrk
drives each endpoint in turn (the order rotates between rounds), all through the same
Lua script cycling over the 32 users' cookies:

- constant: a constant response (bench/benchapp.py)
- select1: `SELECT 1` through the Flask-SQLAlchemy session
- status: GET /assessments/<id>/status, the product's poll (running jobs, healthy)
- status_nocheck: the same SELECT and template without the staleness column
- status_reap: the reaping UPDATE on every poll, then the real poll
- status_ja: the product's poll again, from the same users' sessions switched to Japanese
- status_rendered: the product's poll without If-None-Match: every poll rendered
- status_nometrics: the product's poll with its latency histogram's observe a no-op
  (bench/benchapp.py): row 1f, what the histogram costs

The status endpoints but status_rendered ask as a browser that kept the fragment asks (Chromium,
tests/test_browser.py): with If-None-Match and the ETag of the fragment it got before the
measurement, so a fragment unchanged since comes back 304 without rendering (a job whose
fragment changed would get 200s: the figure can only be worse for it). wrk counts the 304s.

Ratios are taken per round (the two endpoints measured minutes apart at most) and the
median over rounds is reported.
"""

import requests

from . import wrk
from .common import USER_AGENT, Database, count_running, loaded, log
from .table import Row, check, compare, get, missing, num

ENDPOINTS = (
    "constant select1 status status_nocheck status_reap status_ja status_rendered status_nometrics"
).split()
REVALIDATED = ("status", "status_nocheck", "status_reap", "status_ja", "status_nometrics")
RATIOS = (
    "status/constant status/select1 status/status_nocheck status_reap/status status_ja/status"
    " status_rendered/constant status_rendered/select1 status/status_nometrics"
).split()


def paths(user) -> dict[str, str]:
    """Each endpoint's path for user (status_ja and status_rendered ask the status fragment)."""
    status, job = user.status_path, user.job_id
    bench = {"constant": "/bench/constant", "select1": "/bench/select1"}
    bench |= {"status_nocheck": f"/bench/status-nocheck/{job}"}
    bench |= {"status_reap": f"/bench/status-reap-every-poll/{job}"}
    bench |= {"status_nometrics": f"/bench/status-nometrics/{job}"}
    return {ep: bench.get(ep, status) for ep in ENDPOINTS}


def ask(url: str, path: str, cookie: str) -> requests.Response:
    """GET path as the browser whose cookie it is (outside a requests.Session's own jar)."""
    headers = {"HX-Request": "true", "Cookie": cookie, "User-Agent": USER_AGENT}
    return requests.get(url + path, headers=headers, timeout=10)


def with_etags(url: str, lines: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """Each (path, cookie) with the ETag its answer carries now, as a browser keeps it."""
    return [
        (path, cookie, ask(url, path, cookie).headers.get("ETag", "")) for path, cookie in lines
    ]


def run(
    db: Database,
    rounds: int = 3,
    duration: float = 6.0,
    warmup: float = 2,
    connections: int = 16,
    n_users: int = 32,
    threads: str = "8",
) -> dict:
    wrk.require()
    with loaded(db, "poll_closed", n_users, "closed", GUNICORN_THREADS=threads) as (server, users):
        japanese = {u.email: u.session_in("ja") for u in users}

        def cookie(ep: str, user) -> str:
            return japanese[user.email] if ep == "status_ja" else user.cookie

        lines = {ep: [(paths(u)[ep], cookie(ep, u)) for u in users] for ep in ENDPOINTS}
        skipped = {}
        for ep in ENDPOINTS:  # every endpoint answers 200 before it is measured
            r = ask(server.url, *lines[ep][0])
            if ep == "status_ja" and "ポイント" not in r.text:
                raise RuntimeError(f"status_ja did not answer in Japanese: {r.text[:300]}")
            if r.status_code != 200:
                if ep in ("constant", "select1", "status", "status_nometrics"):
                    raise RuntimeError(f"{ep}: {r.status_code} {r.text[:200]}")
                skipped[ep] = f"answered {r.status_code}; see {server.log_path}"
                log(f"poll_closed: {ep} skipped: {skipped[ep]}")
        measured = {ep: lines[ep] for ep in ENDPOINTS if ep not in skipped}
        for ep in REVALIDATED:
            if ep in measured:
                measured[ep] = with_etags(server.url, measured[ep])
        log(f"poll_closed: warm-up {warmup:g} s per endpoint")
        endpoints = wrk.rounds(
            server.url, measured, rounds, duration, warmup, connections, "poll_closed"
        )
        running_after = count_running(db, users)
        fragment_after = users[-1].status()
    out = {"rounds": rounds, "duration_s": duration, "connections": connections}
    out |= {"gunicorn_threads": int(threads), "users": n_users, "endpoints": endpoints}
    out |= {"skipped": skipped}
    out |= {"ratios": {name: wrk.ratio(endpoints, *name.split("/")) for name in RATIOS}}
    out |= {"jobs_running_after": running_after, "fragment_after": fragment_after}
    return out


NUMBER, NAME = "1", "poll path, closed loop"


# The poll against a baseline endpoint: (number, figure, endpoint, baseline, its label, floor).
AT_LEAST = (
    ("1a", "status fragment, closed loop (wrk), req/s", "status", "constant", "constant", 0.8),
    ("1b", "status fragment vs `SELECT 1`, req/s", "status", "select1", "SELECT 1", 1.3),
    ("1e", "status fragment from Japanese sessions vs English ones, req/s", "status_ja",
     "status", "English", 0.95),
    ("1f", "status fragment with its latency histogram vs without, req/s", "status",
     "status_nometrics", "no histogram", 0.95),
)  # fmt: skip


def summary(r: dict) -> list[Row]:
    """Rows 1a-1f: the poll's req/s against each baseline endpoint, as per-round ratios."""
    rps = {ep: get(e, "rps_median") for ep, e in r.get("endpoints", {}).items()}
    ratio = {name: get(v, "median") for name, v in r.get("ratios", {}).items()}
    nc = ratio.get("status/status_nocheck")
    rows = [
        compare(number, figure, rps.get(ep), rps.get(base), label, 0,
                ratio=ratio.get(f"{ep}/{base}"), target=f">= {floor}x",
                ok=check(ratio.get(f"{ep}/{base}"), lambda v, floor=floor: v >= floor))
        for number, figure, ep, base, label, floor in AT_LEAST
    ]  # fmt: skip
    return rows + [
        Row("1c", "reaper check on a healthy poll: throughput cost over HTTP (noisy)",
            num(None if missing(nc) else 100 * (1 - nc), 1, " %"),
            f"no check {num(rps.get('status_nocheck'), 0)} req/s", num(nc, 2, "x"), "<= 3 %"),
        Row("1d", "reaping UPDATE on every poll instead (for comparison)",
            f"{num(rps.get('status_reap'), 0)} req/s", f"status {num(rps.get('status'), 0)}",
            num(ratio.get("status_reap/status"), 2, "x"), "(design avoids it)"),
    ]  # fmt: skip


def details(r: dict) -> list[str]:
    """Section 1: every endpoint's rounds and every ratio's."""
    return [
        "## 1. Poll path, closed loop",
        "",
        f"One gunicorn gthread worker ({r['gunicorn_threads']} threads, the project's"
        " `gunicorn.conf.py`, no access log), 32 users with one running job each."
        f" wrk, {r['connections']} connections, {r['rounds']} rounds of"
        f" {r['duration_s']:g} s per endpoint (order rotating), cycling through the 32"
        " users' cookies. Medians over rounds; ratios are per round, then the median.",
        "",
        *wrk.endpoints_table(r["endpoints"]),
        "",
        *wrk.ratios_table(r["ratios"]),
        "",
        f"Jobs still running after the measurement: {r.get('jobs_running_after')} of"
        f" {r.get('users')}; last fragment: {r.get('fragment_after')}.",
        "",
    ]
