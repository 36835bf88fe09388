"""kill -9 and SIGTERM against the real gunicorn: nobody loses a point or is lied to.

The servers here run the minimal work (tests/minimal_work.py), not the report: what is
proven is the job machinery's, whatever the work computes (app/jobs/work.py).
"""

import contextlib
import os
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests

from bench.common import process_tree
from tests.conftest import wait_for
from tests.live import FAST, User

pytestmark = [pytest.mark.server, pytest.mark.minimal_work]

LEASE = float(FAST["JOB_LEASE_SECONDS"])

POLL = 0.2


def ledger_check(database_url) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "flask"), "--app", "wsgi", "ledger-check"],
        env={"DATABASE_URL": database_url, "SECRET_KEY": "x", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parent.parent,
    )


def poll_until_settled(user, job_id, timeout=LEASE * 10):
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, billing, settled, html = user.status(job_id)
            if settled:
                return status, billing, html
        except requests.RequestException:
            pass  # the worker is being replaced
        assert time.monotonic() < deadline, "the job never settled"
        time.sleep(POLL)


def only_job(sql):
    (job_id,) = sql("SELECT id FROM assessment_jobs")[0]
    return job_id


def assert_truthful(sql, job_id, billing, html):
    consumes = sql(
        "SELECT count(*) FROM point_ledger WHERE job_id = %(j)s AND kind = 'consume'", j=job_id
    )[0][0]
    refunds = sql(
        "SELECT count(*) FROM point_ledger WHERE job_id = %(j)s AND kind = 'refund'", j=job_id
    )[0][0]
    assert refunds == consumes <= 1  # refunded if and only if charged, never twice
    if consumes:
        assert billing == "refunded" and "Your point was refunded." in html
    else:
        assert billing == "not_charged" and "No point was used." in html
    # The job left pending/running within one lease (plus a poll and a worker restart)
    # of its last sign of life, on the database clock.
    (late,) = sql(
        "SELECT finished_at - coalesce(heartbeat_at, started_at, created_at)"
        " > make_interval(secs => %(s)s) FROM assessment_jobs WHERE id = %(j)s",
        j=job_id,
        s=LEASE + POLL + 3,
    )[0]
    assert not late
    return consumes


def assert_interrupted_and_refunded(sql):
    """The one job, stopped by a shutdown, failed as INTERRUPTED, settled and refunded."""
    assert sql("SELECT status, error_code, finalized_at IS NOT NULL FROM assessment_jobs") == [
        ("failed", "INTERRUPTED", True)
    ]
    assert sql("SELECT kind FROM point_ledger WHERE job_id IS NOT NULL ORDER BY id") == [
        ("consume",),
        ("refund",),
    ]


def assert_sigterm_settles_its_job(process, sql, database_url):
    """Once the one job is charged, SIGTERM the process running it (a web instance or a
    queue worker): it exits cleanly, the job interrupted and refunded, the books right."""
    wait_for(lambda: sql("SELECT 1 FROM point_ledger WHERE kind = 'consume'"))

    process.stop(signal.SIGTERM)

    assert process.proc.returncode == 0
    assert_interrupted_and_refunded(sql)
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert ledger_check(database_url).returncode == 0


@pytest.mark.parametrize(
    "point, charged",
    [
        ("after_insert", False),
        ("after_running", False),
        ("after_consume", True),
        ("before_success", True),
    ],
)
def test_worker_killed_in_the_job_path(live, sql, database_url, point, charged):
    server = live(FAILPOINTS=f"{point}=kill")
    user = User(server)
    user.signup("crash@example.com")

    user.submit_to_a_dying_worker()  # gunicorn starts a new worker by itself
    job_id = only_job(sql)

    status, billing, html = poll_until_settled(user, job_id)

    assert status == "failed"
    assert assert_truthful(sql, job_id, billing, html) == int(charged)
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert ledger_check(database_url).returncode == 0

    # The fix is deployed: the same user submits again and is charged once.
    server.stop()
    user.server = live()
    again = user.submit()
    assert again.status_code == 303
    status, billing, _ = poll_until_settled(user, again.headers["Location"].rsplit("/", 1)[1])
    assert (status, billing) == ("succeeded", "charged")
    assert sql("SELECT point_balance FROM users") == [(2,)]
    assert ledger_check(database_url).returncode == 0


@pytest.mark.parametrize("point", ["after_reap", "before_refund"])
def test_worker_killed_while_settling(live, sql, database_url, point):
    server = live(FAILPOINTS=f"after_consume=kill,{point}=kill")
    user = User(server)
    user.signup("settle@example.com")
    second_worker = user.submit_to_a_dying_worker()
    job_id = only_job(sql)

    # Polls until one reaps the job and dies between the reap and the refund.
    deadline = time.monotonic() + LEASE * 10
    while sql("SELECT status FROM assessment_jobs")[0][0] != "failed":
        assert time.monotonic() < deadline
        try:
            user.status(job_id)
        except requests.RequestException:
            pass
        time.sleep(POLL)
    if point == "before_refund":
        # Every try dies before the refund (a new worker's sweep too): nothing is settled.
        assert sql("SELECT finalized_at IS NULL FROM assessment_jobs") == [(True,)]
        assert sql("SELECT count(*) FROM point_ledger WHERE kind = 'refund'") == [(0,)]
        server.stop()  # deploy the fix
        user.server = live()
    else:
        # The reaper died before the refund; the next worker's first sweep or the next
        # poll completes it.
        server.wait_ready(not_pid=second_worker)
    status, billing, html = poll_until_settled(user, job_id)
    assert status == "failed"
    assert assert_truthful(sql, job_id, billing, html) == 1
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert ledger_check(database_url).returncode == 0


