"""Named fault-injection points in the job and payment paths, inert unless FAILPOINTS names them.

FAILPOINTS is a comma-separated list of name=action, where action is `kill`
(SIGKILL this process), `raise` (raise FailpointError) or `sleep:SECONDS`.
Example: FAILPOINTS=after_consume=kill. Crash tests use it against the real server.
"""

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)

NAMES = frozenset(
    {
        "after_insert",
        "after_running",
        "after_consume",
        "before_success",
        "after_reap",
        "before_refund",
        "consume_lookup",
        "before_credit_commit",  # a purchase's credit written, not yet committed
        "before_task_outcome",  # a queue task's job has ended; its outcome not yet read
    }
)

_actions: dict[str, str] = {}
_here = threading.local()  # a thread's own failpoints, over the process's


class FailpointError(RuntimeError):
    """Raised by a failpoint set to `raise`."""


def configure(spec: str) -> None:
    """Set the active failpoints from a FAILPOINTS string ("" turns them all off)."""
    actions = _parse(spec)
    _actions.clear()
    _actions.update(actions)


@contextlib.contextmanager
def on_this_thread(spec: str) -> Iterator[None]:
    """Set failpoints for the calling thread only, for the duration of the block.

    For tests that race a failing call against a healthy one in the same process.
    """
    before = getattr(_here, "actions", None)
    _here.actions = _parse(spec)
    try:
        yield
    finally:
        _here.actions = before


def _parse(spec: str) -> dict[str, str]:
    actions = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, action = item.partition("=")
        if name not in NAMES:
            raise ValueError(f"unknown failpoint {name!r}; known: {sorted(NAMES)}")
        if action not in ("kill", "raise") and not action.startswith("sleep:"):
            raise ValueError(f"unknown failpoint action {action!r} for {name}")
        actions[name] = action
    return actions


def hit(name: str) -> None:
    """Do what FAILPOINTS says for this point; nothing when it is not set."""
    local = getattr(_here, "actions", None)
    action = (local or {}).get(name) or _actions.get(name)
    if action is None:
        return
    log.warning("failpoint %s: %s", name, action)
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "raise":
        raise FailpointError(f"failpoint {name}")
    else:
        time.sleep(float(action.removeprefix("sleep:")))
