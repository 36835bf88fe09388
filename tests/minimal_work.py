"""A second work for the job machinery: it waits, ticks its parts, and can fail.

It keeps app/jobs/work.py's contract and knows nothing of places, layers or reports, so a
test run with JOB_WORK=tests.minimal_work proves the machinery (start and charge, lease,
heartbeat, stop, crash, settle) whatever the report does. A query "fail" fails it as its
source would (refunded); "crash" raises something the work did not mean to (refunded too).
ASSESSMENT_WORK_SECONDS is how long it takes, as the report's stand-in duration.
"""

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from flask import current_app

HOSTED = "tests.minimal_work:setup"  # run in the work's process too, where that is on
PARTS_STEP = "parts:"
READY = "The job is done."


@dataclass(frozen=True)
class Part:
    key: str
    name_en: str
    name_ja: str


PARTS = (Part("one", "Part one", "その一"), Part("two", "Part two", "その二"))


class Refundable(Exception):
    """The work's source failed: the job fails and its point is refunded."""


class Stopped(Exception):
    """The job's stop was set: the work gave up."""


def prepare(user_id: int, query: str, lang: str, confirmed: bool | str) -> dict[str, Any]:
    """Take what was typed as the job's input: nothing to refuse."""
    return {"query": query}


def settings(config: Mapping[str, Any]) -> dict[str, Any]:
    return {"seconds": float(config["ASSESSMENT_WORK_SECONDS"])}


def payload(job_input: dict[str, Any], lang: str) -> dict[str, Any]:
    return {**job_input, "lang": lang}


def run(job_input: dict[str, Any], lang: str, progress: Any, stop: threading.Event) -> dict:
    """The work in the job's thread."""
    seconds = float(current_app.config["ASSESSMENT_WORK_SECONDS"])
    return work(seconds, {**job_input, "lang": lang}, progress, stop)


def setup(args: dict[str, Any]):
    """The work in the work's process (app/jobs/offload.py)."""
    return lambda job, progress, stop: work(args["seconds"], job, progress, stop)


def work(seconds: float, job: dict[str, Any], progress: Any, stop: threading.Event) -> dict:
    progress(PARTS_STEP, 0)
    for i in range(1, len(PARTS) + 1):
        if stop.wait(seconds / len(PARTS)):
            raise Stopped()
        progress(PARTS_STEP + ",".join(p.key for p in PARTS[:i]), 100 * i // len(PARTS))
    if job["query"] == "fail":
        raise Refundable("the source is down")
    if job["query"] == "crash":
        raise RuntimeError("a bug")
    return {"query": job["query"], "lang": job["lang"]}


def failure(exc: Exception) -> str:
    return f"The work's source failed: {exc}."


def alert(exc: Exception) -> tuple[str, str, str] | None:
    return None


def alerts(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    return []


def steps(step: str, status: str) -> list[tuple[Part, bool]]:
    if step.startswith(PARTS_STEP):
        done = set(step[len(PARTS_STEP) :].split(","))
    else:
        done = {p.key for p in PARTS} if status == "succeeded" else set()
    return [(part, part.key in done) for part in PARTS]


def written(result: dict[str, Any], lang: str | None) -> None:
    return None  # no page of its own: the job's status says it all


KIND = "'job'"  # one kind: every job waits as long


def kind(job_input: dict[str, Any] | None) -> str:
    return "job"


def shutdown() -> None:
    pass
