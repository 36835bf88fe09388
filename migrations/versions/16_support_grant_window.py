"""support_grant_window: from which ledger row support's grants add up over a window

Support's second-operator rule counted each grant alone, so 10 + 10 + ... passed a limit of
10. A support user's grants to one account without a second operator now add up over 30
days (app/points/grants.py, GRANT_WINDOW_DAYS) against SUPPORT_GRANT_APPROVAL_POINTS.
`flask ledger-check` checks that from the first row written after this migration: rows
before it were written by code that counted each grant alone, and the ledger is
append-only (14_ledger_rule_starts says why).

Revision ID: 16_support_grant_window
Revises: 15_refund_failures
"""

from alembic import op

revision = "16_support_grant_window"
down_revision = "15_refund_failures"
branch_labels = None
depends_on = None


def upgrade():
    op.execute(
        "INSERT INTO ledger_rule_starts (rule, first_row)"
        " SELECT 'support_grant_window', coalesce(max(id), 0) + 1 FROM point_ledger"
    )


def downgrade():
    op.execute("DELETE FROM ledger_rule_starts WHERE rule = 'support_grant_window'")
