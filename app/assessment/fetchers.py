"""One pool of fetch threads per process, fair per job.

Every running report's upstream calls (a zone tile, a mesh, a base map tile, a site tile)
are asks in its job's own queue (`queue(stop)`); the process's threads take the queues in
turn, one ask at a time, so a report with hundreds of tiles cannot keep another's waiting.
A job has at most its share of asks running: THREADS / the jobs answering, at least one,
at most half the threads.

An ask running for STALL_SECONDS is stalled (its upstream hangs, or answers as if it did):
its job is not answering, so it is given nothing more until that ask ends and is no longer
counted among the jobs that share the threads, and its thread no longer counts against
THREADS, so the pool starts another for the jobs that answer. So a job whose upstream hangs
holds what it had when it hung and no more, and no hang of others' starves a job: the
threads past THREADS are never more than the stalled asks. Threads idle for IDLE_SECONDS
end. A stopped job's waiting asks are dropped, never called. A forked child starts a pool
of its own: the parent's threads are not in it.

The asks only wait on the network (and the demo's painting, which takes its turn in
pixels.Turns): a report's pixel work stays in its job's own thread, which also drives its
readers (drive(), below) and asks the pool every turn to start a thread if one is due
(Queue.nudge: a stall is noticed by time, not by any event).
"""

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import FIRST_COMPLETED, FIRST_EXCEPTION, Future, wait
from typing import Any

from .errors import Stopped

# Enough for the client's four connections per host to the portal, J-SHIS and GSI, with
# asks waiting their turn at a host; a job alone has half of them.
THREADS = 16
IDLE_SECONDS = 10.0
# An ask running this long is stalled. Longer than a healthy call takes (the bench's slow
# stand-in answers in 2 s), shorter than a hung call's timeout.
STALL_SECONDS = 5.0

Ask = tuple[Future, Callable[..., Any], tuple[Any, ...]]


