"""users.session_generation: logging out revokes every copy of the user's session cookie

A signed cookie stays valid until it expires, so a copy taken before logout kept working.
The session now carries the generation it was issued under; logout bumps it.

Revision ID: 05_session_generation
Revises: 04_job_sweep
Create Date: 2026-12-01 06:50:00

"""
import sqlalchemy as sa
from alembic import op

revision = "05_session_generation"
down_revision = "04_job_sweep"
branch_labels = None
depends_on = None


def upgrade():
    # A constant default: PostgreSQL adds the column without rewriting the table.
    op.add_column(
        "users",
        sa.Column("session_generation", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade():
    op.drop_column("users", "session_generation")
