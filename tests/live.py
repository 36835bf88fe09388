"""A real gunicorn server (one gthread worker) for tests that need process death."""

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from bench import common
from bench.common import Process

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

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
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server(Process):
    """gunicorn -c gunicorn.conf.py wsgi:app on a free port, against the test database."""

    def __init__(self, database_url: str, log_path: Path, port: int | None = None, **env: str):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            **FAST,
            **env,
            "DATABASE_URL": database_url,
            "PORT": str(self.port),
        }
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Server":
        self.spawn([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"])
        self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 30, not_pid: int | None = None) -> int:
        """Wait until a worker answers /healthz (a new one, if not_pid is given)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"gunicorn exited; see {self.log_path}"
            try:
                pid = requests.get(self.url + "/healthz", timeout=1).json()["pid"]
                if pid != not_pid:
                    return pid
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.05)
        raise AssertionError(f"server not ready; see {self.log_path}")

    def worker_pid(self) -> int:
        return requests.get(self.url + "/healthz", timeout=2).json()["pid"]


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

    def status(self, job_id) -> tuple[str, str, bool, str]:
        html = self.http.get(f"{self.server.url}/assessments/{job_id}/status", timeout=10).text
        status = re.search(r'data-status="([^"]*)"', html).group(1)
        billing = re.search(r'data-billing="([^"]*)"', html).group(1)
        return status, billing, "hx-trigger" not in html, html


class Worker(common.Worker):
    """flask --app wsgi worker: a procrastinate worker process against the test database."""

    def __init__(self, database_url: str, log_path: Path, **env: str):
        super().__init__(database_url, log_path, **{**FAST, **env})

    def start(self, timeout: float = 30) -> "Worker":
        return super().start(timeout)
