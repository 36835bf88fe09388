"""make chaos: a cluster killed over and over under paid work, and the books checked after.

Two web instances and two queue workers (JOB_EXECUTOR=procrastinate) serve users who
submit, poll and submit again without a pause. Meanwhile a killer SIGKILLs a random
process at a random moment: a whole web instance (master and worker), a web instance's
worker alone (its master starts another), or a queue worker; each dead process comes
back, and some come back armed with a failpoint that SIGKILLs the process itself at a
named step of the job's life (after_insert, after_consume, before_refund, ...). A web
instance or a queue worker is killed only while the other one of its kind is up and
unarmed, so someone is always there to serve a poll and run a job; a failpoint may still
take that one down too.

Each settled page is checked against the ledger when it is read; at the end, with the
killing stopped and every job left to settle, the whole database is checked: every job
settled, charged once if it succeeded, refunded exactly when charged if it failed, every
balance the signup grant less the jobs that succeeded, no incident, `flask ledger-check`
clean. The run stops at --kills kills or after --minutes, whichever comes first, and
writes bench/CHAOS.md. Loopback only; every loop is bounded in count and time.

    .venv/bin/python -m bench.chaos --kills 1000 --minutes 30    # make chaos
"""

import argparse
import collections
import datetime
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

from .common import (
    BIN,
    LOGS,
    PLACE,
    ROOT,
    Database,
    Server,
    User,
    log,
    parse_fragment,
    raise_fd_limit,
)

LEASE, HEARTBEAT, POLL, WORK, SWEEP = 2.0, 0.4, 0.5, 1.0, 1.0
SIGNUP_POINTS = 100_000
ENV = {
    "JOB_EXECUTOR": "procrastinate",
    "JOB_LEASE_SECONDS": str(LEASE),
    "JOB_HEARTBEAT_SECONDS": str(HEARTBEAT),
    "POLL_INTERVAL_SECONDS": str(POLL),
    "SWEEP_INTERVAL_SECONDS": str(SWEEP),
    "ASSESSMENT_WORK_SECONDS": str(WORK),
    "MAX_CONCURRENT_JOBS": "8",
    "MAX_QUEUED_JOBS": "64",
    "SIGNUP_POINTS": str(SIGNUP_POINTS),
}
# Where each kind of process passes a failpoint (app/failpoints.py names them all).
FAILPOINTS = {
    "web": ("after_insert", "after_reap", "before_refund", "consume_lookup"),
    "worker": ("after_running", "after_consume", "before_success", "before_refund"),
}
ARMED_SHARE = 0.5  # of restarted processes, how many come back with a failpoint
# A failed job is settled within a lease of its last sign of life, plus a poll, a sweep
# interval and a process start: the same bound the cluster tests hold.
SETTLE_BOUND = LEASE + POLL + SWEEP + 3
SETTLE_TIMEOUT = 120.0  # a page that has not settled by then is a violation
CHAOS_LOGS = LOGS / "chaos"


class Target:
    """Where a user's next request goes: whichever web instance is up (bench User reads .url)."""

    def __init__(self, url: str):
        self.url = url


