"""Run every benchmark against one fresh database and write bench/RESULTS.md.

    python -m bench.run [--only poll_closed,poll_open,...] [--quick] [--no-profile]

Benchmarks: singleflight, poll_closed, poll_parts, poll_open, poll_metrics, recovery,
outage, submit, memory, places, scale.
Every figure is reported beside a baseline measured in the same run, as a ratio. The raw
numbers go to bench/logs/results.json, server logs to bench/logs/*.log.
"""

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from . import wrk
from .common import LOGS, ROOT, Database, log, raise_fd_limit

ALL = (
    "singleflight",
    "poll_closed",
    "poll_parts",
    "poll_open",
    "poll_metrics",
    "recovery",
    "outage",
    "submit",
    "memory",
    "places",
    "scale",
)
RESULTS = ROOT / "bench" / "RESULTS.md"


def _sh(*cmd: str) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(db: Database) -> dict:
    mem_kib = int(
        next(
            line.split()[1]
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        )
    )
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "-"

    redis_version = "-"
    try:
        from redis import Redis

        redis_version = Redis.from_url(
            os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
        ).info()["redis_version"]
    except Exception:  # noqa: BLE001 - reported as missing
        pass
    dirty = _sh("git", "-C", str(ROOT), "status", "--porcelain", "--", "app", "templates")
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "postgresql": db.version,
        "redis": redis_version,
        "wrk": _sh("wrk", "--version").splitlines()[0] if wrk.available() else "-",
        "packages": {
            name: version(name)
            for name in ("flask", "sqlalchemy", "flask-sqlalchemy", "psycopg", "gunicorn", "rq")
        },
        "commit": _sh("git", "-C", str(ROOT), "rev-parse", "--short", "HEAD")
        + (" (app/ or templates/ modified)" if dirty else ""),
        "loadavg_before": Path("/proc/loadavg").read_text().split()[:3],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(ALL), help="comma-separated benchmarks")
    parser.add_argument("--quick", action="store_true", help="shorter runs (a smoke test)")
    parser.add_argument("--no-profile", action="store_true", help="no py-spy on a miss")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(only) - set(ALL)
    if unknown:
        parser.error(f"unknown benchmarks: {', '.join(sorted(unknown))}")
    raise_fd_limit()
    LOGS.mkdir(parents=True, exist_ok=True)
    for old in LOGS.glob("*.log"):  # the servers append: start each run clean
        old.unlink()
    q = args.quick
    started = time.monotonic()
    results: dict = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "make bench" if os.environ.get("BENCH_VIA_MAKE") else shlex.join(sys.argv),
        "quick": q,
    }
    db = Database()
    log(f"database {db.name}; results -> {args.output}")
    try:
        results["machine"] = machine(db)
        for name in only:
            t0 = time.monotonic()
            log(f"== {name}")
            try:
                results[name] = _run_one(name, db, q)
            except Exception as exc:  # noqa: BLE001 - one failed benchmark, the others go on
                log(f"{name} FAILED: {type(exc).__name__}: {exc}")
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            results.setdefault("seconds", {})[name] = round(time.monotonic() - t0, 1)
        if not args.no_profile and "poll_closed" in results:
            results["profile"] = _profile_on_miss(db, results["poll_closed"], q)
    finally:
        db.close()
    results["total_seconds"] = round(time.monotonic() - started, 1)
    (LOGS / "results.json").write_text(json.dumps(results, indent=2, default=str))
    from .report import render

    Path(args.output).write_text(render(results))
    log(f"wrote {args.output} in {results['total_seconds']:.0f} s")


def _run_one(name: str, db: Database, quick: bool) -> dict:
    if name == "singleflight":
        from . import singleflight

        return singleflight.run()
    if name == "poll_closed":
        from . import poll_closed

        if not wrk.available():
            return {"error": "wrk is not installed (apt-get install wrk)"}
        return poll_closed.run(db, rounds=1 if quick else 4, duration=3 if quick else 5)
    if name == "poll_parts":
        from . import poll_parts

        return poll_parts.run(db, n=100 if quick else 500)
    if name == "poll_open":
        from . import poll_open

        return poll_open.run(db, duration=10 if quick else 30, warmup=3 if quick else 5)
    if name == "poll_metrics":
        from . import poll_metrics

        if not wrk.available():
            return {"error": "wrk is not installed (apt-get install wrk)"}
        return poll_metrics.run(db, rounds=1 if quick else 4, duration=3 if quick else 5)
    if name == "recovery":
        from . import recovery

        return recovery.run(db, kills=2 if quick else 5, term_sizes=(8,) if quick else (1, 8, 32))
    if name == "outage":
        from . import outage

        return outage.run(db, jobs=8 if quick else 32)
    if name == "submit":
        from . import submit

        return submit.run(db, n=40 if quick else 200)
    if name == "memory":
        from . import memory

        return memory.run(db)
    if name == "places":
        from . import places

        return places.run(quick)
    if name == "scale":
        from . import scale

        return scale.run(db, n=40 if quick else 100, duration=3 if quick else 5)
    raise ValueError(name)


def _profile_on_miss(db: Database, closed: dict, quick: bool) -> dict | None:
    """py-spy on the worker while wrk drives the status fragment, if its ratio missed."""
    ratios = closed.get("ratios", {})
    ok = all(
        not math.isnan(ratios.get(key, {}).get("median", math.nan))
        and ratios[key]["median"] >= target
        for key, target in (("status/constant", 0.5), ("status/select1", 1.0))
    )
    if ok:
        return None
    from . import poll_closed, profile
    from .common import Server, users_with_running_jobs

    log("poll path missed: profiling the status fragment with py-spy")
    try:
        db.truncate()
        with Server(db.url, "profile", MAX_CONCURRENT_JOBS="32") as server:
            users = users_with_running_jobs(server, db, 32, "prof")
            lines = [(poll_closed.paths(u)["status"], u.cookie) for u in users]
            summary = profile.profile(server, lines, "status", 5 if quick else 10)
        (LOGS / "profile-status-summary.txt").write_text(summary)
        return {"summary": summary}
    except Exception as exc:  # noqa: BLE001 - the figures stand without the profile
        return {"error": f"{type(exc).__name__}: {exc}"}


if __name__ == "__main__":
    main()
