"""What a chaos run's process logs say: which deaths a recorded fault explains, what else broke.

A queue worker ends itself, for a supervisor to restart, on a database error of its own:
its connection lost in a fault (a ConnectorException raised from the lost connection's
error), or procrastinate's listener or heartbeat lost the database, which stops
procrastinate ("Side task ... failed ..., stopping worker") and the worker ends on that
unasked stop (app/jobs/worker.py). A worker pruned by another while a fault stalled its
heartbeat registers again and goes on (worker.QueueWorker); the death this still excuses
for a prune (a fetch's ConnectorException raised from the ForeignKeyViolation on
procrastinate_workers) is how a worker ended before it did, and a worker pruned again
within a lease of registering ends on a RuntimeError, which nothing excuses. Such a death
is excused only when its own final exception says so, at a time inside or right after a
fault the run recorded (its line's time, or when the harness saw the process end if the
line has none); and only that traceback's ForeignKeyViolation is excused, not the rest of
the log. A queue worker armed
with a failpoint may also die there, by its own SIGKILL, right after the failpoint's line.
Everything here is a pure function of a log's text, the faults' windows (began, ended,
kind) and that end, in wall-clock seconds, so each case is a test on a constructed log.
"""

import datetime
import re
from dataclasses import dataclass

# A worker learns it was pruned at its next fetch: within procrastinate's polling interval
# (5 s) of the database's return, or sooner when a job is queued; the prune itself needs a
# heartbeat older than a lease (2 s), and a loaded machine adds a little.
AFTERMATH = 10.0
CONNECTOR = "procrastinate.exceptions.ConnectorException"
PRUNED = "psycopg.errors.ForeignKeyViolation"
PRUNED_KEY = 'is not present in table "procrastinate_workers"'
# The errors of a connection that a cut, a refusal, a stall or a restart takes away.
CONNECTION_LOST = frozenset(
    "psycopg.OperationalError psycopg_pool.PoolTimeout psycopg.errors.AdminShutdown"
    " psycopg.errors.CrashShutdown psycopg.errors.CannotConnectNow"
    " psycopg.errors.ConnectionFailure psycopg.errors.ConnectionException"
    " psycopg.errors.SqlclientUnableToEstablishSqlconnection".split()
)
STOPPED = "worker stopped by an error"
TRACEBACK = "\nTraceback (most recent call last):\n"
UNASKED = ("RuntimeError", "the queue worker stopped without being told to")
# A record's first line: app/operations/logs.py's text format ("%(asctime)s %(levelname)s
# %(name)s: %(message)s"), or alembic's (migrations/alembic.ini: "%(levelname)-5.5s
# [%(name)s] %(message)s"), which a process that migrates at its start logs in from then on:
# no time in it, so the harness says when the process ended.
RECORD = re.compile(
    r"^(?:(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (?P<level>[A-Z]+) (?P<logger>[\w.]+): "
    r"|(?P<short>[A-Z]{4,5}) *\[(?P<name>[\w.]+)\] )(?P<message>.*)$",
    re.MULTILINE,
)
CHAINED = re.compile(
    r"\n\n(The above exception was the direct cause of the following exception:"
    r"|During handling of the above exception, another exception occurred:)\n\n"
)

Window = tuple[float, float, str]


@dataclass
class Record:
    """One log record: when, its level and logger, its first line, and what follows it."""

    at: float | None  # wall clock, as the faults' windows (None: the line has no time)
    level: str
    logger: str
    message: str  # its text, over several lines if so
    body: str  # its traceback, if any
    start: int  # where it begins and ends in the log's text
    end: int


@dataclass
class Raised:
    """One exception of a logged traceback, and how it follows the one before it."""

    how: str  # "" (the first), "cause" (raise ... from) or "context" (raised in an except)
    type: str
    message: str


def wall_clock(asctime: str) -> float:
    """A log line's time ("2026-12-02 05:43:15,123", this machine's zone) in epoch seconds."""
    stamp, _, millis = asctime.partition(",")
    local = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S")
    return local.timestamp() + int(millis or 0) / 1000


def records(log: str) -> list[Record]:
    """Split a log into its records; lines before the first record belong to none."""
    found = list(RECORD.finditer(log))
    out = []
    for n, match in enumerate(found):
        end = found[n + 1].start() if n + 1 < len(found) else len(log)
        at = wall_clock(match["stamp"]) if match["stamp"] else None
        level, logger = match["level"] or match["short"], match["logger"] or match["name"]
        # A message may run over several lines (an error's text), then its traceback.
        message, header, trace = log[match.start("message") : end].partition(TRACEBACK)
        body = header.lstrip() + trace
        out.append(Record(at, level, logger, message.strip(), body, match.start(), end))
    return out


def raised(body: str) -> list[Raised]:
    """The exceptions of a record's traceback, the first raised first ([] if none)."""
    if not body.startswith("Traceback (most recent call last):"):
        return []
    parts = CHAINED.split(body.rstrip("\n"))
    out = []
    for n in range(0, len(parts), 2):
        how = "" if n == 0 else ("cause" if parts[n - 1].startswith("The above") else "context")
        lines = parts[n].split("\n")[1:]  # after "Traceback (most recent call last):"
        at = next((i for i, line in enumerate(lines) if line and not line[0].isspace()), None)
        if at is None:
            return []  # not a traceback this reader knows: excuses nothing
        kind, _, first = lines[at].partition(": ")
        out.append(Raised(how, kind.rstrip(":"), "\n".join([first, *lines[at + 1 :]]).strip()))
    return out


