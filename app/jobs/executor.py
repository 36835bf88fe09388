"""The seam between submit and whatever runs the work: one protocol, two executors.

Both executors run the same job function (pipeline.run) through the same conditional
transitions, heartbeat, reaper and finalizer; they differ only in where the work runs.
`thread` (the default) runs it on a thread of the process that took the submit;
`procrastinate` (procrastinate_executor.py) queues it in PostgreSQL for worker processes.
"""

import threading
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from ..operations import failpoints
from . import transitions
from .runner import Runner, RunnerBusy

Work = Callable[[uuid.UUID, threading.Event], None]


class Executor(Protocol):
    """Create a pending job and hand it to what runs it, or create nothing."""

    name: str

    def enqueue(
        self, user_id: int, query: str, lang: str, area: dict[str, Any], generation: int
    ) -> uuid.UUID:
        """Insert the pending job and hand it over; raise RunnerBusy having created nothing.

        Also raises transitions.NotEnoughPoints (no point, or a revoked session: the
        session's generation is checked in the same INSERT) and transitions.AssessmentInFlight,
        which the one-in-flight index decides before any capacity check.
        """
        ...


class ThreadExecutor:
    """Run each job on a thread of this process, holding one of its runner's slots."""

    name = "thread"

    def __init__(self, runner: Runner, work: Work):
        self.runner = runner
        self.work = work

    def enqueue(
        self, user_id: int, query: str, lang: str, area: dict[str, Any], generation: int
    ) -> uuid.UUID:
        """Insert the job, take a slot (else delete it: 503), start its thread."""
        # The row goes in before the slot is taken, so the one-in-flight index answers
        # first: a double click is always a 409, never a 503 that depends on timing.
        job_id = transitions.create(user_id, query, lang, area, generation)
        try:
            self.runner.reserve()
        except RunnerBusy:
            transitions.discard_unstarted(job_id)  # busy means nothing created, nothing charged
            raise
        try:
            failpoints.hit("after_insert")
        except BaseException:
            self.runner.release()
            raise
        self.runner.start(job_id, self.work)
        return job_id
