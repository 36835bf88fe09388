"""What every benchmark shares: a fresh database, real gunicorn servers, signed-in users."""

import argparse
import contextlib
import json
import os
import re
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import requests

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
LOGS = ROOT / "bench" / "logs"
DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/postgres"

# The environment of every benchmark server. Jobs run for an hour unless a benchmark says
# otherwise, so they stay `running` for the whole measurement; lease and heartbeat keep
# their defaults (30 s, 10 s), so no job is reaped unless a benchmark kills its worker.
SERVER_ENV = {
    "JOB_LEASE_SECONDS": "30",
    "JOB_HEARTBEAT_SECONDS": "10",
    "JOB_MAX_RUNTIME_SECONDS": "7200",
    "POLL_INTERVAL_SECONDS": "2",
    "ASSESSMENT_WORK_SECONDS": "3600",
    "MAX_CONCURRENT_JOBS": "32",
    "SIGNUP_POINTS": "3",
    "LAYER_PROVIDER": "demo",
    "SECRET_KEY": "bench-secret",
    "SIGNUP_RATE_LIMIT": "100000 per hour",  # every bench user signs up from 127.0.0.1
    "GUNICORN_ACCESSLOG": "",  # no access log: it would be the same cost on every endpoint
    "FAILPOINTS": "",
}

PLACE = "札幌市"
# Every client of the benchmarks sends this one User-Agent: Flask-Login's session
# protection ties a session to it, and a different one would rewrite the cookie on
# every response (a cost no real browser causes).
USER_AGENT = "Mozilla/5.0 (bench) htmx/2.0"


def log(message: str) -> None:
    """Print a progress line to stderr, flushed, with the time."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def raise_fd_limit() -> None:
    """Let this process and the servers it starts hold a few thousand sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 16384) if hard != resource.RLIM_INFINITY else 16384
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_url() -> str:
    """The PostgreSQL server to create the benchmark database on."""
    if url := os.environ.get("BENCH_DATABASE_URL") or os.environ.get("DATABASE_URL"):
        return url
    try:
        with psycopg.connect(DEFAULT_SERVER_URL, connect_timeout=2):
            return DEFAULT_SERVER_URL
    except psycopg.OperationalError:
        from app.database import embedded  # no local server: the product's embedded one

        return embedded.start(ROOT / "bench" / ".pgdata")


