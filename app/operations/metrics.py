"""What jobs and points did, counted for Prometheus and logged, one line per event.

Every function here is called after the transition it reports has committed, and only
by the caller whose conditional UPDATE matched: a rolled-back or lost transition counts
nothing and logs nothing. With PROMETHEUS_MULTIPROC_DIR set (before this module is
first imported), prometheus_client keeps the values in files there, so every worker's
counts add up at /metrics.
"""

import logging
import uuid

from prometheus_client import Counter, Gauge, Histogram

log = logging.getLogger("app.events")

# Jobs run seconds (tests) to many minutes (production), polls a fraction of a millisecond.
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, float("inf"))
POLL_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, float("inf"))

SUBMITS = Counter("hazard_submits", "Submits of an assessment, by HTTP status", ["outcome"])
JOBS_FINISHED = Counter(
    "hazard_jobs_finished", "Jobs that ended, by status and error code", ["status", "error_code"]
)
REAPS = Counter("hazard_reaps", "Stale jobs failed by the reaper")
REAP_DELAY = Histogram(
    "hazard_reap_delay_seconds",
    "From a reaped job's last sign of life to its reap",
    buckets=DURATION_BUCKETS,
)
REFUNDS = Counter("hazard_refunds", "Points refunded, by the path that refunded", ["path"])
INCIDENTS_OPENED = Counter(
    "hazard_incidents_opened", "Incidents opened, by code and severity", ["code", "severity"]
)
UNKNOWN_COLOURS = Counter(
    "hazard_unknown_colour_layers",
    "Zone layers not read: too many pixels of no legend colour, by portal dataset",
    ["dataset"],
)
INCIDENTS_RESOLVED = Counter("hazard_incidents_resolved", "Incidents resolved, by code", ["code"])
# Points people buy (app/points/purchases.py), counted once each: only by the delivery
# whose INSERT made the ledger row.
CHECKOUTS = Counter("hazard_checkouts_started", "Stripe Checkout Sessions created")
PURCHASES = Counter("hazard_purchases", "Point packs bought and credited, by pack", ["points"])
PURCHASED_POINTS = Counter("hazard_purchased_points", "Points credited by purchases")
PURCHASED_YEN = Counter("hazard_purchased_yen", "Yen paid for credited purchases, tax included")
PURCHASE_REFUNDS = Counter(
    "hazard_purchase_refunds",
    "Refunded payments whose points were taken back, by whether some were spent",
    ["outcome"],
)
WEBHOOK_EVENTS = Counter(
    "hazard_stripe_webhook_events",
    "Verified Stripe events, by type and outcome",
    ["type", "outcome"],
)
SLOTS_IN_USE = Gauge(
    "hazard_runner_slots_in_use", "Runner slots taken in this process", multiprocess_mode="livesum"
)
JOB_DURATION = Histogram(
    "hazard_job_duration_seconds", "From a job's start to its end", buckets=DURATION_BUCKETS
)
POLL_SECONDS = Histogram(
    "hazard_status_poll_seconds",
    "Time to answer a status poll, by the path that answered it",
    ["path"],
    buckets=POLL_BUCKETS,
)
# Bound once: the poll is the hot path, so it pays one observe and no label lookup.
POLL_FAST = POLL_SECONDS.labels("fast")
POLL_FULL = POLL_SECONDS.labels("full")
POLL_UNCHANGED = POLL_SECONDS.labels("unchanged")  # answered 304: the browser had it


def _event(
    level: int,
    summary: str,
    transition: str,
    outcome: str,
    job_id: object,
    user_id: object,
    **more: object,
) -> None:
    fields = {"transition": transition, "outcome": outcome, "job_id": job_id, "user_id": user_id}
    fields.update(more)
    pairs = " ".join(f"{k}={'' if v is None else v}" for k, v in fields.items())
    # The text format reads the message; the JSON format gets the same fields as keys.
    extra = {k: (str(v) if isinstance(v, uuid.UUID) else v) for k, v in fields.items()}
    log.log(level, f"{summary}: {pairs}", extra=extra)


def submitted(status_code: int, user_id: int | None, job_id: uuid.UUID | None = None) -> None:
    """Count and log a submit by its HTTP status."""
    SUBMITS.labels(str(status_code)).inc()
    _event(logging.INFO, "submit answered", "submit", str(status_code), job_id, user_id)


def job_started(job_id: uuid.UUID, user_id: int) -> None:
    """Log a job that started running with its point consumed."""
    _event(logging.INFO, "job started, point consumed", "start", "running", job_id, user_id)


