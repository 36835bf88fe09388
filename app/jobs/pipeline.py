"""A job from submit to settled: the service behind POST /assessments and its thread.

What the job computes is its work's (app/jobs/work.py): this module knows nothing of it.
"""

import logging
import threading
import time
import uuid

from flask import current_app

from ..database import dbretry
from ..operations import failpoints
from ..points import ledger
from . import transitions, views
from .executor import Executor
from .runner import Runner

log = logging.getLogger(__name__)


def submit(
    user_id: int, query: str, lang: str, generation: int, confirmed: bool | str = False
) -> uuid.UUID:
    """Start a job and return its id; the work runs after this returns.

    The work's prepare reads the submit into the job's input and raises what the reader
    must answer first (app/jobs/work.py); nothing is charged: the point is consumed by
    the job itself, before any expensive work.
    """
    work = current_app.extensions["work"]
    job_input = work.prepare(user_id, query, lang, confirmed)
    executor: Executor = current_app.extensions["executor"]
    job = (user_id, query, lang, job_input, generation)
    try:
        return executor.enqueue(*job)
    except transitions.AssessmentInFlight as exc:
        # The job in the way may be an orphan of a crash that nobody has polled since:
        # settle it the way a poll would, and if that frees the user, try once more.
        in_the_way = views.view(exc.job_id, user_id) if exc.job_id else None
        if in_the_way is None or in_the_way.status in ("pending", "running"):
            raise
        return executor.enqueue(*job)
    except transitions.NotEnoughPoints:
        # Such an orphan may hold the last point: then the INSERT's balance check refuses
        # before the one-in-flight index can say so. Settle the user's unsettled jobs as
        # a poll would; if one of them was, the ledger answers the second INSERT.
        if not views.settle_user_jobs(user_id):
            raise
        return executor.enqueue(*job)


def run(job_id: uuid.UUID, stop: threading.Event) -> None:
    """Run one job on its thread: start and charge, work, finish; settle it if it fails.

    A database blip shorter than the lease does not end the job: the start and the
    finish are retried while the lease lasts, progress writes are best-effort.
    """
    app = current_app._get_current_object()
    work = app.extensions["work"]  # before the try: its errors name the except clauses
    lease = Lease(app.config["JOB_LEASE_SECONDS"], app.extensions["runner"])
    run_id = uuid.uuid4()  # this run's identity in the row: a second delivery is not it

    def progress(step: str, percent: int) -> None:
        if stop.is_set():
            raise transitions.JobCancelled(str(job_id))
        began = time.monotonic()
        try:
            transitions.report_progress(job_id, step, percent)
        except Exception as exc:
            if not dbretry.is_transient(exc):
                raise
            dbretry.rollback()
            dbretry.outage.failed(exc)
            if lease.ended():
                raise LeaseRanOut() from exc
            return  # best-effort: the heartbeat or the next step writes again
        lease.renewed(began)

    try:
        try:
            started = dbretry.retry(
                lambda: transitions.start(job_id, run_id, stop), until=lease.end(), stop=stop
            )
        except ledger.InsufficientPoints:
            _fail(job_id, "NO_POINTS", "You had no point left when the assessment started.", lease)
            return
        if started is None:
            log.info(
                "job %s was no longer pending, is another run's, or its process is stopping;"
                " not started",
                job_id,
            )
            return
        lease.renewed(time.monotonic())
        failpoints.hit("after_consume")
        # Only now, with the point consumed, does the paid work begin.
        if (host := app.extensions.get("work_host")) is not None:
            # In the work's process: this thread keeps the job's life, the pages the GIL.
            payload = work.payload(started.area, started.lang)
            result = host.run(str(job_id), payload, progress, stop)
        else:
            # A reaped or shut-down job gives up even inside its work: stop is set.
            result = work.run(started.area, started.lang, progress, stop)
        failpoints.hit("before_success")
        # Retried until it commits or the lease runs out; the conditional UPDATE makes a
        # retry of a commit that landed a no-op, and succeed() reads that as done.
        if dbretry.retry(
            lambda: transitions.succeed(job_id, result, run_id, work.READY), until=lease.end()
        ):
            log.info("job %s succeeded; layer cache %s", job_id, result.get("cache"))
        else:
            log.warning("job %s ended elsewhere while finishing; its result is discarded", job_id)
        try:  # what the result says of the data is true whether or not it was kept
            for said in work.alerts(result):
                _record(*said)
        except Exception:  # noqa: BLE001 - a delivered report does not wait on an alert
            dbretry.rollback()
            log.exception("job %s: the work's alerts could not be recorded", job_id)
    except (transitions.JobCancelled, work.Stopped):
        log.info("job %s stopped: its row is no longer running", job_id)
    except LeaseRanOut:
        log.warning("job %s: the database was out of reach past its lease; work dropped", job_id)
    except work.Refundable as exc:
        log.warning("job %s: provider failed: %s", job_id, exc)
        try:
            if alert := work.alert(exc):
                _record(*alert)
        except Exception:  # noqa: BLE001 - the refund must not wait on an alert
            dbretry.rollback()
            log.exception("job %s: the work's alert could not be recorded", job_id)
        _fail(job_id, "PROVIDER_ERROR", work.failure(exc), lease)
    except Exception as exc:
        if dbretry.is_transient(exc) and lease.ended():
            # Retried until the lease ran out: the reaper's refund stands, nothing is
            # charged twice, and there is no database to write a failure to.
            log.warning(
                "job %s: the database was out of reach past its lease; work dropped", job_id
            )
            return
        log.exception("job %s failed", job_id)
        _fail(
            job_id,
            "INTERNAL_ERROR",
            "The assessment failed because of an error on our side.",
            lease,
        )


