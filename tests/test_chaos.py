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
    # The checker is not blind: a page that says other than the ledger is a violation.
    job_id = chaos.db.scalar("SELECT id::text FROM assessment_jobs WHERE status = 'succeeded'")
    assert job_id, out["outcomes"]
    chaos.check_page(job_id, "succeeded", "refunded", "Your point was refunded.")
    assert chaos.violations == [f"job {job_id}: the page says refunded, the ledger charged"]
    shutil.rmtree(chaos.logs)
