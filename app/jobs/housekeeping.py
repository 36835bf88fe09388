"""Opportunistic chores: dead jobs are swept and old reports purged when people come by.

No cron and no worker: every request calls trigger(), which at most once per chore's
interval per process starts a thread. That thread runs a conditional UPDATE ...
RETURNING on the chore's housekeeping row; only the caller whose UPDATE matched runs
the chore, so concurrent triggers (threads, processes) run it once per interval.

The sweep (sweep.py) runs every SWEEP_INTERVAL_SECONDS (the lease, unless set), so
while requests reach any instance, a job that died is refunded within
JOB_LEASE_SECONDS + SWEEP_INTERVAL_SECONDS + one request. The purge runs every
HOUSEKEEPING_INTERVAL_SECONDS, and with it points past their validity lapse
(app/points/expiry.py).
"""

import logging
import threading
import time

from flask import Flask
from sqlalchemy import text

from ..database import limits
from ..extensions import db
from ..points import expiry
from . import sweep

log = logging.getLogger(__name__)

PURGE = "purge_reports"
SWEEP = "sweep_jobs"
INTERVALS = {SWEEP: "SWEEP_INTERVAL_SECONDS", PURGE: "HOUSEKEEPING_INTERVAL_SECONDS"}


class Throttle:
    """A process-local gate so the hot path pays nothing between intervals."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0.0

    def ready(self, interval: float) -> bool:
        """Return True at most once per interval."""
        now = time.monotonic()
        with self._lock:
            if now < self._next:
                return False
            self._next = now + interval
            return True

    def retry_in(self, seconds: float) -> None:
        """Open the gate again in this many seconds (when the chore's row is due)."""
        with self._lock:
            self._next = time.monotonic() + max(seconds, 0.0)


def throttles() -> dict[str, Throttle]:
    """Return one process-local gate per chore, for app.extensions["housekeeping"]."""
    return {name: Throttle() for name in INTERVALS}


def trigger(app: Flask) -> None:
    """Start the due chores in the background if this process has not tried them lately."""
    gates = app.extensions["housekeeping"]
    due = [name for name, setting in INTERVALS.items() if gates[name].ready(app.config[setting])]
    if due:
        threading.Thread(target=_run, args=(app, due), name="housekeeping", daemon=True).start()


def sweep_in_background(app: Flask) -> threading.Thread:
    """Sweep now, whenever the last sweep ran (a worker that starts may follow a crash)."""
    thread = threading.Thread(target=_sweep, args=(app,), name="sweep", daemon=True)
    thread.start()
    return thread


def _sweep(app: Flask) -> None:
    try:
        with limits.role("sweep"), app.app_context():
            sweep.sweep()
    except Exception:  # noqa: BLE001 - the next trigger sweeps again
        log.exception("sweep failed")


def _run(app: Flask, due: list[str]) -> None:
    for name in due:
        try:  # the purge is one UPDATE of old rows: as long, at worst, as a sweep
            with limits.role("sweep"), app.app_context():
                interval = app.config[INTERVALS[name]]
                wait = claim(name, interval)
                if wait is not None:
                    # Another process ran it lately: try again when its row is due, so
                    # that clock skew between the gate and the database costs no interval.
                    app.extensions["housekeeping"][name].retry_in(wait)
                elif name == SWEEP:
                    sweep.sweep()
                else:
                    purge(app.config["REPORT_RETENTION_DAYS"])
                    expiry.expire_lapsed(app.config["POINTS_VALID_DAYS"])
        except Exception:  # noqa: BLE001 - chores are best effort; the next trigger retries
            log.exception("housekeeping %s failed", name)


def claim(name: str, interval_seconds: float) -> float | None:
    """Claim a chore if no one ran it within the interval: None, else seconds until due."""
    # The interval condition sits in the UPDATE's WHERE: of concurrent callers, one matches.
    row = db.session.execute(
        text(
            "WITH claimed AS ("
            "  UPDATE housekeeping SET last_run_at = now() WHERE name = :name"
            "  AND (last_run_at IS NULL"
            "    OR last_run_at < now() - make_interval(secs => :interval))"
            "  RETURNING name)"
            " SELECT EXISTS (SELECT 1 FROM claimed) AS claimed,"
            "  extract(epoch FROM last_run_at + make_interval(secs => :interval) - now())::float"
            "   AS due_in"
            " FROM housekeeping WHERE name = :name"
        ),
        {"name": name, "interval": interval_seconds},
    ).first()
    db.session.commit()
    if row is None:  # the chore's row is not there (not migrated yet): try much later
        return interval_seconds
    return None if row.claimed else max(row.due_in or 0.0, 0.0)


def purge_if_due(interval_seconds: float, retention_days: float) -> int | None:
    """Purge old reports if no one did within the interval; return how many, or None."""
    if claim(PURGE, interval_seconds) is not None:
        return None
    return purge(retention_days)


def purge(retention_days: float) -> int:
    """Drop the report payloads of jobs finished longer ago than the retention."""
    # Only the report payload goes: status, message and the ledger stay as they were.
    purged = db.session.execute(
        text(
            "UPDATE assessment_jobs SET result = NULL, result_purged_at = now()"
            " WHERE result IS NOT NULL"
            "   AND finished_at < now() - make_interval(secs => :age)"
        ),
        {"age": retention_days * 86400},
    ).rowcount
    db.session.commit()
    log.info("housekeeping: purged %d report(s) older than %s days", purged, retention_days)
    return purged
