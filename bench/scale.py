"""Outgrowing one process: the queue executor against the thread executor, measured.

- submit: POST /assessments -> running (bench/submit.py's measure), JOB_EXECUTOR=thread
  vs procrastinate with one worker; the jobs do no work.
- started: jobs started per second by 1 and by 2 queue workers (8 jobs each at a time)
  draining the same backlog of deferred no-work jobs; from the first start to the last,
  on the database clock.
- poll: the status fragment's closed-loop throughput (wrk) on 1 web instance vs 2
  instances side by side (half the connections each, summed), 32 running jobs.
- misses: upstream calls per 100 concurrent misses of one key over 4 processes (25
  threads each), with SHARED_LAYER_CACHE=on vs off (the in-process cache alone).
"""

import contextlib
import json
import subprocess
import sys
import threading
import time

from . import submit, wrk
from .common import LOGS, ROOT, Database, Server, Worker, loaded, wait_until
from .table import Row, check, compare, get, num

NO_WORK = {"ASSESSMENT_WORK_SECONDS": "0", "MAX_QUEUED_JOBS": "100000", "SIGNUP_POINTS": "100000"}


def truncate(db: Database) -> None:
    db.truncate()
    with db.connect() as conn:
        if conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()[0]:
            conn.execute("TRUNCATE procrastinate_jobs, procrastinate_workers, layer_cache CASCADE")


def worker(db: Database, name: str, **env: str) -> Worker:
    """A fresh `flask --app wsgi worker` (JOB_EXECUTOR=procrastinate), for a with block."""
    log_path = LOGS / f"{name}.log"
    log_path.unlink(missing_ok=True)
    return Worker(db.url, log_path, **env)


def submit_latency(db: Database, n: int) -> dict:
    out = {}
    for executor in ("thread", "procrastinate"):
        truncate(db)
        with Server(db.url, f"scale-submit-{executor}", JOB_EXECUTOR=executor, **NO_WORK) as srv:
            if executor == "thread":
                out[executor] = submit.ours(srv, db, n, warmup=5)["post_to_running"]
            else:
                with worker(db, "scale-submit-worker", **NO_WORK):
                    out[executor] = submit.ours(srv, db, n, warmup=5)["post_to_running"]
    out["ratio_median"] = out["procrastinate"]["median_ms"] / out["thread"]["median_ms"]
    return out


def backlog(db: Database, k: int) -> None:
    """Insert k no-work jobs for k users and defer them all in one transaction.

    One commit: both workers are told at the same moment, so the drain rate is theirs,
    not the order in which they started.
    """
    from app.assessment import resolve_place

    area = json.dumps(resolve_place("札幌市").to_dict(), ensure_ascii=False)
    with db.connect() as conn, conn.transaction():
        conn.execute(
            "WITH u AS (INSERT INTO users (email, password_hash)"
            "   SELECT 'backlog' || i || '@bench.example', 'x' FROM generate_series(1, %s) i"
            "   RETURNING id)"
            " INSERT INTO point_ledger (user_id, kind, amount, reason)"
            " SELECT id, 'grant', 1, 'bench' FROM u",
            (k,),
        )
        conn.execute(
            "WITH j AS (INSERT INTO assessment_jobs (user_id, query_text, lang, area, step)"
            "   SELECT id, '札幌市', 'en', %s::jsonb, 'Waiting to start' FROM users"
            "   WHERE email LIKE 'backlog%%' RETURNING id)"
            " SELECT procrastinate_defer_jobs_v1(array_agg(ROW('assessments', 'assess', 0,"
            "   NULL, NULL, jsonb_build_object('job_id', j.id::text), NULL)"
            "   ::procrastinate_job_to_defer_v1)) FROM j",
            (area,),
        )


STARTED = "SELECT count(*) FROM assessment_jobs WHERE started_at IS NOT NULL"


def started_per_second(db: Database, k: int) -> dict:
    out = {}
    for workers in (1, 2):
        truncate(db)
        with contextlib.ExitStack() as stack:
            for i in range(workers):
                stack.enter_context(worker(db, f"scale-drain-{i}", **NO_WORK))
            backlog(db, k)
            wait_until(lambda: db.scalar(STARTED) >= k, 120, "the backlog to drain", 0.1)
        span = db.scalar(
            "SELECT extract(epoch FROM max(started_at) - min(started_at)) FROM assessment_jobs"
        )
        out[f"{workers}_workers"] = {
            "jobs": k,
            "seconds": float(span),
            "per_second": k / float(span),
        }
    out["ratio"] = out["2_workers"]["per_second"] / out["1_workers"]["per_second"]
    return out


