"""A queue worker process: procrastinate runs the deferred jobs, we settle them on SIGTERM.

The worker holds the same Runner as a web process, used only for its bookkeeping: the
jobs it runs get the runner's heartbeat and stop signal, and on SIGTERM or SIGINT the
runner fails and settles them (INTERRUPTED, refunded) before the process exits. With
DRAIN_SECONDS set, the worker first takes nothing more from the queue and lets its
running jobs finish for up to that long, as a web process does.
"""

import asyncio
import atexit
import logging
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from flask import Flask
from procrastinate.exceptions import ConnectorException
from procrastinate.worker import Worker
from psycopg.errors import ForeignKeyViolation
from sqlalchemy import text

from ..extensions import db
from .procrastinate_executor import QUEUE, TASK_NAME, queue_app
from .runner import Runner

log = logging.getLogger(__name__)

# A queued job's row is kept fresh while a worker lives, so it waits in the queue instead
# of being reaped after one lease; with no worker left, it is reaped (nothing was charged).
KEEP_QUEUED_SQL = text(
    "UPDATE assessment_jobs j SET heartbeat_at = now() FROM procrastinate_jobs q"
    " WHERE q.task_name = :task AND q.status = 'todo' AND j.status = 'pending'"
    " AND j.id = (q.args->>'job_id')::uuid"
)

# A task still `doing` although its job was settled `grace` seconds ago may belong to a
# worker that died between the two (SIGKILL, a lost machine): procrastinate never re-runs
# it and never ends it, so it would read `doing` for ever. Both must say so: the job row
# (a draining or slow worker's task is never closed while its job runs) and the worker's
# own heartbeat row (a live worker ends its task itself, with its job's outcome, when
# the task's thread returns, however long after the job settled that is: nothing
# assumes the thread returns within the grace). The task gets its job's outcome. SKIP
# LOCKED and the status re-check let several workers close concurrently, each task once.
CLOSE_SETTLED_TASKS_SQL = text(
    "WITH done AS ("
    " SELECT q.id, CASE j.status WHEN 'succeeded' THEN 'succeeded' ELSE 'failed' END AS outcome"
    " FROM procrastinate_jobs q JOIN assessment_jobs j ON j.id = (q.args->>'job_id')::uuid"
    " WHERE q.task_name = :task AND q.status = 'doing'"
    " AND (j.status = 'succeeded' OR (j.status = 'failed' AND j.finalized_at IS NOT NULL))"
    " AND greatest(j.finished_at, j.finalized_at) < now() - make_interval(secs => :grace)"
    " AND NOT EXISTS (SELECT 1 FROM procrastinate_workers w WHERE w.id = q.worker_id"
    "   AND w.last_heartbeat > now() - make_interval(secs => :worker_gone))"
    " ORDER BY q.id LIMIT 100 FOR UPDATE OF q SKIP LOCKED)"
    " SELECT id, outcome, procrastinate_finish_job_v1(id, outcome::procrastinate_job_status, false)"
    " FROM done"
)


def close_settled_tasks(grace_seconds: float, worker_gone_seconds: float) -> int:
    """End the tasks that dead workers left `doing` after their jobs settled; count them.

    A worker is dead when its heartbeat row is older than worker_gone_seconds (or gone).
    """
    rows = db.session.execute(
        CLOSE_SETTLED_TASKS_SQL,
        {"task": TASK_NAME, "grace": grace_seconds, "worker_gone": worker_gone_seconds},
    ).all()
    db.session.commit()
    for task_id, outcome, _ in rows:
        log.warning("task %s of a dead worker recorded as %s, not run again", task_id, outcome)
    return len(rows)


# The tasks this worker is running, claimed again under its new registration.
CLAIM_RUNNING_SQL = (
    "UPDATE procrastinate_jobs SET worker_id = %(worker_id)s"
    " WHERE id = ANY(%(ids)s) AND status = 'doing' AND worker_id IS NULL"
)
# procrastinate's heartbeat, which also says whether the worker's row is still there.
BEAT_SQL = (
    "UPDATE procrastinate_workers SET last_heartbeat = now() WHERE id = %(worker_id)s RETURNING id"
)


def pruned(error: ConnectorException) -> bool:
    """Tell whether a fetch failed because a peer pruned this worker's row."""
    cause = error.__cause__
    return (
        isinstance(cause, ForeignKeyViolation)
        and cause.diag.constraint_name == "procrastinate_jobs_worker_id_fkey"
    )


