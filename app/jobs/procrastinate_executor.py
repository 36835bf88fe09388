"""The queue executor: jobs deferred to procrastinate in the submit's own transaction.

Submit inserts the pending row and defers its task in one transaction, under a lock
that admits at most MAX_QUEUED_JOBS jobs waiting or running across every process: no
row without its task, no task without its row, nothing charged when the queue is full.
A worker (worker.py) runs the task, which is pipeline.run exactly as on a thread:
the same start-and-charge, heartbeat, conditional finish, reaper and finalizer.
Procrastinate never retries it: a job that died is refunded by the reaper, not re-run;
only a task taken while its worker stops goes back to the queue, never started.
"""

import json
import logging
import time
import uuid
from typing import Any

import procrastinate
from flask import Flask
from psycopg.errors import UniqueViolation
from psycopg.rows import namedtuple_row
from sqlalchemy.engine import make_url

from ..database import dbretry, limits
from ..extensions import db
from ..operations import failpoints
from . import pipeline, transitions
from .runner import Runner, RunnerBusy

log = logging.getLogger(__name__)

TASK_NAME = "assess"
OUTCOME_PATIENCE_SECONDS = 60.0  # how long a task waits for the database to read its outcome
QUEUE = "assessments"
# pg_advisory_xact_lock key held by a submit from its count to its commit ("HZPT").
ADMISSION_LOCK = 0x485A5054


class QueueFull(RunnerBusy):
    """As many jobs as MAX_QUEUED_JOBS are waiting or running: try again shortly."""


IN_FLIGHT_COUNT_SQL = "SELECT count(*) FROM assessment_jobs WHERE status IN ('pending', 'running')"
# procrastinate's own defer function, so the task row is written by this transaction.
DEFER_SQL = (
    "SELECT unnest(procrastinate_defer_jobs_v1(ARRAY[ROW("
    " %(queue)s, %(task)s, 0, NULL, NULL, %(args)s::jsonb, NULL"
    ")::procrastinate_job_to_defer_v1]))"
)


class ProcrastinateExecutor:
    """Defer each job to procrastinate's queue in the transaction that inserts its row."""

    name = "procrastinate"

    def __init__(self, max_queued: int):
        self.max_queued = max_queued

    def enqueue(
        self, user_id: int, query: str, lang: str, area: dict[str, Any], generation: int
    ) -> uuid.UUID:
        """Insert the job and defer its task in one transaction, or raise having written nothing."""
        params = {
            "u": user_id,
            "g": generation,
            "q": query,
            "l": lang,
            "a": transitions._json(area),
        }
        conn = db.engine.raw_connection()
        try:
            pg = conn.driver_connection
            pg.autocommit = True  # the transaction below is explicit: BEGIN ... COMMIT
            try:
                with pg.transaction(), pg.cursor(row_factory=namedtuple_row) as cur:
                    # Held to the commit: submits count and insert one at a time, so
                    # two of them can never both see room for one more job.
                    cur.execute("SELECT pg_advisory_xact_lock(%s)", (ADMISSION_LOCK,))
                    cur.execute(transitions._compiled(transitions.CREATE_SQL), params)
                    row = cur.fetchone()
                    if row is None:
                        raise transitions.NotEnoughPoints()
                    cur.execute(IN_FLIGHT_COUNT_SQL)  # this job included
                    if cur.fetchone()[0] > self.max_queued:
                        raise QueueFull()
                    failpoints.hit("after_insert")
                    cur.execute(
                        DEFER_SQL,
                        {"queue": QUEUE, "task": TASK_NAME, "args": _args(row.id)},
                    )
            finally:
                pg.autocommit = False
        except UniqueViolation as exc:
            if exc.diag.constraint_name == transitions.IN_FLIGHT_INDEX:
                raise transitions.AssessmentInFlight(transitions.in_flight_job(user_id)) from exc
            raise
        finally:
            conn.close()
        return row.id


def _args(job_id: uuid.UUID) -> str:
    return json.dumps({"job_id": str(job_id)})


class Requeued(Exception):
    """This worker is stopping: the task goes back to the queue, its job untouched."""


class JobNotSucceeded(Exception):
    """The task's job did not succeed: the queue records the task failed, as its job."""


# Only a task taken while its worker stops is tried again, by another worker a second
# later; a failed or stalled paid job is refunded by the reaper, never re-run.
REQUEUE = procrastinate.RetryStrategy(retry_exceptions=[Requeued], wait=1)


def run_task(app: Flask, job_id: str) -> None:
    """Run one deferred job as the thread executor would; a settled job is left alone.

    Returns only if the job succeeded: otherwise it raises, so the queue's record of the
    task says what happened to its job when the task ends.
    """
    job = uuid.UUID(job_id)
    with limits.role("job"), app.app_context():
        runner: Runner = app.extensions["runner"]
        with runner.track(job) as stop:
            if stop.is_set():
                # Taken as this worker stops: the job never started and is not charged;
                # it waits in the queue for another worker, as queued jobs do.
                raise Requeued(f"job {job}: this worker is stopping")
            # pipeline.run moves it pending -> running only if it is still pending: a
            # task whose row was reaped or settled meanwhile does nothing.
            pipeline.run(job, stop)
        failpoints.hit("before_task_outcome")
        # The job has ended; the task's outcome is its row's. A database blip here must
        # not record a succeeded job's task failed: the read is waited out a while.
        status = dbretry.retry(
            lambda: transitions.status_of(job), until=time.monotonic() + OUTCOME_PATIENCE_SECONDS
        )
    if status == "pending" and stop.is_set():
        # The stop came before the start could charge it (read under the row's lock):
        # never started, it goes back to the queue like a task taken during the stop.
        raise Requeued(f"job {job}: this worker stopped before it started")
    if status != "succeeded":
        raise JobNotSucceeded(f"job {job} is {status}")


def libpq_url(app: Flask) -> str:
    """Return the app's database URL as libpq reads it (no SQLAlchemy driver name)."""
    url = make_url(app.config["SQLALCHEMY_DATABASE_URI"]).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


def queue_app(app: Flask) -> procrastinate.App:
    """Return a procrastinate app on the same database with the assessment task registered."""
    queue = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=libpq_url(app),
            max_size=4,
            # The same keepalives as the app's pool, and limits of its own.
            kwargs={**limits.connect_args(), "options": limits.queue_options()},
        )
    )

    @queue.task(name=TASK_NAME, queue=QUEUE, retry=REQUEUE)
    def assess(job_id: str) -> None:
        run_task(app, job_id)

    return queue
