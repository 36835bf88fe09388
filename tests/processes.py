"""The child processes of the tests and the benchmarks: a real gunicorn, a queue worker.

One way to start one, wait until it serves, and stop it: tests/live.py gives them the
tests' fast settings, bench/common.py the benchmarks'.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
LOGS = ROOT / "bench" / "logs"  # where a server's log goes unless it is told


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A child process whose output goes to its log file."""

    log_path: Path
    env: dict[str, str]
    proc: subprocess.Popen | None = None

    def spawn(self, argv: list[str], cwd: Path = ROOT) -> None:
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=self.env, stdout=self.log, stderr=subprocess.STDOUT
        )

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        """Send sig, SIGKILL after timeout, wait for the exit and close the log."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()


class Worker(Process):
    """`flask --app wsgi worker`: a queue worker (JOB_EXECUTOR=procrastinate) on a database."""

    defaults: dict[str, str] = {}  # the environment under the caller's
    start_timeout: float = 60

    def __init__(self, database_url: str, log_path: Path, **env: str):
        self.env = {
            **os.environ,
            **self.defaults,
            "JOB_EXECUTOR": "procrastinate",
            **env,
            "DATABASE_URL": database_url,
            "PYTHONPATH": str(ROOT),
        }
        self.log_path = log_path
        self.proc = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, timeout: float | None = None) -> "Worker":
        """Start the worker and wait until procrastinate says it is taking jobs."""
        self.spawn([str(BIN / "flask"), "--app", "wsgi", "worker"])
        timeout = timeout or self.start_timeout
        deadline = time.monotonic() + timeout
        while b"Starting worker on" not in self.log_path.read_bytes():
            if self.proc.poll() is not None:
                raise RuntimeError(f"the worker exited; see {self.log_path}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker not ready after {timeout} s; see {self.log_path}")
            time.sleep(0.05)
        return self

    def __enter__(self) -> "Worker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class Server(Process):
    """gunicorn -c gunicorn.conf.py MODULE on a free port: one gthread worker, no control socket.

    The project's gunicorn.conf.py is used as it is: its on_starting migrates the
    database that DATABASE_URL names, its worker_exit settles jobs on SIGTERM. The log
    goes to bench/logs/<name>.log unless log_path says otherwise.
    """

    defaults: dict[str, str] = {}  # the environment under the caller's
    start_timeout: float = 60

    def __init__(
        self,
        database_url: str | None,
        name: str,
        module: str = "bench.benchapp:app",
        conf: bool = True,
        args: tuple[str, ...] = (),
        *,
        port: int | None = None,
        log_path: Path | None = None,
        **env: str,
    ):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **self.defaults, **env, "PORT": str(self.port)}
        if database_url:
            self.env["DATABASE_URL"] = database_url
        self.env["PYTHONPATH"] = str(ROOT)
        # gunicorn reads ./gunicorn.conf.py by itself: a server without the project's
        # settings runs in bench/, where there is none.
        self.cwd = ROOT if conf else ROOT / "bench"
        if conf:
            self.argv = [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", *args, module]
        else:
            self.argv = [str(BIN / "gunicorn"), "--bind", f"127.0.0.1:{self.port}", *args, module]
        self.log_path = log_path or LOGS / f"{name}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float | None = None) -> "Server":
        self.spawn(self.argv, self.cwd)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float | None = None, not_pid: int | None = None) -> int:
        """Wait until a worker answers /healthz (a new one, if not_pid is given)."""
        timeout = timeout or self.start_timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited; see {self.log_path}")
            try:
                pid = requests.get(self.url + "/healthz", timeout=1).json()["pid"]
                if pid != not_pid:
                    return pid
            except (requests.RequestException, ValueError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not ready after {timeout} s; see {self.log_path}")

    def health(self) -> dict:
        return requests.get(self.url + "/healthz", timeout=5).json()

    def worker_pid(self) -> int:
        return self.health()["pid"]

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
