"""One payment's shared pieces: an event's fields read safely, the payment's lock, its incidents.

Every event about a payment (its credit, a refund, a refund that did not go through, a
dispute) reads Stripe's parsed JSON through text_of and int_of, holds the payment's lock
while it moves points, and tells support through incident.
"""

import hashlib
import json
from typing import Any

from sqlalchemy import text

from ..extensions import db
from . import incidents


def text_of(value: Any) -> str | None:
    """A non-empty string from an event's field, or None (an event is parsed JSON: any type)."""
    return value if isinstance(value, str) and value else None


def int_of(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def unnamed_ref(obj: dict[str, Any]) -> str:
    """A reference for an event's object that names no id of its own: the same object
    re-delivered gives the same one, so its incident opens once (a NULL reference would
    escape the unique index and open one per delivery)."""
    digest = hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()
    return f"unnamed {obj.get('object') or 'object'} {digest[:24]}"


def lock(payment_intent: str | None) -> None:
    """Serialise the credit and the reversal of one payment (until the transaction ends)."""
    if payment_intent:
        db.session.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:pi, 0))"), {"pi": payment_intent}
        )


def incident(code: str, severity: str, *, user_id, detail: str, ref) -> None:
    """Record an incident about a payment (never a job's): support settles it."""
    incidents.record(
        scope="payment",
        code=code,
        severity=severity,
        job_id=None,
        user_id=user_id,
        detail=detail,
        payment_ref=ref,
    )
