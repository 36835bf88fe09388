"""The database itself refuses writes that would break the ledger, even from the table owner.

Every statement here runs on a raw psycopg connection as the role that owns the tables
(the one that ran the migrations): no app code stands between it and the schema.
"""

import psycopg
import pytest
from psycopg.errors import CheckViolation

from app.extensions import db
from app.points import ledger
from tests.test_jobs import insert_job
from tests.test_ledger import make_user


def make_job(sql, user_id):
    """A finished job of the user's, for ledger rows to name."""
    return insert_job(sql, user_id, "succeeded")


def refused(sql, rule, statement, **params):
    """Run statement and assert the database refuses it by the named rule."""
    with pytest.raises(CheckViolation) as caught:
        sql(statement, **params)
    assert caught.value.diag.constraint_name == rule
    return caught.value


def balances(sql):
    """Return each user's balance beside the sum of their ledger rows."""
    return sql(
        "SELECT u.point_balance, coalesce(sum(l.amount), 0) FROM users u"
        " LEFT JOIN point_ledger l ON l.user_id = u.id GROUP BY u.id ORDER BY u.id"
    )


def insert_consume(sql, user_id, job_id):
    return sql(
        "INSERT INTO point_ledger (user_id, kind, amount, job_id)"
        " VALUES (%(u)s, 'consume', -1, %(j)s) RETURNING id",
        u=user_id,
        j=job_id,
    )[0][0]


REFUND = (
    "INSERT INTO point_ledger (user_id, kind, amount, job_id, refund_of)"
    " VALUES (%(u)s, 'refund', 1, %(j)s, %(c)s)"
)
OWN_CONSUME = "point_ledger_refund_of_own_consume"


def test_the_test_connection_is_the_tables_owner(sql):
    assert sql("SELECT tableowner = current_user FROM pg_tables WHERE tablename = 'users'") == [
        (True,)
    ]


def test_a_ledger_row_alone_moves_the_balance(app, sql):
    user_id = make_user(app, points=2)
    job_id = make_job(sql, user_id)
    sql(
        "INSERT INTO point_ledger (user_id, kind, amount, reason) VALUES (%(u)s, 'grant', 4, 'x')",
        u=user_id,
    )
    consume_id = insert_consume(sql, user_id, job_id)
    sql(REFUND, u=user_id, j=job_id, c=consume_id)
    assert balances(sql) == [(6, 6)]


def test_a_refund_of_a_grant_is_refused(app, sql):
    user_id = make_user(app, points=3)
    job_id = make_job(sql, user_id)
    grant_id = sql("SELECT id FROM point_ledger WHERE kind = 'grant'")[0][0]
    refused(sql, OWN_CONSUME, REFUND, u=user_id, j=job_id, c=grant_id)
    refused(sql, OWN_CONSUME, REFUND, u=user_id, j=None, c=grant_id)
    assert balances(sql) == [(3, 3)]


def test_a_refund_credited_to_another_user_is_refused(app, sql):
    alice, mallory = make_user(app, points=3), make_user(app, points=3)
    job_id = make_job(sql, alice)
    consume_id = insert_consume(sql, alice, job_id)
    refused(sql, OWN_CONSUME, REFUND, u=mallory, j=job_id, c=consume_id)
    assert balances(sql) == [(2, 2), (3, 3)]


@pytest.mark.parametrize("other_job", [True, False], ids=["another job", "no job"])
def test_a_refund_naming_another_job_is_refused(app, sql, other_job):
    user_id = make_user(app, points=3)
    job_id = make_job(sql, user_id)
    consume_id = insert_consume(sql, user_id, job_id)
    other = make_job(sql, user_id) if other_job else None
    refused(sql, OWN_CONSUME, REFUND, u=user_id, j=other, c=consume_id)
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'refund'") == [(0,)]
    assert balances(sql) == [(2, 2)]


@pytest.mark.parametrize("new_balance", ["point_balance + 5", "point_balance - 1", "-1", "0"])
def test_a_balance_change_without_a_ledger_row_is_refused(app, sql, new_balance):
    user_id = make_user(app, points=3)
    refused(
        sql,
        "users_balance_from_ledger",
        f"UPDATE users SET point_balance = {new_balance} WHERE id = %(u)s",
        u=user_id,
    )
    assert balances(sql) == [(3, 3)]


