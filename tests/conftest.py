"""Fixtures: one real PostgreSQL database per test session, truncated between tests.

DATABASE_URL, when set, names the server to create the test database on; otherwise
an embedded pgserver in ./.pgdata-test is used. Job threads use their own
connections, so tests cannot run inside one rolled-back transaction: tables are
truncated instead.
"""

import json
import os
import re
import threading
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import pytest
import requests
from sqlalchemy import text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent

TEST_CONFIG = {
    "TESTING": True,
    "SECRET_KEY": "test-secret",
    "SIGNUP_POINTS": 3,
    "ASSESSMENT_WORK_SECONDS": 0,
    "JOB_LEASE_SECONDS": 2,
    "JOB_HEARTBEAT_SECONDS": 0.3,
    "JOB_MAX_RUNTIME_SECONDS": 60,
    "POLL_INTERVAL_SECONDS": 0.5,
    "MAX_CONCURRENT_JOBS": 8,
    "LAYER_PROVIDER": "demo",
    "FAILPOINTS": "",
    # In the job's thread: tests here put providers of their own in the app. The work's
    # process is every live server's (tests/live.py), and test_offload's.
    "WORK_PROCESS": "off",
}


def pytest_collection_modifyitems(items: list) -> None:
    """Put the tests marked `first` first: a run of minutes started last ends the suite alone."""
    items.sort(key=lambda item: item.get_closest_marker("first") is None)


def _server_url() -> str:
    if url := os.environ.get("DATABASE_URL"):
        return url
    from app.database import embedded

    return embedded.start(ROOT / ".pgdata-test")


@pytest.fixture(scope="session", autouse=True)
def compiled_catalogs() -> None:
    """Compile the translation catalogs that changed, as `make test` does before pytest."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    for po in (ROOT / "translations").glob("*/LC_MESSAGES/messages.po"):
        mo = po.with_suffix(".mo")
        if not mo.exists() or mo.stat().st_mtime < po.stat().st_mtime:
            with po.open("rb") as source, mo.open("wb") as target:
                write_mo(target, read_po(source))


@pytest.fixture(scope="session")
def database_url() -> str:
    """Create a fresh database for this session, migrate it, and drop it afterwards."""
    base = make_url(_server_url())
    name = f"hazard_points_test_{os.getpid()}"
    admin = base.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = base.set(drivername="postgresql", database=name).render_as_string(hide_password=False)

    from flask_migrate import upgrade

    from app import create_app

    migrating = create_app({**TEST_CONFIG, "SQLALCHEMY_DATABASE_URI": _sa(url)})
    with migrating.app_context():
        upgrade()
        from app.extensions import db

        db.engine.dispose()
    yield url
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _sa(url: str) -> str:
    from app.config import sqlalchemy_url

    return sqlalchemy_url(url)


def truncate(url: str) -> None:
    """Empty every table and reset the housekeeping clock."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE users, point_ledger, assessment_jobs, incidents, payment_refunds,"
            " procrastinate_jobs, procrastinate_workers, layer_cache, brake_hits, brake_counters"
            " RESTART IDENTITY CASCADE"
        )
        conn.execute("UPDATE housekeeping SET last_run_at = NULL")


def work_of(request) -> dict[str, str]:
    """The configuration a test's apps and servers start from: its marked work, if any.

    A test (or module) marked `minimal_work` proves the job machinery on tests/minimal_work.py,
    not on the report: it does not compute reports, so it is quicker and stays true whatever
    the report does.
    """
    if request.node.get_closest_marker("minimal_work"):
        return {"JOB_WORK": "tests.minimal_work"}
    return {}


@pytest.fixture
def make_app(database_url, request):
    """Build apps on the test database with TEST_CONFIG plus overrides."""
    truncate(database_url)
    built = []
    config = {**TEST_CONFIG, **work_of(request), "SQLALCHEMY_DATABASE_URI": _sa(database_url)}

    def build(**overrides):
        from app import create_app
        from app.jobs import estimate

        estimate.forget()  # the last test's jobs are not this one's recent jobs
        app = create_app({**config, **overrides})
        built.append(app)
        return app

    yield build
    from app.extensions import db
    from app.operations import failpoints

    for app in built:
        assert app.extensions["runner"].wait(10), "a job thread outlived its test"
        # An app with the work's process (WORK_PROCESS=on) ends it here: left running, it
        # kept the session's forkserver alive under every later test of this worker.
        if (host := app.extensions.get("work_host")) is not None:
            host.shutdown()
    chores_done()  # chores that a request set off end with it
    for app in built:
        with app.app_context():
            db.engine.dispose()
    failpoints.configure("")


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def sql(database_url):
    """Run one SQL statement on its own connection and return all rows."""

    def run(statement: str, **params):
        with psycopg.connect(database_url, autocommit=True) as conn:
            cur = conn.execute(statement, params)
            return cur.fetchall() if cur.description else cur.rowcount

    return run


