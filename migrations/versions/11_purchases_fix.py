"""points people buy, the review's fixes: refunds remembered by payment, empty session ids
refused, support adjustments applied once per form

- payment_refunds: one row per Stripe PaymentIntent a charge.refunded was delivered for
  (matched to a credited purchase or not yet): how much of it is refunded, whether in
  full, and whether a partial refund was ever seen. A credit that lands after its
  payment's refund reads it and reverses in the same transaction; a full refund after a
  partial one is left to support (app/points/purchases.py).
- ck_point_ledger_checkout_session_not_empty, ck_checkout_sessions_id_not_empty: an
  empty session id names no session. NOT VALID: rows written before are reported by
  `flask ledger-check`, not a reason to refuse the deploy.
- point_ledger.support_nonce: the one-time value of the console's form a support row came
  from, unique per operator, so a double submit writes one row.

Revision ID: 11_purchases_fix
Revises: 10_purchases
"""

from alembic import op

revision = "11_purchases_fix"
down_revision = "10_purchases"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE payment_refunds (
    payment_intent text PRIMARY KEY CHECK (payment_intent <> ''),
    charge_id text NOT NULL,
    amount integer,
    amount_refunded integer,
    full_refund boolean NOT NULL,
    partial_seen boolean NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE point_ledger ADD CONSTRAINT ck_point_ledger_checkout_session_not_empty
    CHECK (checkout_session <> '') NOT VALID;
ALTER TABLE checkout_sessions ADD CONSTRAINT ck_checkout_sessions_id_not_empty
    CHECK (id <> '') NOT VALID;
ALTER TABLE point_ledger ADD COLUMN support_nonce text;
CREATE UNIQUE INDEX uq_point_ledger_support_nonce ON point_ledger (operator_id, support_nonce)
    WHERE support_nonce IS NOT NULL;
"""

DOWNGRADE = """
DROP INDEX uq_point_ledger_support_nonce;
ALTER TABLE point_ledger DROP COLUMN support_nonce;
ALTER TABLE checkout_sessions DROP CONSTRAINT ck_checkout_sessions_id_not_empty;
ALTER TABLE point_ledger DROP CONSTRAINT ck_point_ledger_checkout_session_not_empty;
DROP TABLE payment_refunds;
"""


def upgrade():
    op.execute(UPGRADE)


def downgrade():
    op.execute(DOWNGRADE)
