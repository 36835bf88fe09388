"""The work a job is paid for, as the job machinery sees it: the one contract between them.

app/jobs starts a job, charges its point, keeps its lease and heartbeat, honours a stop
and settles the job on the ledger; what the job computes is the work's, and app/jobs
knows nothing else of it. A work is a module, named by JOB_WORK (the area assessment's is
app/assessment/job.py; tests/minimal_work.py is a second, for the machinery's own tests):

- ``prepare(user_id, query, lang, confirmed) -> dict``: read a submit into the job's
  input, which the row keeps (its ``area`` column), before anything is charged. It
  raises the work's own refusals, which the submitting page answers with a 4xx; nothing
  is written then. ``confirmed`` is the form's confirmation (True, or the code it names).
- ``run(job_input, lang, progress, stop) -> dict``: the work, in the job's thread. It
  calls ``progress(step, percent)`` as it goes (written to the row; the page shows it),
  raises ``Stopped`` soon after ``stop`` is set, and returns the result the job keeps.
- ``Refundable``: what ``run`` raises when a source it needs failed: the job fails with
  ``failure(exc)`` as its message, and the point is refunded. Anything else it raises
  fails the job as INTERNAL_ERROR, refunded too. ``alert(exc)`` may name such a failure
  that needs an operator, ``(code, key, detail)``: an incident, recorded once an hour per
  key (it is the work's to count it). ``alerts(result)`` names the same of a job that
  succeeded (its result delivered, something in it for an operator to look at), a list.
- ``HOSTED``: ``"module:setup"``, the same work as the work's process runs it
  (offload.py: ``setup(settings(config))`` returns ``(payload, progress, stop) ->
  result``, ``payload(job_input, lang)`` made in the worker), or None: always in the
  job's thread.
- ``READY``: what the page of a job that succeeded says ("Your report is ready."; a
  message the interface translates where it has the words).
- ``steps(step, status) -> list[(part, done)]``: what the page shows of a job's progress;
  ``PARTS_STEP``: the prefix of a step that names the parts done (the page then counts
  them), or None.
- ``written(result, lang) -> dict | None``: a kept result as the job's page shows it, in
  the reader's language (None: the page shows the job's status only).
- ``KIND``: an SQL expression over the job's input (the ``area`` column) naming the kind
  of job it is, for the time left (estimate.py: each kind has its own typical time);
  ``kind(job_input) -> str``: the same, of a job the page shows. One kind for all is
  ``"'job'"`` and ``"job"``.
- ``shutdown()``: end what the work keeps beside its jobs (a pool), at the process's end.
"""

import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

Progress = Callable[[str, int], None]


class Work(Protocol):
    """A job's work (the module docstring says what each part means)."""

    Refundable: type[Exception]
    Stopped: type[Exception]
    HOSTED: str | None
    PARTS_STEP: str | None
    READY: str
    KIND: str

    def prepare(
        self, user_id: int, query: str, lang: str, confirmed: bool | str
    ) -> dict[str, Any]: ...

    def run(
        self, job_input: dict[str, Any], lang: str, progress: Progress, stop: threading.Event
    ) -> dict[str, Any]: ...

    def settings(self, config: Mapping[str, Any]) -> dict[str, Any]: ...

    def payload(self, job_input: dict[str, Any], lang: str) -> Any: ...

    def failure(self, exc: Exception) -> str: ...

    def alert(self, exc: Exception) -> tuple[str, str, str] | None: ...

    def alerts(self, result: dict[str, Any]) -> list[tuple[str, str, str]]: ...

    def steps(self, step: str, status: str) -> list[tuple[Any, bool]]: ...

    def written(self, result: dict[str, Any], lang: str | None) -> dict[str, Any] | None: ...

    def kind(self, job_input: dict[str, Any] | None) -> str: ...

    def shutdown(self) -> None: ...


PARTS = (
    "Refundable",
    "Stopped",
    "HOSTED",
    "PARTS_STEP",
    "READY",
    "prepare",
    "run",
    "settings",
    "payload",
    "failure",
    "alert",
    "alerts",
    "steps",
    "written",
    "KIND",
    "kind",
    "shutdown",
)


def check(work: Any) -> Any:
    """Return work if it has every part of the contract; else say at start which it lacks.

    Found missing only when a job needs it, a part would fail that job late (its except
    clause itself raising): the refund would wait for the reaper.
    """
    if missing := [name for name in PARTS if not hasattr(work, name)]:
        raise TypeError(f"{work.__name__} is not a job's work: no {', '.join(missing)}")
    return work