CSRF_RE = re.compile(
    r'name="csrf_token" type="hidden" value="([^"]+)"|name="csrf_token" value="([^"]+)"'
)


def csrf_token(html: str) -> str:
    """Pull the CSRF token out of a rendered page."""
    match = CSRF_RE.search(html)
    assert match, "no csrf_token on the page"
    return match.group(1) or match.group(2)


class Actions:
    """What a user does in the app, through the test client, with real CSRF tokens."""

    def __init__(self, client):
        self.client = client

    def token(self, path: str = "/signup") -> str:
        return csrf_token(self.client.get(path).get_data(as_text=True))

    def signup(self, email: str | None = None, password: str = "correct horse"):
        email = email or f"user-{uuid.uuid4().hex[:8]}@example.com"
        return self.client.post(
            "/signup", data={"email": email, "password": password, "csrf_token": self.token()}
        )

    def login(self, email: str, password: str = "correct horse"):
        return self.client.post(
            "/login",
            data={"email": email, "password": password, "csrf_token": self.token("/login")},
        )

    def submit(self, query: str = "札幌市", lang: str = "en", token: str | None = None, **fields):
        token = token or self.token("/assessments/new")
        return self.client.post(
            "/assessments", data={"query": query, "lang": lang, "csrf_token": token, **fields}
        )


def signed_in(make_app, email: str | None = None, **config):
    """Build an app with config overrides and sign a new user up; return app, client, actions."""
    app = make_app(**config)
    client = app.test_client()
    actions = Actions(client)
    actions.signup(email)
    return app, client, actions


@pytest.fixture
def actions(client):
    return Actions(client)


def wait_for(predicate, timeout: float = 10.0) -> None:
    """Wait until predicate() holds; fail the test if it never does."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def idle_in_transaction(sql, query_like: str) -> int:
    """Count this database's sessions holding a transaction open after a query LIKE that."""
    return sql(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND state = 'idle in transaction' AND query LIKE %(q)s",
        q=query_like,
    )[0][0]


def job_id_from(response) -> uuid.UUID:
    """Return the job id a submit redirected to."""
    assert response.status_code == 303, response.get_data(as_text=True)[:500]
    return uuid.UUID(response.headers["Location"].rstrip("/").split("/")[-1])


def scalar(app, statement: str, **params):
    """Run one query through the app's engine and return its single value."""
    from app.extensions import db

    with app.app_context():
        value = db.session.execute(text(statement), params).scalar()
        db.session.rollback()
        return value


