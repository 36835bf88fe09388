"""make chaos: a cluster killed over and over under paid work, and the books checked after.

Users submit, poll and submit again without a pause on the cluster of `chaos_cluster.py`
(two web instances, two queue workers) while its killer SIGKILLs a random process at a
random moment or lets one kill itself at a failpoint. Each settled page is checked
against the ledger when it is read. At the end, with the killing stopped and every job
left to settle, the whole database: every job settled, charged once if it succeeded,
refunded exactly when charged if it failed, every balance the signup grant less the jobs
that succeeded, every queue task ended with its job's outcome, no incident,
`flask ledger-check` clean. The run stops at --kills kills or after --minutes, whichever
comes first, and writes bench/CHAOS.md. Loopback only; every loop is bounded.

    .venv/bin/python -m bench.chaos --kills 1000 --minutes 40    # make chaos
"""

import argparse
import collections
import datetime
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

from .chaos_cluster import HEARTBEAT, LEASE, POLL, SIGNUP_POINTS, SWEEP, WORK, Cluster
from .common import BIN, LOGS, ROOT, Database, User, log, parse_fragment, raise_fd_limit

# A failed job is settled within a lease of its last sign of life, plus a poll, a sweep
# interval and a process start: the same bound the cluster tests hold.
SETTLE_BOUND = LEASE + POLL + SWEEP + 3
SETTLE_TIMEOUT = 120.0  # a page that has not settled by then is a violation
QUIET_TIMEOUT = 60.0  # after the killing: every job and task ended by then


class Target:
    """Where a user's next request goes (bench's User reads .url)."""

    def __init__(self, url: str):
        self.url = url


