"""Support grants and corrections: points added or taken back from the console, by a named
operator, with the reason the user reads in their history.

Support never adjusts its own account, and a grant above SUPPORT_GRANT_APPROVAL_POINTS
waits as a request until a second support user approves it: the ledger row then names
both (operator_id, approver_id). The database refuses both shapes otherwise
(migrations/versions/13_till_second_pass.py)."""

from psycopg.errors import CheckViolation
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from ..extensions import db
from .ledger import NONNEGATIVE, InsufficientPoints


class AlreadyApplied(Exception):
    """This operator's form (its nonce) was already recorded: a double submit."""


class OwnAccount(Exception):
    """Support may not add points to, or take them from, its own account."""


class NeedsApproval(Exception):
    """The grant is above the limit: it waits for a second support user's approval."""

    def __init__(self, request_id: int):
        super().__init__(f"grant request {request_id} waits for approval")
        self.request_id = request_id


def adjust(
    user_id: int,
    amount: int,
    operator_id: int,
    reason: str,
    nonce: str | None = None,
    approval_above: int | None = None,
) -> int:
    """Add (or, negative, take back) points as a `support` ledger row; return the new balance.

    Commits. Raises InsufficientPoints, writing nothing, when a correction would take the
    balance below zero; ValueError for a zero amount or an empty reason; AlreadyApplied,
    writing nothing, when the operator's nonce (the console form's one-time value) was
    used already (unique per operator: migrations/versions/11_purchases_fix.py);
    OwnAccount for the operator's own account; NeedsApproval, having recorded the request
    only, for a grant that takes what this operator granted the user alone (no second
    operator) over GRANT_WINDOW_DAYS above `approval_above` points: 10 + 10 is 20.
    """
    if amount == 0 or not reason.strip():
        raise ValueError("a support adjustment needs a non-zero amount and a reason")
    if user_id == operator_id:
        raise OwnAccount(user_id)
    if approval_above is not None and amount > 0:
        # Under the user's row lock: two grants at once cannot both read the other as absent.
        db.session.execute(text("SELECT 1 FROM users WHERE id = :u FOR UPDATE"), {"u": user_id})
        if _granted_alone(user_id, operator_id) + amount > approval_above:
            db.session.rollback()
            raise NeedsApproval(_request(user_id, amount, operator_id, reason.strip(), nonce))
    try:
        written = db.session.execute(
            text(
                "INSERT INTO point_ledger"
                " (user_id, kind, amount, operator_id, reason, support_nonce)"
                " VALUES (:u, 'support', :n, :op, :r, :nonce)"
                " ON CONFLICT (operator_id, support_nonce) WHERE support_nonce IS NOT NULL"
                " DO NOTHING RETURNING id"
            ),
            {"u": user_id, "n": amount, "op": operator_id, "r": reason.strip(), "nonce": nonce},
        ).scalar_one_or_none()
    except IntegrityError as exc:
        db.session.rollback()
        orig = exc.orig
        if isinstance(orig, CheckViolation) and orig.diag.constraint_name == NONNEGATIVE:
            raise InsufficientPoints("the correction would take the balance below zero") from exc
        raise
    if written is None:
        db.session.rollback()
        raise AlreadyApplied(nonce)
    balance = db.session.execute(
        text("SELECT point_balance FROM users WHERE id = :u"), {"u": user_id}
    ).scalar_one()
    db.session.commit()
    return balance


# Support's grants to one account without a second operator add up over this many days
# against SUPPORT_GRANT_APPROVAL_POINTS: a large grant split into small ones still needs one.
GRANT_WINDOW_DAYS = 30


def _granted_alone(user_id: int, operator_id: int) -> int:
    """Points this operator granted the user with no second operator in the window."""
    return db.session.execute(
        text(
            "SELECT coalesce(sum(amount), 0) FROM point_ledger WHERE kind = 'support'"
            " AND user_id = :u AND operator_id = :op AND amount > 0 AND approver_id IS NULL"
            " AND created_at > now() - make_interval(days => :days)"
        ),
        {"u": user_id, "op": operator_id, "days": GRANT_WINDOW_DAYS},
    ).scalar_one()


def _request(user_id: int, amount: int, operator_id: int, reason: str, nonce: str | None) -> int:
    """Record a grant waiting for a second support user; return its id (once per form)."""
    request_id = db.session.execute(
        text(
            "INSERT INTO support_grant_requests (user_id, amount, reason, operator_id, nonce)"
            " VALUES (:u, :n, :r, :op, :nonce)"
            " ON CONFLICT (operator_id, nonce) DO NOTHING RETURNING id"
        ),
        {"u": user_id, "n": amount, "r": reason, "op": operator_id, "nonce": nonce or ""},
    ).scalar_one_or_none()
    if request_id is None:
        db.session.rollback()
        raise AlreadyApplied(nonce)
    db.session.commit()
    return request_id


