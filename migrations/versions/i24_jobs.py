"""assessment_jobs.run_id: which run of a job started it

A job's task may be delivered more than once (a manual retry, a second defer,
procrastinate's retry_stalled_jobs). The run that moves a job to running writes its
own id here; start() and succeed() match on it, so a second run finds the row not
its own and does nothing instead of running the paid work again on the one charge.

Revision ID: i24_jobs
Revises: 0006
Create Date: 2026-12-01 15:40:00

"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "i24_jobs"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("assessment_jobs", sa.Column("run_id", postgresql.UUID(), nullable=True))


def downgrade():
    op.drop_column("assessment_jobs", "run_id")