class Chaos:
    """The users, the checks and the report around a Cluster."""

    def __init__(self, db: Database, kills: int, minutes: float, users: int, seed: int):
        self.db = db
        self.kills_wanted = kills
        self.minutes = minutes
        self.n_users = users
        self.seed = seed
        self.logs = LOGS / f"chaos-{os.getpid()}"
        self.cluster = Cluster(db.url, self.logs, seed, self.violation)
        self.route = random.Random()  # which instance a request goes to
        self.stopping = threading.Event()
        self.violations: list[str] = []
        self.pages: collections.Counter[tuple[str, str]] = collections.Counter()
        self.served: collections.Counter[int] = collections.Counter()
        self.lock = threading.Lock()

    def violation(self, what: str) -> None:
        """Record a broken promise (and log it as it happens)."""
        log(f"VIOLATION: {what}")
        with self.lock:
            self.violations.append(what)

    # -- the users ----------------------------------------------------------------------

    def web(self) -> str:
        """The address of a web instance that answers now, waiting up to a minute for one."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if urls := self.cluster.urls():
                return self.route.choice(urls)
            time.sleep(0.05)
        raise RuntimeError("no web instance came back within 60 s")

    def serve(self, user: User, user_id: int) -> None:
        """Submit and poll to the end, again and again, until the run stops."""
        try:
            while not self.stopping.is_set():
                job_id = self.submit(user, user_id)
                if job_id is not None:
                    self.settle(user, job_id)
                    with self.lock:
                        self.served[user_id] += 1
        except Exception as exc:  # noqa: BLE001 - a user who gives up is a finding
            self.violation(f"user {user_id} stopped: {type(exc).__name__}: {exc}")

    def submit(self, user: User, user_id: int) -> str | None:
        """Start a job for the user, whatever dies meanwhile; its id, or None at the end."""
        since = self.db.scalar("SELECT now()")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.stopping.is_set():
            user.server.url = self.web()
            try:
                r = user.submit()
            except (requests.RequestException, AttributeError):
                r = None  # the process died: its transaction committed or it did not
            if r is not None and r.status_code == 303:
                return r.headers["Location"].rstrip("/").rsplit("/", 1)[-1]
            if r is None or r.status_code == 409:
                found = self.db.scalar(
                    "SELECT id::text FROM assessment_jobs WHERE user_id = %s AND created_at >= %s"
                    " ORDER BY created_at DESC LIMIT 1",
                    (user_id, since),
                )
                if found:
                    return found
                if r is not None:
                    self.violation(f"user {user_id}: 409 with no job of theirs in flight")
                    return None
            elif r.status_code != 503:  # 503: admission or a drain; try again
                self.violation(f"user {user_id}: submit answered {r.status_code}")
                return None
            time.sleep(0.1)
        if not self.stopping.is_set():
            self.violation(f"user {user_id}: no submit went through in 60 s")
        return None

    def settle(self, user: User, job_id: str) -> None:
        """Poll the job's fragment on any instance until it settles; check what it says."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while time.monotonic() < deadline:
            try:
                html = user.http.get(
                    f"{self.web()}/assessments/{job_id}/status",
                    headers={"HX-Request": "true"},
                    timeout=10,
                ).text
                status, billing, settled = parse_fragment(html)
            except (requests.RequestException, AttributeError):
                time.sleep(POLL)  # a dying worker, or an error page mid-restart
                continue
            if settled:
                self.check_page(job_id, status, billing, html)
                return
            time.sleep(POLL)
        self.violation(f"job {job_id} never settled on its page within {SETTLE_TIMEOUT:.0f} s")

    def check_page(self, job_id: str, status: str, billing: str, html: str) -> None:
        """Check that a settled page says what the ledger says when it is read."""
        consumes, refunds = self.db.rows(
            "SELECT count(*) FILTER (WHERE kind = 'consume'),"
            " count(*) FILTER (WHERE kind = 'refund')"
            " FROM point_ledger WHERE job_id = %s",
            (job_id,),
        )[0]
        expected = {
            ("succeeded", 1, 0): ("charged", None),
            ("failed", 1, 1): ("refunded", "Your point was refunded."),
            ("failed", 0, 0): ("not_charged", "No point was used."),
        }.get((status, consumes, refunds))
        with self.lock:
            self.pages[(status, billing)] += 1
        if expected is None:
            self.violation(f"job {job_id}: {status} with {consumes} consumes, {refunds} refunds")
        elif billing != expected[0] or (expected[1] and expected[1] not in html):
            self.violation(f"job {job_id}: the page says {billing}, the ledger {expected[0]}")

    # -- the run ------------------------------------------------------------------------

    def run(self) -> dict:
        """Start the cluster and the users, kill until done, calm down, check; the figures."""
        shutil.rmtree(self.logs, ignore_errors=True)
        try:
            return self._run()
        finally:
            self.stopping.set()
            self.cluster.stop()

    def _run(self) -> dict:
        started = time.monotonic()
        self.cluster.start()
        users = []
        for n in range(self.n_users):
            user = User(Target(self.web()), f"chaos{n}@bench.example").signup()
            user_id = self.db.scalar("SELECT id FROM users WHERE email = %s", (user.email,))
            users.append(threading.Thread(target=self.serve, args=(user, user_id), daemon=True))
        for thread in users:
            thread.start()
        log(f"cluster up in {time.monotonic() - started:.1f} s; killing")
        chaos_started = time.monotonic()
        deadline = chaos_started + self.minutes * 60
        last_report = last_count = 0.0
        total = 0
        while time.monotonic() < deadline:
            if time.monotonic() - last_count > 2:  # the failpoints' kills are read from logs
                total, last_count = self.cluster.total_kills(), time.monotonic()
            if total >= self.kills_wanted:
                break
            if time.monotonic() - last_report > 30:
                log(
                    f"{total} kills, {sum(self.pages.values())} pages checked,"
                    f" {len(self.violations)} violations"
                )
                last_report = time.monotonic()
            self.cluster.kill_one()
            time.sleep(self.cluster.rng.uniform(0.05, 0.5))
        chaos_seconds = time.monotonic() - chaos_started
        stopped_at = self.db.scalar("SELECT now()")
        log("killing stopped; letting every job settle")
        self.stopping.set()
        for thread in users:
            thread.join(SETTLE_TIMEOUT + 70)
        self.cluster.calm()
        settled_in = self.wait_quiet()
        return self.report(chaos_seconds, stopped_at, settled_in)

    def wait_quiet(self) -> float | None:
        """Wait until every job is settled and every queue task ended; how long it took."""
        started = time.monotonic()
        while time.monotonic() - started < QUIET_TIMEOUT:
            left = self.db.scalar(
                "SELECT (SELECT count(*) FROM assessment_jobs WHERE status IN"
                " ('pending', 'running') OR (status = 'failed' AND finalized_at IS NULL))"
                " + (SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing'))"
            )
            if left == 0:
                return time.monotonic() - started
            for url in self.cluster.urls():  # a request to an instance sweeps for nobody
                try:
                    requests.get(url + "/login", timeout=5)
                except requests.RequestException:
                    pass
            time.sleep(POLL)
        self.violation(f"{left} jobs or tasks not ended {QUIET_TIMEOUT:.0f} s after the killing")
        return None

    def books(self) -> list[str]:
        """Check every job, task and balance against the ledger once all is quiet."""
        wrong = []
        for job_id, status, finalized, consumes, refunds in self.db.rows(
            "SELECT j.id, j.status, j.finalized_at IS NOT NULL,"
            " count(l.id) FILTER (WHERE l.kind = 'consume'),"
            " count(l.id) FILTER (WHERE l.kind = 'refund')"
            " FROM assessment_jobs j LEFT JOIN point_ledger l ON l.job_id = j.id GROUP BY j.id"
        ):
            fine = (status, consumes, refunds) == ("succeeded", 1, 0) or (
                status == "failed" and finalized and consumes == refunds <= 1
            )
            if not fine:
                wrong.append(f"job {job_id}: {status}, {consumes} consumes, {refunds} refunds")
        # One task per job, ended; a job that succeeded, a task that did. (A task of a job
        # settled before it ran does nothing and succeeds: no second outcome to compare.)
        for job_id, job, tasks in self.db.rows(
            "SELECT j.id, j.status, array_agg(q.status::text) FILTER (WHERE q.id IS NOT NULL)"
            " FROM assessment_jobs j"
            " LEFT JOIN procrastinate_jobs q ON (q.args->>'job_id')::uuid = j.id GROUP BY j.id"
        ):
            if tasks is None or len(tasks) != 1 or (job == "succeeded" and tasks != ["succeeded"]):
                wrong.append(f"job {job_id} {job}, its queue tasks {tasks}")
        for email, balance, succeeded in self.db.rows(
            "SELECT u.email, u.point_balance, count(j.id) FILTER (WHERE j.status = 'succeeded')"
            " FROM users u LEFT JOIN assessment_jobs j ON j.user_id = u.id GROUP BY u.id"
        ):
            if balance != SIGNUP_POINTS - succeeded:
                wrong.append(f"{email}: balance {balance}, {succeeded} jobs succeeded")
        if incidents := self.db.scalar("SELECT count(*) FROM incidents"):
            wrong.append(f"{incidents} incidents opened")
        idle = [u for u in self.db.rows("SELECT id FROM users") if self.served[u[0]] == 0]
        if idle:
            wrong.append(f"{len(idle)} users never had a page checked")
        check = subprocess.run(
            [str(BIN / "flask"), "--app", "wsgi", "ledger-check"],
            env={**os.environ, "DATABASE_URL": self.db.url, "SECRET_KEY": "x"},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check.returncode != 0:
            wrong.append(f"ledger-check: {check.stdout.strip()} {check.stderr.strip()[-300:]}")
        return wrong + self.cluster.log_faults()

    def report(self, chaos_seconds: float, stopped_at, settled_in: float | None) -> dict:
        """Check the books and gather the figures for CHAOS.md."""
        for what in self.books():
            self.violation(what)
        failpoints = self.cluster.failpoint_kills()
        outcomes = self.db.rows(
            "SELECT status, coalesce(error_code, ''), count(*) FROM assessment_jobs"
            " GROUP BY 1, 2 ORDER BY 3 DESC"
        )
        # From a failed job's last sign of life to its settling, for jobs that failed while
        # the killing went on (after it, the instances restarting is no kill of a job).
        settles = sorted(
            float(row[0])
            for row in self.db.rows(
                "SELECT extract(epoch FROM"
                " finalized_at - coalesce(heartbeat_at, started_at, created_at))"
                " FROM assessment_jobs WHERE status = 'failed' AND finished_at < %s",
                (stopped_at,),
            )
        )
        if over := sum(1 for s in settles if s > SETTLE_BOUND):
            self.violation(f"{over} failed jobs settled later than {SETTLE_BOUND} s")
        return {
            "seed": self.seed,
            "minutes": round(chaos_seconds / 60, 1),
            "kills": sum(self.cluster.kills.values()) + sum(failpoints.values()),
            "kills_wanted": self.kills_wanted,
            "kills_by_target": dict(self.cluster.kills.most_common()),
            "kills_by_failpoint": dict(failpoints.most_common()),
            "jobs": sum(n for *_, n in outcomes),
            "outcomes": [list(r) for r in outcomes],
            "pages_checked": sum(self.pages.values()),
            "pages": {f"{s}/{b}": n for (s, b), n in self.pages.most_common()},
            "failed_jobs": len(settles),
            "slowest_settle_s": round(settles[-1], 2) if settles else None,
            "settle_p99_s": round(settles[int(len(settles) * 0.99) - 1], 2)
            if len(settles) >= 100
            else None,
            "settle_bound_s": SETTLE_BOUND,
            "settled_after_stop_s": None if settled_in is None else round(settled_in, 2),
            "tracebacks_in_logs": self.cluster.tracebacks(),
            "violations": self.violations,
        }


def write_markdown(out: dict, path: Path) -> None:
    """Write the figures of one run as bench/CHAOS.md."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    settle = f"{out['slowest_settle_s']} s (bound {out['settle_bound_s']} s)"
    lines = [
        "# Chaos: kills under paid work",
        "",
        f"Written by `make chaos` (`python -m bench.chaos`) on {datetime.date.today()} at"
        f" {commit}. Two web instances and two queue workers on one database; lease {LEASE} s,"
        f" heartbeat {HEARTBEAT} s, poll {POLL} s, sweep {SWEEP} s, jobs of {WORK} s. The seed"
        f" ({out['seed']}) fixes the kill schedule's choices, not its timing: no two runs are"
        " the same.",
        "",
        "| what | figure |",
        "|---|---|",
        f"| kills | {out['kills']} of {out['kills_wanted']} wanted, in {out['minutes']} min |",
        f"| trials: jobs run under the kills | {out['jobs']} |",
        f"| settled pages checked against the ledger | {out['pages_checked']} |",
        f"| failed jobs (refunded or never charged) | {out['failed_jobs']} |",
        f"| slowest settle after a failed job's last sign of life | {settle} |",
        f"| 99th percentile of those | {out['settle_p99_s']} s |",
        f"| every job and task ended after the killing stopped, in | "
        f"{out['settled_after_stop_s']} s |",
        f"| tracebacks in the processes' logs (read them; not a verdict) | "
        f"{out['tracebacks_in_logs']} |",
        f"| **invariant violations** | **{len(out['violations'])}** |",
        "",
        "Kills by target (SIGKILL from the harness):",
        "",
        *[f"- {k}: {n}" for k, n in out["kills_by_target"].items()],
        "",
        "Kills by failpoint (the process SIGKILLed itself at that step):",
        "",
        *[f"- {k}: {n}" for k, n in out["kills_by_failpoint"].items()],
        "",
        "Jobs by outcome (status, error code, count):",
        "",
        *[f"- {s} {c or '-'}: {n}" for s, c, n in out["outcomes"]],
        "",
        "Pages as the users read them (status/billing):",
        "",
        *[f"- {k}: {n}" for k, n in out["pages"].items()],
        "",
    ]
    if out["violations"]:
        shown = out["violations"][:50]
        lines += ["Violations (the first 50):", "", *[f"- {v}" for v in shown], ""]
    path.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=40.0)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--seed", type=int, default=random.SystemRandom().randrange(10**6))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "CHAOS.md")
    args = parser.parse_args()
    raise_fd_limit()
    db = Database()
    try:
        chaos = Chaos(db, args.kills, args.minutes, args.users, args.seed)
        out = chaos.run()
    finally:
        db.close()
    write_markdown(out, args.out)
    print(json.dumps(out, indent=2))
    log(f"{out['kills']} kills, {len(out['violations'])} violations; wrote {args.out}")
    if not out["violations"]:
        shutil.rmtree(chaos.logs, ignore_errors=True)
    sys.exit(1 if out["violations"] or out["kills"] < args.kills else 0)


if __name__ == "__main__":
    main()