def poll_throughput(db: Database, duration: float) -> dict:
    wrk.require()
    truncate(db)
    with (
        loaded(db, "scale-poll-a", 32, "scalepoll") as (a, users),
        Server(db.url, "scale-poll-b") as b,
    ):
        lines = [(u.status_path, u.cookie) for u in users]
        one = wrk.run(a.url, lines, duration, connections=16).rps
        results: list[float] = []

        def half(server: Server) -> None:
            results.append(wrk.run(server.url, lines, duration, connections=8).rps)

        threads = [threading.Thread(target=half, args=(s,)) for s in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return {"1_instance_rps": one, "2_instances_rps": sum(results), "ratio": sum(results) / one}


CHILD = """
import json, sys, threading, time, urllib.request
from app import create_app
from app.config import sqlalchemy_url
app = create_app({"SQLALCHEMY_DATABASE_URI": sqlalchemy_url(sys.argv[1]),
                  "SHARED_LAYER_CACHE": sys.argv[2]})
cache = app.extensions["layer_cache"]
start = float(sys.argv[4])
def ask():
    while time.time() < start:
        time.sleep(0.001)
    cache.get(("flood", "k"), lambda: json.load(urllib.request.urlopen(sys.argv[3], timeout=10)))
threads = [threading.Thread(target=ask) for _ in range(25)]
[t.start() for t in threads]
[t.join() for t in threads]
"""


def misses(db: Database) -> dict:
    from .zones import Upstream

    upstream = Upstream(0.2)  # answers "ok" after 0.2 s, counting the calls
    url = upstream.url + "/flood/k"
    out = {}
    try:
        for setting in ("on", "off"):
            truncate(db)
            upstream.hits.clear()
            start = time.time() + 3  # every process imported and built by then
            children = [
                subprocess.Popen(
                    [sys.executable, "-c", CHILD, db.url, setting, url, str(start)], cwd=ROOT
                )
                for _ in range(4)
            ]
            for child in children:
                child.wait(60)
            out[f"shared_{setting}"] = upstream.hits.total()
    finally:
        upstream.server.shutdown()
    return out


def run(db: Database, n: int = 100, backlog: int = 200, duration: float = 5.0) -> dict:
    LOGS.mkdir(parents=True, exist_ok=True)
    # The first server migrates the fresh database (procrastinate's schema included).
    with Server(db.url, "scale-migrate"):
        pass
    out = {}
    for name, measure in (
        ("submit", lambda: submit_latency(db, n)),
        ("started", lambda: started_per_second(db, backlog)),
        ("poll", lambda: poll_throughput(db, duration)),
        ("misses", lambda: misses(db)),
    ):
        try:
            out[name] = measure()
        except Exception as exc:  # noqa: BLE001 - one failed figure, the others go on
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return out


NUMBER, NAME = "8", "scale"


# Each step up beside the one before: (number, figure, part of the results, the figure's
# path in it, the baseline's, the baseline's label, digits, unit).
STEPS = (
    ("8a", "POST -> running, median, JOB_EXECUTOR=procrastinate (1 worker)", "submit",
     ("procrastinate", "median_ms"), ("thread", "median_ms"), "thread", 2, " ms"),
    ("8b", "queued jobs started per second, 2 workers", "started",
     ("2_workers", "per_second"), ("1_workers", "per_second"), "1 worker", 0, "/s"),
    ("8c", "status fragment, closed loop, 2 web instances, req/s", "poll",
     ("2_instances_rps",), ("1_instance_rps",), "1 instance", 0, ""),
)  # fmt: skip


def summary(r: dict) -> list[Row]:
    """Rows 8a-8d: the queue executor, 2 workers, 2 web instances, the shared cache."""
    ratio = {"submit": "ratio_median", "started": "ratio", "poll": "ratio"}
    misses = r.get("misses", {})
    return [
        *(compare(number, figure, get(r, part, *path), get(r, part, *base), label, digits, unit,
                  ratio=get(r, part, ratio[part]))
          for number, figure, part, path, base, label, digits, unit in STEPS),
        Row("8d", "upstream calls per 100 concurrent misses over 4 processes, shared cache",
            num(misses.get("shared_on"), 0),
            f"in-process cache only {num(misses.get('shared_off'), 0)}", "", "1",
            check(misses.get("shared_on"), lambda v: v == 1)),
    ]  # fmt: skip


def details(r: dict) -> list[str]:
    """No section of its own: the summary's rows say it all."""
    return []
