"""Profile the worker with py-spy while wrk drives one endpoint; print where the GIL goes.

    python -m bench.profile [--endpoint status|constant|select1|...] [--seconds 10]

py-spy samples only the thread holding the GIL (--gil): one gthread worker is bound to
one core by the GIL, so that is the time that limits its throughput. The raw samples
go to bench/logs/profile-<endpoint>.txt (collapsed stacks: flamegraph.pl and speedscope
read them).
"""

import collections
import re
import shutil
import subprocess
import threading
import time

from . import poll_closed, wrk
from .common import BIN, LOGS, Database, loaded, log, run_alone


def record(pid: int, seconds: float, name: str) -> str:
    """Sample pid's GIL-holding thread for seconds into logs/profile-<name>.txt; summarize."""
    out = str(LOGS / f"profile-{name}.txt")
    cmd = [shutil.which("py-spy") or str(BIN / "py-spy"), "record", "-p", str(pid)]
    cmd += ["-d", f"{seconds:g}", "-r", "200", "-f", "raw", "-o", out, "--nonblocking", "--gil"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=seconds + 60)
    return summarize(out)


def summarize(raw_path: str, top: int = 40) -> str:
    """Inclusive and self shares per function from py-spy's collapsed stacks."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    with open(raw_path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            n = int(count)
            total += n
            frames = [re.sub(r" \((.*?):\d+\)$", r" (\1)", fr) for fr in stack.split(";")]
            for fr in set(frames):
                inclusive[fr] += n
            own[frames[-1]] += n
    lines = [f"{total} samples with the GIL held", "", "inclusive  function"]
    lines += [f"{100 * n / total:6.1f} %  {fr}" for fr, n in inclusive.most_common(top)]
    lines += ["", "self       function"]
    lines += [f"{100 * n / total:6.1f} %  {fr}" for fr, n in own.most_common(top)]
    return "\n".join(lines)


def profile_endpoint(db: Database, endpoint: str, seconds: float, n_users: int = 32) -> str:
    """Profile the worker while wrk drives endpoint for users with one running job each."""
    with loaded(db, "profile", n_users, "prof") as (server, users):
        lines = [(poll_closed.paths(u)[endpoint], u.cookie) for u in users]
        if endpoint in poll_closed.REVALIDATED:  # as poll_closed asks
            lines = poll_closed.with_etags(server.url, lines)
        log(f"profiling {endpoint} for {seconds:g} s")
        load = threading.Thread(target=wrk.run, args=(server.url, lines, seconds + 4))
        load.start()
        try:
            time.sleep(1.5)
            return record(server.worker_pid(), seconds, endpoint)
        finally:
            load.join()


def on_miss(db: Database, closed: dict, quick: bool) -> dict | None:
    """The status fragment under py-spy, if the closed loop missed its targets (1a, 1b)."""
    rows = poll_closed.summary(closed) if "error" not in closed else []
    if all(row.ok for row in rows if row.number in ("1a", "1b")):
        return None
    log("poll path missed: profiling the status fragment with py-spy")
    try:
        summary = profile_endpoint(db, "status", 5 if quick else 10)
    except Exception as exc:  # noqa: BLE001 - the figures stand without the profile
        return {"error": f"{type(exc).__name__}: {exc}"}
    (LOGS / "profile-status-summary.txt").write_text(summary)
    return {"summary": summary}


NUMBER, NAME = None, "py-spy on a miss"  # no row: a section, when the poll missed


def summary(r: dict) -> list:
    return []


def details(r: dict) -> list[str]:
    """Its section: where the GIL went, when the closed loop missed and it ran."""
    if not r.get("summary"):
        return []
    return [
        "### py-spy: the worker during the status run (GIL-holding samples)",
        "",
        "```",
        *r["summary"].splitlines()[:32],
        "```",
        "",
    ]


if __name__ == "__main__":
    run_alone(profile_endpoint, __doc__, endpoint="status", seconds=10.0, n_users=32)
