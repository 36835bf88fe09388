"""make chaos: a cluster killed, its database cut and crashed, and paid, and the books checked.

Users submit, poll and submit again without a pause on the cluster of `chaos_cluster.py`
(two web instances, two queue workers) while its killer SIGKILLs a random process at a
random moment or lets one kill itself at a failpoint. Every process reaches the run's own
PostgreSQL through tests/dbproxy.py, whose Outages cut, refuse or stall it, and now and
then restart the server in immediate mode. Meanwhile tests/stripestorm.py buys packs
through the checkout route and delivers Stripe's webhooks: re-delivered, raced, reordered,
forged. Each settled page is checked against the ledger when it is read. At the end, with
every fault stopped and every job left to settle, the whole database: every job settled
within the bound of its last sign of life or the database's return, charged once if it
succeeded, refunded exactly when charged if it failed; every paid session credited once,
a refunded one reversed once, and every refund the books cannot settle alone (a part, after
spending, failed, disputed) told to support; every balance its ledger, the signup grant less the
jobs that succeeded plus the packs kept; no forged event credited; no incident open but
those a refund or a dispute leaves support (tests/stripestorm.py);
every queue task ended with its job's outcome; `flask ledger-check` clean. A violation
names the job or session, the faults around it and its ledger rows. The run stops when
every target is met or after --minutes, and writes bench/CHAOS.md. Loopback only.

    .venv/bin/python -m bench.chaos --kills 1000 --minutes 40    # make chaos
"""

import argparse
import collections
import datetime
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import requests

from tests.dbproxy import DbProxy, Outages, Postgres
from tests.stripeplans import REFUND_KINDS
from tests.stripestorm import Storm
from tests.test_crash import ledger_check

from .chaos_cluster import HEARTBEAT, LEASE, POLL, SIGNUP_POINTS, SWEEP, WORK, Cluster
from .common import LOGS, ROOT, Database, User, log, parse_fragment, raise_fd_limit
from .table import table

# Storm buyers keep the modest signup grant, so a refund often comes after spending; the
# other users are granted this much at the start and never run out.
USER_GRANT = 100_000

# A failed job is settled within a lease of its last sign of life, plus a poll, a sweep
# interval and a process start: the same bound the cluster tests hold.
SETTLE_BOUND = LEASE + POLL + SWEEP + 3
SETTLE_TIMEOUT = 120.0  # a page that has not settled by then is a violation
QUIET_TIMEOUT = 60.0  # after the killing: every job and task ended by then


