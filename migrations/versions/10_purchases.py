"""points people buy: Checkout sessions, purchase rows credited once, their reversal, support rows

- checkout_sessions: one row per Stripe Checkout Session we created (who, which pack,
  what it costs, where its payment stands). Mutable: it is the after-pay page's state,
  not the books.
- point_ledger.checkout_session: the Stripe Checkout Session id of a `purchase` row
  and of the `purchase_refund` that reverses it. A partial unique index per kind makes
  a re-delivered, concurrent or out-of-order webhook credit (and reverse) once: the
  second INSERT ... ON CONFLICT DO NOTHING inserts nothing and, being AFTER INSERT,
  the balance trigger of 0004 moves nothing.
- point_ledger.operator_id: the support user behind a `support` row (a grant or a
  correction made from the console, with its reason).
- ck_point_ledger_kind_amount gains the three kinds; every other shape is refused as
  before. point_ledger_purchase_refund_check (BEFORE INSERT, purchase_refund only): a
  reversal names a purchase of its own user and session and takes back no more than
  it credited, or it is refused (23514, named as the constraint, like 0004's).
- incidents.payment_ref: the Checkout Session (or charge) an incident is about, unique
  per code, so a webhook re-delivered opens its incident once.

Revision ID: 10_purchases
Revises: 09_login_brakes
"""

from alembic import op

revision = "10_purchases"
down_revision = "09_login_brakes"
branch_labels = None
depends_on = None

OLD_CHECK = (
    "(kind = 'grant' AND amount > 0 AND job_id IS NULL AND refund_of IS NULL)"
    " OR (kind = 'consume' AND amount = -1 AND job_id IS NOT NULL AND refund_of IS NULL)"
    " OR (kind = 'refund' AND amount = 1 AND refund_of IS NOT NULL)"
)

# Kept in step with app/models.py (LedgerEntry).
NEW_CHECK = (
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

UPGRADE = rf"""
CREATE TABLE checkout_sessions (
    id text PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id),
    points integer NOT NULL CHECK (points > 0),
    amount integer NOT NULL CHECK (amount > 0),
    currency text NOT NULL,
    status text NOT NULL DEFAULT 'open',
    payment_intent text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ck_checkout_sessions_status
        CHECK (status IN ('open', 'awaiting_payment', 'paid', 'failed', 'expired'))
);
CREATE INDEX ix_checkout_sessions_user ON checkout_sessions (user_id, created_at);
CREATE UNIQUE INDEX uq_checkout_sessions_payment_intent ON checkout_sessions (payment_intent)
    WHERE payment_intent IS NOT NULL;

ALTER TABLE point_ledger ADD COLUMN checkout_session text;
ALTER TABLE point_ledger ADD COLUMN operator_id bigint REFERENCES users (id);
ALTER TABLE point_ledger DROP CONSTRAINT ck_point_ledger_kind_amount;
ALTER TABLE point_ledger ADD CONSTRAINT ck_point_ledger_kind_amount CHECK ({NEW_CHECK});
CREATE UNIQUE INDEX uq_point_ledger_purchase_per_session ON point_ledger (checkout_session)
    WHERE kind = 'purchase';
CREATE UNIQUE INDEX uq_point_ledger_purchase_refund_per_session
    ON point_ledger (checkout_session) WHERE kind = 'purchase_refund';

CREATE FUNCTION point_ledger_purchase_refund_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM point_ledger p
     WHERE p.id = NEW.refund_of AND p.kind = 'purchase' AND p.user_id = NEW.user_id
       AND p.checkout_session = NEW.checkout_session AND -NEW.amount <= p.amount;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'a purchase refund must reverse at most a purchase of its own session and user'
            USING ERRCODE = 'check_violation', TABLE = 'point_ledger',
                  CONSTRAINT = 'point_ledger_purchase_refund_of_own_purchase',
                  DETAIL = format('refund_of %s, session %s, user %s, amount %s',
                                  NEW.refund_of, NEW.checkout_session, NEW.user_id, NEW.amount);
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER point_ledger_purchase_refund_check BEFORE INSERT ON point_ledger
    FOR EACH ROW WHEN (NEW.kind = 'purchase_refund')
    EXECUTE FUNCTION point_ledger_purchase_refund_check();

ALTER TABLE incidents ADD COLUMN payment_ref text;
CREATE UNIQUE INDEX uq_incidents_payment_ref_code ON incidents (payment_ref, code)
    WHERE payment_ref IS NOT NULL;
"""

DOWNGRADE = rf"""
DROP INDEX uq_incidents_payment_ref_code;
ALTER TABLE incidents DROP COLUMN payment_ref;
DROP TRIGGER point_ledger_purchase_refund_check ON point_ledger;
DROP FUNCTION point_ledger_purchase_refund_check();
DROP INDEX uq_point_ledger_purchase_refund_per_session;
DROP INDEX uq_point_ledger_purchase_per_session;
ALTER TABLE point_ledger DROP CONSTRAINT ck_point_ledger_kind_amount;
ALTER TABLE point_ledger ADD CONSTRAINT ck_point_ledger_kind_amount CHECK ({OLD_CHECK});
ALTER TABLE point_ledger DROP COLUMN operator_id;
ALTER TABLE point_ledger DROP COLUMN checkout_session;
DROP TABLE checkout_sessions;
"""


def upgrade():
    op.execute(UPGRADE)


def downgrade():
    # Refused while purchase, purchase_refund or support rows exist (the old CHECK fails):
    # the ledger is append-only, so they cannot be dropped, only kept.
    op.execute(DOWNGRADE)