def test_a_ledger_row_and_a_hand_written_balance_update_are_refused_together(
    app, sql, database_url
):
    # The app's old way (insert the row, then UPDATE users) would now count twice:
    # the UPDATE is refused, and the whole transaction with it.
    user_id = make_user(app, points=3)
    with pytest.raises(CheckViolation), psycopg.connect(database_url) as conn:
        conn.execute(
            "INSERT INTO point_ledger (user_id, kind, amount, reason)"
            " VALUES (%(u)s, 'grant', 1, 'x')",
            {"u": user_id},
        )
        conn.execute(
            "UPDATE users SET point_balance = point_balance + 1 WHERE id = %(u)s", {"u": user_id}
        )
    # Nor does a session flag open the door: only the ledger's own trigger may write.
    with pytest.raises(CheckViolation), psycopg.connect(database_url) as conn:
        conn.execute("SELECT set_config('app.ledger_write', 'on', true)")
        conn.execute("UPDATE users SET point_balance = 9 WHERE id = %(u)s", {"u": user_id})
    assert balances(sql) == [(3, 3)]


def test_other_columns_of_a_user_still_change(app, sql):
    user_id = make_user(app, points=3)
    sql(
        "UPDATE users SET role = 'support', point_balance = point_balance WHERE id = %(u)s",
        u=user_id,
    )
    assert sql("SELECT role, point_balance FROM users") == [("support", 3)]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE point_ledger SET amount = 5 WHERE user_id = %(u)s",
        "UPDATE point_ledger SET reason = 'edited' WHERE user_id = %(u)s",
        "DELETE FROM point_ledger WHERE user_id = %(u)s",
        "DELETE FROM point_ledger WHERE false AND user_id = %(u)s",
    ],
)
def test_the_ledger_is_append_only(app, sql, statement):
    user_id = make_user(app, points=3)
    refused(sql, "point_ledger_append_only", statement, u=user_id)
    assert sql("SELECT kind, amount, reason FROM point_ledger") == [("grant", 3, "welcome points")]
    assert balances(sql) == [(3, 3)]


def test_a_consume_that_would_go_negative_is_refused(app, sql):
    user_id = make_user(app, points=1)
    first, second = make_job(sql, user_id), make_job(sql, user_id)
    insert_consume(sql, user_id, first)
    refused(
        sql,
        "ck_users_point_balance_nonnegative",
        "INSERT INTO point_ledger (user_id, kind, amount, job_id)"
        " VALUES (%(u)s, 'consume', -1, %(j)s)",
        u=user_id,
        j=second,
    )
    assert sql("SELECT count(*) FROM point_ledger WHERE job_id = %(j)s", j=second) == [(0,)]
    assert balances(sql) == [(0, 0)]


def test_a_new_user_starts_at_zero(app, sql):
    refused(
        sql,
        "users_balance_starts_at_zero",
        "INSERT INTO users (email, password_hash, point_balance)"
        " VALUES ('rich@example.com', 'x', 5)",
    )
    sql("INSERT INTO users (email, password_hash) VALUES ('new@example.com', 'x')")
    assert balances(sql) == [(0, 0)]


def test_the_apps_grant_consume_and_refund_still_work(app, sql):
    user_id = make_user(app, points=1)
    job_id = make_job(sql, user_id)
    with app.app_context():
        ledger.grant(user_id, 2, "operator")
        consume_id = ledger.consume(user_id, job_id)
        assert ledger.consume(user_id, job_id) == consume_id  # idempotent: moves nothing
        db.session.commit()
        assert ledger.refund(consume_id, "test") is not None
        assert ledger.refund(consume_id, "test") is None  # idempotent: moves nothing
        db.session.commit()
    assert balances(sql) == [(3, 3)]
    assert sql("SELECT kind, amount FROM point_ledger ORDER BY id") == [
        ("grant", 1),
        ("grant", 2),
        ("consume", -1),
        ("refund", 1),
    ]


def test_the_app_cannot_spend_a_point_it_does_not_have(app, sql):
    user_id = make_user(app, points=1)
    first, second = make_job(sql, user_id), make_job(sql, user_id)
    with app.app_context():
        ledger.consume(user_id, first)
        db.session.commit()
        with pytest.raises(ledger.InsufficientPoints):
            ledger.consume(user_id, second)
        db.session.rollback()
    assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'consume'") == [(1,)]
    assert balances(sql) == [(0, 0)]
