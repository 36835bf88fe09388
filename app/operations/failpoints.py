"""Named fault-injection points in the job and payment paths, inert unless FAILPOINTS names them.

FAILPOINTS is a comma-separated list of name=action, where action is `kill`
(SIGKILL this process), `raise` (raise FailpointError) or `sleep:SECONDS`.
Example: FAILPOINTS=after_consume=kill. Crash tests use it against the real server.
"""

import logging
import os
import signal
import time

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
    }
)

_actions: dict[str, str] = {}


class FailpointError(RuntimeError):
    """Raised by a failpoint set to `raise`."""


def configure(spec: str) -> None:
    """Set the active failpoints from a FAILPOINTS string ("" turns them all off)."""
    actions = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, action = item.partition("=")
        if name not in NAMES:
            raise ValueError(f"unknown failpoint {name!r}; known: {sorted(NAMES)}")
        if action not in ("kill", "raise") and not action.startswith("sleep:"):
            raise ValueError(f"unknown failpoint action {action!r} for {name}")
        actions[name] = action
    _actions.clear()
    _actions.update(actions)


def hit(name: str) -> None:
    """Do what FAILPOINTS says for this point; nothing when it is not set."""
    action = _actions.get(name)
    if action is None:
        return
    log.warning("failpoint %s: %s", name, action)
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "raise":
        raise FailpointError(f"failpoint {name}")
    else:
        time.sleep(float(action.removeprefix("sleep:")))
