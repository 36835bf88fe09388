"""The user's assessments, newest first, each with what it cost and its report's headline."""

import logging
from typing import Any

from sqlalchemy import text

from ..assessment.report.analysis import LAYERS, headline_of
from ..extensions import db
from ..jobs.views import BILLING_COLUMNS, OUTCOME_SQL, WITH_CONSUME, outcome_of
from ..points import billing

log = logging.getLogger(__name__)


def _headline(row: Any) -> Any:
    """Return the headline a stored report's page shows; None when it cannot be told.

    One report the page cannot read again is that row's loss, never the whole history's.
    """
    area = row.report_area or row.area
    if not row.layers or not area:
        return None
    try:
        return headline_of(
            {"area": area, "layers": row.layers} | ({"circle": True} if row.spot else {})
        )
    except (KeyError, TypeError, ValueError):
        log.exception("the headline of job %s could not be read again", row.id)
        return None


def assessments(
    user_id: int, limit: int = 100, offset: int = 0, outcome: str | None = None
) -> list[dict[str, Any]]:
    """Return the user's jobs, newest first, with what each cost; only one outcome if given."""
    rows = db.session.execute(
        text(
            "SELECT j.id, j.status, j.error_code, j.query_text, j.lang, j.area, j.created_at,"
            # The headline of a kept report, so places can be compared down the list: the
            # one its page shows (a point's is its spot's, the circle's beside it).
            " j.result->'layers' AS layers, j.result->'area' AS report_area,"
            " j.result->'circle' IS NOT NULL AS spot,"
            f"{BILLING_COLUMNS}{WITH_CONSUME}"
            f" WHERE j.user_id = :u AND {OUTCOME_SQL[outcome]}"
            " ORDER BY j.created_at DESC, j.id DESC LIMIT :n OFFSET :o"
        ),
        {"u": user_id, "n": limit, "o": offset},
    ).all()
    by_key = {layer.key: layer for layer in LAYERS}
    heads = [_headline(row) for row in rows]
    return [
        {
            **row._mapping,
            "outcome": outcome_of(row.status, row.error_code),
            "headline": head,
            "worst_layers": [by_key[key] for key in head.worst] if head else [],
            "billing": billing.billing_state(
                row.status, row.finalized, row.charged, row.refunded, row.support_open
            ),
        }
        for row, head in zip(rows, heads, strict=True)
    ]
