"""index point_ledger.job_id

Deleting a never-started job (a 503 submit) checks the ledger's foreign key, and the
support console lists a job's ledger rows: both scanned the whole ledger, because the
only index on job_id is the partial one for consumes.

Revision ID: 02_ledger_job_index
Revises: 01_initial
Create Date: 2026-11-29 09:10:00

"""
from alembic import op

revision = "02_ledger_job_index"
down_revision = "01_initial"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index("ix_point_ledger_job_id", "point_ledger", ["job_id"])


def downgrade():
    op.drop_index("ix_point_ledger_job_id", table_name="point_ledger")
