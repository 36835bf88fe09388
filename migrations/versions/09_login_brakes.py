"""brake_hits and brake_counters: the log-in and sign-up brakes' counts, shared by every process

Flask-Limiter's moving window keeps one row per counted attempt in brake_hits; brake_acquire()
takes one under a per-key advisory lock, so two processes never both take the last one.
brake_counters serves the fixed-window strategy, should RATELIMIT_STRATEGY choose it.

Revision ID: 09_login_brakes
Revises: 08_user_locale_timezone
Create Date: 2026-12-01 16:00:00

"""
from alembic import op

revision = "09_login_brakes"
down_revision = "08_user_locale_timezone"
branch_labels = None
depends_on = None


def upgrade():
    op.execute(
        """
        CREATE TABLE brake_hits (
            key text NOT NULL,
            at timestamptz NOT NULL,
            expires_at timestamptz NOT NULL
        );
        CREATE INDEX brake_hits_key_at ON brake_hits (key, at);
        CREATE INDEX brake_hits_expires_at ON brake_hits (expires_at);

        CREATE TABLE brake_counters (
            key text PRIMARY KEY,
            count integer NOT NULL,
            expires_at timestamptz NOT NULL
        );

        -- Take `amount` entries of a moving window of `expiry` seconds holding at most
        -- `lim`; false, and nothing written, when they do not fit. The advisory lock
        -- serializes takers of one key, so a count and its insert cannot interleave.
        CREATE FUNCTION brake_acquire(k text, lim integer, expiry double precision, amount integer)
        RETURNS boolean LANGUAGE plpgsql AS $$
        DECLARE
            moment timestamptz := clock_timestamp();
            used integer;
        BEGIN
            -- A count is worth less than a commit's flush to disk: a crash may forget the
            -- last few attempts (the window restarts a little early), never invent any.
            PERFORM set_config('synchronous_commit', 'off', true);
            PERFORM pg_advisory_xact_lock(hashtextextended('brake:' || k, 0));
            DELETE FROM brake_hits WHERE key = k AND at <= moment - make_interval(secs => expiry);
            SELECT count(*) INTO used FROM brake_hits WHERE key = k;
            IF used + amount > lim THEN
                RETURN false;
            END IF;
            INSERT INTO brake_hits (key, at, expires_at)
                SELECT k, moment, moment + make_interval(secs => expiry)
                FROM generate_series(1, amount);
            RETURN true;
        END
        $$;
        """
    )


def downgrade():
    op.execute(
        "DROP FUNCTION brake_acquire(text, integer, double precision, integer);"
        " DROP TABLE brake_counters; DROP TABLE brake_hits;"
    )
