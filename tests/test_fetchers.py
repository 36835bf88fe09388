"""The process's fetch pool: fair per job, bounded while an upstream hangs, new in a fork.

Real threads, real waits on events; nothing is mocked. Each pool is the test's own (a few
threads), so the share rules are seen at a small size.
"""

import os
import threading
import time

import pytest

from app.assessment import fetchers
from app.assessment.errors import Stopped

TIMEOUT = 5.0


def wait_until(check, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_job_whose_upstream_hangs_holds_its_share_and_the_others_are_served() -> None:
    pool = fetchers.FairPool(threads=4, idle_seconds=0.2, stall_seconds=0.3)
    hang, release = threading.Event(), threading.Event()
    running = {"now": 0, "most": 0}
    lock = threading.Lock()

    def hung() -> None:
        with lock:
            running["now"] += 1
            running["most"] = max(running["most"], running["now"])
        hang.set()
        release.wait(TIMEOUT)
        with lock:
            running["now"] -= 1

    stuck = pool.queue()
    for _ in range(20):
        stuck.submit(hung)
    hang.wait(TIMEOUT)
    time.sleep(0.1)
    assert running["most"] == 2  # alone: half the threads, however many asks it has

    # Two more jobs hang too: the pool's four threads are all held...
    others = [pool.queue() for _ in range(2)]
    for queue in others:
        for _ in range(3):
            queue.submit(hung)
    wait_until(lambda: running["now"] == 4)
    time.sleep(0.1)
    assert running["now"] == 4 and pool.counts()["threads"] == 4
    # ... and a healthy job is still answered: once they have hung STALL_SECONDS, those
    # four are stalled, their threads no longer count, and the pool starts more.
    healthy, answered = pool.queue(), []
    began = time.monotonic()

    def square(n: int) -> tuple[int, int]:
        time.sleep(0.02)
        return n * n, pool.counts()["threads"]

    asking = threading.Thread(target=lambda: answered.append(healthy.map(square, range(6))))
    asking.daemon = True
    asking.start()
    asking.join(TIMEOUT)
    assert [n for n, _ in answered[0]] == [n * n for n in range(6)]
    # Four held by the hung, and at most the healthy job's share of the four that count
    # (two: the second may not be needed on a machine slow to start it).
    assert 5 <= max(threads for _, threads in answered[0]) <= 6
    assert time.monotonic() - began >= 0.2
    # The hung jobs were given nothing more, free threads or not: a stalled job waits.
    time.sleep(0.1)
    assert running["now"] == running["most"] == 4 and pool.counts()["stalled"] == 4
    release.set()
    for queue in [stuck, *others, healthy]:
        queue.close()
    wait_until(lambda: pool.counts()["threads"] == 0)
    assert pool.counts() == dict.fromkeys(("jobs", "waiting", "running", "stalled", "threads"), 0)


def test_a_job_waiting_its_turn_behind_healthy_asks_gets_no_thread_of_its_own() -> None:
    # One thread, two jobs whose asks take 0.1 s, under a stall of 0.5 s: nothing stalls,
    # and the jobs take the thread in turn, a new job next.
    pool = fetchers.FairPool(threads=1, stall_seconds=0.5)
    seen: list[tuple[str, int]] = []
    first, second = pool.queue(), None

    def ask(job: str) -> str:
        seen.append((job, pool.counts()["threads"]))
        time.sleep(0.1)
        return job

    futures = [first.submit(ask, "first") for _ in range(4)]
    wait_until(lambda: bool(seen))  # the first job's first ask is running
    second = pool.queue()
    futures += [second.submit(ask, "second") for _ in range(4)]
    deadline = time.monotonic() + TIMEOUT
    while not all(f.done() for f in futures) and time.monotonic() < deadline:
        first.nudge()
        second.nudge()
        time.sleep(0.02)
    assert [job for job, _ in seen] == ["first", "second"] * 4
    assert {threads for _, threads in seen} == {1}
    first.close()
    second.close()


def test_the_jobs_are_served_in_turn() -> None:
    pool = fetchers.FairPool(threads=1)
    order: list[str] = []
    gate = threading.Event()

    def ask(name: str) -> None:
        gate.wait(TIMEOUT)
        order.append(name)

    big, small = pool.queue(), pool.queue()
    for _ in range(30):
        big.submit(ask, "big")
    futures = [small.submit(ask, "small") for _ in range(5)]
    gate.set()
    for future in futures:
        future.result(TIMEOUT)
    # One thread, taken by the queues in turn: the small job's five asks were not kept
    # behind the big job's thirty.
    last_small = max(i for i, name in enumerate(order) if name == "small")
    assert last_small <= 11
    big.close()
    small.close()


def test_a_stopped_job_s_waiting_asks_are_dropped_never_called() -> None:
    pool = fetchers.FairPool(threads=2)
    stop, release, first = threading.Event(), threading.Event(), threading.Event()
    called: list[int] = []

    def ask(n: int) -> int:
        called.append(n)
        first.set()
        release.wait(TIMEOUT)
        return n

    queue = pool.queue(stop)
    futures = [queue.submit(ask, n) for n in range(6)]
    first.wait(TIMEOUT)
    stop.set()
    release.set()
    assert futures[0].result(TIMEOUT) == 0  # running when stopped: it finishes
    wait_until(lambda: all(f.done() for f in futures))
    assert called == [0]  # a job alone here holds one thread: the rest were waiting
    assert all(f.cancelled() for f in futures[1:])
    queue.close()
    with pytest.raises(RuntimeError):
        queue.submit(ask, 7)  # a closed queue takes nothing more


def test_a_forked_child_starts_a_pool_of_its_own() -> None:
    parent = fetchers.pool()
    with parent.queue() as queue:
        assert queue.map(str, [1, 2]) == ["1", "2"]  # the parent's threads are started
    pid = os.fork()
    if pid == 0:  # the child: the parent's threads are not here
        code = 1
        try:
            if fetchers._process["pool"] is None:
                with fetchers.pool().queue() as queue:
                    future = queue.submit(sum, [1, 2, 3])
                    code = 0 if future.result(TIMEOUT) == 6 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert fetchers.pool() is parent


def test_readers_are_driven_side_by_side_with_errors_and_pauses_in_them() -> None:
    pool = fetchers.FairPool(threads=4)
    finished: dict[str, object] = {}

    def squares():
        got = yield [lambda n=n: n * n for n in range(5)]
        return got

    def careful():
        try:
            yield [lambda: 1, lambda: 1 / 0]
        except ZeroDivisionError:
            pass  # the first error, in order, is raised in the reader
        yield fetchers.Pause(0.05)
        (again,) = yield [lambda: "after the pause"]
        return again

    with pool.queue() as queue:
        started = time.monotonic()
        fetchers.drive(
            queue,
            {"squares": squares(), "careful": careful()},
            finished.__setitem__,
            lambda: None,
            0.1,
        )
    assert finished == {"squares": [0, 1, 4, 9, 16], "careful": "after the pause"}
    assert time.monotonic() - started >= 0.05

    def failing():
        yield [lambda: 1 / 0]

    with pool.queue() as queue, pytest.raises(ZeroDivisionError):
        fetchers.drive(queue, {"failing": failing()}, finished.__setitem__, lambda: None, 0.1)

    stop = threading.Event()

    def forever():
        while True:
            yield fetchers.Pause(60)

    threading.Timer(0.05, stop.set).start()
    with pool.queue(stop) as queue, pytest.raises(Stopped):
        fetchers.drive(queue, {"forever": forever()}, finished.__setitem__, lambda: None, 0.1)