class QueueWorker(Worker):
    """procrastinate's Worker, which registers again when a peer pruned its row.

    Every worker prunes the rows of workers whose heartbeat is older than
    stalled_worker_timeout (a lease) when it starts. A database outage longer than that
    stalls a live worker's heartbeat, a peer starting meanwhile deletes its row (its
    running tasks' worker becomes NULL, and the worker looks dead to close_settled_tasks),
    and its next fetch would fail on the foreign key to procrastinate_workers. Nothing else
    is wrong: its jobs still run and beat. So whichever notices first, its heartbeat (the
    row is gone) or a fetch (the foreign key), registers it again and claims the tasks it
    is running; it goes on instead of ending and having them failed and refunded. Pruned
    again within a lease of registering, it ends: that is no stalled heartbeat.
    """

    _registered_at = float("-inf")
    _registering: asyncio.Lock | None = None

    async def _register_again(self, pruned_id: int | None) -> None:
        self._registering = self._registering or asyncio.Lock()
        async with self._registering:
            if self.worker_id != pruned_id:
                return  # the heartbeat or a fetch did it meanwhile
            # A peer prunes a row whose heartbeat is a lease old, and the row's first beat is
            # its registration: so a prune is never within a lease of asking to register,
            # however long the answer took.
            asked = time.monotonic()
            if asked - self._registered_at < self.stalled_worker_timeout:
                raise RuntimeError(f"worker {pruned_id} was pruned again right after registering")
            self._registered_at = asked
            self.worker_id = await self.app.job_manager.register_worker()
            running = [context.job.id for context in self._running_jobs.values()]
            if running:
                await self.app.connector.execute_query_async(
                    CLAIM_RUNNING_SQL, worker_id=self.worker_id, ids=running
                )
            log.warning(
                "worker %s was pruned by a peer while its heartbeat stalled; registered"
                " again as %s with its %d running tasks",
                pruned_id,
                self.worker_id,
                len(running),
            )

    async def _fetch_and_process_jobs(self) -> None:
        while True:
            worker_id = self.worker_id
            try:
                return await super()._fetch_and_process_jobs()
            except ConnectorException as error:
                if not pruned(error):
                    raise
            await self._register_again(worker_id)

    async def _update_heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.update_heartbeat_interval)
            worker_id = self.worker_id
            beat = await self.app.connector.execute_query_all_async(BEAT_SQL, worker_id=worker_id)
            if not beat:
                await self._register_again(worker_id)


def run(app: Flask, concurrency: int, graceful_seconds: float = 1.0) -> None:
    """Run jobs from the queue until told to stop; drain, settle the rest, then exit."""
    queue = queue_app(app)
    runner: Runner = app.extensions["runner"]
    drain_seconds = app.config["DRAIN_SECONDS"]
    stopping = threading.Event()
    # drain(0) is shutdown(): the running jobs are failed and settled at once.
    settled = threading.Thread(target=runner.drain, args=(drain_seconds,), name="settle-at-stop")

    # A live worker ends its own task: another closes it only once the job has settled a
    # while ago and the worker's procrastinate heartbeat (every heartbeat interval here)
    # is older than a lease.
    lease = app.config["JOB_LEASE_SECONDS"]
    task_grace = lease + drain_seconds + graceful_seconds

    def keep_queued() -> None:
        while not stopping.wait(app.config["JOB_HEARTBEAT_SECONDS"]):
            try:
                with app.app_context():
                    db.session.execute(KEEP_QUEUED_SQL, {"task": TASK_NAME})
                    db.session.commit()
                    close_settled_tasks(task_grace, lease)
            except Exception:  # noqa: BLE001 - a missed beat is retried; the lease covers it
                log.exception("could not keep queued jobs fresh")

    async def main() -> None:
        worker = QueueWorker(
            queue,
            queues=[QUEUE],
            concurrency=concurrency,
            install_signal_handlers=False,
            # Our own drain decides when a running job is given up; procrastinate
            # only waits for it (a sync task cannot be aborted from outside anyway).
            shutdown_graceful_timeout=drain_seconds + graceful_seconds,
            # Its heartbeat row says it is alive: while it is, no other worker ends its tasks.
            update_heartbeat_interval=app.config["JOB_HEARTBEAT_SECONDS"],
            stalled_worker_timeout=lease,
        )
        told = asyncio.Event()

        def stop() -> None:
            if stopping.is_set():
                return
            stopping.set()
            log.warning(
                "stopping: taking no more jobs; running ones get %g s, then are settled",
                drain_seconds,
            )
            worker.stop()  # fetch nothing more: queued jobs stay queued for other workers
            settled.start()  # off the event loop: it waits on the jobs and the database
            told.set()

        loop = asyncio.get_running_loop()
        # procrastinate runs a sync task on the loop's default executor, which holds only
        # cpu_count + 4 threads: a job beyond them would be taken from the queue and then
        # wait unstarted. One thread per job slot, and one for waiting on the settling.
        loop.set_default_executor(
            ThreadPoolExecutor(max_workers=concurrency + 1, thread_name_prefix="queue-job")
        )
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
        async with queue.open_async():
            running = asyncio.create_task(worker.run())
            await asyncio.wait(
                [running, asyncio.create_task(told.wait())], return_when=asyncio.FIRST_COMPLETED
            )
            if running.done() and not told.is_set():
                running.result()  # its error, if any, ends the worker with code 1 below
                # procrastinate stopped by itself (its listener lost the database, say): a
                # stop nobody asked for is a failure, so a supervisor restarts this worker.
                raise RuntimeError("the queue worker stopped without being told to")
            await asyncio.to_thread(settled.join)
            # The jobs are settled; give procrastinate a moment to record its own end,
            # but not the minutes an abandoned job's thread may still sleep.
            await asyncio.wait([running], timeout=graceful_seconds)
            if not running.done():
                _exit(0)

    threading.Thread(target=keep_queued, name="keep-queued", daemon=True).start()
    if recheck := app.extensions.get("provider_recheck"):
        # LAYER_PROVIDER unset: ask the services again, as the web processes do on their
        # first request, so this worker follows them between real and demo data.
        recheck["start"]()
    code = 0
    try:
        asyncio.run(main())
    except BaseException:  # noqa: BLE001 - the jobs are settled below whatever happened
        log.exception("worker stopped by an error")
        code = 1
    stopping.set()
    if settled.ident is None:
        settled.start()
    settled.join()
    _exit(code)


def _exit(code: int) -> None:
    # Every job of this worker is settled in the database. What is left are the
    # abandoned jobs' threads (a fetch may sleep for minutes), which the interpreter
    # would join: nothing in them matters any more, so leave now, after the exit hooks
    # (the embedded PostgreSQL stops with the last process that uses it).
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