class Proc:
    """One slot of the cluster (web1, web2, worker1, worker2): its current process."""

    def __init__(self, kind: str, name: str, db_url: str):
        self.kind, self.name, self.db_url = kind, name, db_url
        self.generation = 0
        self.armed: str | None = None
        self.ready = False
        self.server: Server | None = None  # web
        self.proc: subprocess.Popen | None = None  # worker
        self.lock = threading.Lock()

    def start(self, armed: str | None) -> None:
        self.generation += 1
        self.armed = armed
        env = {**ENV, "FAILPOINTS": f"{armed}=kill" if armed else ""}
        name = f"chaos/{self.name}-{self.generation}"
        if self.kind == "web":
            self.server = Server(self.db_url, name, module="wsgi:app", **env)
            self.server.start(timeout=90)
        else:
            path = LOGS / f"{name}.log"
            full = {**os.environ, **env, "DATABASE_URL": self.db_url, "SECRET_KEY": "bench-secret"}
            with open(path, "ab") as out:
                self.proc = subprocess.Popen(
                    [str(BIN / "flask"), "--app", "wsgi", "worker"],
                    cwd=ROOT,
                    env={**full, "PYTHONPATH": str(ROOT)},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            deadline = time.monotonic() + 90
            while b"Starting worker on" not in path.read_bytes():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"queue worker did not start; see {path}")
                time.sleep(0.05)
        self.ready = True

    def alive(self) -> bool:
        if self.kind == "web":
            return self.server is not None and self.server.proc.poll() is None
        return self.proc is not None and self.proc.poll() is None

    def url(self) -> str | None:
        return self.server.url if self.ready and self.kind == "web" and self.alive() else None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.ready = False
        if self.kind == "web" and self.server:
            self.server.stop(sig)
        elif self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Chaos:
    def __init__(self, db: Database, kills: int, minutes: float, users: int, seed: int):
        self.db = db
        self.kills_wanted = kills
        self.deadline = time.monotonic() + minutes * 60
        self.rng = random.Random(seed)
        self.seed = seed
        self.n_users = users
        self.procs = [Proc("web", f"web{i}", db.url) for i in (1, 2)] + [
            Proc("worker", f"worker{i}", db.url) for i in (1, 2)
        ]
        self.kills: collections.Counter[str] = collections.Counter()
        self.stopping = threading.Event()
        self.violations: list[str] = []
        self.pages = collections.Counter()
        self.lock = threading.Lock()

    # -- the cluster --------------------------------------------------------------------

    def others(self, proc: Proc) -> list[Proc]:
        return [p for p in self.procs if p.kind == proc.kind and p is not proc]

    def restart(self, proc: Proc) -> None:
        """Bring a slot back, armed now and then (never both of a kind at once)."""
        with proc.lock:
            proc.stop(signal.SIGKILL)
            armed = None
            if self.rng.random() < ARMED_SHARE and not any(o.armed for o in self.others(proc)):
                armed = self.rng.choice(FAILPOINTS[proc.kind])
            for _ in range(3):
                try:
                    proc.start(armed)
                    return
                except RuntimeError as exc:  # a failpoint may kill it while it starts
                    log(f"restart of {proc.name}: {exc}")
                    proc.stop(signal.SIGKILL)
            self.violation(f"{proc.name} could not be restarted")

    def watch(self) -> None:
        """Restart queue workers and web instances that died by themselves (failpoints)."""
        while not self.stopping.is_set():
            for proc in self.procs:
                if proc.ready and not proc.alive():
                    proc.ready = False
                    threading.Thread(target=self.restart, args=(proc,), daemon=True).start()
            time.sleep(0.1)

    def kill_one(self) -> bool:
        """SIGKILL one process whose kind has another up and unarmed; False if none may go."""
        eligible = [
            p
            for p in self.procs
            if p.ready
            and p.alive()
            and any(o.ready and o.alive() and not o.armed for o in self.others(p))
        ]
        if not eligible:
            return False
        victim = self.rng.choice(eligible)
        if victim.kind == "worker":
            target = "queue worker"
        else:
            target = self.rng.choice(("web instance", "web worker"))
        with victim.lock:
            if not (victim.ready and victim.alive()):
                return False
            if target == "web worker":
                try:
                    pid = victim.server.worker_pid()
                except requests.RequestException:
                    return False
                os.kill(pid, signal.SIGKILL)
                victim.ready = False  # until its master has a new worker answering
                threading.Thread(target=self.respawned, args=(victim, pid), daemon=True).start()
            else:
                victim.ready = False
                if target == "web instance":
                    try:
                        os.kill(victim.server.worker_pid(), signal.SIGKILL)
                    except (requests.RequestException, ProcessLookupError):
                        pass
                    victim.server.proc.kill()
                else:
                    victim.proc.kill()
                threading.Thread(target=self.restart, args=(victim,), daemon=True).start()
        with self.lock:
            self.kills[target] += 1
        return True

    def respawned(self, proc: Proc, old_pid: int) -> None:
        try:
            proc.server.wait_ready(timeout=60, not_pid=old_pid)
            proc.ready = True
        except RuntimeError:
            self.restart(proc)

    def failpoint_kills(self) -> collections.Counter[str]:
        """Processes that killed themselves at a failpoint, counted from their logs."""
        found: collections.Counter[str] = collections.Counter()
        for path in CHAOS_LOGS.glob("*.log"):
            kind = "web" if path.name.startswith("web") else "queue worker"
            for name in re.findall(rb"failpoint (\w+): kill", path.read_bytes()):
                found[f"{name.decode()} ({kind})"] += 1
        return found

    def total_kills(self) -> int:
        return sum(self.kills.values()) + sum(self.failpoint_kills().values())

    # -- the users ----------------------------------------------------------------------

    def violation(self, what: str) -> None:
        log(f"VIOLATION: {what}")
        with self.lock:
            self.violations.append(what)

    def web(self) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            urls = [u for p in self.procs if (u := p.url())]
            if urls:
                return self.rng.choice(urls)
            time.sleep(0.05)
        raise RuntimeError("no web instance came back within 60 s")

    def serve(self, user: User, user_id: int) -> None:
        while not self.stopping.is_set():
            job_id = self.submit(user, user_id)
            if job_id is not None:
                self.settle(user, job_id)

    def submit(self, user: User, user_id: int) -> str | None:
        since = self.db.scalar("SELECT now()")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.stopping.is_set():
            user.server.url = self.web()
            try:  # confirm=yes: the same place again is meant, not paid twice unawares
                r = user.http.post(
                    user.server.url + "/assessments",
                    data={
                        "query": PLACE,
                        "lang": "en",
                        "confirm": "yes",
                        "csrf_token": user.csrf(),
                    },
                    allow_redirects=False,
                    timeout=30,
                )
            except requests.RequestException:
                r = None  # the process died: its transaction committed or did not
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
        return None

    def settle(self, user: User, job_id: str) -> None:
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
        """The settled page says what the ledger says, at the moment it is read."""
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
        CHAOS_LOGS.mkdir(parents=True, exist_ok=True)
        for old in CHAOS_LOGS.glob("*.log"):
            old.unlink()
        started = time.monotonic()
        threads = [threading.Thread(target=p.start, args=(None,)) for p in self.procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        users = []
        for n in range(self.n_users):
            user = User(Target(self.procs[n % 2].server.url), f"chaos{n}@bench.example").signup()
            user_id = self.db.scalar("SELECT id FROM users WHERE email = %s", (user.email,))
            users.append(threading.Thread(target=self.serve, args=(user, user_id), daemon=True))
        for t in users:
            t.start()
        watcher = threading.Thread(target=self.watch, daemon=True)
        watcher.start()
        log(f"cluster up in {time.monotonic() - started:.1f} s; killing")
        chaos_started = time.monotonic()
        last_report = last_count = 0.0
        total = 0
        while time.monotonic() < self.deadline:
            if time.monotonic() - last_count > 2:  # the failpoints' kills are read from logs
                total, last_count = self.total_kills(), time.monotonic()
            if total >= self.kills_wanted:
                break
            if time.monotonic() - last_report > 30:
                log(
                    f"{total} kills, {sum(self.pages.values())} pages checked,"
                    f" {len(self.violations)} violations"
                )
                last_report = time.monotonic()
            self.kill_one()
            time.sleep(self.rng.uniform(0.05, 0.5))
        chaos_seconds = time.monotonic() - chaos_started
        log("killing stopped; letting every job settle")
        self.stopping.set()
        for t in users:
            t.join(SETTLE_TIMEOUT + 70)
        watcher.join(5)
        for proc in self.procs:  # the survivors and the restarted, unarmed, to settle the rest
            if proc.armed or not proc.alive():
                self.restart_unarmed(proc)
        settled_in = self.wait_all_settled()
        out = self.report(chaos_seconds, settled_in)
        for proc in self.procs:
            proc.stop()
        return out

    def restart_unarmed(self, proc: Proc) -> None:
        with proc.lock:
            proc.stop(signal.SIGKILL)
            proc.start(None)

    def wait_all_settled(self) -> float | None:
        started = time.monotonic()
        while time.monotonic() - started < 60:
            left = self.db.scalar(
                "SELECT count(*) FROM assessment_jobs"
                " WHERE status IN ('pending', 'running')"
                " OR (status = 'failed' AND finalized_at IS NULL)"
            )
            if left == 0:
                return time.monotonic() - started
            for proc in self.procs:  # polls of nobody: a request to each instance sweeps
                if url := proc.url():
                    try:
                        requests.get(url + "/login", timeout=5)
                    except requests.RequestException:
                        pass
            time.sleep(POLL)
        self.violation(f"{left} jobs still unsettled 60 s after the killing stopped")
        return None

    def books(self) -> list[str]:
        """Every job and every balance, checked against the ledger once all is quiet."""
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
        for email, balance, succeeded in self.db.rows(
            "SELECT u.email, u.point_balance, count(j.id) FILTER (WHERE j.status = 'succeeded')"
            " FROM users u LEFT JOIN assessment_jobs j ON j.user_id = u.id GROUP BY u.id"
        ):
            if balance != SIGNUP_POINTS - succeeded:
                wrong.append(f"{email}: balance {balance}, {succeeded} jobs succeeded")
        incidents = self.db.scalar("SELECT count(*) FROM incidents")
        if incidents:
            wrong.append(f"{incidents} incidents opened")
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
        return wrong

    def report(self, chaos_seconds: float, settled_in: float | None) -> dict:
        for what in self.books():
            self.violation(what)
        failpoints = self.failpoint_kills()
        outcomes = self.db.rows(
            "SELECT status, coalesce(error_code, ''), count(*) FROM assessment_jobs"
            " GROUP BY 1, 2 ORDER BY 3 DESC"
        )
        settles = [
            row[0]
            for row in self.db.rows(
                "SELECT extract(epoch FROM"
                " finalized_at - coalesce(heartbeat_at, started_at, created_at))"
                " FROM assessment_jobs WHERE status = 'failed'"
            )
        ]
        slow = sorted(float(s) for s in settles)
        over = sum(1 for s in slow if s > SETTLE_BOUND)
        if over:
            self.violation(
                f"{over} failed jobs settled later than {SETTLE_BOUND} s"
                " after their last sign of life"
            )
        return {
            "seed": self.seed,
            "minutes": round(chaos_seconds / 60, 1),
            "kills": sum(self.kills.values()) + sum(failpoints.values()),
            "kills_wanted": self.kills_wanted,
            "kills_by_target": dict(self.kills.most_common()),
            "kills_by_failpoint": dict(failpoints.most_common()),
            "jobs": sum(n for *_, n in outcomes),
            "outcomes": [list(r) for r in outcomes],
            "pages_checked": sum(self.pages.values()),
            "pages": {f"{s}/{b}": n for (s, b), n in self.pages.most_common()},
            "failed_jobs": len(slow),
            "slowest_settle_s": round(slow[-1], 2) if slow else None,
            "settle_p99_s": round(slow[int(len(slow) * 0.99) - 1], 2) if len(slow) >= 100 else None,
            "settle_bound_s": SETTLE_BOUND,
            "settled_after_stop_s": None if settled_in is None else round(settled_in, 2),
            "violations": self.violations,
        }


def write_markdown(out: dict, path: Path) -> None:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    lines = [
        "# Chaos: kills under paid work",
        "",
        f"Written by `make chaos` (`python -m bench.chaos`) on {datetime.date.today()} at {commit}"
        f" (seed {out['seed']}). Two web instances and two queue workers on one database;"
        f" lease {LEASE} s, heartbeat {HEARTBEAT} s, poll {POLL} s, sweep {SWEEP} s,"
        f" jobs of {WORK} s.",
        "",
        "| what | figure |",
        "|---|---|",
        f"| kills | {out['kills']} of {out['kills_wanted']} wanted, in {out['minutes']} min |",
        f"| trials: jobs run under the kills | {out['jobs']} |",
        f"| settled pages checked against the ledger | {out['pages_checked']} |",
        f"| failed jobs (refunded or never charged) | {out['failed_jobs']} |",
        f"| slowest settle after a job's last sign of life | {out['slowest_settle_s']} s"
        f" (bound {out['settle_bound_s']} s) |",
        f"| 99th percentile of those | {out['settle_p99_s']} s |",
        f"| every job settled after the killing stopped, in | {out['settled_after_stop_s']} s |",
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
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--seed", type=int, default=random.SystemRandom().randrange(10**6))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "CHAOS.md")
    args = parser.parse_args()
    raise_fd_limit()
    db = Database()
    try:
        out = Chaos(db, args.kills, args.minutes, args.users, args.seed).run()
    finally:
        db.close()
    write_markdown(out, args.out)
    print(json.dumps(out, indent=2))
    log(f"{out['kills']} kills, {len(out['violations'])} violations; wrote {args.out}")
    sys.exit(1 if out["violations"] or out["kills"] < args.kills else 0)


if __name__ == "__main__":
    main()
