"""Recovery: how soon the page tells the truth after the worker dies or is stopped.

SIGKILL: a user's job is running and charged; the worker is killed at a random point
of the heartbeat cycle; the browser keeps polling every POLL_INTERVAL_SECONDS from the
moment of the kill. Measured: the time from the kill until a poll answers the settled,
truthful fragment (data-billing="refunded", no hx-trigger). gunicorn's master forks a
new worker by itself; the reaper is the poll. Target: <= JOB_LEASE_SECONDS + one poll
interval.

SIGTERM: N jobs run; the master gets SIGTERM. Measured: signal -> master exit, and
whether every job was failed, refunded and finalized in the database before the exit
(finalized_at on the database clock against the client's clock at exit, same machine).
Target: < 1 s, settled before exit.
"""

import os
import random
import signal
import time

import requests

from .common import Database, Server, Tab, User, loaded, log, median, wait_until
from .table import Row, check, compare, div, get, num, table

LEASE = 3.0
HEARTBEAT = 1.0
POLL = 0.5
# A short lease, heartbeat and poll (bench/outage.py's too): a dead worker's job is reaped soon.
SHORT = {
    "JOB_LEASE_SECONDS": str(LEASE),
    "JOB_HEARTBEAT_SECONDS": str(HEARTBEAT),
    "POLL_INTERVAL_SECONDS": str(POLL),
}


def kill_trials(db: Database, trials: int) -> list[dict]:
    out = []
    with loaded(db, "recovery-kill", 0, **SHORT) as (server, _):
        for i in range(trials):
            user = User(server, f"kill{i}@bench.example").signup()
            r = user.submit()
            if r.status_code != 303:
                raise RuntimeError(f"submit: {r.status_code} {r.text[:200]}")
            wait_until(lambda u=user: u.status()[:2] == ("running", "charged"), 20, "a charged job")
            time.sleep(random.uniform(0, HEARTBEAT))  # any point of the heartbeat cycle
            pid = server.worker_pid()
            beat_age = db.scalar(
                "SELECT extract(epoch FROM clock_timestamp() - heartbeat_at)::float"
                " FROM assessment_jobs WHERE id = %s",
                (user.job_id,),
            )
            os.kill(pid, signal.SIGKILL)
            tab = Tab(user, time.monotonic(), POLL, 30)
            tab.run()  # in this thread: polls from the kill until the page settles
            new_pid = server.worker_pid()
            ledger = db.rows(
                "SELECT (SELECT count(*) FROM point_ledger"
                "   WHERE job_id = %(j)s AND kind = 'consume'),"
                " (SELECT count(*) FROM point_ledger r JOIN point_ledger c ON r.refund_of = c.id"
                "   WHERE c.job_id = %(j)s AND r.kind = 'refund'),"
                " (SELECT point_balance FROM users u JOIN assessment_jobs j ON j.user_id = u.id"
                "   WHERE j.id = %(j)s)",
                {"j": user.job_id},
            )[0]
            final = tab.timeline[-1] if tab.timeline else None
            refunded = bool(final and len(final) == 4 and final[2] == "refunded")
            trial = {"seconds_to_settled": tab.settled_at, "heartbeat_age_at_kill_s": beat_age}
            trial |= {"seconds_to_first_answer": tab.first_answer, "final": final}
            trial |= {"truthful": refunded and ledger[0] == 1 and ledger[1] == 1}
            trial |= {"consumes": ledger[0], "refunds": ledger[1], "balance_after": ledger[2]}
            out.append(trial | {"new_worker": new_pid != pid, "timeline": tab.timeline})
            log(f"recovery kill {i + 1}/{trials}: settled after {tab.settled_at} s")
    return out


def _sigterm(server: Server) -> tuple[float | None, float]:
    """SIGTERM the master; return seconds until the worker, then the master, exited (30 s cap)."""
    worker = server.worker_pid()
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    worker_exit_s = None
    while server.proc.poll() is None and time.monotonic() - t0 < 30:
        if worker_exit_s is None and not _alive(worker):
            worker_exit_s = time.monotonic() - t0
        time.sleep(0.002)
    return worker_exit_s, time.monotonic() - t0


def _alive(pid: int) -> bool:
    """True while pid runs (a zombie, exited but not yet reaped by its master, is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def term_trial(db: Database, n_jobs: int, tag: str) -> dict:
    with loaded(db, f"recovery-term-{tag}", n_jobs, f"term{tag}-", **SHORT) as (server, users):
        ids = [str(u.job_id) for u in users]
        t_wall = time.time()
        worker_exit_s, exit_s = _sigterm(server)
        server.proc.wait(30)
        exit_wall = t_wall + exit_s
    rows = db.rows(
        "SELECT j.status, j.finalized_at IS NOT NULL, extract(epoch FROM j.finalized_at),"
        " EXISTS (SELECT 1 FROM point_ledger r JOIN point_ledger c ON r.refund_of = c.id"
        "   WHERE c.job_id = j.id AND r.kind = 'refund')"
        " FROM assessment_jobs j WHERE j.id = ANY(%s::uuid[])",
        (ids,),
    )
    settled = [r for r in rows if r[0] == "failed" and r[1] and r[3]]
    last_final = max((float(r[2]) for r in rows if r[2] is not None), default=float("nan"))
    out = {"jobs": n_jobs, "seconds_to_worker_exit": worker_exit_s}
    out |= {"seconds_to_master_exit": exit_s, "jobs_settled": len(settled)}
    out |= {"last_finalized_after_signal_s": last_final - t_wall}
    out |= {"settled_before_exit": len(settled) == n_jobs and last_final <= exit_wall}
    return out


def term_bare() -> dict:
    """Baseline: SIGTERM to a bare Flask app's gunicorn while a client holds a keep-alive."""
    gunicorn = ("-w", "1", "-k", "gthread", "--threads", "8", "--no-control-socket")
    server = Server(None, "recovery-term-bare", "bench.bareapp:app", False, gunicorn)
    server.start()
    try:
        client = requests.Session()
        client.get(server.url + "/healthz", timeout=5)  # a browser's kept-alive connection
        worker_exit_s, exit_s = _sigterm(server)
        client.close()
    finally:
        server.stop(signal.SIGKILL)
    return {"seconds_to_worker_exit": worker_exit_s, "seconds_to_master_exit": exit_s}


