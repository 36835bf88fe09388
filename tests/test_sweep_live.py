"""The sweep against the real gunicorn: a job whose worker was SIGKILLed and whose owner
never polls again is refunded by someone else's request, by a restarted worker, or by
`flask sweep`; a server with settings that cannot work does not start."""

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.live import FAST, User
from tests.processes import BIN, ROOT, free_port
from tests.test_crash import ledger_check, only_job
from tests.test_sweep import settled_and_refunded

pytestmark = [pytest.mark.server, pytest.mark.minimal_work]

LEASE = float(FAST["JOB_LEASE_SECONDS"])


def killed_mid_job(live, sql):
    """Start a job whose worker is SIGKILLed once it has charged; the owner never returns."""
    server = live(FAILPOINTS="after_consume=kill")
    owner = User(server)
    owner.signup("gone@example.com")
    second = owner.submit_to_a_dying_worker()
    wait_for(lambda: sql("SELECT 1 FROM point_ledger WHERE kind = 'consume'"))
    return server, only_job(sql), second


def stale(sql):
    return sql(
        "SELECT coalesce(heartbeat_at, started_at, created_at)"
        " < now() - make_interval(secs => %(s)s) FROM assessment_jobs",
        s=LEASE + 0.2,
    ) == [(True,)]


def test_another_users_requests_refund_a_job_whose_owner_never_returns(live, sql, database_url):
    server, job_id, _ = killed_mid_job(live, sql)
    other = User(server)
    other.signup("other@example.com")

    def browse_then_check():
        other.http.get(server.url + "/", timeout=5)
        return settled_and_refunded(sql, job_id)

    wait_for(browse_then_check, timeout=LEASE * 10)

    assert sql("SELECT point_balance FROM users WHERE email = 'gone@example.com'") == [(3,)]
    # Within the lease, the sweep interval (the lease by default) and a request or two.
    (late,) = sql(
        "SELECT r.created_at - coalesce(j.heartbeat_at, j.started_at, j.created_at)"
        " > make_interval(secs => %(s)s) FROM assessment_jobs j"
        " JOIN point_ledger r ON r.job_id = j.id AND r.kind = 'refund'",
        s=2 * LEASE + 1.5,
    )[0]
    assert not late
    assert ledger_check(database_url).returncode == 0


def test_a_restarted_worker_refunds_it_with_no_request_at_all(live, sql, database_url):
    server, job_id, second = killed_mid_job(live, sql)
    wait_for(lambda: stale(sql), timeout=LEASE * 5)
    assert sql("SELECT status FROM assessment_jobs") == [("running",)]  # nobody came by

    os.kill(second, signal.SIGKILL)  # gunicorn starts a new worker, which sweeps first

    wait_for(lambda: settled_and_refunded(sql, job_id), timeout=30)
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert ledger_check(database_url).returncode == 0


def flask(database_url, *args):
    return subprocess.run(
        [str(BIN / "flask"), "--app", "wsgi", *args],
        env={**FAST, "DATABASE_URL": database_url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_flask_sweep_on_its_own_refunds_it(live, sql, database_url):
    server, job_id, _ = killed_mid_job(live, sql)
    server.stop()  # no server at all: only the operator's timer is left
    wait_for(lambda: stale(sql), timeout=LEASE * 5)
    check = flask(database_url, "ledger-check")
    assert check.returncode == 1 and f"job {job_id}" in check.stderr

    swept = flask(database_url, "sweep")

    assert swept.returncode == 0, swept.stderr
    assert swept.stdout.strip() == "reaped 1, finalized 1"
    assert settled_and_refunded(sql, job_id)
    assert sql("SELECT point_balance FROM users") == [(3,)]
    assert flask(database_url, "ledger-check").returncode == 0


@pytest.mark.parametrize(
    "env, named",
    [
        ({"JOB_HEARTBEAT_SECONDS": "5", "JOB_LEASE_SECONDS": "2"}, "JOB_HEARTBEAT_SECONDS"),
        ({"JOB_LEASE_SECONDS": "0"}, "JOB_LEASE_SECONDS"),
        ({"MAX_CONCURRENT_JOBS": "0"}, "MAX_CONCURRENT_JOBS"),
        ({"SWEEP_INTERVAL_SECONDS": "-1"}, "SWEEP_INTERVAL_SECONDS"),
    ],
)
def test_gunicorn_refuses_to_start_with_settings_that_cannot_work(database_url, env, named):
    started = subprocess.run(
        [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"],
        env={
            **os.environ,
            **FAST,
            **env,
            "DATABASE_URL": database_url,
            "PORT": str(free_port()),
        },
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(ROOT),
    )
    assert started.returncode != 0
    assert named in started.stdout + started.stderr