def job_finished(
    job_id: uuid.UUID, user_id: int, status: str, error_code: str | None, duration: float | None
) -> None:
    """Count and log a job that left pending/running; a user's cancel counts as "cancelled"."""
    if status == "failed" and error_code == "CANCELLED":
        status = "cancelled"  # its own outcome: a failure rate must not count a user's choice
    JOBS_FINISHED.labels(status, error_code or "").inc()
    if duration is not None:
        JOB_DURATION.observe(max(0.0, duration))
    level = logging.INFO if status == "succeeded" else logging.WARNING
    _event(
        level, f"job {status}", "finish", status, job_id, user_id,
        error_code=error_code, seconds=duration,
    )  # fmt: skip


def reaped(job_id: uuid.UUID, user_id: int, silent_for: float, duration: float | None) -> None:
    """Count and log a reap: the job failed INTERRUPTED after silent_for seconds of silence."""
    REAPS.inc()
    REAP_DELAY.observe(max(0.0, silent_for))
    _event(
        logging.WARNING, f"reaped stale job {job_id}", "reap", "failed", job_id, user_id,
        silent_seconds=silent_for,
    )  # fmt: skip
    job_finished(job_id, user_id, "failed", "INTERRUPTED", duration)


def refunded(job_id: uuid.UUID, user_id: int | None, path: str) -> None:
    """Count and log a refund by the path that made it (finalizer, shutdown, support...)."""
    REFUNDS.labels(path).inc()
    _event(logging.INFO, "point refunded", "refund", path, job_id, user_id)


def incident_opened(
    incident_id: int,
    code: str,
    severity: str,
    job_id: uuid.UUID | None,
    user_id: int | None,
    detail: str,
) -> None:
    """Count and log a new incident; a critical one is logged at CRITICAL."""
    INCIDENTS_OPENED.labels(code, severity).inc()
    level = logging.CRITICAL if severity == "critical" else logging.ERROR
    _event(
        level, f"incident {incident_id} opened", "incident", "opened", job_id, user_id,
        incident=incident_id, code=code,
        severity=severity, detail=detail,
    )  # fmt: skip


def incidents_resolved(
    codes: list[str], job_id: uuid.UUID | None, user_id: int | None, by: str
) -> None:
    """Count and log incidents that were resolved."""
    for code in codes:
        INCIDENTS_RESOLVED.labels(code).inc()
        _event(
            logging.INFO, "incident resolved", "incident", "resolved", job_id, user_id,
            code=code, by=by,
        )  # fmt: skip


def slot_taken() -> None:
    """Note a runner slot taken."""
    SLOTS_IN_USE.inc()


def slot_released() -> None:
    """Note a runner slot given back."""
    SLOTS_IN_USE.dec()


def checkout_started(user_id: int, points: int) -> None:
    """Count and log a Checkout Session created for a pack."""
    CHECKOUTS.inc()
    _event(logging.INFO, "checkout started", "checkout", "started", None, user_id, points=points)


def purchased(session_id: str, user_id: int, points: int, yen: int) -> None:
    """Count and log a purchase credited (once per Checkout Session)."""
    PURCHASES.labels(str(points)).inc()
    PURCHASED_POINTS.inc(points)
    PURCHASED_YEN.inc(yen)
    _event(
        logging.INFO,
        "purchase credited",
        "purchase",
        "credited",
        None,
        user_id,
        session=session_id,
        points=points,
        yen=yen,
    )


def purchase_reversed(session_id: str, user_id: int, taken: int, credited: int) -> None:
    """Count and log a refunded payment's points taken back (once per Checkout Session)."""
    outcome = "unspent" if taken == credited else "partly_spent"
    PURCHASE_REFUNDS.labels(outcome).inc()
    _event(
        logging.INFO,
        "purchase refunded",
        "purchase_refund",
        outcome,
        None,
        user_id,
        session=session_id,
        taken=taken,
        credited=credited,
    )


_IGNORED_SEEN: set[str] = set()


def webhook_event(kind: str, outcome: str, event_type: str = "") -> None:
    """Count a verified Stripe event; log an ignored type once per process."""
    WEBHOOK_EVENTS.labels(kind, outcome).inc()
    if outcome == "ignored" and event_type not in _IGNORED_SEEN:
        _IGNORED_SEEN.add(event_type)
        log.info("stripe event type %s ignored (logged once per process)", event_type)
