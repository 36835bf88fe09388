"""What every benchmark shares: a fresh database, a server under load, its readings.

One way to start a server under load (loaded()), one browser tab that polls a job on a
timetable (Tab), one way to read a process's memory and CPU from /proc and one summary of
a sample (spread()). bench/run.py is the one way to run them, alone too (--only).
"""

import contextlib
import os
import re
import resource
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import requests

from tests import processes
from tests.processes import BIN, LOGS, ROOT, free_port  # noqa: F401 - benchmarks import them here

DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/postgres"

# The environment of every benchmark server. Jobs run for an hour unless a benchmark says
# otherwise, so they stay `running` for the whole measurement; lease and heartbeat keep
# their defaults (30 s, 10 s), so no job is reaped unless a benchmark kills its worker.
SERVER_ENV = {"JOB_LEASE_SECONDS": "30", "JOB_HEARTBEAT_SECONDS": "10"}
SERVER_ENV |= {"JOB_MAX_RUNTIME_SECONDS": "7200", "ASSESSMENT_WORK_SECONDS": "3600"}
SERVER_ENV |= {"POLL_INTERVAL_SECONDS": "2", "MAX_CONCURRENT_JOBS": "32", "SIGNUP_POINTS": "3"}
SERVER_ENV |= {"LAYER_PROVIDER": "demo", "SECRET_KEY": "bench-secret", "FAILPOINTS": ""}
# Every bench user signs up from 127.0.0.1; no access log: the same cost on every endpoint.
SERVER_ENV |= {"SIGNUP_RATE_LIMIT": "100000 per hour", "GUNICORN_ACCESSLOG": ""}

