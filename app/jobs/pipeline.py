"""An assessment from submit to settled: the service behind POST /assessments and its thread."""

import logging
import threading
import uuid

from flask import current_app

from .. import failpoints
from ..assessment import Area, ProviderError, resolve_place, run_assessment
from ..extensions import db
from ..points import ledger
from . import transitions, views
from .executor import Executor

log = logging.getLogger(__name__)


def submit(user_id: int, query: str, lang: str) -> uuid.UUID:
    """Start an assessment and return its job id; the work runs after this returns.

    Resolving the place and checking the balance charge nothing: the point is consumed
    by the job itself, before any expensive work.
    """
    area = resolve_place(query)
    executor: Executor = current_app.extensions["executor"]
    try:
        return executor.enqueue(user_id, query, lang, area.to_dict())
    except transitions.AssessmentInFlight as exc:
        # The job in the way may be an orphan of a crash that nobody has polled since:
        # settle it the way a poll would, and if that frees the user, try once more.
        in_the_way = views.view(exc.job_id, user_id) if exc.job_id else None
        if in_the_way is None or in_the_way.status in ("pending", "running"):
            raise
        return executor.enqueue(user_id, query, lang, area.to_dict())


def run(job_id: uuid.UUID, stop: threading.Event) -> None:
    """Run one job on its thread: start and charge, work, finish; settle it if it fails."""
    app = current_app._get_current_object()

    def progress(step: str, percent: int) -> None:
        if stop.is_set():
            raise transitions.JobCancelled(str(job_id))
        transitions.report_progress(job_id, step, percent)

    try:
        try:
            started = transitions.start(job_id)
        except ledger.InsufficientPoints:
            _fail(job_id, "NO_POINTS", "You had no point left when the assessment started.")
            return
        if started is None:
            log.info("job %s was no longer pending; not started", job_id)
            return
        failpoints.hit("after_consume")
        # Only now, with the point consumed, does the paid work begin.
        result = run_assessment(
            Area.from_dict(started.area),
            started.lang,
            provider=app.extensions["layer_provider"],
            cache=app.extensions["layer_cache"],
            progress=progress,
        )
        failpoints.hit("before_success")
        if transitions.succeed(job_id, result):
            log.info("job %s succeeded; layer cache %s", job_id, result.get("cache"))
        else:
            log.warning("job %s ended elsewhere while finishing; its result is discarded", job_id)
    except transitions.JobCancelled:
        log.info("job %s stopped: its row is no longer running", job_id)
    except ProviderError as exc:
        log.warning("job %s: provider failed: %s", job_id, exc)
        _fail(
            job_id,
            "PROVIDER_ERROR",
            f'The "{exc.dataset}" hazard data could not be fetched: {exc.reason}.',
        )
    except Exception:
        log.exception("job %s failed", job_id)
        _fail(job_id, "INTERNAL_ERROR", "The assessment failed because of an error on our side.")


def _fail(job_id: uuid.UUID, code: str, message: str) -> None:
    db.session.rollback()
    transitions.fail_and_settle(job_id, code, message)
