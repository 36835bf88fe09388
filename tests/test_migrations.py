"""The revisions are named in the order they apply, and a database migrated under the old
numbered names upgrades in place: nothing applied twice, nothing skipped."""

import psycopg
import pytest
from alembic.script import ScriptDirectory
from flask_migrate import upgrade
from sqlalchemy.engine import make_url

from app import create_app
from tests.conftest import ROOT, TEST_CONFIG, _sa


def test_the_chain_reads_in_order():
    script = ScriptDirectory(str(ROOT / "migrations"))
    chain = [rev.revision for rev in reversed(list(script.walk_revisions()))]
    assert chain == sorted(chain)  # 01_..., 02_..., each revises the one before it
    assert [int(rev.split("_")[0]) for rev in chain] == list(range(1, len(chain) + 1))


@pytest.fixture
def scratch_database(database_url):
    """A database of its own, dropped afterwards."""
    base = make_url(database_url)
    name = f"{base.database}_migrations"
    admin = base.set(database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield base.set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate(url: str, revision: str = "head") -> None:
    app = create_app({**TEST_CONFIG, "SQLALCHEMY_DATABASE_URI": _sa(url)})
    with app.app_context():
        upgrade(revision=revision)
        from app.extensions import db

        db.engine.dispose()


def version(url: str) -> str:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]


@pytest.mark.parametrize(
    ("applied", "old_name"),
    [
        ("05_session_generation", "0003"),  # the old chain's middle: 0005 -> 0003
        ("08_user_locale_timezone", "0006"),  # the old chain's head
    ],
)
def test_a_database_under_the_old_names_upgrades_in_place(scratch_database, applied, old_name):
    migrate(scratch_database, applied)
    with psycopg.connect(scratch_database, autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = %s", (old_name,))

    migrate(scratch_database)  # would fail re-creating a table if it re-ran an applied one

    head = ScriptDirectory(str(ROOT / "migrations")).get_current_head()
    assert version(scratch_database) == head
    with psycopg.connect(scratch_database) as conn:
        columns = {
            row[0]
            for row in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'users'"
            )
        }
    assert {"session_generation", "locale", "timezone"} <= columns