def connector_error(chain: list[Raised]) -> bool:
    """Tell whether a traceback ends on the connector's error from the database's own.

    The last exception is a ConnectorException raised from a ForeignKeyViolation on
    procrastinate_workers (a pruned worker) or from a lost connection's error, and
    whatever came before that error is a lost connection's error too.
    """
    if len(chain) < 2 or chain[-1].type != CONNECTOR or chain[-1].how != "cause":
        return False
    cause = chain[-2]
    pruned = cause.type == PRUNED and PRUNED_KEY in cause.message
    return (pruned or cause.type in CONNECTION_LOST) and all(
        r.type in CONNECTION_LOST for r in chain[:-2]
    )


def lost_connection(chain: list[Raised]) -> bool:
    """Tell whether a traceback ends on a lost connection, bare or wrapped by the connector."""
    return connector_error(chain) or (len(chain) == 1 and chain[0].type in CONNECTION_LOST)


def in_fault(at: float | None, faults: list[Window]) -> bool:
    """Tell whether `at` falls inside a recorded fault or within AFTERMATH after it ends."""
    return at is not None and any(b - 0.01 <= at <= e + AFTERMATH for b, e, _ in faults)


def database_death(log: str, faults: list[Window], ended: float | None) -> list[Record]:
    """The records that excuse a queue worker's end on a database error in a fault, or [].

    The log's last stop record must carry its own traceback ending on the connector's
    error (the pruned worker, the lost connection), or be the unasked stop that follows
    procrastinate's side task failing on a lost connection; and the error must come
    inside or right after a recorded fault: by its line's time, or, when its line has
    none, by `ended`, when the harness saw the process end (it ends right after the
    error, once its jobs are settled). The records returned are the stop and, for an
    unasked stop, the side task's failure: only their violations are excused.
    """
    found = records(log)
    stops = [n for n, r in enumerate(found) if r.message == STOPPED]
    if not stops:
        return []
    stop = found[stops[-1]]
    chain = raised(stop.body)
    if connector_error(chain):
        return [stop] if in_fault(stop.at or ended, faults) else []
    if [(r.how, r.type, r.message) for r in chain] != [("", *UNASKED)]:
        return []
    sides = (r for r in reversed(found[: stops[-1]]) if r.message.startswith("Side task "))
    side = next((r for r in sides if r.message.endswith(", stopping worker")), None)
    if side is None or not lost_connection(raised(side.body)):
        return []
    if not in_fault(side.at or ended, faults):
        return []
    return [side, stop]


def failpoint_death(log: str, armed: str) -> bool:
    """Tell whether a queue worker armed with `armed` died at it: its line is the log's last news.

    A failpoint logs "failpoint NAME: kill" and SIGKILLs its own process at once: at most
    a few lines other threads wrote in that instant may follow it, none an error's.
    """
    found = records(log)
    fired = [n for n, r in enumerate(found) if r.message.startswith("failpoint ")]
    if not fired or found[fired[-1]].message != f"failpoint {armed}: kill":
        return False
    after = found[fired[-1] :]
    return len(after) <= 4 and not any(r.body or r.level.startswith("ERR") for r in after)


def death_excused(
    log: str, faults: list[Window], armed: str | None, code: int | None, ended: float | None
) -> str:
    """Why a process's death is no fault of the product ("" if nothing explains it).

    code is its exit code (-9: SIGKILL), ended when the harness saw it dead. A queue
    worker that ended on a database error exits 1; one armed dies by its own SIGKILL at
    its failpoint.
    """
    if armed and code == -9 and failpoint_death(log, armed):
        return f"failpoint {armed}"
    if code == 1 and database_death(log, faults, ended):
        return "database error in a fault"
    return ""


def log_faults(name: str, log: str, faults: list[Window], ended: float | None) -> list[str]:
    """Say what a process's log shows went wrong that no kill or recorded fault explains.

    ended is when the harness saw the process end or ended it (None: it still runs).
    """
    wrong = []
    # Not a procrastinate task whose end a database fault kept from being written
    # (ConnectorException): the books check that its task ends with its job's outcome.
    lost = re.findall(r"never retrieved\nfuture: [^\n]*exception=(\w+)", log)
    if n := sum(1 for kind in lost if kind != "ConnectorException"):
        wrong.append(f"{name}: {n} x task exception never retrieved")
    # Only the traceback of a worker's excused end on a database error may hold one (the
    # killer may take the worker while it ends, so this reads the log, not the death).
    excused = database_death(log, faults, ended)
    rest = log
    for record in reversed(excused):
        rest = rest[: record.start] + rest[record.end :]
    if n := rest.count("ForeignKeyViolation"):
        wrong.append(f"{name}: {n} x ForeignKeyViolation")
    return wrong
