"""Submit: from POST /assessments to the job running, against RQ on the local Redis.

All one at a time (one job in flight per user), each job finished before the next
submit, every figure from the same run:

- ours: POST /assessments -> the job's row `running`. The figure is started_at (set by
  the job thread's `UPDATE ... SET status = 'running'`, the database clock) minus the
  client's clock just before the request's bytes go out on the socket: one machine,
  one clock. The POST is sent from a raw keep-alive socket so that no HTTP client
  library's own time is counted.
- RQ, enqueue -> start: Queue.enqueue() of a job whose first line reads the clock,
  with SimpleWorker (runs jobs in the worker process) and the default forking Worker.
  This is the issue's baseline; it contains no web request at all.
- the design's floor, POST -> running: the same measurement on POST /bench/floor-submit
  (bench/benchapp.py), the product's INSERT and a thread that starts the job in its own
  transaction, with no Flask, session, CSRF, form, place lookup or ledger: what any
  implementation of the architecture's submit costs on this machine, at least.
- Flask + RQ, POST -> start: POST /bench/rq-submit (bench/benchapp.py) does what POST
  /assessments does before the INSERT (login, CSRF form, place, balance check), then
  enqueues to RQ (SimpleWorker): the same measurement as ours for a queue-based design.
- one round trip to PostgreSQL and to Redis, back to back and after the same idle pause
  the submits start from: what each hop between processes costs on this machine.
"""

import collections
import contextlib
import os
import socket
import time
import urllib.parse
import uuid
from collections.abc import Iterator

from tests import processes

from .common import (
    BIN,
    LOGS,
    PLACE,
    ROOT,
    USER_AGENT,
    Database,
    Server,
    User,
    loaded,
    log,
    spread,
    wait_until,
)
from .openloop import response_head
from .table import Row, compare, div, get, table

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
SETTLE_PAUSE = 0.02  # after each submit, before the client starts asking whether it is done


class RawPost:
    """A keep-alive socket that sends a prebuilt form POST and reads the response head."""

    def __init__(self, port: int, cookie: str):
        self.port, self.cookie = port, cookie
        self.sock: socket.socket | None = None

    def post(self, path: str, form: dict[str, str]) -> tuple[float, int, dict[str, str]]:
        """Return (wall-clock time the bytes went out, status, headers)."""
        body = urllib.parse.urlencode(form).encode()
        request = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"User-Agent: {USER_AGENT}\r\nCookie: {self.cookie}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        for attempt in (0, 1):
            if self.sock is None:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            t0 = time.time()
            try:
                self.sock.sendall(request)
                return (t0, *self._read())
            except (ConnectionError, EOFError):
                self.sock.close()
                self.sock = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _read(self) -> tuple[int, dict[str, str]]:
        data = b""
        while b"\r\n\r\n" not in data:
            data += self._recv()
        head, _, rest = data.partition(b"\r\n\r\n")
        status, headers = response_head(head)
        while len(rest) < int(headers.get("content-length", "0")):
            rest += self._recv()
        if headers.get("connection", "").lower() == "close":
            self.sock.close()
            self.sock = None
        return status, headers

    def _recv(self) -> bytes:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError()
        return chunk

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


@contextlib.contextmanager
def rq_worker(worker_class: str) -> Iterator[tuple[object, str]]:
    """An `rq worker` process of worker_class on a queue of its own; yields (redis, queue)."""
    from redis import Redis
    from rq import Queue, Worker

    redis = Redis.from_url(REDIS_URL)
    redis.ping()
    name = f"bench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    short = worker_class.rsplit(".", 1)[-1]
    LOGS.mkdir(parents=True, exist_ok=True)
    worker = processes.Process()
    worker.log_path, worker.env = LOGS / f"rq-{short}.log", {**os.environ, "PYTHONPATH": str(ROOT)}
    worker.spawn([str(BIN / "rq"), "worker", "-u", REDIS_URL, "-w", worker_class, "-q", name])
    try:
        wait_until(
            lambda: any(name in w.queue_names() for w in Worker.all(connection=redis)),
            timeout=20,
            what=f"rq {short} to start",
        )
        yield redis, name
    finally:
        worker.stop(timeout=10)
        Queue(name, connection=redis).delete(delete_jobs=True)