def test_sigterm_settles_a_running_job_before_the_worker_exits(live, sql, database_url):
    # A lease far longer than the test: only the shutdown hook can settle the job.
    server = live(ASSESSMENT_WORK_SECONDS="60", JOB_LEASE_SECONDS="600")
    user = User(server)
    user.signup("deploy@example.com")
    assert user.submit().status_code == 303

    assert_sigterm_settles_its_job(server, sql, database_url)


def test_ctrl_c_settles_the_running_job_and_the_worker_ends_itself(live, sql, database_url):
    # Ctrl-C on `make run`: the terminal's SIGINT to every process of the group (master,
    # worker, the work's process and its forkserver), then the master's SIGQUIT to its
    # worker. gunicorn's own handler shut the request pool down from the signal and could
    # wait on a lock its loop held (handing a request to a starting pool thread) until the
    # master's SIGKILL, the job left running (a lease far longer than the test says so);
    # run twice, the second signal cut the settling short.
    server = live(ASSESSMENT_WORK_SECONDS="60", JOB_LEASE_SECONDS="600")
    user = User(server)
    user.signup("quick@example.com")
    assert user.submit().status_code == 303
    wait_for(lambda: sql("SELECT 1 FROM assessment_jobs WHERE step LIKE 'parts:%%'"))
    # Browsers leaving as the stop comes: their kept-alive connections' ends are requests
    # the worker hands to its pool, which starts threads for them.
    browsers = [requests.Session() for _ in range(8)]
    for browser in browsers:
        browser.get(server.url + "/healthz", timeout=5)
    for browser in browsers:
        browser.close()

    for pid in process_tree(server.proc.pid):
        with contextlib.suppress(ProcessLookupError):  # one that ended meanwhile
            os.kill(pid, signal.SIGINT)
    server.proc.wait(30)

    assert server.proc.returncode == 0
    assert_interrupted_and_refunded(sql)
    assert "was sent SIGKILL" not in server.log_path.read_text()
    assert ledger_check(database_url).returncode == 0


def test_ctrl_c_during_a_drain_lets_the_refund_under_way_finish(live, sql, database_url):
    # SIGTERM drains (DRAIN_SECONDS); the job's refund is under way in the drain when the
    # operator loses patience. The worker's exit waits for it: before, it left at once and
    # the job stayed failed and unrefunded until the next start's sweep.
    server = live(
        ASSESSMENT_WORK_SECONDS="60",
        JOB_LEASE_SECONDS="600",
        DRAIN_SECONDS="1",
        FAILPOINTS="before_refund=sleep:1",
    )
    user = User(server)
    user.signup("impatient@example.com")
    assert user.submit().status_code == 303
    wait_for(lambda: sql("SELECT 1 FROM point_ledger WHERE kind = 'consume'"))
    server.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: "failpoint before_refund" in server.log_path.read_text())

    server.stop(signal.SIGINT)

    assert_interrupted_and_refunded(sql)
    assert ledger_check(database_url).returncode == 0


def test_the_quick_stop_leaves_without_touching_the_request_pool():
    # gthread's own handler shut the pool down from the signal, which deadlocked when the
    # signal landed while the worker's loop held the pool's lock.
    conf = runpy.run_path(str(Path(__file__).resolve().parent.parent / "gunicorn.conf.py"))

    class Pool:
        def shutdown(self, wait: bool = True) -> None:
            raise AssertionError("the quick stop took the request pool's lock from a signal")

    told = []
    worker = SimpleNamespace(alive=True, tpool=Pool(), cfg=SimpleNamespace(worker_int=told.append))
    before = {sig: signal.getsignal(sig) for sig in conf["STOP_SIGNALS"]}
    try:
        with pytest.raises(SystemExit):
            conf["quick_stop"](worker)(signal.SIGINT, None)
        # Once only: a second stop signal must not cut the settling in worker_exit short.
        assert {signal.getsignal(sig) for sig in conf["STOP_SIGNALS"]} == {signal.SIG_IGN}
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    assert worker.alive is False and told == [worker]


@pytest.mark.parametrize(
    "query, code, message",
    [
        ("fail", "PROVIDER_ERROR", "The work's source failed: the source is down."),
        ("crash", "INTERNAL_ERROR", "The assessment failed because of an error on our side."),
    ],
)
def test_a_work_that_fails_is_refunded_with_what_its_work_says(
    live, sql, database_url, query, code, message
):
    # The work runs in its own process here (WORK_PROCESS auto, two cores or more) or in
    # the job's thread: its failure crosses either way, and only the work names it.
    user = User(live())
    user.signup("fails@example.com")
    response = user.submit(query)
    assert response.status_code == 303
    status, billing, html = poll_until_settled(user, response.headers["Location"].rsplit("/", 1)[1])
    assert (status, billing) == ("failed", "refunded")
    assert sql("SELECT error_code, message FROM assessment_jobs") == [(code, message)]
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert ledger_check(database_url).returncode == 0
