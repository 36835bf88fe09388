"""The trivial job that RQ runs in the submit benchmark: it says when it started."""

import time


def started() -> float:
    """Return the wall-clock time at which the worker began running this job."""
    return time.time()
