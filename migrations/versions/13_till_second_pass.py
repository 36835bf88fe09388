"""points people buy, the second review: refunds that come undone, grants that need a second
operator, and the row that says a payment intent is another session's

- point_ledger kind `purchase_restore` (+what a reversal took, `refund_of` that
  `purchase_refund`, the same session, one per session): a refund that failed or was
  cancelled (konbini refunds wait for bank details) gives the points back, once. A
  trigger refuses one that is not its own user's and session's reversal, or gives back
  another amount than the reversal took.
- payment_refunds.failed_refunds (the Refund ids that failed or were cancelled, each
  counted once) and failed_until (the newest such event's time): a `charge.refunded`
  older than a failure it is delivered after no longer takes points back.
- point_ledger.approver_id: a second support user who approved a grant above
  SUPPORT_GRANT_APPROVAL_POINTS; never the operator, never the user granted to. And
  support never adjusts its own account (NOT VALID: older rows are ledger-check's).
- support_grant_requests: a grant waiting for that second support user; approved once,
  in the transaction that writes its ledger row.
- point_ledger kind `expire` (negative, nothing else set): points past POINTS_VALID_DAYS
  lapse, oldest first (app/points/expiry.py).

Revision ID: 13_till_second_pass
Revises: 12_job_runs
"""

from alembic import op

revision = "13_till_second_pass"
down_revision = "12_job_runs"
branch_labels = None
depends_on = None

OLD_CHECK = (
    "(kind = 'grant' AND amount > 0 AND job_id IS NULL AND refund_of IS NULL"
    "  AND checkout_session IS NULL AND operator_id IS NULL)"
    " OR (kind = 'consume' AND amount = -1 AND job_id IS NOT NULL AND refund_of IS NULL"
    "  AND checkout_session IS NULL AND operator_id IS NULL)"
    " OR (kind = 'refund' AND amount = 1 AND refund_of IS NOT NULL"
    "  AND checkout_session IS NULL AND operator_id IS NULL)"
    " OR (kind = 'purchase' AND amount > 0 AND checkout_session IS NOT NULL"
    "  AND job_id IS NULL AND refund_of IS NULL AND operator_id IS NULL)"
    " OR (kind = 'purchase_refund' AND amount <= 0 AND checkout_session IS NOT NULL"
    "  AND refund_of IS NOT NULL AND job_id IS NULL AND operator_id IS NULL)"
    " OR (kind = 'support' AND amount <> 0 AND operator_id IS NOT NULL AND reason <> ''"
    "  AND job_id IS NULL AND refund_of IS NULL AND checkout_session IS NULL)"
)

# Kept in step with app/models.py (LedgerEntry).
NEW_CHECK = (
    f"(({OLD_CHECK}) AND approver_id IS NULL)"
    " OR (kind = 'purchase_restore' AND amount >= 0 AND checkout_session IS NOT NULL"
    "  AND refund_of IS NOT NULL AND job_id IS NULL AND operator_id IS NULL"
    "  AND approver_id IS NULL)"
    " OR (kind = 'support' AND amount > 0 AND operator_id IS NOT NULL AND reason <> ''"
    "  AND job_id IS NULL AND refund_of IS NULL AND checkout_session IS NULL"
    "  AND approver_id <> operator_id AND approver_id <> user_id)"
    " OR (kind = 'expire' AND amount < 0 AND job_id IS NULL AND refund_of IS NULL"
    "  AND checkout_session IS NULL AND operator_id IS NULL AND approver_id IS NULL)"
)

UPGRADE = rf"""
ALTER TABLE point_ledger ADD COLUMN approver_id bigint REFERENCES users (id);
ALTER TABLE point_ledger DROP CONSTRAINT ck_point_ledger_kind_amount;
ALTER TABLE point_ledger ADD CONSTRAINT ck_point_ledger_kind_amount CHECK ({NEW_CHECK});
ALTER TABLE point_ledger ADD CONSTRAINT ck_point_ledger_support_not_own
    CHECK (kind <> 'support' OR operator_id <> user_id) NOT VALID;
CREATE UNIQUE INDEX uq_point_ledger_purchase_restore_per_session
    ON point_ledger (checkout_session) WHERE kind = 'purchase_restore';

CREATE FUNCTION point_ledger_purchase_restore_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM point_ledger r
     WHERE r.id = NEW.refund_of AND r.kind = 'purchase_refund' AND r.user_id = NEW.user_id
       AND r.checkout_session = NEW.checkout_session AND NEW.amount = -r.amount;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'a purchase restore must give back what a reversal of its own session and user took'
            USING ERRCODE = 'check_violation', TABLE = 'point_ledger',
                  CONSTRAINT = 'point_ledger_purchase_restore_of_own_reversal',
                  DETAIL = format('refund_of %s, session %s, user %s, amount %s',
                                  NEW.refund_of, NEW.checkout_session, NEW.user_id, NEW.amount);
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER point_ledger_purchase_restore_check BEFORE INSERT ON point_ledger
    FOR EACH ROW WHEN (NEW.kind = 'purchase_restore')
    EXECUTE FUNCTION point_ledger_purchase_restore_check();

ALTER TABLE payment_refunds ADD COLUMN failed_refunds text[] NOT NULL DEFAULT '{{}}';
ALTER TABLE payment_refunds ADD COLUMN failed_until timestamptz;

CREATE TABLE support_grant_requests (
    id bigserial PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id),
    amount integer NOT NULL CHECK (amount > 0),
    reason text NOT NULL CHECK (reason <> ''),
    operator_id bigint NOT NULL REFERENCES users (id),
    nonce text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    approved_by bigint REFERENCES users (id),
    approved_at timestamptz,
    ledger_id bigint REFERENCES point_ledger (id),
    CONSTRAINT ck_support_grant_requests_not_own CHECK (operator_id <> user_id),
    CONSTRAINT ck_support_grant_requests_second_operator
        CHECK (approved_by IS NULL OR (approved_by <> operator_id AND approved_by <> user_id))
);
CREATE UNIQUE INDEX uq_support_grant_requests_nonce
    ON support_grant_requests (operator_id, nonce);
"""

DOWNGRADE = rf"""
DROP TABLE support_grant_requests;
ALTER TABLE payment_refunds DROP COLUMN failed_until;
ALTER TABLE payment_refunds DROP COLUMN failed_refunds;
DROP TRIGGER point_ledger_purchase_restore_check ON point_ledger;
DROP FUNCTION point_ledger_purchase_restore_check();
DROP INDEX uq_point_ledger_purchase_restore_per_session;
ALTER TABLE point_ledger DROP CONSTRAINT ck_point_ledger_support_not_own;
ALTER TABLE point_ledger DROP CONSTRAINT ck_point_ledger_kind_amount;
ALTER TABLE point_ledger ADD CONSTRAINT ck_point_ledger_kind_amount CHECK ({OLD_CHECK});
ALTER TABLE point_ledger DROP COLUMN approver_id;
"""


def upgrade():
    op.execute(UPGRADE)


def downgrade():
    # Refused while purchase_restore rows or approved support rows exist (the old CHECK
    # fails): the ledger is append-only, so they cannot be dropped, only kept.
    op.execute(DOWNGRADE)
