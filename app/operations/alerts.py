"""Critical incidents posted to ALERT_WEBHOOK_URL: once each, off the request's thread.

The incident row says whether it was posted (alerted_at) and whether a process is
posting it now (alert_attempt_at), so "once" holds across threads, processes and
restarts. A post that fails clears its claim: the next poll or sweep that calls kick()
tries again. A claim left by a crash expires after CLAIM_SECONDS.
"""

import json
import logging
import threading
import urllib.request

from flask import Flask, current_app
from sqlalchemy import text

from ..extensions import db

log = logging.getLogger(__name__)

CLAIM_SECONDS = 60.0

_sending = threading.Lock()  # one sender thread per process at a time is plenty


def kick(app: Flask | None = None) -> None:
    """Post the critical incidents not yet alerted, on a background thread, if configured."""
    app = app or current_app._get_current_object()
    if not app.config["ALERT_WEBHOOK_URL"] or not _sending.acquire(blocking=False):
        return
    try:
        threading.Thread(target=_send_all, args=(app,), name="alerts", daemon=True).start()
    except BaseException:
        _sending.release()
        raise


def _send_all(app: Flask) -> None:
    try:
        with app.app_context():
            while (incident := _claim()) is not None and _post(app, incident):
                pass
    except Exception:  # noqa: BLE001 - alerting is retried by the next kick
        log.exception("could not send alerts")
    finally:
        _sending.release()


def _claim():
    # SKIP LOCKED and the claim's WHERE: of concurrent senders, one takes each incident.
    row = db.session.execute(
        text(
            "UPDATE incidents SET alert_attempt_at = now() WHERE id = ("
            " SELECT id FROM incidents WHERE severity = 'critical' AND alerted_at IS NULL"
            "   AND (alert_attempt_at IS NULL"
            "     OR alert_attempt_at < now() - make_interval(secs => :claim))"
            " ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)"
            " RETURNING id, scope, code, severity, job_id, user_id, detail, created_at"
        ),
        {"claim": CLAIM_SECONDS},
    ).first()
    db.session.commit()
    return row


def _post(app: Flask, incident) -> bool:
    """Post one claimed incident; record it as alerted, or release the claim on failure."""
    body = {
        "text": f"CRITICAL incident {incident.id} {incident.code}: {incident.detail}",
        "incident": {
            "id": incident.id,
            "scope": incident.scope,
            "code": incident.code,
            "severity": incident.severity,
            "job_id": str(incident.job_id) if incident.job_id else None,
            "user_id": incident.user_id,
            "detail": incident.detail,
            "created_at": incident.created_at.isoformat(),
        },
    }
    request = urllib.request.Request(
        app.config["ALERT_WEBHOOK_URL"],
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=app.config["ALERT_TIMEOUT_SECONDS"]):
            pass  # urlopen raises on a 4xx or 5xx
    except Exception as exc:  # noqa: BLE001 - any failure: try again on the next kick
        log.warning("alert for incident %s not delivered: %s", incident.id, exc)
        db.session.execute(
            text("UPDATE incidents SET alert_attempt_at = NULL WHERE id = :id"),
            {"id": incident.id},
        )
        db.session.commit()
        return False
    db.session.execute(
        text("UPDATE incidents SET alerted_at = now() WHERE id = :id"), {"id": incident.id}
    )
    db.session.commit()
    log.info("alert for incident %s delivered", incident.id)
    return True
