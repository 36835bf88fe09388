"""A report's work in the work's process (app/jobs/offload.py): the same report, errors that
cross whole, a stop honoured at once, and deaths on either side that cost nobody a point."""

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from app.assessment import hosted
from app.assessment.errors import ProviderError, Stopped, UnreadableTiles
from app.assessment.place.resolver import resolve_place
from app.assessment.sources.providers import make_provider
from app.assessment.work import run_assessment
from app.caches.singleflight import SingleFlightCache
from app.jobs.offload import Host, WorkFailed, portable
from tests.conftest import wait_for
from tests.live import User
from tests.test_crash import ledger_check, only_job, poll_until_settled

SETTINGS = {
    "LAYER_PROVIDER": "demo",
    "ASSESSMENT_WORK_SECONDS": 0,
    "LAYER_CACHE_SIZE": 64,
    "LAYER_CACHE_TTL_SECONDS": 60,
    "TILE_CACHE_SIZE": 64,
    "TILE_CACHE_TTL_SECONDS": 60,
}


@pytest.fixture
def host():
    host = Host("app.assessment.hosted:setup", SETTINGS, Stopped)
    yield host
    host.shutdown()


def comparable(report):
    return {k: v for k, v in report.items() if k not in ("generated_at", "cache")}


@pytest.mark.parametrize("query", ["札幌市", "35.6812, 139.7671"])
def test_the_work_process_writes_the_report_the_jobs_thread_would(host, query):
    area = resolve_place(query)
    steps = []
    there = host.run(
        "a",
        hosted.payload(area.to_dict(), "ja", "demo"),
        lambda *s: steps.append(s),
        threading.Event(),
    )
    here = run_assessment(
        area,
        "ja",
        provider=make_provider(SETTINGS),
        cache=SingleFlightCache(maxsize=64, ttl=60),
        progress=lambda *s: None,
    )
    assert comparable(there) == comparable(here)
    assert steps[0] == ("layers:", 0) and steps[-1] == ("Report ready", 100)
    assert host.pid() not in (None, os.getpid())
    # It yields the CPU to the pages.
    assert os.getpriority(os.PRIO_PROCESS, host.pid()) == os.getpriority(os.PRIO_PROCESS, 0) + 10


def test_a_stop_is_honoured_at_once_and_the_process_stops_the_work():
    area = resolve_place("札幌市").to_dict()
    stop = threading.Event()
    slow = Host("app.assessment.hosted:setup", {**SETTINGS, "ASSESSMENT_WORK_SECONDS": 30}, Stopped)
    threads = []

    def stopping():
        threads.append(len(list(Path(f"/proc/{slow.pid()}/task").iterdir())))
        stop.set()

    try:
        threading.Timer(1, stopping).start()
        began = time.monotonic()
        with pytest.raises(Stopped):
            slow.run("slow", hosted.payload(area, "en", "demo"), lambda *s: None, stop)
        assert time.monotonic() - began < 2  # not the 30 s the work would take
        # The work's thread ends, not in 30 s (its pauses hold no thread of the fetch pool).
        tasks = Path(f"/proc/{slow.pid()}/task")
        wait_for(lambda: len(list(tasks.iterdir())) <= threads[0] - 1, timeout=5)
    finally:
        slow.shutdown()


def test_errors_cross_whole_and_others_arrive_with_their_traceback():
    error = portable(ProviderError("flood", "pref/12/1/2", "the service answered 503", "HTTP 503"))
    assert (type(error), error.dataset, error.key, error.reason, error.detail) == (
        ProviderError,
        "flood",
        "pref/12/1/2",
        "the service answered 503",
        "HTTP 503",
    )
    tiles = portable(UnreadableTiles("flood", "01_flood", 0.4, {"#123456": 9, "#abcdef": 3}))
    assert type(tiles) is UnreadableTiles and tiles.colours == ["#123456", "#abcdef"]
    assert str(tiles) == str(
        UnreadableTiles("flood", "01_flood", 0.4, {"#123456": 9, "#abcdef": 3})
    )

    class Local(Exception):  # defined in a function: it cannot be pickled
        pass

    try:
        raise Local("a bug in the work")
    except Local as exc:
        failed = portable(exc)
    assert isinstance(failed, WorkFailed)
    assert "Local: a bug in the work" in str(failed) and "raise Local" in str(failed)


def children(pid: int) -> list[int]:
    """Return the pids whose parent is pid."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def work_process(server) -> int | None:
    """Return the live worker's work process: the one its forkserver forked."""
    found = [pid for fork in children(server.worker_pid()) for pid in children(fork)]
    return found[0] if len(found) == 1 else None


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.server
def test_a_work_process_killed_under_a_job_costs_nobody_anything(live, sql, database_url):
    server = live(WORK_PROCESS="on", ASSESSMENT_WORK_SECONDS="3")
    user = User(server)
    user.signup("work@example.com")
    assert user.submit().status_code == 303
    job_id = only_job(sql)
    wait_for(lambda: work_process(server) is not None)
    first = work_process(server)
    wait_for(lambda: sql("SELECT progress > 0 FROM assessment_jobs")[0][0])

    os.kill(first, signal.SIGKILL)

    # The job's thread starts its work again in a new process: charged once, a report.
    status, billing, _ = poll_until_settled(user, job_id, timeout=30)
    assert (status, billing) == ("succeeded", "charged")
    assert work_process(server) not in (None, first)
    assert sql("SELECT point_balance FROM users") == [(2,)]
    assert ledger_check(database_url).returncode == 0


@pytest.mark.server
def test_the_work_process_ends_with_a_killed_worker(live, sql):
    server = live(WORK_PROCESS="on", ASSESSMENT_WORK_SECONDS="30")
    user = User(server)
    user.signup("gone@example.com")
    assert user.submit().status_code == 303
    wait_for(lambda: work_process(server) is not None)
    work = work_process(server)

    os.kill(server.worker_pid(), signal.SIGKILL)

    # Nothing of the dead worker's computes on for nobody (and its job is refunded by
    # the reaper, as test_crash proves for every worker).
    wait_for(lambda: not alive(work), timeout=10)