def at_once(app, n: int, call) -> list:
    """Return what call() returned on n threads released together, each in its own app context."""
    from app.extensions import db

    barrier = threading.Barrier(n)
    results = []

    def run():
        with app.app_context():
            barrier.wait()
            results.append(call())
            db.session.remove()

    threads = [threading.Thread(target=run) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


Answer = tuple[int, bytes, dict[str, str]]


@contextmanager
def serve_http(stand_in):
    """Serve GETs on a free port of 127.0.0.1 with stand_in.respond(path), its URL in stand_in.url.

    The one server behind the tests' stand-ins for upstream services: each says only what
    it answers, a status, a body and headers (JSON unless they name another content type).
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            status, body, headers = stand_in.respond(self.path)
            try:
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass  # the client gave up waiting

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    stand_in.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()


class Upstream:
    """The http provider's service, served by serve_http, whose answer each test chooses."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.status = 200
        self.body: bytes | None = None  # None: the demo numbers for the path
        self.delay = 0.0
        self.held: set[str] = set()  # datasets whose answers wait for release
        self.released = threading.Event()
        self.url = ""

    def answer(self, path: str) -> tuple[int, bytes]:
        if self.body is not None:
            return self.status, self.body
        dataset, key = path.lstrip("/").split("/", 1)
        from app.assessment.sources.providers import DemoProvider

        return self.status, json.dumps(DemoProvider().fetch(dataset, key)).encode()

    def respond(self, path: str) -> Answer:
        self.hits[path] += 1
        time.sleep(self.delay)
        if path.lstrip("/").split("/", 1)[0] in self.held:
            self.released.wait(30)
        return *self.answer(path), {}


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    with serve_http(Upstream()) as state:
        yield state
        state.released.set()


@contextmanager
def processes(kind, database_url: str, logs: Path, name: str, request) -> Iterator[Callable]:
    """Hand a test start(...): a new kind (Server, Worker) on the database, started.

    Each logs to logs/<name>-<n>.log; every one started is stopped at the end.
    """
    started = []
    defaults = work_of(request)

    def start(*args, **env):
        log = logs / f"{name}-{len(started)}.log"
        process = kind(database_url, log, *args, **{**defaults, **env})
        started.append(process.start())
        return process

    try:
        yield start
    finally:
        for process in started:
            process.stop()


@pytest.fixture
def live(database_url, tmp_path, request):
    """Start real gunicorn servers on the test database; stop them after the test."""
    from tests.live import Server

    truncate(database_url)
    with processes(Server, database_url, tmp_path, "gunicorn", request) as start:
        yield start


@pytest.fixture(scope="module")
def _module_servers(database_url, tmp_path_factory, request):
    """The module's kept gunicorn servers by their settings, and how to start one."""
    from tests.live import Server

    kept: dict[tuple, Server] = {}
    logs = tmp_path_factory.mktemp("kept")
    with processes(Server, database_url, logs, "gunicorn", request) as start:
        yield start, kept


@pytest.fixture
def kept_live(_module_servers, database_url, request):
    """Like `live`, but the server with these settings is the module's, started once.

    For tests that neither kill, restart nor read the log of their server, and end their
    jobs: each test starts on empty tables, after the last one's jobs have ended (a server
    still running one is stopped, with a warning). Its in-process caches (layers, tiles,
    the time estimate) outlive the tables: a later test of the same place reads a report
    "made from a recent report"; a test that needs a fresh server's page uses `live`.
    A start costs about 3 s; a module's parametrised tests take one.
    """
    start, kept = _module_servers
    for key, server in list(kept.items()):
        if not _idle(server, timeout=15):
            warnings.warn(f"a kept server ran a job past its test: {server.log_path}", stacklevel=2)
            server.stop()
            del kept[key]
    truncate(database_url)
    work = work_of(request)  # the test's own marks, not only its module's

    def server(**env: str):
        settings = {**work, **env}
        key = tuple(sorted(settings.items()))
        if key not in kept:
            kept[key] = start(**settings)
        return kept[key]

    return server


def _idle(server, timeout: float) -> bool:
    """Tell whether the server answers with no job running, waiting up to timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if server.health()["jobs_running"] == 0:
                return True
        except (requests.RequestException, ValueError, KeyError):
            return False
        time.sleep(0.05)
    return False


@pytest.fixture
def db_proxy(database_url):
    """A proxy in front of the test database."""
    from tests.dbproxy import DbProxy

    proxy = DbProxy.to(database_url)
    yield proxy.start()
    proxy.close()


@pytest.fixture
def proxied_live(database_url, db_proxy, tmp_path, request):
    """Start a real gunicorn whose database connections go through the proxy."""
    from tests.live import Server

    truncate(database_url)
    url = db_proxy.url(database_url)
    with processes(Server, url, tmp_path, "gunicorn", request) as start:
        yield start


@pytest.fixture
def live_worker(database_url, tmp_path, request):
    """Start real queue workers (flask worker) on the test database; stop them after the test."""
    from tests.live import Worker

    with processes(Worker, database_url, tmp_path, "worker", request) as start:
        yield start


def off_the_main_thread(call):
    """Return call()'s result, run on a thread of its own.

    The browser tests' Playwright keeps an event loop running on the main thread for the
    rest of the session, and asyncio.run() (procrastinate's run_worker too) refuses to
    start inside a running loop.
    """
    out = {}

    def target():
        try:
            out["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            out["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def chores_done() -> None:
    """Wait for the housekeeping and sweep threads that requests set off to end."""
    for thread in threading.enumerate():
        if thread.name in ("housekeeping", "sweep"):
            thread.join(10)
