"""The ledger's guarantees under real concurrency, on a real PostgreSQL."""

import uuid

import psycopg
import pytest
from sqlalchemy import text

from app.extensions import db
from app.points import accounts, ledger
from tests.conftest import at_once


def make_user(app, points=3, email=None):
    with app.app_context():
        user = accounts.create_user(
            email or f"{uuid.uuid4().hex[:8]}@example.com", "pw-123456", points
        )
        return user.id


def make_job(sql, user_id):
    return sql(
        "INSERT INTO assessment_jobs (user_id, query_text, lang, status)"
        " VALUES (%(u)s, 'x', 'en', 'running') RETURNING id",
        u=user_id,
    )[0][0]


def in_threads(app, n, fn):
    """Run fn() in n real threads, each with its own app context, all released at once.

    Each commits what it did, or rolls back and hands in what it raised.
    """

    def committed():
        try:
            result = fn()
            db.session.commit()
            return result, None
        except Exception as exc:  # noqa: BLE001 - collected for the assertions
            db.session.rollback()
            return None, exc

    outcomes = at_once(app, n, committed)
    return [r for r, exc in outcomes if exc is None], [exc for _, exc in outcomes if exc]


def tamper(database_url, statement, **params):
    """Write past the ledger's triggers, as only a superuser can (replication role)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(statement, params)


def check(app):
    with app.app_context():
        return ledger.balance_mismatches(), ledger.job_violations()


def test_signup_grant_is_a_ledger_row(app, sql):
    user_id = make_user(app, points=3)
    assert sql("SELECT kind, amount FROM point_ledger WHERE user_id = %(u)s", u=user_id) == [
        ("grant", 3)
    ]
    assert sql("SELECT point_balance FROM users WHERE id = %(u)s", u=user_id) == [(3,)]


def test_twenty_concurrent_consumes_for_one_job_charge_once(app, sql):
    user_id = make_user(app, points=3)
    job_id = make_job(sql, user_id)

    results, errors = in_threads(app, 20, lambda: ledger.consume(user_id, job_id))

    assert errors == []
    assert len(set(results)) == 1  # every caller got the one consume's id
    assert sql(
        "SELECT count(*) FROM point_ledger WHERE job_id = %(j)s AND kind = 'consume'", j=job_id
    ) == [(1,)]
    assert sql("SELECT point_balance FROM users WHERE id = %(u)s", u=user_id) == [(2,)]
    assert check(app) == ([], [])


def test_twenty_concurrent_refunds_of_one_consume_refund_once(app, sql):
    user_id = make_user(app, points=3)
    job_id = make_job(sql, user_id)
    with app.app_context():
        consume_id = ledger.consume(user_id, job_id)
        db.session.commit()

    results, errors = in_threads(app, 20, lambda: ledger.refund(consume_id, "test"))

    assert errors == []
    assert len([r for r in results if r is not None]) == 1
    assert sql("SELECT count(*) FROM point_ledger WHERE refund_of = %(c)s", c=consume_id) == [(1,)]
    assert sql("SELECT point_balance FROM users WHERE id = %(u)s", u=user_id) == [(3,)]
    assert check(app) == ([], [])


def test_consume_at_zero_balance_fails_and_writes_nothing(app, sql):
    user_id = make_user(app, points=0)
    job_id = make_job(sql, user_id)
    with app.app_context():
        with pytest.raises(ledger.InsufficientPoints):
            ledger.consume(user_id, job_id)
        db.session.rollback()
    assert sql("SELECT count(*) FROM point_ledger WHERE user_id = %(u)s", u=user_id) == [(0,)]
    assert sql("SELECT point_balance FROM users WHERE id = %(u)s", u=user_id) == [(0,)]


def test_database_refuses_a_second_consume(app, sql):
    user_id = make_user(app, points=1)
    job_id = make_job(sql, user_id)
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, job_id)"
        " VALUES (%(u)s, 'consume', -1, %(j)s)",
        u=user_id,
        j=job_id,
    )
    with pytest.raises(psycopg.errors.UniqueViolation):
        sql(
            "INSERT INTO point_ledger (user_id, kind, amount, job_id)"
            " VALUES (%(u)s, 'consume', -1, %(j)s)",
            u=user_id,
            j=job_id,
        )


def test_ledger_check_passes_then_fails_on_tampering(app, sql, database_url):
    user_id = make_user(app, points=3)
    job_id = make_job(sql, user_id)
    with app.app_context():
        ledger.consume(user_id, job_id)
        db.session.commit()
    runner = app.test_cli_runner()

    ok = runner.invoke(args=["ledger-check"])
    assert ok.exit_code == 0, ok.output
    assert "ledger ok" in ok.output

    tamper(
        database_url,
        "UPDATE users SET point_balance = point_balance + 5 WHERE id = %(u)s",
        u=user_id,
    )
    bad = runner.invoke(args=["ledger-check"])
    assert bad.exit_code == 1
    assert "ledger sums to 2" in bad.output


def test_ledger_check_catches_a_succeeded_job_that_was_refunded(app, sql):
    user_id = make_user(app, points=3)
    job_id = make_job(sql, user_id)
    with app.app_context():
        consume_id = ledger.consume(user_id, job_id)
        ledger.refund(consume_id, "test")
        db.session.execute(
            text("UPDATE assessment_jobs SET status = 'succeeded' WHERE id = :j"), {"j": job_id}
        )
        db.session.commit()
    bad = app.test_cli_runner().invoke(args=["ledger-check"])
    assert bad.exit_code == 1
    assert "succeeded with 1 consumes, 1 refunds" in bad.output


def test_cli_grants_points_and_creates_support_user(app, sql):
    make_user(app, points=0, email="Ann@Example.com")
    runner = app.test_cli_runner()
    granted = runner.invoke(args=["grant-points", "ann@example.com", "5"])
    assert granted.exit_code == 0, granted.output
    assert "balance 5" in granted.output
    missing = runner.invoke(args=["grant-points", "nobody@example.com", "5"])
    assert missing.exit_code != 0
    created = runner.invoke(
        args=["create-support", "help@example.com"], input="s3cret-pass\ns3cret-pass\n"
    )
    assert created.exit_code == 0, created.output
    assert sql("SELECT role FROM users WHERE email = 'help@example.com'") == [("support",)]
    assert runner.invoke(args=["ledger-check"]).exit_code == 0
