"""An assessment from submit to settled: the service behind POST /assessments and its thread."""

import logging
import threading
import time
import uuid

from flask import current_app

from ..assessment import (
    UNREAD,
    Area,
    PlaceAmbiguous,
    ProviderError,
    Stopped,
    hosted,
    place_address,
    resolve_place,
    run_assessment,
    unread,
)
from ..assessment.errors import UnreadableTiles
from ..database import dbretry
from ..operations import failpoints
from ..points import ledger
from . import transitions, views
from .executor import Executor
from .runner import Runner

log = logging.getLogger(__name__)


class AlreadyReported(Exception):
    """The user has a kept report of this area; starting again needs their confirmation."""

    def __init__(self, job_id: uuid.UUID, lang: str):
        super().__init__("a report of this area is already yours")
        self.job_id = job_id
        self.lang = lang  # the report's language: the other one is free to read


def submit(
    user_id: int, query: str, lang: str, generation: int, confirmed: bool | str = False
) -> uuid.UUID:
    """Start an assessment and return its job id; the work runs after this returns.

    Resolving the place and checking the balance charge nothing: the point is consumed
    by the job itself, before any expensive work. Unless confirmed, a place the user
    already has a kept report of raises AlreadyReported (in this language if there is
    one), so nobody pays twice for the same thing without knowing it. A confirmation may
    name the area's code: it then confirms that area only, not another typed in its place.
    """
    area = resolve_place(query)
    # The confirmation names the area the form previewed: before GSI moves it to its 番地.
    confirmed = confirmed is True or confirmed == area.code
    if not confirmed and (rest := unread(query)):
        # A street typed in romaji is not read: ask before the whole municipality is paid
        # for, offering it as the one choice (free), the form saying what was not read.
        raise PlaceAmbiguous(query, [area], parts=[(UNREAD, {"unread": rest})])
    if area.address and not current_app.extensions["layer_provider"].is_demo:
        url = current_app.config["GSI_ADDRESS_SEARCH_URL"]
        area = place_address(area, url, current_app.extensions["layer_cache"])
    if not confirmed and (reports := views.finished_reports(user_id, area)):
        same = next((r for r in reports if r.lang == lang), reports[0])
        raise AlreadyReported(same.id, same.lang)
    executor: Executor = current_app.extensions["executor"]
    job = (user_id, query, lang, area.to_dict(), generation)
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
            choice = app.extensions["provider_choice"]
            serving = choice["setting"] if choice["explicit"] else choice["mode"]
            job = hosted.payload(started.area, started.lang, serving)
            result = host.run(str(job_id), job, progress, stop)
        else:
            result = run_assessment(
                Area.from_dict(started.area),
                started.lang,
                provider=app.extensions["layer_provider"],
                cache=app.extensions["layer_cache"],
                progress=progress,
                stop=stop,  # a reaped or shut-down job gives up even inside a fetch
            )
        failpoints.hit("before_success")
        # Retried until it commits or the lease runs out; the conditional UPDATE makes a
        # retry of a commit that landed a no-op, and succeed() reads that as done.
        if dbretry.retry(lambda: transitions.succeed(job_id, result, run_id), until=lease.end()):
            log.info("job %s succeeded; layer cache %s", job_id, result.get("cache"))
        else:
            log.warning("job %s ended elsewhere while finishing; its result is discarded", job_id)
    except (transitions.JobCancelled, Stopped):
        log.info("job %s stopped: its row is no longer running", job_id)
    except LeaseRanOut:
        log.warning("job %s: the database was out of reach past its lease; work dropped", job_id)
    except ProviderError as exc:
        log.warning("job %s: provider failed: %s", job_id, exc)
        if isinstance(exc, UnreadableTiles):
            _unreadable(exc)
        _fail(
            job_id,
            "PROVIDER_ERROR",
            f'The "{exc.dataset}" hazard data could not be fetched: {exc.reason}.',
            lease,
        )
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


_alerted: dict[tuple[str, tuple[str, ...]], float] = {}
ALERT_AGAIN_SECONDS = 3600.0


def _unreadable(exc: UnreadableTiles) -> None:
    """Count a layer read in colours of no legend class, and alert once an hour per kind.

    Not tied to the job (which fails and refunds as any provider failure does): it is the
    data that needs an operator, whichever job met it first.
    """
    from ..operations import metrics
    from ..points import incidents

    metrics.UNKNOWN_COLOURS.labels(exc.path).inc()
    seen = (exc.path, tuple(exc.colours))
    now = time.monotonic()
    if now - _alerted.get(seen, -ALERT_AGAIN_SECONDS) < ALERT_AGAIN_SECONDS:
        return
    _alerted[seen] = now
    try:
        incidents.record(
            scope="data",
            code="UNKNOWN_COLOURS",
            severity="critical",
            job_id=None,
            user_id=None,
            detail=(
                f"{exc.path}: {exc.share:.1%} of the painted pixels are of no legend colour; "
                f"colours seen: {', '.join(exc.colours)}"
            ),
        )
    except Exception as error:  # noqa: BLE001 - the job's refund must not wait on an alert
        if not dbretry.is_transient(error):
            raise
        log.warning("could not record the unknown-colours incident: %s", error)
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
