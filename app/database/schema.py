"""Apply the migrations once, however many processes start at the same moment."""

from flask_migrate import upgrade
from sqlalchemy import text

from ..extensions import db
from . import limits

# pg_advisory_lock key that serializes `upgrade` across processes ("HZMG").
MIGRATION_LOCK = 0x485A4D47


def upgrade_once() -> None:
    """Run the migrations under a database-wide lock; the ones after the first find nothing to do.

    Two web instances (or a web instance and a worker) starting together would otherwise
    both see the same old revision and both try to create the same tables.
    """
    # No time limits: a migration may wait for another process's, and take long itself.
    with limits.role("migrate"), db.engine.connect() as lock:
        lock.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK})
        try:
            upgrade()
        finally:
            lock.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK})
            lock.commit()
