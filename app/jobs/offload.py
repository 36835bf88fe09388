"""A job's work in a process beside the worker, so the pages keep the worker's interpreter.

A report's work holds the GIL for every step it takes in Python (each upstream call, its
futures and caches, its pixels), and the status poll of every user waits behind it: eight
reports on real tiles took the poll's p99 to seconds on a two-core machine. So the work
runs in one process of its own (WORK_PROCESS, on by default where there is more than one
core), at a lower priority (NICE), and the worker keeps only what is the job's
life: its thread starts and charges the job, writes the progress the work sends, keeps the
lease, honours a stop and finishes or fails the job on the ledger. The work's process has no
database: all it can do is compute and answer.

Host.run(key, payload, progress, stop) is the work function's contract seen from the job's
thread: it returns what the work returned, raises what the work raised (an exception that
cannot cross processes arrives as WorkFailed, with the work's traceback as a note), calls
progress(step, percent) in the job's thread as the work reports it, and once stop is set
raises the stopped exception within STOP_CHECK_SECONDS while the work is told to stop.

The process is started on first use with the 'forkserver' method (no fork of a process that
has threads), builds its work with setup(args) (setup names a function, "module:name") and
runs each job on a thread of its own. A process that dies (killed, out of memory) fails no
job by itself: the next job starts a new one, and the jobs it held start their work again
there, at most ATTEMPTS times in all. It ends with the worker's jobs (Runner.shutdown), and
on its own when the worker is gone (its end of the pipe closes).
"""

import atexit
import faulthandler
import importlib
import logging
import multiprocessing
import os
import pickle
import queue
import signal
import threading
import traceback
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

NICE = 10  # the work yields the CPU to the pages, which run at the worker's priority
ATTEMPTS = 2  # a job's work is started at most this often when its process dies under it
STOP_CHECK_SECONDS = 0.1


class WorkFailed(Exception):
    """The work raised an exception that cannot cross processes: its text and traceback."""


class HostDied(Exception):
    """The work's process died under the same job ATTEMPTS times."""


class Host:
    """One process that runs the work of this process's jobs, started on first use."""

    def __init__(self, setup: str, args: Any, stopped: type[Exception]) -> None:
        self.setup = setup  # "module:function": function(args) returns the work
        self.args = args
        self.stopped = stopped  # raised in the job's thread once its stop is set
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self._closed = False
        atexit.register(self.shutdown)  # before multiprocessing's own hook waits for it

    def run(
        self,
        key: str,
        payload: Any,
        progress: Callable[[str, int], None],
        stop: threading.Event,
    ) -> Any:
        """Return work(payload, progress, stop) as computed in the work's process."""
        for attempt in range(1, ATTEMPTS + 1):
            inbox: queue.SimpleQueue = queue.SimpleQueue()
            child = self._send_start(key, payload, inbox)
            settled = False
            try:
                while True:
                    try:
                        message = inbox.get(timeout=STOP_CHECK_SECONDS)
                    except queue.Empty:
                        if stop.is_set():
                            raise self.stopped() from None
                        continue
                    kind = message[0]
                    if kind == "progress":
                        progress(*message[1:])  # a cancelled job raises here
                    elif kind == "done":
                        settled = True
                        return message[1]
                    elif kind == "raised":
                        settled = True
                        raise message[1]
                    else:  # "died": the process ended under this job
                        settled = True
                        break
            finally:
                child.forget(key, tell=not settled)
            if stop.is_set():
                raise self.stopped()
            log.warning(
                "the work's process died under job %s (attempt %d of %d)", key, attempt, ATTEMPTS
            )
        raise HostDied(f"the work's process died under job {key} {ATTEMPTS} times")

    def _send_start(self, key: str, payload: Any, inbox: queue.SimpleQueue) -> "_Child":
        with self._lock:
            if self._closed:
                raise self.stopped()  # the worker is stopping: its jobs are being settled
            child = self._child
            if child is None or child.dead or child.owner != os.getpid():
                child = self._child = _Child.start(self.setup, self.args)
        child.begin(key, payload, inbox)
        return child

    def pid(self) -> int | None:
        """Return the work process's pid, if one runs (for operators and tests)."""
        child = self._child
        return None if child is None or child.dead else child.process.pid

    def shutdown(self) -> None:
        """End the work's process now; later runs raise the stopped exception."""
        with self._lock:
            self._closed = True
            child, self._child = self._child, None
        if child is not None and child.owner == os.getpid():
            child.end()


