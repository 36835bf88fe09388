"""the database enforces the ledger: balances move only with ledger rows

Until now the app kept `point_balance == sum(point_ledger.amount)` by writing both in
one transaction; any other writer (a fix by hand, a bug) could break it, and a refund
could name a grant, or another user's or another job's consume. These triggers make
the database refuse every such write, for every role, the table owner's included:

- point_ledger_refund_check (BEFORE INSERT, refunds only): a refund reverses a
  consume of the same job and the same user, or it is refused.
- point_ledger_apply (AFTER INSERT): the row's amount is added to the user's
  balance, in the same statement. The app no longer updates balances itself. A
  consume that would go below zero fails on the CHECK (point_balance >= 0) inside
  this UPDATE. AFTER, not BEFORE: an INSERT ... ON CONFLICT DO NOTHING that
  inserts nothing fires no AFTER trigger, so an idempotent retry moves nothing.
- users_balance_from_ledger (BEFORE UPDATE of point_balance, when it changes):
  refused unless the UPDATE runs inside another trigger (pg_trigger_depth() > 1),
  which here is point_ledger_apply. Not a set_config() flag: any session can set
  a flag before a plain UPDATE; nesting inside a trigger takes DDL, and whoever
  can run DDL can drop these triggers anyway. It also costs no extra call.
- users_balance_starts_at_zero (BEFORE INSERT): a new user's balance is 0; the
  welcome points are a grant row.
- point_ledger_append_only (BEFORE UPDATE OR DELETE, per statement): the ledger is
  never rewritten. TRUNCATE (the tests' reset) fires no such trigger.

Every error is a check_violation (23514) naming its rule as the constraint, so the
app and the tests tell them apart by diag.constraint_name. `flask ledger-check`
stays the auditor of what these triggers cannot see (jobs' billing invariants).

Downgrading needs the app code from before this revision too: without the triggers,
nothing but that code's own UPDATEs moves a balance.

Revision ID: 03_ledger_enforced
Revises: 02_ledger_job_index
Create Date: 2026-12-01 06:50:00

"""

from alembic import op

revision = "03_ledger_enforced"
down_revision = "02_ledger_job_index"
branch_labels = None
depends_on = None


UPGRADE = r"""
CREATE FUNCTION point_ledger_refund_check() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM point_ledger c
     WHERE c.id = NEW.refund_of AND c.kind = 'consume'
       AND c.job_id = NEW.job_id AND c.user_id = NEW.user_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'a refund must reverse a consume of its own job and user'
            USING ERRCODE = 'check_violation', TABLE = 'point_ledger',
                  CONSTRAINT = 'point_ledger_refund_of_own_consume',
                  DETAIL = format('refund_of %s, job %s, user %s',
                                  NEW.refund_of, NEW.job_id, NEW.user_id);
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER point_ledger_refund_check BEFORE INSERT ON point_ledger
    FOR EACH ROW WHEN (NEW.kind = 'refund') EXECUTE FUNCTION point_ledger_refund_check();

CREATE FUNCTION point_ledger_apply() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE users SET point_balance = point_balance + NEW.amount WHERE id = NEW.user_id;
    RETURN NULL;
END $$;

CREATE TRIGGER point_ledger_apply AFTER INSERT ON point_ledger
    FOR EACH ROW EXECUTE FUNCTION point_ledger_apply();

CREATE FUNCTION point_ledger_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the points ledger is append-only: % refused', TG_OP
        USING ERRCODE = 'check_violation', TABLE = 'point_ledger',
              CONSTRAINT = 'point_ledger_append_only';
END $$;

CREATE TRIGGER point_ledger_append_only BEFORE UPDATE OR DELETE ON point_ledger
    FOR EACH STATEMENT EXECUTE FUNCTION point_ledger_append_only();

CREATE FUNCTION users_balance_from_ledger() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'point_balance changes only with a point_ledger row'
            USING ERRCODE = 'check_violation', TABLE = 'users',
                  CONSTRAINT = 'users_balance_from_ledger';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER users_balance_from_ledger BEFORE UPDATE OF point_balance ON users
    FOR EACH ROW WHEN (NEW.point_balance IS DISTINCT FROM OLD.point_balance)
    EXECUTE FUNCTION users_balance_from_ledger();

CREATE FUNCTION users_balance_starts_at_zero() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a new user''s point_balance is 0: points come as a grant row'
        USING ERRCODE = 'check_violation', TABLE = 'users',
              CONSTRAINT = 'users_balance_starts_at_zero';
END $$;

CREATE TRIGGER users_balance_starts_at_zero BEFORE INSERT ON users
    FOR EACH ROW WHEN (NEW.point_balance <> 0) EXECUTE FUNCTION users_balance_starts_at_zero();
"""

DOWNGRADE = r"""
DROP TRIGGER users_balance_starts_at_zero ON users;
DROP FUNCTION users_balance_starts_at_zero();
DROP TRIGGER users_balance_from_ledger ON users;
DROP FUNCTION users_balance_from_ledger();
DROP TRIGGER point_ledger_append_only ON point_ledger;
DROP FUNCTION point_ledger_append_only();
DROP TRIGGER point_ledger_apply ON point_ledger;
DROP FUNCTION point_ledger_apply();
DROP TRIGGER point_ledger_refund_check ON point_ledger;
DROP FUNCTION point_ledger_refund_check();
"""


def upgrade():
    op.execute(UPGRADE)


def downgrade():
    op.execute(DOWNGRADE)