def _rq_started(redis, job_id: str) -> float:
    """Wait for an RQ job to finish; return the time its function started."""
    from rq.job import Job

    job, deadline = Job.fetch(job_id, connection=redis), time.monotonic() + 10
    while (result := job.latest_result()) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"rq job {job_id} did not run")
        time.sleep(0.002)
    if result.return_value is None:
        raise RuntimeError(f"rq job {job_id}: {result.type} {result.exc_string}")
    return result.return_value


def _finished(conn, job_id: str) -> tuple:
    """The job's status, started_at and created_at (epoch) once it ended (10 s at most)."""
    sql = (
        "SELECT status, extract(epoch FROM started_at), extract(epoch FROM created_at)"
        " FROM assessment_jobs WHERE id = %s"
    )
    deadline = time.monotonic() + 10
    while (row := conn.execute(sql, (job_id,)).fetchone())[0] not in ("succeeded", "failed"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"job {job_id} did not finish: {row}")
        time.sleep(0.002)
    return row


def ours(server: Server, db: Database, n: int, warmup: int, floor: bool = False) -> dict:
    """POST /assessments as a signed-in user; with floor, POST /bench/floor-submit.

    Beside POST -> running, the same path cut at the INSERT's arrival in the database
    (created_at): the web request before it; the INSERT's commit, the thread and its BEGIN
    after it.
    """
    user = User(server, f"{'floor' if floor else 'submitter'}@bench.example").signup()
    client = RawPost(server.port, user.cookie)
    if floor:
        path = "/bench/floor-submit"
        form = {"user": str(db.scalar("SELECT id FROM users WHERE email = %s", (user.email,)))}
    else:
        path = "/assessments"
        form = {"query": PLACE, "lang": "en", "confirm": "yes", "csrf_token": user.csrf()}
    keys = ("post_to_running", "post_to_insert", "insert_to_running", "post_response")
    times: dict[str, list[float]] = {key: [] for key in keys}
    statuses: collections.Counter[str] = collections.Counter()
    with db.connect() as conn:
        for i in range(warmup + n):
            t0, status, headers = client.post(path, form)
            t1 = time.time()
            if status != 303:
                raise RuntimeError(f"submit {i}: {status}")
            time.sleep(SETTLE_PAUSE)
            state, started, created = _finished(
                conn, headers["location"].rstrip("/").rsplit("/", 1)[-1]
            )
            statuses[state] += 1
            if i >= warmup:
                started, created = float(started), float(created)
                cuts = (started - t0, created - t0, started - created, t1 - t0)
                for key, seconds in zip(keys, cuts, strict=True):
                    times[key].append(seconds * 1e3)
    client.close()
    return {key: spread(values) for key, values in times.items()} | {"job_statuses": dict(statuses)}


def idle_round_trips(db: Database, redis, n: int = 200) -> dict:
    """One round trip to PostgreSQL and to Redis, back to back and after SETTLE_PAUSE idle.

    Every submit above starts from an idle machine (the client waits for the job to
    finish); this is what each hop between processes costs in that state, in this run.
    """
    out = {}
    with db.connect() as conn:
        probes = {"postgres": lambda: conn.execute("SELECT 1").fetchone()}
        if redis is not None:
            probes["redis"] = redis.ping
        for name, probe in probes.items():
            for label, pause in (("back_to_back", 0.0), ("after_idle", SETTLE_PAUSE)):
                times = []
                for _ in range(n):
                    if pause:
                        time.sleep(pause)
                    t0 = time.perf_counter()
                    probe()
                    times.append((time.perf_counter() - t0) * 1e3)
                out[f"{name}_{label}"] = spread(times)
    return out


