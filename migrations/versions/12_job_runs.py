"""assessment_jobs.run_id: which run of a job started it; a job never ends before it starts;
assessment_jobs.draining: the process running it is finishing before a restart

A job's task may be delivered more than once (a manual retry, a second defer,
procrastinate's retry_stalled_jobs). The run that moves a job to running writes its
own id here; start() and succeed() match on it, so a second run finds the row not
its own and does nothing instead of running the paid work again on the one charge.

finished_at was written with now(), the start of the writer's transaction, which could
precede a start committed meanwhile (a cancel in the transaction the user loader
opened): negative durations. The transitions now write the clock's time; the CHECK
keeps it so. A row already written so is given its start as its end (a zero duration,
the closest honest figure) before the CHECK is added.

The job page said "finishing before a restart" when the process that answered the
poll was draining, whichever process ran the job. The process that runs it marks the
row instead (with its heartbeat, which writes the row anyway); the poll's one SELECT
reads it.

Revision ID: 12_job_runs
Revises: 11_purchases_fix
Create Date: 2026-12-01 15:40:00

"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "12_job_runs"
down_revision = "11_purchases_fix"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("assessment_jobs", sa.Column("run_id", postgresql.UUID(), nullable=True))
    op.add_column(
        "assessment_jobs",
        sa.Column("draining", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.execute(
        "UPDATE assessment_jobs SET finished_at = started_at WHERE finished_at < started_at"
    )
    op.create_check_constraint(
        "ck_jobs_finished_after_start", "assessment_jobs", "finished_at >= started_at"
    )


def downgrade():
    op.drop_constraint("ck_jobs_finished_after_start", "assessment_jobs", type_="check")
    op.drop_column("assessment_jobs", "draining")
    op.drop_column("assessment_jobs", "run_id")
