"""Poll path, open loop: 1,000 browsers polling every 2 s (500 req/s) while 32 jobs run.

The browsers are spread over the 32 users (about 31 open tabs each, one running job per
user: the product allows one in flight per user). The generator is bench/openloop.py;
the worker's CPU use over the run comes from /proc/<pid>/stat. Baseline, same worker,
same jobs running, same timetable: the constant endpoint of bench/benchapp.py.

    python -m bench.poll_open [--browsers 1000] [--duration 30]
"""

import os
import time
from pathlib import Path

from . import openloop
from .common import Database, Server, count_running, log, run_alone, users_with_running_jobs


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(
    db: Database,
    browsers: int = 1000,
    interval: float = 2.0,
    duration: float = 30.0,
    warmup: float = 5.0,
    n_jobs: int = 32,
) -> dict:
    db.truncate()
    server = Server(db.url, "poll_open", MAX_CONCURRENT_JOBS=str(n_jobs))
    with server:
        users = users_with_running_jobs(server, db, n_jobs, "open")
        pid = server.worker_pid()
        runs = {}
        for name, targets, expect in (
            ("constant", [("/bench/constant", u.cookie) for u in users], b"ok"),
            ("status", [(u.status_path, u.cookie) for u in users], b'data-status="running"'),
        ):
            log(
                f"poll_open {name}: {browsers} browsers every {interval:g} s"
                f" ({browsers / interval:.0f} req/s) for {warmup:g}+{duration:g} s"
            )
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            r = openloop.run(
                "127.0.0.1",
                server.port,
                targets,
                browsers=browsers,
                interval=interval,
                duration=duration,
                warmup=warmup,
                expect=expect,
            )
            r["worker_cpu_share"] = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
            runs[name] = r
            log(
                f"poll_open {name}: p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms,"
                f" errors {r['errors']}, {r['achieved_rps']:.0f} req/s ok"
            )
            server.wait_ready(timeout=60)  # the worker may still be draining a backlog
        result = {**runs["status"], "baseline_constant": runs["constant"]}
        result["jobs"] = n_jobs
        result["jobs_running_after"] = count_running(db, users)
        result["worker_pid_unchanged"] = server.worker_pid() == pid
    return result


def main() -> None:
    run_alone(run, __doc__, browsers=1000, interval=2.0, duration=30.0)


if __name__ == "__main__":
    main()