PLACE = "札幌市"
PASSWORD = "correct horse battery"
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
    """A fresh database `bench_<pid>` dropped by close(), or an existing one left alone.

    With patience, a read that finds the server gone is tried again for that many seconds.
    """

    def __init__(self, existing: str | None = None, patience: float = 0) -> None:
        from sqlalchemy.engine import make_url

        self.patience = patience
        self.created = existing is None
        if existing is not None:
            self.url = self.admin = existing
            self.name = make_url(existing).database
            self.version = self.scalar("SHOW server_version")
            return
        base = make_url(server_url()).set(drivername="postgresql")
        self.name = f"bench_{os.getpid()}"
        self.admin = base.render_as_string(hide_password=False)
        self.url = base.set(database=self.name).render_as_string(hide_password=False)
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{self.name}"')
        self.version = self.scalar("SHOW server_version")

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.url, autocommit=True)

    def scalar(self, sql: str, params: tuple | dict = ()):
        return next(iter(self.rows(sql, params)), (None,))[0]

    def rows(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        deadline = time.monotonic() + self.patience
        while True:
            try:
                with self.connect() as conn:
                    return conn.execute(sql, params).fetchall()
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def truncate(self) -> None:
        """Empty the product's tables between benchmarks (before the first server: no-op)."""
        tables = "users, point_ledger, assessment_jobs, incidents"
        with self.connect() as conn:
            if conn.execute("SELECT to_regclass('assessment_jobs')").fetchone()[0]:
                conn.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")

    def close(self) -> None:
        if not self.created:
            return
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class Server(processes.Server):
    defaults = SERVER_ENV


class Worker(processes.Worker):
    defaults = SERVER_ENV


def csrf_token(http: requests.Session, url: str) -> str:
    """The CSRF token of the form on the page at url."""
    html = http.get(url, timeout=10).text
    return re.search(r'name="csrf_token"[^>]*value="([^"]+)"', html).group(1)


def kept_alive_session() -> requests.Session:
    """A browser's session that sends a request once more when the server had closed the
    kept-alive connection it went out on (ConnectionResetError), as browsers do."""
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    http = requests.Session()
    http.headers["User-Agent"] = USER_AGENT
    # Only errors before an answer, POST too: a reset request never reached the app.
    again = Retry(total=1, connect=1, read=1, status=0, other=0, allowed_methods=None)
    http.mount("http://", HTTPAdapter(max_retries=again))
    return http


class User:
    """A signed-in browser session: its cookie is what the load generators send."""

    def __init__(self, server: Server, email: str):
        self.server, self.email, self.http = server, email, kept_alive_session()
        self.job_id: uuid.UUID | None = None
        self._csrf: str | None = None

    def csrf(self) -> str:
        if self._csrf is None:
            self._csrf = csrf_token(self.http, self.server.url + "/assessments/new")
        return self._csrf

    def post(self, path: str, data: dict, form: str, http: requests.Session | None = None):
        """POST data and the CSRF token of the form at form to path; fail unless 303."""
        http = http or self.http
        data = {**data, "csrf_token": csrf_token(http, self.server.url + form)}
        r = http.post(self.server.url + path, data=data, allow_redirects=False, timeout=30)
        if r.status_code != 303:
            raise RuntimeError(f"{path} for {self.email}: {r.status_code} {r.text[:200]}")

    def signup(self, password: str = PASSWORD) -> "User":
        self.post("/signup", {"email": self.email, "password": password}, "/signup")
        self.http.get(self.server.url + "/", timeout=10)  # shows (and drops) the welcome flash
        return self

    def session_in(self, language: str, password: str = PASSWORD) -> str:
        """Log in once more, in a browser of its own that switched to language; its cookie."""
        http = kept_alive_session()
        self.post("/login", {"email": self.email, "password": password}, "/login", http)
        self.post("/language", {"lang": language}, "/", http)
        return cookie(http)

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
        return cookie(self.http)

    @property
    def status_path(self) -> str:
        return f"/assessments/{self.job_id}/status"

    def status(self) -> tuple[str, str, bool]:
        """(data-status, data-billing, settled) of this user's job, as the fragment says."""
        url = self.server.url + self.status_path
        return parse_fragment(self.http.get(url, headers={"HX-Request": "true"}, timeout=10).text)


def cookie(http: requests.Session) -> str:
    """The Cookie header a browser with http's cookies sends."""
    return "; ".join(f"{c.name}={c.value}" for c in http.cookies)


def parse_fragment(html: str) -> tuple[str, str, bool]:
    status = re.search(r'data-status="([^"]*)"', html).group(1)
    billing = re.search(r'data-billing="([^"]*)"', html).group(1)
    return status, billing, "hx-trigger" not in html


RUNNING_AND_CHARGED = (
    "SELECT count(*) FROM assessment_jobs j JOIN point_ledger c"
    " ON c.job_id = j.id AND c.kind = 'consume'"
    " WHERE j.status = 'running' AND j.id = ANY(%s::uuid[])"
)


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
    what = f"{n} jobs running and charged"
    wait_until(lambda: db.scalar(RUNNING_AND_CHARGED, (ids,)) == n, timeout=30, what=what)
    return users


@contextlib.contextmanager
def loaded(
    db: Database,
    name: str,
    jobs: int,
    prefix: str = "",
    *,
    url: str | None = None,
    place: str = PLACE,
    timeout: float | None = None,
    **env: str,
) -> Iterator[tuple[Server, list[User]]]:
    """A server on the emptied database, with `jobs` users each running a job (prefix: emails).

    The one way a benchmark puts a server under load: MAX_CONCURRENT_JOBS lets every job
    run (env may say otherwise; SERVER_ENV's with jobs=0), url reaches the database some
    other way (a proxy), and with no prefix nobody signs up yet. The server stops however
    the block ends.
    """
    db.truncate()
    limit = {"MAX_CONCURRENT_JOBS": str(max(jobs, 8))} if jobs else {}
    server = Server(url or db.url, name, **(limit | env))
    server.start(timeout)
    try:
        users = users_with_running_jobs(server, db, jobs, prefix, place) if prefix else []
        yield server, users
    finally:
        server.stop()


class Tab(threading.Thread):
    """A browser tab polling one job's fragment every interval s from t0, until it settles.

    The polls are due on a fixed timetable from t0 (a slow answer delays none but its
    own). Seconds from t0: when each poll went out (sent), what came back (answers: the
    HTTP status, 0 for none; timeline: an exception's name, `http <status>` or the
    fragment's status, billing and settled), the first fragment and the settled one.
    """

    def __init__(self, user: User, t0: float, interval: float, limit: float, stop=None):
        super().__init__(daemon=True)
        self.user, self.t0, self.interval, self.limit = user, t0, interval, limit
        self.stop = stop or threading.Event()
        self.sent, self.answers, self.timeline = [], [], []  # as the docstring says
        self.first_answer: float | None = None
        self.settled_at: float | None = None

    def run(self) -> None:
        url, k = self.user.server.url + self.user.status_path, 0
        while not self.stop.is_set() and time.monotonic() - self.t0 < self.limit:
            due = self.t0 + k * self.interval
            k += 1
            if (pause := due - time.monotonic()) > 0:
                time.sleep(pause)
            self.sent.append(time.monotonic() - self.t0)
            try:
                resp = self.user.http.get(url, headers={"HX-Request": "true"}, timeout=10)
            except requests.RequestException as exc:
                self.answers.append((time.monotonic() - self.t0, 0))
                self.timeline.append((round(self.answers[-1][0], 3), type(exc).__name__))
                continue
            at = time.monotonic() - self.t0
            self.answers.append((at, resp.status_code))
            if resp.status_code != 200:
                self.timeline.append((round(at, 3), f"http {resp.status_code}"))
                continue
            status, billing, settled = parse_fragment(resp.text)
            self.first_answer = at if self.first_answer is None else self.first_answer
            self.timeline.append((round(at, 3), status, billing, settled))
            if settled:
                self.settled_at = at
                return


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


def cpu_seconds(pid: int) -> float:
    """The process's user and system CPU so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """The process and its descendants (the work's and the pixel pool's forkserver and
    processes). Each thread's children: a process started from a job's thread is listed
    under that thread, not under the main one."""
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids += (task / "children").read_text().split()
        except OSError:  # the thread ended meanwhile
            pass
    return [pid, *(p for kid in kids for p in process_tree(int(kid)))]


def tree_sum(pid: int, read: Callable[[int], float]) -> float:
    """The sum of read(p) over the process tree; a process that just ended counts 0."""
    total = 0.0
    for p in process_tree(pid):
        try:
            total += read(p)
        except OSError:
            pass
    return total


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0-100) by the nearest-rank method; nan when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-p * len(ordered) // 100))))
    return ordered[rank - 1]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values_ms: list[float]) -> dict:
    """How many, the median, p90, p99 and the largest of a sample in milliseconds."""
    return {
        "n": len(values_ms),
        "median_ms": median(values_ms),
        "p90_ms": percentile(values_ms, 90),
        "p99_ms": percentile(values_ms, 99),
        "max_ms": max(values_ms, default=float("nan")),
    }


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
