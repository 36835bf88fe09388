"""The live processes of the tests: real gunicorn servers and queue workers, fast settings.

They are tests/processes.py's Server and Worker (one way to start, wait for and stop a
child process) with the tests' own environment: short leases, heartbeats and work.
"""

import os
import re
import signal
from pathlib import Path

import requests

from bench import common
from tests import processes

FAST = {
    "JOB_LEASE_SECONDS": "2",
    "JOB_HEARTBEAT_SECONDS": "0.4",
    "JOB_MAX_RUNTIME_SECONDS": "120",
    "POLL_INTERVAL_SECONDS": "0.5",
    "ASSESSMENT_WORK_SECONDS": "1",
    "MAX_CONCURRENT_JOBS": "8",
    "SIGNUP_POINTS": "3",
    "LAYER_PROVIDER": "demo",
    "SECRET_KEY": "live-test-secret",
    "GUNICORN_ACCESSLOG": "",
    # Every test user signs up from 127.0.0.1, and the brake's counts are the database's,
    # shared by a test's instances: tests of the brake set their own limits.
    "SIGNUP_RATE_LIMIT": "1000 per hour",
}


class Server(processes.Server):
    """gunicorn -c gunicorn.conf.py wsgi:app on a free port, against the test database."""

    defaults = FAST
    start_timeout = 30

    def __init__(self, database_url: str, log_path: Path, port: int | None = None, **env: str):
        super().__init__(
            database_url, log_path.stem, "wsgi:app", port=port, log_path=log_path, **env
        )

    def kill(self) -> None:
        """SIGKILL the whole instance, its worker and its master, as a power cut would."""
        os.kill(self.worker_pid(), signal.SIGKILL)
        self.proc.kill()
        self.proc.wait()


class User:
    """A browser session against a live server."""

    def __init__(self, server: Server):
        self.server = server
        self.http = requests.Session()

    def _token(self, path: str) -> str:
        html = self.http.get(self.server.url + path, timeout=5).text
        return re.search(r'name="csrf_token"[^>]*value="([^"]+)"', html).group(1)

    def signup(self, email: str, password: str = "correct horse") -> None:
        r = self.http.post(
            self.server.url + "/signup",
            data={"email": email, "password": password, "csrf_token": self._token("/signup")},
            allow_redirects=False,
            timeout=10,
        )
        assert r.status_code == 303, r.text[:300]

    def submit(self, query: str = "札幌市", lang: str = "en") -> requests.Response:
        return self.http.post(
            self.server.url + "/assessments",
            data={"query": query, "lang": lang, "csrf_token": self._token("/assessments/new")},
            allow_redirects=False,
            timeout=10,
        )

    def submit_to_a_dying_worker(self) -> int:
        """Submit where a failpoint kills the worker; return the pid of the one gunicorn starts.

        The worker may die before its answer is out: the job row is what counts.
        """
        dying = self.server.worker_pid()
        try:
            self.submit()
        except requests.RequestException:
            pass
        return self.server.wait_ready(not_pid=dying)

    def status(self, job_id) -> tuple[str, str, bool, str]:
        html = self.http.get(f"{self.server.url}/assessments/{job_id}/status", timeout=10).text
        return (*common.parse_fragment(html), html)


class Worker(processes.Worker):
    """flask --app wsgi worker: a procrastinate worker process against the test database."""

    defaults = FAST
    start_timeout = 30
