"""make chaos's harness, run briefly: random SIGKILLs and failpoints, then the books checked."""

import shutil

import pytest

from bench.chaos import Chaos
from bench.common import Database
from tests.conftest import truncate

pytestmark = pytest.mark.server


def test_a_short_chaos_run_keeps_the_books_and_its_checker_sees_a_lie(database_url):
    truncate(database_url)
    chaos = Chaos(Database(database_url), kills=10, minutes=3, users=4, seed=20261201)

    out = chaos.run()

    assert out["violations"] == []
    assert out["kills"] >= 10 and 0 < out["pages_checked"] <= out["jobs"]
    # The checker is not blind: a page that says other than the ledger is a violation. Ten
    # kills can come so close together that no job of the run succeeds, so the lie is told
    # about whichever job ended: a success called refunded, a failure called charged.
    job_id, status = chaos.db.rows(
        "SELECT id::text, status FROM assessment_jobs WHERE status IN ('succeeded', 'failed')"
        " ORDER BY status = 'succeeded' DESC LIMIT 1"
    )[0]
    lie = "refunded" if status == "succeeded" else "charged"
    chaos.check_page(job_id, status, lie, "Your point was refunded.")
    assert len(chaos.violations) == 1, chaos.violations
    assert chaos.violations[0].startswith(f"job {job_id}: the page says {lie}, the ledger ")
    shutil.rmtree(chaos.logs)