def run(db: Database, kills: int = 5, term_sizes: tuple[int, ...] = (1, 8, 32)) -> dict:
    db.truncate()
    log(f"recovery: {kills} SIGKILL trials (lease {LEASE:g} s, poll {POLL:g} s)")
    killed = kill_trials(db, kills)
    terms = []
    for n in term_sizes:
        log(f"recovery: SIGTERM with {n} running job(s)")
        terms.append(term_trial(db, n, str(n)))
    log("recovery: SIGTERM to a bare Flask app (baseline)")
    bare = term_bare()
    times = [k["seconds_to_settled"] for k in killed if k["seconds_to_settled"] is not None]
    kill = {"trials": killed, "median_s": median(times), "max_s": max(times, default=float("nan"))}
    kill |= {"all_truthful": all(k["truthful"] for k in killed)}
    kill |= {"all_settled": len(times) == len(killed)}
    out = {"lease_s": LEASE, "heartbeat_s": HEARTBEAT, "poll_s": POLL, "kill": kill}
    return out | {"term": terms, "term_bare_flask": bare}


NUMBER, NAME = "3", "recovery"


def summary(r: dict) -> list[Row]:
    """Rows 3a-3c: SIGKILL -> the page refunded within lease + a poll; SIGTERM -> settled."""
    bound, kill = r["lease_s"] + r["poll_s"], r.get("kill", {})
    worst = kill.get("max_s")
    rows = [
        Row("3a", f"SIGKILL mid-job -> poll shows refunded (max of {len(kill.get('trials', []))})",
            f"{num(worst, 2, ' s')} (median {num(kill.get('median_s'), 2, ' s')})",
            f"lease + poll = {num(bound, 1, ' s')}", num(div(worst, bound), 2, "x"),
            "<= lease + 1 poll, truthful",
            check(worst, lambda v: v <= bound and kill.get("all_truthful")))
    ]  # fmt: skip
    # The figure is the time until the jobs are settled (as for SIGKILL); the process's
    # own exit is shown beside the bare Flask app's.
    for t in r.get("term", []):
        settled_s, exit_s = t.get("last_finalized_after_signal_s"), t.get("seconds_to_master_exit")
        everyone = t["settled_before_exit"] and t["jobs_settled"] == t["jobs"]
        rows.append(Row(
            "3b", f"SIGTERM with {t['jobs']} running job(s) -> every job settled",
            f"{num(settled_s, 2, ' s')} ({t['jobs_settled']}/{t['jobs']});"
            f" before exit: {t['settled_before_exit']}",
            f"master exit {num(exit_s, 2, ' s')}", num(div(settled_s, exit_s), 2, "x"),
            "< 1 s, settled before exit",
            check(settled_s, lambda v, everyone=everyone: v < 1 and everyone),
        ))  # fmt: skip
    for t in r.get("term", [])[-1:]:
        rows.append(compare(
            "3c", f"SIGTERM with {t['jobs']} running job(s) -> master exit",
            t.get("seconds_to_master_exit"), get(r, "term_bare_flask", "seconds_to_master_exit"),
            "bare Flask", 2, " s", target="(gunicorn keeps kept-alive connections 2 s)",
        ))  # fmt: skip
    return rows


KILLED = ("SIGKILL trial", "to settled", "last heartbeat before the kill", "first answer",
          "final fragment", "ledger (consumes/refunds)", "truthful")  # fmt: skip
TERMED = ("SIGTERM", "worker exit", "master exit", "jobs settled", "last finalized_at",
          "settled before exit")  # fmt: skip


def details(r: dict) -> list[str]:
    """Section 3: every SIGKILL trial, every SIGTERM and the bare Flask app's."""
    b = r.get("term_bare_flask", {})

    def s(value) -> str:
        return num(value, 2, " s")

    kills = (
        (i, s(t["seconds_to_settled"]), s(t.get("heartbeat_age_at_kill_s")),
         s(t["seconds_to_first_answer"]), t["final"], f"{t['consumes']}/{t['refunds']}",
         t["truthful"])
        for i, t in enumerate(r["kill"]["trials"], 1)
    )  # fmt: skip
    terms = [
        *((f"{t['jobs']} job(s)", s(t["seconds_to_worker_exit"]), s(t["seconds_to_master_exit"]),
           t["jobs_settled"], s(t["last_finalized_after_signal_s"]), t["settled_before_exit"])
          for t in r["term"]),
        ("bare Flask (baseline)", s(b.get("seconds_to_worker_exit")),
         s(b.get("seconds_to_master_exit")), "-", "-", "-"),
    ]  # fmt: skip
    return [
        "## 3. Recovery",
        "",
        f"JOB_LEASE_SECONDS={r['lease_s']:g}, JOB_HEARTBEAT_SECONDS={r['heartbeat_s']:g},"
        f" polls every {r['poll_s']:g} s from the kill (a poll that fails, e.g. on the"
        " dead worker's kept-alive connection, is not retried before the next one).",
        "",
        *table(KILLED, kills),
        "",
        *table(TERMED, terms),
        "",
        "Every SIGTERM trial holds kept-alive client connections (the polling browsers'),"
        " as a real deploy does.",
        "",
    ]
