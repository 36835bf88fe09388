"""Deploys that finish work: SIGTERM with DRAIN_SECONDS to the real gunicorn and queue worker."""

import signal
import time

import pytest

from tests.conftest import wait_for
from tests.live import User
from tests.test_crash import assert_interrupted_and_refunded, ledger_check

pytestmark = [pytest.mark.server, pytest.mark.minimal_work]


QUEUE = {"JOB_EXECUTOR": "procrastinate", "JOB_LEASE_SECONDS": "600"}


def running(sql) -> bool:
    return bool(sql("SELECT 1 FROM assessment_jobs WHERE status = 'running'"))


def submitted(user) -> str:
    response = user.submit()
    assert response.status_code == 303, response.text[:300]
    return response.headers["Location"].rsplit("/", 1)[1]


def test_a_job_shorter_than_the_drain_finishes_and_is_charged(live, sql):
    server = live(DRAIN_SECONDS="20", ASSESSMENT_WORK_SECONDS="2", JOB_LEASE_SECONDS="600")
    user = User(server)
    user.signup("short@example.com")
    assert user.submit().status_code == 303
    wait_for(lambda: running(sql))

    began = time.monotonic()
    server.stop(signal.SIGTERM)

    assert server.proc.returncode == 0
    assert time.monotonic() - began < 15  # it left when the job was done, not at the deadline
    assert sql("SELECT status, finalized_at IS NULL FROM assessment_jobs") == [("succeeded", True)]
    assert sql("SELECT kind FROM point_ledger WHERE job_id IS NOT NULL") == [("consume",)]
    assert sql("SELECT point_balance FROM users") == [(2,)]


def test_a_longer_job_is_refunded_before_exit_and_submits_wait(live, sql):
    drain = 3.0
    server = live(DRAIN_SECONDS=str(drain), ASSESSMENT_WORK_SECONDS="60", JOB_LEASE_SECONDS="600")
    user, late = User(server), User(server)
    user.signup("long@example.com")
    late.signup("late@example.com")
    assert user.submit().status_code == 303
    wait_for(lambda: running(sql))
    (job_id,) = sql("SELECT id FROM assessment_jobs")[0]

    began = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    # While it drains, the worker still answers: the job page says why it waits...
    wait_for(lambda: "Finishing before a restart" in user.status(job_id)[3], timeout=drain)
    # ...and a submit is turned away without a charge or a row.
    refused = late.submit()
    assert refused.status_code == 503
    assert int(refused.headers["Retry-After"]) > 0
    assert sql("SELECT count(*) FROM assessment_jobs") == [(1,)]
    server.proc.wait(30)

    assert server.proc.returncode == 0
    assert time.monotonic() - began >= drain  # the job was given its chance to finish
    assert_interrupted_and_refunded(sql)
    assert sql("SELECT email, point_balance FROM users ORDER BY id") == [
        ("long@example.com", 3),
        ("late@example.com", 3),
    ]


def test_a_queue_worker_finishes_its_job_and_leaves_the_queued_one_to_another(
    live, live_worker, sql, database_url
):
    server = live(**QUEUE)
    worker = live_worker(
        **QUEUE, DRAIN_SECONDS="20", ASSESSMENT_WORK_SECONDS="2", MAX_CONCURRENT_JOBS="1"
    )
    first, second = User(server), User(server)
    first.signup("first@example.com")
    second.signup("second@example.com")
    finishing = submitted(first)
    wait_for(lambda: running(sql))
    queued = submitted(second)  # behind the first: the worker has one slot

    began = time.monotonic()
    worker.stop(signal.SIGTERM)

    assert worker.proc.returncode == 0
    assert time.monotonic() - began < 15  # it left when the job was done, not at the deadline
    assert sql("SELECT status FROM assessment_jobs WHERE id = %(j)s", j=finishing) == [
        ("succeeded",)
    ]
    assert sql("SELECT kind FROM point_ledger WHERE job_id = %(j)s", j=finishing) == [("consume",)]
    # The queued job was not taken: still waiting in the queue, nothing charged.
    assert sql("SELECT status FROM assessment_jobs WHERE id = %(j)s", j=queued) == [("pending",)]
    assert sql("SELECT status FROM procrastinate_jobs WHERE args->>'job_id' = %(j)s", j=queued) == [
        ("todo",)
    ]
    assert sql("SELECT count(*) FROM point_ledger WHERE job_id = %(j)s", j=queued) == [(0,)]

    live_worker(**QUEUE)  # the next worker of the deploy runs it
    wait_for(
        lambda: (
            sql("SELECT status FROM assessment_jobs WHERE id = %(j)s", j=queued) == [("succeeded",)]
        )
    )
    assert sql("SELECT email, point_balance FROM users ORDER BY id") == [
        ("first@example.com", 2),
        ("second@example.com", 2),
    ]
    assert ledger_check(database_url).returncode == 0


def test_a_queue_worker_refunds_a_longer_job_before_it_exits(live, live_worker, sql, database_url):
    drain = 3.0
    server = live(**QUEUE)
    worker = live_worker(**QUEUE, DRAIN_SECONDS=str(drain), ASSESSMENT_WORK_SECONDS="60")
    user = User(server)
    user.signup("long-queued@example.com")
    job_id = submitted(user)
    wait_for(lambda: running(sql))

    began = time.monotonic()
    worker.proc.send_signal(signal.SIGTERM)
    # The web process is not draining, the worker that runs the job is: the page says so.
    wait_for(lambda: "Finishing before a restart" in user.status(job_id)[3], timeout=drain)
    worker.proc.wait(30)

    assert worker.proc.returncode == 0
    assert time.monotonic() - began >= drain  # the job was given its chance to finish
    assert_interrupted_and_refunded(sql)
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert sql("SELECT status FROM procrastinate_jobs") == [("failed",)]  # as its job
    assert ledger_check(database_url).returncode == 0