class Chaos:
    """The users, the faults, the checks and the report around a Cluster (close() after)."""

    def __init__(
        self,
        kills: int,
        minutes: float,
        users: int,
        seed: int,
        db_faults: int = 100,
        restarts: int = 5,
        deliveries: int = 2000,
        buyers: int = 3,
        timed: bool = True,
        refund_events: int | None = None,
    ):
        self.wanted = {"kills": kills, "database cuts or stalls": db_faults}
        self.wanted |= {"database restarts": restarts, "webhook deliveries": deliveries}
        # Refunds, failed refunds and disputes, of every delivery (15 % unless told).
        refunds = round(0.15 * deliveries) if refund_events is None else refund_events
        self.wanted["refund events"] = refunds
        self.minutes = minutes
        self.timed = timed  # a settle past SETTLE_BOUND is a violation (else only counted)
        self.late: list[str] = []
        self.n_users, self.n_buyers = users, buyers
        self.seed = seed
        self.logs = LOGS / f"chaos-{os.getpid()}"
        self.pg = Postgres(Path(tempfile.mkdtemp(prefix="chaos-pg-")))
        self.db = Database(self.pg.start(), patience=60)
        self.proxy = DbProxy.to(self.db.url).start()
        # ~3.5 deliveries a sale, from the buyers who buy at the storm's pace: the first is
        # thrifty (it buys only once it has about run out), so it does not pace.
        pace = max(buyers - 1, 1)
        pause = 0.6 * minutes * 60 * pace * 3.5 / max(deliveries, 1)
        self.storm = Storm(
            lambda: self.cluster.urls(), seed, self.violation, pause, check=self.check_sale,
            balance=lambda user_id: self.db.scalar(
                "SELECT point_balance FROM users WHERE id = %s", (user_id,)
            ),
        )  # fmt: skip
        url = self.proxy.url(self.db.url)
        self.cluster = Cluster(url, self.logs, seed, self.violation, self.storm.env)
        # Paced to meet the targets in 60 % of the minutes: a fault or a sale now and then,
        # so that most kills land between them, not on a start the database refuses.
        gap = 0.6 * minutes * 60 / max(db_faults + restarts, 1)
        share = min(0.2, 2 * restarts / max(db_faults, 1))
        rng = random.Random(seed + 1)
        self.outages = Outages(self.proxy, rng, self.pg.restart, share, (gap / 2, gap * 1.5))
        self.route = random.Random()  # which instance a request goes to
        self.stopping = threading.Event()
        self.violations: list[str] = []
        self.pages: collections.Counter[tuple[str, str]] = collections.Counter()
        self.served: collections.Counter[int] = collections.Counter()
        self.buyer_ids: set[int] = set()
        self.lock = threading.Lock()

    def close(self) -> None:
        """Stop the database, the proxy and the Stripe stand-in."""
        self.proxy.close()
        self.storm.close()
        self.pg.stop()

    def violation(self, what: str) -> None:
        """Record a broken promise (and log it as it happens)."""
        log(f"VIOLATION: {what}")
        with self.lock:
            self.violations.append(what)

    def explain(self, what: str, began: float, ended: float, where: str, key) -> str:
        """what, with the faults within 5 s of [began, ended] and the ledger rows where=key."""
        faults = self.outages.around(began - 5, ended + 5) + [
            f"{name} {at:.1f}" for at, name in self.cluster.timeline if began - 5 <= at <= ended + 5
        ]
        rows = self.db.rows(
            "SELECT id, kind, amount, job_id::text, checkout_session, refund_of,"
            f" round(extract(epoch FROM created_at), 1) FROM point_ledger WHERE {where} = %s",
            (key,),
        )
        return f"{what}; [{began:.1f}-{ended:.1f}] faults: {faults}; ledger: {rows}"

    def explain_job(self, job_id: str, what: str) -> str:
        began, ended = self.db.rows(
            "SELECT extract(epoch FROM created_at)::float,"
            " extract(epoch FROM coalesce(finalized_at, finished_at, now()))::float"
            " FROM assessment_jobs WHERE id = %s",
            (job_id,),
        )[0]
        return self.explain(what, began, ended, "job_id", job_id)

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
            elif r.status_code == 402 and user_id in self.buyer_ids:
                self.stopping.wait(1.0)  # a buyer spent it all: until a pack lands
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
        if billing == "support" and self.db.scalar(
            "SELECT count(*) FROM incidents WHERE job_id = %s AND resolved_at IS NULL", (job_id,)
        ):
            consumes = refunds = -1  # the ledger is for support to read: so the page says
        expected = {
            ("failed", -1, -1): ("support", "contact support about your points"),
            ("succeeded", 1, 0): ("charged", None),
            ("failed", 1, 1): ("refunded", "Your point was refunded."),
            ("failed", 0, 0): ("not_charged", "No point was used."),
        }.get((status, consumes, refunds))
        with self.lock:
            self.pages[(status, billing)] += 1
        if expected is None:
            what = f"job {job_id}: {status} with {consumes} consumes, {refunds} refunds"
            self.violation(self.explain_job(job_id, what))
        elif billing != expected[0] or (expected[1] and expected[1] not in html):
            what = f"job {job_id}: the page says {billing}, the ledger {expected[0]}"
            self.violation(self.explain_job(job_id, what))

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
        users, buyers = [], []
        for n in range(self.n_users):
            user = User(SimpleNamespace(url=self.web()), f"chaos{n}@bench.example").signup()
            user_id = self.db.scalar("SELECT id FROM users WHERE email = %s", (user.email,))
            users.append(threading.Thread(target=self.serve, args=(user, user_id), daemon=True))
            if n < self.n_buyers:  # the same user buys in a tab of its own
                buyers.append((user.http, user.csrf(), user_id))
                self.buyer_ids.add(user_id)
            else:
                self.grant(user.email, USER_GRANT)
        for thread in users:
            thread.start()
        self.storm.start(buyers)
        self.outages.start()
        log(f"cluster up in {time.monotonic() - started:.1f} s; killing, cutting and paying")
        chaos_started = time.monotonic()
        deadline = chaos_started + self.minutes * 60
        last_report = last_count = 0.0
        while time.monotonic() < deadline:
            if time.monotonic() - last_count > 2:  # the failpoints' kills are read from logs
                reached, last_count = self.reached(), time.monotonic()
                if all(reached[k] >= n for k, n in self.wanted.items()):
                    break
            if time.monotonic() - last_report > 30:
                pages = sum(self.pages.values())
                log(f"{reached}, {pages} pages, {len(self.violations)} violations")
                last_report = time.monotonic()
            self.cluster.kill_one()
            time.sleep(self.cluster.rng.uniform(0.05, 0.5))
        chaos_seconds = time.monotonic() - chaos_started
        self.outages.stop()
        stopped_at = self.db.scalar("SELECT now()")
        log("faults stopped; letting every job and payment settle")
        self.stopping.set()
        self.storm.stop()
        for thread in users:
            thread.join(SETTLE_TIMEOUT + 70)
        self.cluster.calm()
        settled_in = self.wait_quiet()
        return self.report(chaos_seconds, stopped_at, settled_in)

    def grant(self, email: str, points: int) -> None:
        """Grant points as an operator does (`flask grant-points`), before the faults start."""
        subprocess.run(
            [str(Path(sys.executable).parent / "flask"), "--app", "wsgi", "grant-points", email,
             str(points), "--reason", "chaos: a user who never runs out"],
            env={"DATABASE_URL": self.db.url, "SECRET_KEY": "x", "PATH": "/usr/bin:/bin"},
            cwd=ROOT, check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    def reached(self) -> dict[str, int]:
        """How far the run is towards each target."""
        faults = self.outages.counts()
        return {
            "kills": self.cluster.total_kills(),
            "database cuts or stalls": faults["cut"] + faults["refuse"] + faults["stall"],
            "database restarts": faults["restart"],
            "webhook deliveries": self.storm.counts["deliveries"],
            "refund events": self.storm.counts["refund events"],
        }

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
        """Check every job, task, sale, balance and incident against the ledger, all quiet."""
        wrong = []
        for job_id, status, finalized, consumes, refunds in self.db.rows(
            "SELECT j.id::text, j.status, j.finalized_at IS NOT NULL,"
            " count(l.id) FILTER (WHERE l.kind = 'consume'),"
            " count(l.id) FILTER (WHERE l.kind = 'refund')"
            " FROM assessment_jobs j LEFT JOIN point_ledger l ON l.job_id = j.id GROUP BY j.id"
        ):
            fine = (status, consumes, refunds) == ("succeeded", 1, 0) or (
                status == "failed" and finalized and consumes == refunds <= 1
            )
            if not fine:
                what = f"job {job_id}: {status}, {consumes} consumes, {refunds} refunds"
                wrong.append(self.explain_job(job_id, what))
        # One task per job, ended; a job that succeeded, a task that did. (A task of a job
        # settled before it ran does nothing and succeeds: no second outcome to compare.)
        for job_id, job, tasks in self.db.rows(
            "SELECT j.id::text, j.status,"
            " array_agg(q.status::text) FILTER (WHERE q.id IS NOT NULL) FROM assessment_jobs j"
            " LEFT JOIN procrastinate_jobs q ON (q.args->>'job_id')::uuid = j.id GROUP BY j.id"
        ):
            if tasks is None or len(tasks) != 1 or (job == "succeeded" and tasks != ["succeeded"]):
                wrong.append(self.explain_job(job_id, f"job {job_id} {job}, its tasks {tasks}"))
        sales, explained = self.sale_books()
        for sale, what in sales:
            end = (sale.ended or time.time()) if sale else time.time()
            began = sale.began if sale else end  # a session never sold: no faults to show
            wrong.append(
                self.explain(what, began, end, "checkout_session", what.split()[1].strip(":"))
            )
        # Each balance is its ledger: what the user was given (the signup grant, and
        # USER_GRANT unless a buyer), less the jobs that succeeded, plus what the sales'
        # rows (checked above, sale by sale) left them.
        for user_id, email, balance, ledger, given, bought, succeeded in self.db.rows(
            "SELECT u.id, u.email, u.point_balance,"
            " (SELECT sum(amount) FROM point_ledger l WHERE l.user_id = u.id),"
            " (SELECT coalesce(sum(amount), 0) FROM point_ledger l WHERE l.user_id = u.id"
            "   AND l.kind = 'grant'),"
            " (SELECT coalesce(sum(amount), 0) FROM point_ledger l WHERE l.user_id = u.id"
            "   AND l.kind IN ('purchase', 'purchase_refund', 'purchase_restore')),"
            " (SELECT count(*) FROM assessment_jobs j"
            "   WHERE j.user_id = u.id AND j.status = 'succeeded') FROM users u"
        ):
            start = SIGNUP_POINTS + (0 if user_id in self.buyer_ids else USER_GRANT)
            if not (balance == ledger == given - succeeded + bought >= 0 and given == start):
                wrong.append(
                    f"{email}: balance {balance}, ledger {ledger}; given {given} (of {start}),"
                    f" {succeeded} jobs succeeded, {bought} points bought and kept"
                )
        for row in self.db.rows(
            "SELECT id, code, job_id::text, payment_ref, detail FROM incidents"
            " WHERE resolved_at IS NULL"
        ):
            if row[0] not in explained:
                wrong.append(f"incident open at the end: {row}")
        idle = [u for u in self.db.rows("SELECT id FROM users") if self.served[u[0]] == 0]
        if idle:
            wrong.append(f"{len(idle)} users never had a page checked")
        if (check := ledger_check(self.db.url)).returncode != 0:
            wrong.append(f"ledger-check: {check.stdout.strip()} {check.stderr.strip()[-300:]}")
        # A death or a log line is excused only by a fault this run recorded, by its time.
        faults = self.outages.windows
        wrong += self.cluster.judge(faults) + self.cluster.log_faults(faults)
        return wrong + self.outages.errors

    def sale_books(self, sale=None) -> tuple[list[tuple], set]:
        """Storm.books() over the sessions' rows (sale's alone if given), the open incidents."""
        sessions = self.db.rows(
            "SELECT c.id, c.status, l.kind, l.amount FROM checkout_sessions c"
            " LEFT JOIN point_ledger l ON l.checkout_session = c.id"
            + (" WHERE c.id = %s" if sale else ""),
            (sale.session_id,) if sale else (),
        )
        told = self.db.rows(
            "SELECT id, payment_ref, detail FROM incidents"
            " WHERE resolved_at IS NULL AND scope = 'payment'"
        )
        return self.storm.books(sessions, told, [sale] if sale else None)

    def check_sale(self, sale) -> None:
        """Check a sale's books once Stripe's every event of it is acknowledged."""
        for _, what in self.sale_books(sale)[0]:
            what = f"right after its events: {what}"
            where = ("checkout_session", sale.session_id)
            self.violation(self.explain(what, sale.began, sale.ended, *where))
            sale.wrong = True

    def settles(self, stopped_at) -> tuple[list[float], list[float]]:
        """Each failed job's settle from its last sign of life or the database's return after.

        Both lists sorted; the second holds only the settles timed from a return. A job
        settled later than SETTLE_BOUND is a violation, with its faults and ledger.
        """
        settles, after_return = [], []
        for job_id, last, finalized in self.db.rows(
            "SELECT id::text, extract(epoch FROM coalesce(heartbeat_at, started_at, created_at)),"
            " extract(epoch FROM finalized_at) FROM assessment_jobs"
            " WHERE status = 'failed' AND finished_at < %s",
            (stopped_at,),
        ):
            returned = self.outages.returned(float(finalized)) or 0.0
            settle = float(finalized) - max(float(last), returned)
            settles.append(settle)
            if returned > float(last):
                after_return.append(settle)
            if settle > SETTLE_BOUND:
                what = f"job {job_id} settled {settle:.2f} s after its last sign of life or"
                self.late.append(self.explain_job(job_id, f"{what} the database's return"))
                if self.timed:
                    self.violation(self.late[-1])
        return sorted(settles), sorted(after_return)

    def report(self, chaos_seconds: float, stopped_at, settled_in: float | None) -> dict:
        """Check the books; the figures for CHAOS.md: its table's rows, then its lists."""
        for what in self.books():
            self.violation(what)
        outcomes = self.db.rows(
            "SELECT status, coalesce(error_code, '-'), count(*) FROM assessment_jobs"
            " GROUP BY 1, 2 ORDER BY 3 DESC"
        )
        settles, after_return = self.settles(stopped_at)
        ledger = dict(self.db.rows("SELECT kind, count(*) FROM point_ledger GROUP BY kind"))
        out = {"reached": self.reached(), "wanted": self.wanted, "violations": self.violations}
        out |= {"jobs": sum(n for *_, n in outcomes), "pages_checked": sum(self.pages.values())}
        out |= {"credits": ledger.get("purchase", 0), "reversals": ledger.get("purchase_refund", 0)}
        out |= {"restores": ledger.get("purchase_restore", 0)}
        after_spending = self.db.scalar(
            "SELECT count(*) FROM point_ledger r JOIN point_ledger p ON p.id = r.refund_of"
            " WHERE r.kind = 'purchase_refund' AND -r.amount < p.amount"
        )
        bound = f"s (bound {SETTLE_BOUND} s)"

        def hooks(*keys: str) -> str:
            return " / ".join(str(self.storm.counts[k]) for k in keys)

        out["table"] = [
            ("run", f"{chaos_seconds / 60:.1f} min, seed {self.seed}"),
            *[(f"{k} (wanted {n})", out["reached"][k]) for k, n in self.wanted.items()],
            ("database faults by kind", dict(self.outages.counts().most_common())),
            ("trials: jobs run under the faults", out["jobs"]),
            ("settled pages checked against the ledger", out["pages_checked"]),
            ("failed jobs (refunded or never charged)", len(settles)),
            ("slowest settle after a failed job's last sign of life",
             f"{max(settles, default=0):.2f} {bound}"),
            (f"slowest settle after the database returned ({len(after_return)} jobs)",
             f"{max(after_return, default=0):.2f} {bound}"),
            ("failed jobs settled later than the bound", len(self.late)),
            ("every job and task ended after the faults stopped, in", f"{settled_in or 0:.2f} s"),
            ("sales (Checkout Sessions bought) / credits / reversals / restores",
             f"{len(self.storm.sales)} / {out['credits']} / {out['reversals']}"
             f" / {out['restores']}"),
            ("webhook deliveries: genuine / forged",
             hooks("genuine deliveries", "forged deliveries")),
            ("refund events delivered (genuine): all / charge.refunded / refund.failed /"
             " charge.refund.updated / charge.dispute.created",
             hooks("refund events", *(f"refund events: {k}" for k in REFUND_KINDS))),
            ("refund events posted all at once", hooks("refund events posted at once")),
            ("refunds after spending (reversals short of the pack)", after_spending),
            ("re-deliveries / concurrent duplicates / refunds before the payment",
             hooks("re-deliveries", "concurrent duplicates", "refunds before the payment")),
            ("answers the deliverer got, by status", dict(sorted(self.storm.answers.items()))),
            ("5xx answers retried to success / never",
             hooks("5xx answers retried to success", "5xx answers never retried to success")),
            ("posts cut off, no answer (sent again)", hooks("posts cut off (no answer)")),
            ("queue workers that ended on a database error in a recorded fault (restarted)",
             len(self.cluster.gave_up)),
            ("tracebacks in the logs (read them; not a verdict)", self.cluster.tracebacks()),
            ("**invariant violations**", f"**{len(self.violations)}**"),
        ]  # fmt: skip
        failpoints = {f"{k} (failpoint)": n for k, n in self.cluster.failpoint_kills().items()}
        out["kills by target"] = dict(self.cluster.kills.most_common()) | failpoints
        out["jobs by outcome (status, error code)"] = {f"{s} {c}": n for s, c, n in outcomes}
        out["paid sales by story after the payment"] = dict(
            collections.Counter(s.payment.story for s in self.storm.sales if s.payment and s.paid)
        )
        out["incidents for support, by code"] = dict(
            self.db.rows("SELECT code, count(*) FROM incidents GROUP BY code ORDER BY 2 DESC")
        )
        out["pages as the users read them (status/billing)"] = {
            f"{s}/{b}": n for (s, b), n in self.pages.most_common()
        }
        return out


def tree() -> dict:
    """The commit checked out and the changes not committed (git status), as of now."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return {"commit": None, "changes": [], "diff": ""}
    changes = git("status", "--porcelain").stdout.splitlines()
    # A file changed again while the run ran reads the same in git status: its diff does not.
    diff = hashlib.sha256(git("diff", "HEAD").stdout.encode()).hexdigest()[:16]
    return {"commit": head.stdout.strip(), "changes": changes, "diff": diff}


def tree_line(started: dict, ended: dict) -> str:
    """Say which tree a run ran (tree() at its start and end): the commit, clean or not."""
    if started["commit"] is None:
        return "UNKNOWN TREE (no git checkout)"
    commit, changes = started["commit"][:12], started["changes"]
    if started != ended:
        return (
            f"MOVING TREE: {commit} with {len(changes)} uncommitted changes at the start,"
            f" {(ended['commit'] or '?')[:12]} with {len(ended['changes'])} at the end"
        )
    if changes:
        shown = ", ".join(line[3:] for line in changes[:5])
        return f"DIRTY TREE: {commit} with {len(changes)} uncommitted changes ({shown})"
    return f"{commit}, clean tree"


def write_markdown(out: dict, path: Path, started: dict, ended: dict) -> None:
    """Write the figures of one run as bench/CHAOS.md, the tree it ran in its first line.

    started and ended are tree() at the run's start and end; the file is the harness's
    alone, nothing in it written by hand.
    """
    lines = [
        f"# Chaos at {tree_line(started, ended)}: kills, database faults and payments",
        "",
        f"Written by `make chaos` (`python -m bench.chaos`) on {datetime.date.today()}, all of"
        " it: the commit and whether the tree was clean are read as the run starts, and again"
        " as it ends (a tree that moved says so above). Two web instances and two queue"
        " workers on one PostgreSQL of the run's own, reached through tests/dbproxy.py;"
        f" lease {LEASE} s, heartbeat {HEARTBEAT} s,"
        f" poll {POLL} s, sweep {SWEEP} s, jobs of {WORK} s. The seed fixes the choices of"
        " the kills, the database faults and the sales, not their timing: no two runs are"
        " the same.",
        "",
        *table(("what", "figure"), out["table"]),
    ]
    for title in (
        "kills by target",
        "jobs by outcome (status, error code)",
        "pages as the users read them (status/billing)",
        "paid sales by story after the payment",
        "incidents for support, by code",
    ):
        lines += ["", f"{title.capitalize()}:", "", *[f"- {k}: {n}" for k, n in out[title].items()]]
    if out["violations"]:
        lines += ["", "Violations (the first 50):", "", *[f"- {v}" for v in out["violations"][:50]]]
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    seed = random.SystemRandom().randrange(10**6)
    for name, default in (("kills", 1000), ("db-faults", 100), ("restarts", 5), ("users", 8),
                          ("deliveries", 2000), ("refund-events", 300), ("minutes", 40.0),
                          ("seed", seed)):  # fmt: skip
        parser.add_argument(f"--{name}", type=type(default), default=default)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "CHAOS.md")
    args = parser.parse_args()
    started = tree()  # before anything runs: the code this run is of
    raise_fd_limit()
    chaos = Chaos(
        args.kills, args.minutes, args.users, args.seed, args.db_faults, args.restarts,
        args.deliveries, refund_events=args.refund_events,
    )  # fmt: skip
    try:
        out = chaos.run()
    finally:
        chaos.close()
    ended = tree()
    out["tree"] = {"started": started, "ended": ended, "line": tree_line(started, ended)}
    write_markdown(out, args.out, started, ended)
    print(json.dumps(out, indent=2))
    log(f"{out['reached']}, {len(out['violations'])} violations; wrote {args.out}")
    if not out["violations"]:
        shutil.rmtree(chaos.logs, ignore_errors=True)
    short = any(out["reached"][k] < n for k, n in out["wanted"].items())
    sys.exit(1 if out["violations"] or short else 0)


if __name__ == "__main__":
    main()