class _Child:
    """A running work process, the pipe to it and the jobs it holds."""

    def __init__(self, process: Any, conn: Any) -> None:
        self.process = process
        self.conn = conn
        self.owner = os.getpid()
        self.dead = False
        self._lock = threading.Lock()  # one sender at a time; guards inboxes
        self.inboxes: dict[str, queue.SimpleQueue] = {}

    @classmethod
    def start(cls, setup: str, args: Any) -> "_Child":
        context = multiprocessing.get_context("forkserver")
        # Imported once, in the forkserver, and shared by every process it forks; not
        # __main__ (gunicorn's or flask's). The pixel pool's processes come from it too.
        context.set_forkserver_preload([setup.partition(":")[0]])
        here, there = context.Pipe()
        process = context.Process(target=serve, args=(there, setup, args), name="work")
        process.start()
        there.close()
        child = cls(process, here)
        threading.Thread(target=child._read, name="work-reader", daemon=True).start()
        log.info("the work's process %s started", process.pid)
        return child

    def begin(self, key: str, payload: Any, inbox: queue.SimpleQueue) -> None:
        with self._lock:
            self.inboxes[key] = inbox
            if not self.dead:
                try:
                    self.conn.send(("start", key, payload))
                    return
                except OSError:
                    self.dead = True
        inbox.put(("died",))

    def forget(self, key: str, tell: bool) -> None:
        """Drop a job's inbox; tell the process to stop its work if it still runs."""
        with self._lock:
            self.inboxes.pop(key, None)
            if tell and not self.dead:
                try:
                    self.conn.send(("stop", key))
                except OSError:
                    self.dead = True

    def _read(self) -> None:
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError, pickle.UnpicklingError):
                break
            with self._lock:
                inbox = self.inboxes.get(message[1])
            if inbox is not None:
                inbox.put((message[0], *message[2:]))
        with self._lock:
            self.dead = True
            held = list(self.inboxes.values())
        for inbox in held:
            inbox.put(("died",))
        log.warning("the work's process %s ended", self.process.pid)

    def end(self) -> None:
        """Ask the process to end, and kill it if it has not within two seconds."""
        with self._lock:
            try:
                self.conn.send(("exit",))
            except OSError:
                pass
        self.process.join(2)  # the reader sees the pipe close and tells the jobs held
        if self.process.is_alive():
            self.process.kill()
            self.process.join(2)


def serve(conn: Any, setup: str, args: Any) -> None:
    """The work's process: run each job sent on a thread; end when the worker is gone."""
    # Ctrl-C reaches every process of the terminal's group: the worker settles the jobs and
    # ends this process; interrupted here first, a job would fail as the work's own error.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield_to_the_pages()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s [work] %(name)s: %(message)s")
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # kill -USR1: where it is, on stderr
    module, _, name = setup.partition(":")
    work = getattr(importlib.import_module(module), name)(args)
    lock = threading.Lock()
    stops: dict[str, threading.Event] = {}

    def send(message: tuple) -> None:
        try:
            with lock:
                conn.send(message)
        except OSError:  # the worker is gone
            os._exit(0)

    def one(key: str, payload: Any, stop: threading.Event) -> None:
        try:
            result = work(
                payload, lambda step, percent: send(("progress", key, step, percent)), stop
            )
        except BaseException as exc:  # noqa: BLE001 - every outcome goes back to the job
            send(("raised", key, portable(exc)))
        else:
            send(("done", key, result))
        finally:
            stops.pop(key, None)

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            break
        if message[0] == "start":
            stops[message[1]] = stop = threading.Event()
            threading.Thread(target=one, args=(*message[1:], stop), daemon=True).start()
        elif message[0] == "stop" and (stop := stops.get(message[1])) is not None:
            stop.set()
        elif message[0] == "exit":
            break
    for stop in list(stops.values()):
        stop.set()
    os._exit(0)  # its jobs' threads are daemons, and nothing here is owed to anyone


def yield_to_the_pages() -> None:
    """Run this process, and every thread it starts, at a lower priority than the pages.

    A nice of 10: the scheduler weighs each of its threads a tenth of one of the worker's.
    SCHED_IDLE, which weighs them next to nothing, was tried: on a machine kept busy by
    anything else (the test suite's two workers) a report of one second was not done in
    ten, and reports are paid for.
    """
    try:
        os.nice(NICE)
    except OSError:  # not allowed here: the work runs at the worker's priority
        pass


def portable(exc: BaseException) -> BaseException:
    """Return exc if it crosses processes intact, else WorkFailed; with the traceback."""
    text = "".join(traceback.format_exception(exc))
    try:
        copy = pickle.loads(pickle.dumps(exc))
        if type(copy) is not type(exc) or str(copy) != str(exc):
            raise TypeError("changed on the way")
    except Exception:  # noqa: BLE001 - anything may fail to pickle
        return WorkFailed(f"{type(exc).__name__}: {exc}\n\nin the work's process:\n{text}")
    copy.add_note("in the work's process:\n" + text)
    return copy