def approve(request_id: int, approver_id: int) -> str:
    """Approve a waiting grant as a second support user: its ledger row, once.

    Returns "approved", "unknown", "own" (the approver asked for it, or is the user it is
    for) or "already" (approved before). The request is claimed by a conditional UPDATE
    in the transaction that writes the row, so two approvals at once write one.
    """
    wanted = db.session.execute(
        text("SELECT operator_id, user_id, approved_by FROM support_grant_requests WHERE id = :id"),
        {"id": request_id},
    ).first()
    if wanted is None:
        return "unknown"
    if approver_id in (wanted.operator_id, wanted.user_id):
        return "own"
    ledger_id = db.session.execute(
        text(
            "WITH claimed AS ("
            "  UPDATE support_grant_requests SET approved_by = :a, approved_at = now()"
            "   WHERE id = :id AND approved_by IS NULL RETURNING user_id, amount, reason,"
            "   operator_id)"
            " INSERT INTO point_ledger (user_id, kind, amount, operator_id, approver_id, reason)"
            " SELECT user_id, 'support', amount, operator_id, :a, reason FROM claimed"
            " RETURNING id"
        ),
        {"id": request_id, "a": approver_id},
    ).scalar_one_or_none()
    if ledger_id is None:
        db.session.rollback()
        return "already"
    db.session.execute(
        text("UPDATE support_grant_requests SET ledger_id = :l WHERE id = :id"),
        {"l": ledger_id, "id": request_id},
    )
    db.session.commit()
    return "approved"


def waiting():
    """Return the grants waiting for a second support user, oldest first."""
    return db.session.execute(
        text(
            "SELECT r.id, r.amount, r.reason, r.created_at, r.operator_id, r.user_id, u.email,"
            " o.email AS operator FROM support_grant_requests r"
            " JOIN users u ON u.id = r.user_id JOIN users o ON o.id = r.operator_id"
            " WHERE r.approved_by IS NULL ORDER BY r.id"
        )
    ).all()


def recent(limit: int = 20):
    """Return the latest support rows with their user, operator and approver, newest first."""
    return db.session.execute(
        text(
            "SELECT l.id, l.amount, l.reason, l.created_at, u.email, o.email AS operator,"
            " a.email AS approver"
            " FROM point_ledger l JOIN users u ON u.id = l.user_id"
            " JOIN users o ON o.id = l.operator_id LEFT JOIN users a ON a.id = l.approver_id"
            " WHERE l.kind = 'support' ORDER BY l.id DESC LIMIT :n"
        ),
        {"n": limit},
    ).all()


def violations(approval_above: int) -> list[str]:
    """Describe support rows that skipped the second operator or touched their own account.

    Only rows written since the rule holds (migrations/versions/14_ledger_rule_starts.py):
    the ledger is append-only, so an older row could never be made to meet it.
    """
    problems = [
        f"support row {r.id}: {r.amount} points by operator {r.operator_id}"
        + (" to their own account" if r.own else " without a second support user's approval")
        for r in db.session.execute(
            text(
                "SELECT id, amount, operator_id, operator_id = user_id AS own FROM point_ledger"
                " WHERE kind = 'support' AND id >= (" + RULE_START + ")"
                "   AND (operator_id = user_id OR (amount > :limit AND approver_id IS NULL))"
                " ORDER BY id"
            ),
            {"limit": approval_above},
        )
    ]
    # Small grants that add up: each grant alone, with what the same operator granted the
    # same user alone in the window before it (GRANT_WINDOW_DAYS).
    problems += [
        f"support row {r.id}: operator {r.operator_id} granted user {r.user_id} {r.total}"
        f" points in {GRANT_WINDOW_DAYS} days without a second support user's approval"
        for r in db.session.execute(
            text(
                "SELECT l.id, l.operator_id, l.user_id, (SELECT sum(e.amount) FROM point_ledger e"
                "   WHERE e.kind = 'support' AND e.user_id = l.user_id"
                "     AND e.operator_id = l.operator_id AND e.amount > 0"
                "     AND e.approver_id IS NULL AND e.id <= l.id"
                "     AND e.created_at > l.created_at - make_interval(days => :days)) AS total"
                " FROM point_ledger l WHERE l.kind = 'support' AND l.amount > 0"
                "   AND l.amount <= :limit AND l.approver_id IS NULL"
                "   AND l.id >= (" + WINDOW_START + ")"
                " ORDER BY l.id"
            ),
            {"limit": approval_above, "days": GRANT_WINDOW_DAYS},
        )
        if r.total > approval_above
    ]
    return problems


RULE_START = (
    "SELECT coalesce(max(first_row), 0) FROM ledger_rule_starts"
    " WHERE rule = 'support_second_operator'"
)


WINDOW_START = (
    "SELECT coalesce(max(first_row), 0) FROM ledger_rule_starts WHERE rule = 'support_grant_window'"
)


def before_the_rule() -> int:
    """Count the support rows written before the second-operator rule (not checked)."""
    return db.session.execute(
        text(
            "SELECT count(*) FROM point_ledger WHERE kind = 'support' AND id < (" + RULE_START + ")"
        )
    ).scalar_one()
