"""incidents.alerted_at, alert_attempt_at; an index on assessment_jobs.finished_at

A critical incident is posted to ALERT_WEBHOOK_URL once, whichever process notices it
first and however often it restarts: alerted_at records that the post succeeded,
alert_attempt_at that a process has claimed the post (a claim left by a crash expires).
The operations page counts the jobs that ended in the last day and week every 10 s
while it is open: finished_at is indexed so that stays a range scan.

Revision ID: 07_incident_alerts
Revises: 06_procrastinate_schema
Create Date: 2026-12-01 07:10:00

"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = "07_incident_alerts"
down_revision = "06_procrastinate_schema"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("incidents", sa.Column("alerted_at", postgresql.TIMESTAMP(timezone=True)))
    op.add_column("incidents", sa.Column("alert_attempt_at", postgresql.TIMESTAMP(timezone=True)))
    # The sweep looks for critical incidents not yet alerted: a handful among many.
    op.create_index(
        "ix_incidents_unalerted",
        "incidents",
        ["id"],
        postgresql_where=sa.text("severity = 'critical' AND alerted_at IS NULL"),
    )
    op.create_index("ix_assessment_jobs_finished_at", "assessment_jobs", ["finished_at"])


def downgrade():
    op.drop_index("ix_assessment_jobs_finished_at", table_name="assessment_jobs")
    op.drop_index("ix_incidents_unalerted", table_name="incidents")
    op.drop_column("incidents", "alert_attempt_at")
    op.drop_column("incidents", "alerted_at")
