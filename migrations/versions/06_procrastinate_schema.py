"""procrastinate's schema and the shared layer cache, for more than one process

The shared layer cache (layer_cache) holds upstream answers with their expiry, so that
concurrent misses in several processes make one call (app/caches/sharedflight.py).

The queue lives in the product's own database, so a submit can insert its job and defer
its task in one transaction, and `flask db upgrade` stays the one set-up step. The SQL
beside this file is procrastinate 3.10's schema.sql, copied verbatim: pyproject pins
procrastinate to 3.10.*, and moving to a later version means a migration of ours that
applies that version's files from procrastinate/sql/migrations.

Revision ID: 06_procrastinate_schema
Revises: 05_session_generation
Create Date: 2026-12-01 07:00:00

"""
from pathlib import Path

from alembic import op

revision = "06_procrastinate_schema"
down_revision = "05_session_generation"
branch_labels = None
depends_on = None

SCHEMA = Path(__file__).with_name("06_procrastinate_3_10_schema.sql")


def upgrade():
    # On the driver's connection, in Alembic's transaction: several statements, no
    # parameters, so the % signs in its RAISE messages are left alone.
    op.get_bind().connection.driver_connection.execute(SCHEMA.read_text())
    op.execute(
        "CREATE TABLE layer_cache (key text PRIMARY KEY, value jsonb NOT NULL,"
        " expires_at timestamptz NOT NULL)"
    )
    op.create_index("ix_layer_cache_expires_at", "layer_cache", ["expires_at"])


def downgrade():
    op.drop_table("layer_cache")
    op.execute(
        "DO $$ DECLARE f regprocedure; BEGIN"
        " FOR f IN SELECT p.oid::regprocedure FROM pg_proc p"
        "   JOIN pg_namespace n ON n.oid = p.pronamespace"
        "   WHERE n.nspname = current_schema() AND p.proname LIKE 'procrastinate%'"
        " LOOP EXECUTE 'DROP FUNCTION ' || f || ' CASCADE'; END LOOP; END $$"
    )
    op.execute(
        "DROP TABLE IF EXISTS procrastinate_events, procrastinate_periodic_defers,"
        " procrastinate_jobs, procrastinate_workers CASCADE"
    )
    op.execute(
        "DROP TYPE IF EXISTS procrastinate_job_to_defer_v1, procrastinate_job_event_type,"
        " procrastinate_job_status"
    )
