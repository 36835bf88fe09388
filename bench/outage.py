"""Outage: how soon every watched page tells the truth after the database comes back.

The server reaches PostgreSQL through tests/dbproxy.py, a TCP proxy that refuses and
cuts connections on demand. N jobs run and are charged; a browser per job polls its
status fragment every POLL_INTERVAL_SECONDS on a fixed timetable, through the outage.

Long outage (lease + 2 s): measured, the time from the database's return until every
page has answered its settled, truthful fragment (failed, refunded). The leases ran
out during the outage, so the first poll after the return reaps and settles. Target:
within one poll interval of the return; every job charged once and refunded once.

Blip (half a lease): the jobs finish their work and are charged exactly once. Measured:
how many succeeded, and the time from the return until every page settled.

Both: what the polls got during the outage (503 pages, never a 500) and what the log
said (lines, tracebacks, bytes).
"""

import re
import threading
import time

from tests.dbproxy import DbProxy

from .common import Database, Tab, loaded, log
from .recovery import HEARTBEAT, LEASE, POLL, SHORT
from .table import Row, check, div, num, table


def trial(db: Database, n_jobs: int, down_s: float, work_s: float, tag: str) -> dict:
    """The database gone for down_s under n_jobs jobs, a browser tab polling each."""
    proxy = DbProxy.to(db.url).start()
    env = {**SHORT, "ASSESSMENT_WORK_SECONDS": str(work_s)}
    name, url = f"outage-{tag}", proxy.url(db.url)
    try:
        with loaded(db, name, n_jobs, tag, url=url, **env) as (server, users):
            log_before = server.log_path.stat().st_size
            stop, t0 = threading.Event(), time.monotonic()
            tabs = [Tab(u, t0, POLL, 60, stop) for u in users]
            for tab in tabs:
                tab.start()
            proxy.down()
            time.sleep(down_s)  # the outage itself
            back = time.monotonic() - t0
            proxy.up()
            for tab in tabs:
                tab.join(60)
            stop.set()
            time.sleep(0.5)  # let the last log lines land
            tail = server.log_path.read_bytes()[log_before:].decode(errors="replace")
    finally:
        proxy.close()
    rows = db.rows(
        "SELECT j.status,"
        " (SELECT count(*) FROM point_ledger c WHERE c.job_id = j.id AND c.kind = 'consume'),"
        " (SELECT count(*) FROM point_ledger r JOIN point_ledger c ON r.refund_of = c.id"
        "   WHERE c.job_id = j.id AND r.kind = 'refund')"
        " FROM assessment_jobs j WHERE j.id = ANY(%s::uuid[])",
        ([str(u.job_id) for u in users],),
    )
    after = [t.settled_at - back for t in tabs if t.settled_at is not None]
    during = [code for t in tabs for at, code in t.answers if at < back]
    # Polls sent after the return until the page settled: 1 is the first poll.
    polls_after = [sum(1 for at in t.sent if at >= back) for t in tabs]

    def once(status: str, ledger: tuple[int, int]) -> int:
        return sum(1 for s, c, r in rows if s == status and (c, r) == ledger)

    out = {"jobs": n_jobs, "down_s": down_s, "work_s": work_s, "settled": len(after)}
    out |= {"max_s_after_return": max(after, default=None)}
    out |= {"median_s_after_return": sorted(after)[len(after) // 2] if after else None}
    out |= {"max_polls_after_return": max(polls_after, default=None)}
    out |= {"succeeded_charged_once": once("succeeded", (1, 0))}
    out |= {"failed_refunded_once": once("failed", (1, 1))}
    out |= {"double": sum(1 for _, c, r in rows if c > 1 or r > 1), "polls_during": len(during)}
    out |= {"polls_during_503": during.count(503), "polls_during_500": during.count(500)}
    out |= {"log_lines": tail.count("\n"), "log_bytes": len(tail)}
    out |= {"log_tracebacks": len(re.findall(r"^\S.*\nTraceback", tail, re.M))}
    out |= {"log_outage_lines": tail.count("database unreachable") + tail.count("reachable again")}
    return out


def run(db: Database, jobs: int = 32) -> dict:
    log(f"outage: {jobs} jobs, database gone for lease + 2 s (lease {LEASE:g} s, poll {POLL:g} s)")
    long = trial(db, jobs, LEASE + 2, 3600, "outage-long")
    log(f"outage: settled {long['max_s_after_return']} s after the return")
    log(f"outage: {jobs} jobs, database gone for half a lease")
    blip = trial(db, jobs, LEASE / 2, 4, "outage-blip")
    log(f"outage blip: {blip['succeeded_charged_once']}/{jobs} succeeded and charged once")
    return {"lease_s": LEASE, "heartbeat_s": HEARTBEAT, "poll_s": POLL, "long": long, "blip": blip}


NUMBER, NAME = "3d", "database outage"


def summary(r: dict) -> list[Row]:
    """Rows 3d-3f: pages refunded at the first poll after a long outage, a blip's jobs charged."""
    lo, bl = r["long"], r["blip"]
    return [
        Row("3d", f"database gone {lo['down_s']:g} s (> lease) under {lo['jobs']} running jobs"
            " -> every page refunded, after the return",
            f"{num(lo['max_s_after_return'], 2, ' s')} (poll #{lo['max_polls_after_return']})",
            f"poll interval {num(r['poll_s'], 1, ' s')}, lease {num(r['lease_s'], 1, ' s')}",
            num(div(lo["max_s_after_return"], r["lease_s"]), 2, "x lease"),
            "first poll after the return, refunded once",
            check(lo["max_polls_after_return"], lambda v: v == 1
                  and lo["failed_refunded_once"] == lo["jobs"] and not lo["double"])),
        Row("3e", f"database gone {bl['down_s']:g} s (< lease) under {bl['jobs']} running jobs"
            " -> jobs finished, charged once", f"{bl['succeeded_charged_once']}/{bl['jobs']}",
            f"refunded {bl['failed_refunded_once']}", "", "all, none twice",
            check(bl["succeeded_charged_once"], lambda v: v == bl["jobs"] and not bl["double"])),
        Row("3f", "polls during the outage: 503 / 500; log tracebacks",
            f"{lo['polls_during_503']} / {lo['polls_during_500']};"
            f" {lo['log_tracebacks']} traceback(s), {num(lo['log_bytes'] / 1024, 1, ' KiB')}",
            f"{lo['polls_during']} polls", "", "no 500, <= 1 traceback per error",
            check(lo["polls_during_500"], lambda v: v == 0 and lo["log_tracebacks"] <= 2)),
    ]  # fmt: skip


COLUMNS = ("outage", "jobs", "work", "settled", "max after return", "median", "poll #",
           "succeeded, charged once", "failed, refunded once", "double",
           "polls during: 503 / 500", "log: lines, tracebacks")  # fmt: skip


def details(r: dict) -> list[str]:
    """Section 3b: both outages, what the pages, the ledger and the log said."""
    rows = (
        (f"{t['down_s']:g} s", t["jobs"], f"{t['work_s']:g} s", t["settled"],
         num(t["max_s_after_return"], 2, " s"), num(t["median_s_after_return"], 2, " s"),
         t["max_polls_after_return"], t["succeeded_charged_once"], t["failed_refunded_once"],
         t["double"], f"{t['polls_during_503']} / {t['polls_during_500']}",
         f"{t['log_lines']}, {t['log_tracebacks']}")
        for t in (r["long"], r["blip"])
    )  # fmt: skip
    return [
        "## 3b. Database outage",
        "",
        "bench/outage.py: the server reaches PostgreSQL through tests/dbproxy.py, which"
        " refuses new connections and cuts open ones for the outage. A browser per job"
        f" polls every {r['poll_s']:g} s on a fixed timetable through it"
        f" (JOB_LEASE_SECONDS={r['lease_s']:g}, JOB_HEARTBEAT_SECONDS={r['heartbeat_s']:g}).",
        " Times are from the proxy's return to the settled answer; poll # counts the polls sent"
        " after the return, up to the one that settled the page (1: the first).",
        "",
        *table(COLUMNS, rows),
        "",
        "The blip's jobs settle when their remaining work is done, not at the return.",
        "",
    ]
