"""the job sweep: its housekeeping row and an index of failed, unfinalized jobs

The sweep reaps and settles the jobs of every user, not only of those who poll. Its
row in housekeeping makes it run once per SWEEP_INTERVAL_SECONDS across processes.
Its second query, failed jobs not finalized, would scan the whole table; the partial
index holds only those rows, which are few and short-lived.

Revision ID: 04_job_sweep
Revises: 03_ledger_enforced
Create Date: 2026-12-01 07:00:00

"""

import sqlalchemy as sa
from alembic import op

revision = "04_job_sweep"
down_revision = "03_ledger_enforced"
branch_labels = None
depends_on = None


def upgrade():
    op.execute("INSERT INTO housekeeping (name) VALUES ('sweep_jobs') ON CONFLICT DO NOTHING")
    op.create_index(
        "ix_assessment_jobs_unfinalized",
        "assessment_jobs",
        ["id"],
        postgresql_where=sa.text("status = 'failed' AND finalized_at IS NULL"),
    )


def downgrade():
    op.drop_index("ix_assessment_jobs_unfinalized", table_name="assessment_jobs")
    op.execute("DELETE FROM housekeeping WHERE name = 'sweep_jobs'")
