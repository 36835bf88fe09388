"""ledger_rule_starts: from which ledger row a rule added later holds

The point ledger is append-only, so a row written before a rule existed can never be
changed to meet it: a check that read every row would fail forever on it. Support's
second-operator rule (a grant above SUPPORT_GRANT_APPROVAL_POINTS approved by another
support user, never on one's own account) came with 13_till_second_pass; `flask
ledger-check` checks it from the first row written after this migration, and counts
the older support rows apart (said, not failed). Rows between 13 and this migration
were written by code that already asked for approval.

Revision ID: 14_ledger_rule_starts
Revises: 13_till_second_pass
"""

from alembic import op

revision = "14_ledger_rule_starts"
down_revision = "13_till_second_pass"
branch_labels = None
depends_on = None


def upgrade():
    op.execute(
        """
CREATE TABLE ledger_rule_starts (
    rule text PRIMARY KEY,
    first_row bigint NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO ledger_rule_starts (rule, first_row)
    SELECT 'support_second_operator', coalesce(max(id), 0) + 1 FROM point_ledger;
"""
    )


def downgrade():
    op.execute("DROP TABLE ledger_rule_starts;")
