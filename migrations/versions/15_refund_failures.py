"""refund_failures: each failed or cancelled Refund, so a late charge.refunded is judged
by the refunds that failed, not by the payment's newest failure

- refund_failures (one row per Refund id): its payment, its amount, when the refund was
  made (refund_created, when Stripe says) and when it failed (failed_at, the event's
  time). A `charge.refunded` older than failures is dropped only when the failures of
  refunds made before it and failed after it add up to what it says was refunded; what is
  left went back to the buyer, and support hears of it.
- Rows for failures recorded before this migration (payment_refunds.failed_refunds) are
  copied with no amount: the failure is known, its amount is not, so it is read as
  explaining an older event entirely, as the code that recorded it did.

Revision ID: 15_refund_failures
Revises: 14_ledger_rule_starts
"""

from alembic import op

revision = "15_refund_failures"
down_revision = "14_ledger_rule_starts"
branch_labels = None
depends_on = None


def upgrade():
    op.execute(
        """
CREATE TABLE refund_failures (
    refund_id text PRIMARY KEY CHECK (refund_id <> ''),
    payment_intent text NOT NULL REFERENCES payment_refunds (payment_intent),
    amount integer CHECK (amount >= 0),
    refund_created timestamptz,
    failed_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ix_refund_failures_payment ON refund_failures (payment_intent, failed_at);
INSERT INTO refund_failures (refund_id, payment_intent, amount, failed_at)
    SELECT DISTINCT ON (f.refund_id) f.refund_id, p.payment_intent, NULL,
           coalesce(p.failed_until, p.updated_at)
      FROM payment_refunds p, unnest(p.failed_refunds) AS f(refund_id)
     WHERE f.refund_id <> ''
     ORDER BY f.refund_id;
"""
    )


def downgrade():
    op.execute("DROP TABLE refund_failures;")