class Database:
    """A fresh database `bench_<pid>` dropped by close(), or an existing one left alone."""

    def __init__(self, existing: str | None = None) -> None:
        from sqlalchemy.engine import make_url

        self.created = existing is None
        if existing is not None:
            self.url = self.admin = existing
            self.name = make_url(existing).database
            self.version = self.scalar("SHOW server_version")
            return
        base = make_url(server_url())
        self.name = f"bench_{os.getpid()}"
        self.admin = base.set(drivername="postgresql").render_as_string(hide_password=False)
        self.url = base.set(drivername="postgresql", database=self.name).render_as_string(
            hide_password=False
        )
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.name}"')
        self.version = self.scalar("SHOW server_version")

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.url, autocommit=True)

    def scalar(self, sql: str, params: tuple | dict = ()):
        with self.connect() as conn:
            row = conn.execute(sql, params).fetchone()
            return None if row is None else row[0]

    def rows(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        with self.connect() as conn:
            return conn.execute(sql, params).fetchall()

    def truncate(self) -> None:
        """Empty the product's tables between benchmarks (before the first server: no-op)."""
        with self.connect() as conn:
            exists = conn.execute("SELECT to_regclass('assessment_jobs')").fetchone()[0]
            if exists:
                conn.execute(
                    "TRUNCATE users, point_ledger, assessment_jobs, incidents"
                    " RESTART IDENTITY CASCADE"
                )

    def close(self) -> None:
        if not self.created:
            return
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


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

    defaults = SERVER_ENV  # the environment under the caller's (tests/live.py: its own)
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

    defaults = SERVER_ENV  # the environment under the caller's (tests/live.py: its own)
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


class User:
    """A signed-in browser session: its cookie is what the load generators send."""

    def __init__(self, server: Server, email: str):
        self.server = server
        self.email = email
        self.http = requests.Session()
        self.http.headers["User-Agent"] = USER_AGENT
        self.job_id: uuid.UUID | None = None
        self._csrf: str | None = None

    def csrf(self) -> str:
        if self._csrf is None:
            html = self.http.get(self.server.url + "/assessments/new", timeout=10).text
            self._csrf = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', html).group(1)
        return self._csrf

    def signup(self, password: str = "correct horse battery") -> "User":
        html = self.http.get(self.server.url + "/signup", timeout=10).text
        token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', html).group(1)
        r = self.http.post(
            self.server.url + "/signup",
            data={"email": self.email, "password": password, "csrf_token": token},
            allow_redirects=False,
            timeout=30,
        )
        if r.status_code != 303:
            raise RuntimeError(f"signup of {self.email}: {r.status_code} {r.text[:200]}")
        self.http.get(self.server.url + "/", timeout=10)  # shows (and drops) the welcome flash
        return self

    def session_in(self, language: str, password: str = "correct horse battery") -> str:
        """Log in once more, in a browser of its own that switched to language; its cookie."""
        http = requests.Session()
        http.headers["User-Agent"] = USER_AGENT

        def token(path: str) -> str:
            html = http.get(self.server.url + path, timeout=10).text
            return re.search(r'name="csrf_token"[^>]*value="([^"]+)"', html).group(1)

        for path, data in (
            ("/login", {"email": self.email, "password": password}),
            ("/language", {"lang": language}),
        ):
            form = "/login" if path == "/login" else "/"
            r = http.post(
                self.server.url + path,
                data={**data, "csrf_token": token(form)},
                allow_redirects=False,
                timeout=30,
            )
            if r.status_code != 303:
                raise RuntimeError(f"{path} for {self.email}: {r.status_code} {r.text[:200]}")
        return "; ".join(f"{c.name}={c.value}" for c in http.cookies)

    def submit(self, query: str = PLACE, lang: str = "en") -> requests.Response:
        # confirm=yes: a bench user asks for the same place again on purpose, where the
        # form would first point a person to the report they already paid for (409).
        r = self.http.post(
            self.server.url + "/assessments",
            data={"query": query, "lang": lang, "confirm": "yes", "csrf_token": self.csrf()},
            allow_redirects=False,
            timeout=30,
        )
        if r.status_code == 303:
            self.job_id = uuid.UUID(r.headers["Location"].rstrip("/").rsplit("/", 1)[-1])
        return r

    @property
    def cookie(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.http.cookies)

    @property
    def status_path(self) -> str:
        return f"/assessments/{self.job_id}/status"

    def status(self) -> tuple[str, str, bool]:
        """(data-status, data-billing, settled) of this user's job, as the fragment says."""
        html = self.http.get(
            self.server.url + self.status_path, headers={"HX-Request": "true"}, timeout=10
        ).text
        return parse_fragment(html)


def parse_fragment(html: str) -> tuple[str, str, bool]:
    status = re.search(r'data-status="([^"]*)"', html).group(1)
    billing = re.search(r'data-billing="([^"]*)"', html).group(1)
    return status, billing, "hx-trigger" not in html


def users_with_running_jobs(
    server: Server, db: Database, n: int, prefix: str, query: str = PLACE
) -> list[User]:
    """Sign up n distinct users and start one job each; wait until all n are running."""
    users = [User(server, f"{prefix}{i}@bench.example").signup() for i in range(n)]
    for user in users:
        r = user.submit(query)
        if r.status_code != 303:
            raise RuntimeError(f"submit for {user.email}: {r.status_code} {r.text[:300]}")
    ids = [str(u.job_id) for u in users]
    wait_until(
        lambda: (
            db.scalar(
                "SELECT count(*) FROM assessment_jobs j JOIN point_ledger c"
                " ON c.job_id = j.id AND c.kind = 'consume'"
                " WHERE j.status = 'running' AND j.id = ANY(%s::uuid[])",
                (ids,),
            )
            == n
        ),
        timeout=30,
        what=f"{n} jobs running and charged",
    )
    return users


def count_running(db: Database, users: list[User]) -> int:
    return db.scalar(
        "SELECT count(*) FROM assessment_jobs WHERE status = 'running' AND id = ANY(%s::uuid[])",
        ([str(u.job_id) for u in users],),
    )


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


def rss_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM from /proc/<pid>/status, and Pss from smaps_rollup, in KiB."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "Threads"):
            out[key] = int(value.split()[0])
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("Pss", "Private_Dirty", "Shared_Clean"):
                out[key] = int(value.split()[0])
    return out


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0-100) by the nearest-rank method; nan when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-p * len(ordered) // 100))))
    return ordered[rank - 1]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def best_ns(fn: Callable[[], object], n: int, repeats: int) -> float:
    """Nanoseconds per call of fn called n times in a row, the best of repeats runs.

    The best run is the one the shared machine disturbed least.
    """
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


@contextlib.contextmanager
def servers(*items: Server) -> Iterator[tuple[Server, ...]]:
    """Start servers and stop each of them however the block ends."""
    started: list[Server] = []
    try:
        for item in items:
            started.append(item.start())
        yield tuple(started)
    finally:
        for item in reversed(started):
            item.stop()


def run_alone(run, doc: str, database: bool = True, **options) -> None:
    """Run one benchmark by itself and print its figures as JSON: `python -m bench.<name>`.

    run(db, **options) is called as bench/run.py calls it, db a fresh database of its own
    (dropped after; None with database=False, for the in-process ones). Each option
    (name=default) becomes a flag --name, a switch where the default is False.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, default in options.items():
        if default is False:
            parser.add_argument(f"--{name}", action="store_true")
        else:
            parser.add_argument(f"--{name}", type=type(default), default=default)
    args = parser.parse_args()
    raise_fd_limit()
    db = Database() if database else None
    try:
        out = run(db, **vars(args))
    finally:
        if db is not None:
            db.close()
    print(json.dumps(out, indent=2, default=str))