def flask_rq(server: Server, redis, n: int, warmup: int) -> dict:
    user = User(server, "rq-submitter@bench.example").signup()
    client = RawPost(server.port, user.cookie)
    form = {"query": PLACE, "lang": "en", "csrf_token": user.csrf()}
    post_to_start, response = [], []
    for i in range(warmup + n):
        t0, status, headers = client.post("/bench/rq-submit", form)
        t1 = time.time()
        if status != 303:
            raise RuntimeError(f"rq-submit {i}: {status}")
        time.sleep(SETTLE_PAUSE)
        started = _rq_started(redis, headers["location"].rsplit("/", 1)[-1])
        if i >= warmup:
            post_to_start.append((started - t0) * 1e3)
            response.append((t1 - t0) * 1e3)
    client.close()
    return {"post_to_start": spread(post_to_start), "post_response": spread(response)}


def rq_enqueue(redis, queue_name: str, n: int, warmup: int) -> dict:
    from rq import Queue

    from . import rqjob

    queue = Queue(queue_name, connection=redis)
    latencies = []
    for i in range(warmup + n):
        t0 = time.time()
        job = queue.enqueue(rqjob.started)
        time.sleep(SETTLE_PAUSE)
        started = _rq_started(redis, job.id)
        if i >= warmup:
            latencies.append((started - t0) * 1e3)
    return spread(latencies)


def run(db: Database, n: int = 200, warmup: int = 10, forking: bool = True) -> dict:
    out: dict = {"n": n}
    with contextlib.ExitStack() as simple:
        try:
            redis, queue_name = simple.enter_context(rq_worker("rq.worker.SimpleWorker"))
        except Exception as exc:  # noqa: BLE001 - no Redis: ours alone
            out["rq_error"] = f"{type(exc).__name__}: {exc}"
            redis, queue_name = None, "unused"
        env = {"ASSESSMENT_WORK_SECONDS": "0", "SIGNUP_POINTS": str(n + warmup + 10)}
        env |= {"BENCH_RQ_QUEUE": queue_name, "BENCH_REDIS_URL": REDIS_URL}
        with loaded(db, "submit", 8, **env) as (server, _):
            log(f"submit: ours, {n} submits")
            out["ours"] = ours(server, db, n, warmup)
            log(f"submit: the design's floor (no Flask), {n} submits")
            out["floor"] = ours(server, db, n, warmup, floor=True)
            if redis is not None:
                log(f"submit: Flask + RQ SimpleWorker, {n} submits")
                out["flask_rq_simple"] = flask_rq(server, redis, n, warmup)
        if redis is not None:
            log(f"submit: RQ SimpleWorker enqueue, {n} jobs")
            out["rq_simple"] = rq_enqueue(redis, queue_name, n, warmup)
        log("submit: one round trip, back to back and after idle")
        out["round_trip"] = idle_round_trips(db, redis)
    if redis is not None and forking:
        log(f"submit: RQ Worker (forking) enqueue, {n} jobs")
        with rq_worker("rq.worker.Worker") as (redis, queue_name):
            out["rq_fork"] = rq_enqueue(redis, queue_name, n, warmup)
    return out


NUMBER, NAME = "5", "submit"
# Section 5's table: (label, the figures' path in the results).
PATHS = (
    ("ours: POST -> running", ("ours", "post_to_running")),
    ("ours, part: POST -> INSERT (created_at)", ("ours", "post_to_insert")),
    ("ours, part: INSERT -> running", ("ours", "insert_to_running")),
    ("ours: POST -> 303 received", ("ours", "post_response")),
    ("design floor (no Flask): POST -> running", ("floor", "post_to_running")),
    ("the floor, part: POST -> INSERT (created_at)", ("floor", "post_to_insert")),
    ("the floor, part: INSERT -> running", ("floor", "insert_to_running")),
    ("Flask + RQ SimpleWorker: POST -> start", ("flask_rq_simple", "post_to_start")),
    ("RQ SimpleWorker: enqueue -> start", ("rq_simple",)),
    ("RQ Worker (fork): enqueue -> start", ("rq_fork",)),
)


