"""Opportunistic cleanup: old report payloads are purged when people come to look.

No cron and no worker: the submit and status handlers call trigger(), which at most
once per HOUSEKEEPING_INTERVAL_SECONDS per process starts a thread. That thread runs
a conditional UPDATE ... RETURNING on the housekeeping row; only the caller whose
UPDATE matched runs the purge, so concurrent triggers (threads, processes) purge once.
"""

import logging
import threading
import time

from flask import Flask
from sqlalchemy import text

from ..extensions import db

log = logging.getLogger(__name__)

PURGE = "purge_reports"


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


def trigger(app: Flask) -> None:
    """Start the purge in the background if this process has not tried it lately."""
    if not app.extensions["housekeeping"].ready(app.config["HOUSEKEEPING_INTERVAL_SECONDS"]):
        return
    threading.Thread(target=_run, args=(app,), name="housekeeping", daemon=True).start()


def _run(app: Flask) -> None:
    try:
        with app.app_context():
            purge_if_due(
                app.config["HOUSEKEEPING_INTERVAL_SECONDS"], app.config["REPORT_RETENTION_DAYS"]
            )
    except Exception:  # noqa: BLE001 - cleanup is best effort; the next trigger retries
        log.exception("housekeeping failed")


def purge_if_due(interval_seconds: float, retention_days: float) -> int | None:
    """Purge old reports if no one did within the interval; return how many, or None."""
    # The interval condition sits in the WHERE: of concurrent callers, one matches.
    claimed = db.session.execute(
        text(
            "UPDATE housekeeping SET last_run_at = now() WHERE name = :name"
            " AND (last_run_at IS NULL"
            "   OR last_run_at < now() - make_interval(secs => :interval))"
            " RETURNING name"
        ),
        {"name": PURGE, "interval": interval_seconds},
    ).first()
    if claimed is None:
        db.session.rollback()
        return None
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
