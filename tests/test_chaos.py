"""make chaos's harness, run briefly: kills, database faults and webhook storms, then the books."""

import shutil

import pytest

from bench.chaos import Chaos
from bench.chaos_cluster import ended_on_database_error

pytestmark = pytest.mark.server


def test_a_short_chaos_run_keeps_the_books_and_its_checker_sees_a_lie():
    # timed=False: how soon a job settles is make chaos's figure; a test asserts no wall time.
    chaos = Chaos(
        kills=30, minutes=8, users=4, seed=20261202, db_faults=15, restarts=1, deliveries=150,
        timed=False,
    )  # fmt: skip
    try:
        out = chaos.run()

        assert out["violations"] == []
        # Every kind of fault happened, at least half as often as wanted (a loaded machine
        # restarts processes slowly; the run stops at its minutes).
        assert all(out["reached"][k] >= n / 2 for k, n in out["wanted"].items()), out["reached"]
        assert 0 < out["pages_checked"] <= out["jobs"] and out["credits"] > out["reversals"] > 0
        # The checker is not blind: a page that says other than the ledger is a violation. The
        # lie is told about whichever job ended: a success called refunded, a failure charged.
        job_id, status = chaos.db.rows(
            "SELECT id::text, status FROM assessment_jobs WHERE status IN ('succeeded', 'failed')"
            " ORDER BY status = 'succeeded' DESC LIMIT 1"
        )[0]
        lie = "refunded" if status == "succeeded" else "charged"
        chaos.check_page(job_id, status, lie, "Your point was refunded.")
        assert len(chaos.violations) == 1, chaos.violations
        assert chaos.violations[0].startswith(f"job {job_id}: the page says {lie}, the ledger ")
        assert "faults: [" in chaos.violations[0] and "ledger: [(" in chaos.violations[0]
        # Nor blind to money: a paid sale the ledger did not credit, a refund not reversed.
        sale = next(s for s in chaos.storm.sales if s.paid)
        sale.refunded = not sale.refunded
        assert [s for s, _ in chaos.storm.books(chaos.sessions())] == [sale]
    finally:
        chaos.close()
    shutil.rmtree(chaos.logs, ignore_errors=True)


STOPPED = (
    b"ERROR [app.jobs.worker] worker stopped by an error\nTraceback (most recent call last):\n"
)


@pytest.mark.parametrize(
    "log,restart",
    [
        # pruned while a fault stalled its heartbeat: the fetch's ForeignKeyViolation
        (STOPPED + b"psycopg.errors.ForeignKeyViolation\nprocrastinate.exceptions."
         b"ConnectorException: \n", True),
        # procrastinate's listener lost the database and its run returned
        (b"psycopg.OperationalError: connection failed: refused\n" + STOPPED
         + b"RuntimeError: the queue worker stopped without being told to\n", True),
        (STOPPED + b"RuntimeError: the queue worker stopped without being told to\n", False),
        (STOPPED + b"ZeroDivisionError: division by zero\n", False),
        (b"psycopg.errors.ForeignKeyViolation\nConnectorException\n", False),  # never stopped
    ],
    ids=["pruned", "listener-lost", "unasked-no-fault", "crash", "running"],
)  # fmt: skip
def test_the_checker_tells_a_worker_ended_by_a_fault_from_a_crash(log, restart):
    assert ended_on_database_error(log) is restart