def summary(r: dict) -> list[Row]:
    """Rows 5a-5e: POST -> running against the design's floor, and against RQ's."""
    ours = get(r, "ours", "post_to_running", default={})
    floor = get(r, "floor", "post_to_running", default={})
    ms = {"digits": 2, "unit": " ms"}
    # Measured against the design's own floor: a Redis queue is not the step up (the
    # queue executor, bench/scale.py, keeps job state in the ledger's database).
    rows = [
        compare("5a", f"POST /assessments -> running, median (n={ours.get('n')})",
                ours.get("median_ms"), floor.get("median_ms"), "the design's floor", **ms,
                target="(no target)"),
        compare("5b", "POST /assessments -> running, p99", ours.get("p99_ms"),
                floor.get("p99_ms"), "the design's floor p99", **ms),
        compare("5e", "the design's floor: gunicorn + the INSERT + a thread + its BEGIN,"
                " no Flask, median", floor.get("median_ms"), get(r, "rq_simple", "median_ms"),
                "RQ SimpleWorker", **ms),
    ]  # fmt: skip
    for number, figure, theirs in (
        ("5c", "same POST path with an RQ enqueue instead (Flask + RQ SimpleWorker), median",
         get(r, "flask_rq_simple", "post_to_start", "median_ms")),
        ("5d", "RQ default (forking) Worker enqueue -> start, median",
         get(r, "rq_fork", "median_ms")),
    ):  # fmt: skip
        ratio = div(ours.get("median_ms"), theirs)
        rows.append(compare(number, figure, theirs, ours.get("median_ms"), "ours", **ms,
                            ratio=ratio, ratio_unit="x (ours/them)"))  # fmt: skip
    return rows


def details(r: dict) -> list[str]:
    """Section 5: every path's percentiles, what they say, one round trip after idle."""
    keys = ("median_ms", "p90_ms", "p99_ms", "max_ms")
    paths = (
        (label, *(f"{s[k]:.2f} ms" for k in keys)) for label, path in PATHS if (s := get(r, *path))
    )
    out = [
        "## 5. Submit",
        "",
        f"{r['n']} submits (after 10 warm-up), one at a time, each job finished before the"
        " next. Ours: client clock just before the POST's bytes leave a raw socket ->"
        " started_at (database clock, same machine). RQ: clock before `enqueue()` -> the"
        " job function's first line.",
        "",
        *table(("path", "median", "p90", "p99", "max"), paths),
    ]
    if r.get("rq_error"):
        out.append(f"\nRQ not measured: {r['rq_error']}")
    out += _reading(r)
    if trips := r.get("round_trip"):
        pairs = (
            (n, trips.get(f"{n}_back_to_back"), trips.get(f"{n}_after_idle"))
            for n in ("postgres", "redis")
        )
        figures = ((n, w["median_ms"], i["median_ms"], i["p90_ms"]) for n, w, i in pairs if w and i)
        rows = ((n, *(f"{v:.3f} ms" for v in values)) for n, *values in figures)
        header = ("round trip", "back to back, median", "after idle, median", "after idle, p90")
        out += [
            "",
            "One round trip (`SELECT 1`, Redis `PING`), back to back and after the"
            f" {1000 * SETTLE_PAUSE:.0f} ms idle pause every submit above starts from:"
            " what each hop between processes costs here.",
            "",
            *table(header, rows),
        ]
    return [*out, ""]


def _reading(r: dict) -> list[str]:
    """What the submit figures say, computed from them: ours vs the floor vs RQ."""
    ours, floor, rq = r.get("ours"), r.get("floor"), r.get("rq_simple")
    if not (ours and floor and rq):
        return []

    def med(d, key):
        return d[key]["median_ms"]

    before = med(ours, "post_to_insert") - med(floor, "post_to_insert")
    after = med(ours, "insert_to_running") - med(floor, "insert_to_running")
    return [
        "",
        f"Reading: ours takes {before:.2f} ms more than the floor before its INSERT reaches"
        " the database (Flask, the session, CSRF, the form, the place lookup) and"
        f" {after:.2f} ms more after it (the runner, the job's app context and ORM session)."
        f" The floor, which any implementation of the architecture's submit must pay (a web"
        f" request, a durable INSERT, a thread that begins its own transaction), is"
        f" {med(floor, 'post_to_running') / rq['median_ms']:.2f}x RQ SimpleWorker's"
        " enqueue -> start, which has no web request and no durable write.",
    ]
