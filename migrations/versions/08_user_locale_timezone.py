"""users.locale and users.timezone: the interface's language and time zone a user chose

Both are nullable: no choice yet means the browser's language and Asia/Tokyo.

Revision ID: 08_user_locale_timezone
Revises: 07_incident_alerts
Create Date: 2026-12-01 10:00:00

"""
import sqlalchemy as sa
from alembic import op

revision = "08_user_locale_timezone"
down_revision = "07_incident_alerts"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("users", sa.Column("locale", sa.Text(), nullable=True))
    op.add_column("users", sa.Column("timezone", sa.Text(), nullable=True))
    op.create_check_constraint("ck_users_locale", "users", "locale IN ('en', 'ja')")


def downgrade():
    op.drop_constraint("ck_users_locale", "users", type_="check")
    op.drop_column("users", "timezone")
    op.drop_column("users", "locale")
