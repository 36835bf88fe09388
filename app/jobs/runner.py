"""The in-process executor: bounded slots, job threads with an app context, heartbeat, shutdown.

No queue: a submit takes a slot, inserts the row and starts a daemon thread. The
database row, not this object, is the job's state; the runner only knows which jobs
live in this process so it can keep their heartbeat fresh and settle them on exit.
"""

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator

from flask import Flask

from ..database import dbretry, limits
from ..extensions import db
from ..operations import metrics
from . import transitions

log = logging.getLogger(__name__)


class RunnerBusy(Exception):
    """Every slot of this process is taken."""


class Runner:
    """Run jobs on daemon threads, at most max_jobs at a time."""

    def __init__(self, app: Flask, max_jobs: int, heartbeat_seconds: float):
        self.app = app
        self.max_jobs = max_jobs
        self.heartbeat_seconds = heartbeat_seconds
        self._slots = threading.BoundedSemaphore(max_jobs)
        self._lock = threading.Lock()
        self._live: dict[uuid.UUID, threading.Event] = {}  # job id -> its stop signal
        self._tracked: set[uuid.UUID] = set()  # of those, a queue worker's tasks
        self._closing = False
        self.draining = False  # written to its jobs' rows: "finishing before a restart"
        self._heartbeat: threading.Thread | None = None
        self._wake = threading.Event()
        self.last_beat = 0.0  # monotonic start of the last heartbeat that reached the database

    def reserve(self) -> None:
        """Take a slot for a job about to be created, or raise RunnerBusy."""
        with self._lock:
            if self._closing or not self._slots.acquire(blocking=False):
                raise RunnerBusy()
        metrics.slot_taken()

    def release(self) -> None:
        """Give back a slot that was reserved but not used."""
        self._slots.release()
        metrics.slot_released()

    def start(self, job_id: uuid.UUID, work: Callable[[uuid.UUID, threading.Event], None]) -> None:
        """Run work(job_id, stop) on a daemon thread inside an app context, holding a slot."""
        stop = threading.Event()
        with self._lock:
            self._live[job_id] = stop
        try:
            self._ensure_heartbeat()
            threading.Thread(
                target=self._run, args=(job_id, work, stop), name=f"job-{job_id}", daemon=True
            ).start()
        except BaseException:
            # The OS refused a thread ("can't start new thread"): nothing will run this
            # job, so it must not keep a slot or a heartbeat. It was never charged.
            with self._lock:
                self._live.pop(job_id, None)
            self.release()
            log.exception("could not start a thread for job %s", job_id)
            try:
                transitions.fail_and_settle(job_id, transitions.INTERRUPTED, NOT_STARTED_MESSAGE)
            except Exception:  # noqa: BLE001 - the sweep settles it once its lease runs out
                db.session.rollback()
                log.exception("could not settle job %s that never started", job_id)
            raise RunnerBusy() from None

    def _run(self, job_id, work, stop) -> None:
        limits.set_role("job")
        try:
            with self.app.app_context():
                work(job_id, stop)
        except BaseException:  # noqa: BLE001 - a thread's last word must be logged
            log.exception("job %s crashed its thread", job_id)
        finally:
            with self._lock:
                self._live.pop(job_id, None)
            self.release()

    @contextlib.contextmanager
    def track(self, job_id: uuid.UUID) -> Iterator[threading.Event]:
        """Count a job run on another owner's thread as living here; yield its stop signal.

        For a queue worker's threads: the job gets the same heartbeat, the same stop
        signal when its row stops running, and the settling at shutdown of a job that
        started (one still pending goes back to the queue: see shutdown). The stop
        signal is already set when this process is shutting down, and such a job is
        not counted here (the shutdown does not settle it: it never started). A second
        delivery of a job that lives here already shares the first's stop signal and
        leaves it the heartbeat.
        """
        with self._lock:
            first = not self._closing and job_id not in self._live
            stop = self._live.get(job_id) or threading.Event()
            if self._closing:
                stop.set()
            if first:
                self._live[job_id] = stop
                self._tracked.add(job_id)
        self._ensure_heartbeat()
        try:
            yield stop
        finally:
            if first:
                with self._lock:
                    self._live.pop(job_id, None)
                    self._tracked.discard(job_id)

    def wait(self, timeout: float) -> bool:
        """Wait until no job lives in this process; False if some still run after timeout."""
        deadline = time.monotonic() + timeout
        while self.running_ids():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def running_ids(self) -> list[uuid.UUID]:
        """Return the ids of the jobs living in this process."""
        with self._lock:
            return list(self._live)

    def _ensure_heartbeat(self) -> None:
        with self._lock:
            if self._heartbeat is None or not self._heartbeat.is_alive():
                self._heartbeat = threading.Thread(
                    target=self._beat, name="job-heartbeat", daemon=True
                )
                self._heartbeat.start()

    def _beat(self) -> None:
        """Keep live jobs' heartbeat fresh; tell jobs whose row stopped running to stop."""
        limits.set_role("heartbeat")
        while not self._wake.wait(self.heartbeat_seconds):
            began = time.monotonic()  # before the snapshot: every job in it is covered
            ids = self.running_ids()
            if not ids:
                continue
            try:
                with self.app.app_context():
                    alive = transitions.heartbeat(ids, self.draining)
            except Exception as exc:  # noqa: BLE001 - a missed beat is retried; the lease covers it
                if dbretry.is_transient(exc):
                    dbretry.outage.failed(exc)  # one line per outage, not one per beat
                else:
                    log.exception("heartbeat failed")
                continue
            self.last_beat = began
            with self._lock:
                for job_id in ids:
                    # A row that left pending/running was reaped or shut down: stop.
                    if job_id not in alive and (stop := self._live.get(job_id)) is not None:
                        stop.set()

    def stop_admitting(self) -> None:
        """Take no new job from here on (a submit gets 503); the running ones go on."""
        with self._lock:
            self._closing = True
            self.draining = True

    def drain(self, seconds: float) -> None:
        """Let running jobs finish for up to seconds, then fail and settle the rest."""
        self.stop_admitting()
        if seconds > 0 and (ids := self.running_ids()):
            log.warning("draining: waiting up to %g s for %d job(s)", seconds, len(ids))
            try:  # their pages say so now, not at the next heartbeat (which says it too)
                with self.app.app_context():
                    transitions.heartbeat(ids, draining=True)
            except Exception:  # noqa: BLE001 - the next heartbeat writes it
                log.exception("could not mark the draining jobs")
            self.wait(seconds)
        self.shutdown()

    def shutdown(self) -> None:
        """Fail and settle the jobs of this process now, so users see the truth at once.

        A queue task's job that has not started yet is left pending at first: its task
        sees the stop signal (at the latest under the row's lock, in the start) and goes
        back to the queue uncharged. One still here REQUEUE_SECONDS later (its thread
        waits on a connection or a lock) is failed like the others, so its page says so
        now and not a lease later. Every stop signal is set before the first row is failed.
        """
        with self._lock:
            self._closing = True  # no new job starts from here on
            live = list(self._live.items())
            tracked = set(self._tracked)
        self._wake.set()
        for _, stop in live:
            stop.set()
        # What the work keeps beside its jobs (the report's pixel pool) ends with them,
        # before any exit hook would wait for it.
        if (work := self.app.extensions.get("work")) is not None:
            work.shutdown()
        if (host := self.app.extensions.get("work_host")) is not None:
            host.shutdown()  # its jobs' threads raise Stopped, and are settled below
        if not live:
            return
        with self.app.app_context():
            pending = {
                job_id
                for job_id, _ in live
                if not self._settle(job_id, started_only=job_id in tracked) and job_id in tracked
            }
            deadline = time.monotonic() + REQUEUE_SECONDS
            while (left := pending & set(self.running_ids())) and time.monotonic() < deadline:
                time.sleep(0.01)
            for job_id in left:
                self._settle(job_id)

    def _settle(self, job_id: uuid.UUID, started_only: bool = False) -> bool:
        """Fail and settle one job at shutdown; True if this failed it."""
        try:
            failed = transitions.fail_and_settle(
                job_id,
                transitions.INTERRUPTED,
                SHUTDOWN_MESSAGE,
                path="shutdown",
                started_only=started_only,
            )
        except Exception:  # noqa: BLE001 - the next poll's reaper settles it
            db.session.rollback()
            log.exception("could not settle job %s at shutdown", job_id)
            return False
        if failed:
            log.warning("settled job %s at shutdown", job_id)
        return failed


# How long the shutdown lets a queue task that had not started go back to the queue.
REQUEUE_SECONDS = 0.5
SHUTDOWN_MESSAGE = "The service restarted while your assessment was running."
NOT_STARTED_MESSAGE = "The service was too busy to start your assessment."