class Queue:
    """One job's asks, in the order asked; ended by close() (or its stop signal)."""

    def __init__(self, pool: "FairPool", stop: threading.Event) -> None:
        self.pool = pool
        self.stop = stop
        self.waiting: deque[Ask] = deque()
        self.began: list[float] = []  # when each of its running asks was taken

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Put fn(*args) in line; return its future."""
        return self.pool._submit(self, fn, args)

    def nudge(self) -> None:
        """Start a thread if one is due (asks waiting, none free, stalled ones replaced)."""
        self.pool._nudge()

    def map(self, fn: Callable[..., Any], items: Iterable[Any]) -> list[Any]:
        """Return fn(item) for each item, asked side by side (the first error raises)."""
        futures = [self.submit(fn, item) for item in items]
        try:
            while True:
                done, pending = wait(futures, timeout=0.1, return_when=FIRST_EXCEPTION)
                for future in futures:  # the first, in order, of those that failed
                    if future in done and not future.cancelled() and future.exception():
                        raise future.exception()  # type: ignore[misc]
                if not pending:
                    return [future.result() for future in futures]
                self.nudge()
        finally:
            for future in futures:
                future.cancel()  # after an error: those still waiting are dropped

    def close(self) -> None:
        """Drop the asks still waiting and leave the pool (those running finish)."""
        self.pool._close(self)

    def __enter__(self) -> "Queue":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FairPool:
    """Threads that take the jobs' queues in turn, each job up to its share."""

    def __init__(
        self,
        threads: int = THREADS,
        idle_seconds: float = IDLE_SECONDS,
        stall_seconds: float = STALL_SECONDS,
    ) -> None:
        if threads < 1:
            raise ValueError("a fair pool needs at least one thread")
        self.threads = threads
        self.idle_seconds = idle_seconds
        self.stall_seconds = stall_seconds
        self._cond = threading.Condition()
        self._queues: deque[Queue] = deque()  # the next to be served first
        self._started = 0  # threads alive
        self._free = 0  # of them, waiting for an ask
        self._began: list[float] = []  # when each ask running was taken, closed queues' too

    def queue(self, stop: threading.Event | None = None) -> Queue:
        """Return a new job's queue (its stop signal drops what it still has waiting)."""
        queue = Queue(self, stop or threading.Event())
        with self._cond:
            self._queues.appendleft(queue)  # a new job is served next
        return queue

    def counts(self) -> dict[str, int]:
        """Return the jobs, their asks waiting, running and stalled, and the threads."""
        with self._cond:
            now = time.monotonic()
            return {
                "jobs": len(self._queues),
                "waiting": sum(len(q.waiting) for q in self._queues),
                "running": len(self._began),
                "stalled": sum(now - at >= self.stall_seconds for at in self._began),
                "threads": self._started,
            }

    def _stalled(self, began: list[float], now: float) -> bool:
        return bool(began) and now - min(began) >= self.stall_seconds

    def _share(self, now: float) -> int:
        """Return how many asks an answering job may have running (lock held)."""
        answering = sum(not self._stalled(q.began, now) for q in self._queues)
        return max(1, min(self.threads // 2, self.threads // max(1, answering)))

    def _submit(self, queue: Queue, fn: Callable[..., Any], args: tuple[Any, ...]) -> Future:
        future: Future = Future()
        with self._cond:
            if queue not in self._queues:
                raise RuntimeError("this job's queue is closed")
            queue.waiting.append((future, fn, args))
            if self._free:
                self._free -= 1  # counted off here: a second ask wakes a second thread
                self._cond.notify()
            else:
                self._top_up(time.monotonic())
        return future

    def _top_up(self, now: float) -> None:
        """Start a thread if the pool is short of THREADS, stalled asks not counted."""
        stalled = sum(now - at >= self.stall_seconds for at in self._began)
        if self._started - stalled < self.threads:
            self._started += 1
            try:
                threading.Thread(target=self._serve, name="assessment-fetch", daemon=True).start()
            except BaseException:  # no thread to be had ("can't start new thread")
                self._started -= 1
                raise

    def _nudge(self) -> None:
        with self._cond:
            now = time.monotonic()
            if self._free == 0 and self._takeable(now):
                try:
                    self._top_up(now)
                except RuntimeError:
                    pass  # asked again at the next nudge

    def _takeable(self, now: float) -> bool:
        share = self._share(now)
        return any(
            q.waiting and len(q.began) < share and not self._stalled(q.began, now)
            for q in self._queues
        )

    def _close(self, queue: Queue) -> None:
        with self._cond:
            self._drop(queue)
            if queue in self._queues:
                self._queues.remove(queue)
            self._free = 0
            self._cond.notify_all()  # the others' shares grew

    @staticmethod
    def _drop(queue: Queue) -> None:
        while queue.waiting:
            queue.waiting.popleft()[0].cancel()

    def _next(self) -> tuple[Queue, Ask] | None:
        """Take the next ask in turn, or None (lock held)."""
        now = time.monotonic()
        share = self._share(now)
        for _ in range(len(self._queues)):
            queue = self._queues[0]
            self._queues.rotate(-1)  # served or not, it goes to the back
            if queue.stop.is_set():
                self._drop(queue)
            if self._stalled(queue.began, now):
                continue  # not answering: nothing more until its stalled ask ends
            while queue.waiting and len(queue.began) < share:
                ask = queue.waiting.popleft()
                if ask[0].set_running_or_notify_cancel():
                    return queue, ask
        return None

    def _serve(self) -> None:
        """Take the queues' asks in turn; end after IDLE_SECONDS with none to take."""
        with self._cond:
            while True:
                taken = self._next()
                if taken is None:
                    self._free += 1
                    if self._cond.wait(self.idle_seconds):
                        continue  # asked (the asker counted this thread off)
                    self._free = max(0, self._free - 1)  # a close may have zeroed it
                    if (taken := self._next()) is None:
                        self._started -= 1
                        return
                self._work(*taken)
                taken = None  # nothing of an ask outlives it here

    def _work(self, queue: Queue, ask: Ask) -> None:
        """Run an ask outside the lock (held on entry and on return)."""
        began = time.monotonic()
        queue.began.append(began)
        self._began.append(began)
        self._cond.release()
        try:
            _run(queue, *ask)
        finally:
            self._cond.acquire()
            queue.began.remove(began)
            self._began.remove(began)


def _run(queue: Queue, future: Future, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        if queue.stop.is_set():
            raise Stopped()
        result = fn(*args)
    except BaseException as exc:  # noqa: BLE001 - it belongs to the asker
        future.set_exception(exc)
    else:
        future.set_result(result)


_process: dict[str, Any] = {"pool": None}
_lock = threading.Lock()


def pool() -> FairPool:
    """Return this process's pool (made on first use)."""
    with _lock:
        if _process["pool"] is None:
            _process["pool"] = FairPool()
        return _process["pool"]


def _forget() -> None:
    """In a forked child: the parent's threads are not here, so neither is its pool."""
    global _lock
    _lock = threading.Lock()
    _process["pool"] = None


os.register_at_fork(after_in_child=_forget)


class Pause(float):
    """What a reader yields to be resumed after these seconds, holding no thread."""


Reader = Generator[Any, Any, Any]


def drive(
    queue: Queue,
    readers: dict[str, Reader],
    done: Callable[[str, Any], None],
    turn: Callable[[], None],
    check_seconds: float,
) -> None:
    """Run the readers side by side in this thread until each returns; their asks in queue.

    A reader yields a list of calls (no arguments) and is resumed with their results, in
    order, once all have answered (or the first error, in order, is raised in it); or a
    Pause. done(key, value) is called as each returns; turn() after every wait. The
    queue's stop signal raises Stopped within check_seconds; a reader's error raises here.
    """
    stop = queue.stop
    state: dict[str, tuple[list[Future] | None, float]] = {}

    def advance(key: str, sent: Any = None, error: BaseException | None = None) -> None:
        reader = readers[key]
        while True:
            try:
                asked = reader.throw(error) if error is not None else reader.send(sent)
            except StopIteration as end:
                state.pop(key, None)
                done(key, end.value)
                return
            if isinstance(asked, Pause):
                state[key] = (None, time.monotonic() + asked)
                return
            if asked:
                state[key] = ([queue.submit(call) for call in asked], 0.0)
                return
            sent, error = [], None  # nothing asked: resumed at once

    for key in readers:
        advance(key)
    while state:
        now = time.monotonic()
        pending = [f for fs, _ in state.values() if fs for f in fs if not f.done()]
        wakes = [at - now for fs, at in state.values() if fs is None]
        ready = any(fs is not None and all(f.done() for f in fs) for fs, _ in state.values())
        timeout = 0.0 if ready else max(0.0, min([check_seconds, *wakes]))
        if pending:
            wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
        else:
            stop.wait(timeout)
        if stop.is_set():
            raise Stopped()
        queue.nudge()
        for key, (futures, at) in list(state.items()):
            if futures is None:
                if time.monotonic() >= at:
                    advance(key)
            elif all(f.done() for f in futures):
                if any(f.cancelled() for f in futures):
                    raise Stopped()  # dropped: only a closed or stopped queue does that
                errors = [e for f in futures if (e := f.exception()) is not None]
                if errors:
                    advance(key, error=errors[0])
                else:
                    advance(key, [f.result() for f in futures])
        turn()