class LeaseRanOut(Exception):
    """The database stayed out of reach past the job's lease: the reaper settles the job."""


class Lease:
    """When this job's lease ends, as far as this process can tell without the database.

    The database's clock decides (the reaper's WHERE); this local estimate only bounds
    how long the thread retries. It counts from the last write that kept the job alive:
    the thread's own, or the runner's heartbeat.
    """

    def __init__(self, seconds: float, runner: Runner):
        self.seconds = seconds
        self.runner = runner
        self.alive_at = time.monotonic()  # the thread starts just after the row's creation

    def renewed(self, at: float) -> None:
        """Note a write that kept the job alive, begun at `at` (monotonic)."""
        self.alive_at = max(self.alive_at, at)

    def end(self) -> float:
        """Return the monotonic time at which the lease runs out."""
        return max(self.alive_at, self.runner.last_beat) + self.seconds

    def ended(self) -> bool:
        """Tell whether the lease has run out."""
        return time.monotonic() >= self.end()


_alerted: dict[tuple[str, str], float] = {}
ALERT_AGAIN_SECONDS = 3600.0


def _record(code: str, key: str, detail: str) -> None:
    """Open a critical incident for what the work says needs an operator: once an hour per key.

    Not tied to the job (which fails and refunds as any refundable failure does, or
    succeeds): it is the work's data or sources that need an operator, whichever job met
    it first.
    """
    from ..points import incidents

    now = time.monotonic()
    if now - _alerted.get((code, key), -ALERT_AGAIN_SECONDS) < ALERT_AGAIN_SECONDS:
        return
    _alerted[(code, key)] = now
    try:
        incidents.record(
            scope="data", code=code, severity="critical", job_id=None, user_id=None, detail=detail
        )
    except Exception as error:  # noqa: BLE001 - the job's refund must not wait on an alert
        if not dbretry.is_transient(error):
            raise
        log.warning("could not record the %s incident: %s", code, error)
    finally:
        dbretry.rollback()


def _fail(job_id: uuid.UUID, code: str, message: str, lease: Lease) -> None:
    dbretry.rollback()
    try:
        # fail_and_settle is conditional and finalize idempotent: a retry is safe, and
        # a retry after a fail() whose answer was lost still settles the job.
        dbretry.retry(
            lambda: transitions.fail_and_settle(job_id, code, message, until=lease.end()),
            until=lease.end(),
        )
    except Exception as exc:
        if not dbretry.is_transient(exc):
            raise
        log.warning("job %s: could not record its failure; the reaper settles it", job_id)
