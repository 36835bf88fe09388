"""Memory: the worker's RSS with 32 running jobs, against a bare Flask worker.

Product: gunicorn -c gunicorn.conf.py (one gthread worker), 32 users with one running
job each, every job polled a few times. Baseline, in the same run: a bare Flask app
(bench/bareapp.py) in one gthread worker with 32 threads, all 32 created by 64
concurrent slow requests. VmRSS/VmHWM from /proc/<pid>/status (pid from /healthz),
Pss from /proc/<pid>/smaps_rollup (pages shared with the master counted in part).

    python -m bench.memory
"""

import threading

import requests

from .common import Database, Server, log, rss_kib, run_alone, users_with_running_jobs
from .table import Row, check, compare, get, mib, num, table


def product(db: Database, n_jobs: int = 32) -> dict:
    db.truncate()
    server = Server(db.url, "memory", MAX_CONCURRENT_JOBS=str(n_jobs))
    with server:
        health = server.health()
        idle = rss_kib(health["pid"])
        idle_master = rss_kib(server.proc.pid)
        users = users_with_running_jobs(server, db, n_jobs, "mem")
        for _ in range(3):
            for u in users:
                u.status()
        health = server.health()
        busy = rss_kib(health["pid"])
        master = rss_kib(server.proc.pid)
    return {
        "jobs_running": health["jobs_running"],
        "idle": idle,
        "with_jobs": busy,
        "master_idle": idle_master,
        "master": master,
    }


def bare(threads: int = 32) -> dict:
    server = Server(
        None,
        "memory-bare",
        module="bench.bareapp:app",
        conf=False,
        args=("-w", "1", "-k", "gthread", "--threads", str(threads), "--no-control-socket"),
    )
    with server:
        pid = server.worker_pid()
        idle = rss_kib(pid)

        def hold() -> None:
            requests.get(server.url + "/hold", timeout=30)

        load = [threading.Thread(target=hold) for _ in range(2 * threads)]
        for t in load:
            t.start()
        for t in load:
            t.join()
        busy = rss_kib(pid)
    return {"threads": threads, "idle": idle, "after_load": busy}


def run(db: Database, n_jobs: int = 32) -> dict:
    log(f"memory: product worker with {n_jobs} running jobs")
    ours = product(db, n_jobs)
    log("memory: bare Flask worker with 32 threads")
    baseline = bare()
    return {"product": ours, "bare_flask": baseline}


NUMBER, NAME = "6", "memory"


def summary(r: dict) -> list[Row]:
    """Row 6: the worker's VmRSS with its jobs running (target <= 100 MiB)."""
    rss = mib(get(r, "product", "with_jobs", "VmRSS"))
    return [
        compare(
            "6",
            f"worker VmRSS with {get(r, 'product', 'jobs_running')} running jobs",
            rss,
            mib(get(r, "bare_flask", "after_load", "VmRSS")),
            "bare Flask, 32 threads",
            1,
            " MiB",
            target="<= 100 MiB",
            ok=check(rss, lambda v: v <= 100),
        )
    ]


def details(r: dict) -> list[str]:
    """Section 6: each process's memory, idle and busy."""
    p, b = r["product"], r["bare_flask"]
    processes = (
        ("product worker, idle", p["idle"]),
        (f"product worker, {p['jobs_running']} jobs running", p["with_jobs"]),
        ("product master", p["master"]),
        ("bare Flask worker, idle", b["idle"]),
        (f"bare Flask worker, {b['threads']} threads busy", b["after_load"]),
    )
    return [
        "## 6. Memory",
        "",
        *table(
            ("process", "VmRSS", "VmHWM", "Pss", "threads"),
            (
                (
                    label,
                    *(num(mib(s.get(k)), 1, " MiB") for k in ("VmRSS", "VmHWM", "Pss")),
                    s.get("Threads"),
                )
                for label, s in processes
            ),
        ),
        "",
    ]


def main() -> None:
    run_alone(run, __doc__)


if __name__ == "__main__":
    main()
