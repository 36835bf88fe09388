"""Run every benchmark against one fresh database and write bench/RESULTS.md.

    python -m bench.run [--only poll_closed,poll_open,...] [--quick]

Benchmarks: singleflight, poll_closed, poll_parts, poll_open, recovery, outage, submit,
memory, places, scale.
Every figure is reported beside a baseline measured in the same run, as a ratio. The raw
numbers go to bench/logs/results.json, server logs to bench/logs/*.log.
"""

import argparse
import datetime
import importlib
import json
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
from .report import render

# Every benchmark, in the order they run: its options for `make bench`, then for --quick.
# Each is bench/<name>.py, whose run(db, **options) returns its figures.
PLAN = {
    "singleflight": ({}, {}),
    "poll_closed": ({"rounds": 4, "duration": 5}, {"rounds": 1, "duration": 3}),
    "poll_parts": ({"n": 500}, {"n": 100}),
    # and rows 2d-2j: the same timetable while 8 and 32 reports compute (demo, real)
    "poll_open": ({"duration": 30, "warmup": 5, "computing": True}, {"duration": 10, "warmup": 3}),
    "recovery": ({"kills": 5, "term_sizes": (1, 8, 32)}, {"kills": 2, "term_sizes": (8,)}),
    "outage": ({"jobs": 32}, {"jobs": 8}),
    "submit": ({"n": 200}, {"n": 40}),
    "memory": ({}, {}),
    "places": ({}, {"quick": True}),
    "scale": ({"n": 100, "duration": 5}, {"n": 40, "duration": 3}),
}
RESULTS = ROOT / "bench" / "RESULTS.md"


def _sh(*cmd: str) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(db: Database) -> dict:
    """Where the figures were measured: the machine, the software and the commit."""
    meminfo = (line.split() for line in Path("/proc/meminfo").read_text().splitlines())
    mem_kib = int(next(fields[1] for fields in meminfo if fields[0] == "MemTotal:"))
    cpuinfo = (line.partition(":") for line in Path("/proc/cpuinfo").read_text().splitlines())
    cpu = next((v.strip() for k, _, v in cpuinfo if k.startswith("model name")), None)

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "-"

    redis_version = "-"
    try:
        from redis import Redis

        redis_url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
        redis_version = Redis.from_url(redis_url).info()["redis_version"]
    except Exception:  # noqa: BLE001 - reported as missing
        pass
    dirty = _sh("git", "-C", str(ROOT), "status", "--porcelain", "--", "app", "templates")
    packages = ("flask", "sqlalchemy", "flask-sqlalchemy", "psycopg", "gunicorn", "rq")
    commit = _sh("git", "-C", str(ROOT), "rev-parse", "--short", "HEAD")
    out = {"nproc": os.cpu_count(), "memory_gib": round(mem_kib / 2**20, 1)}
    out |= {"cpu": cpu or platform.processor(), "kernel": platform.release()}
    out |= {"python": platform.python_version(), "postgresql": db.version, "redis": redis_version}
    out |= {"wrk": _sh("wrk", "--version").splitlines()[0] if wrk.available() else "-"}
    out |= {"packages": {name: version(name) for name in packages}}
    out |= {"commit": commit + (" (app/ or templates/ modified)" if dirty else "")}
    out |= {"loadavg_before": Path("/proc/loadavg").read_text().split()[:3]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PLAN), help="comma-separated benchmarks")
    parser.add_argument("--quick", action="store_true", help="shorter runs (a smoke test)")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(only) - set(PLAN)
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
                full, quick = PLAN[name]
                module = importlib.import_module(f"bench.{name}")
                results[name] = module.run(db, **(quick if q else full))
            except Exception as exc:  # noqa: BLE001 - one failed benchmark, the others go on
                log(f"{name} FAILED: {type(exc).__name__}: {exc}")
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            results.setdefault("seconds", {})[name] = round(time.monotonic() - t0, 1)
    finally:
        db.close()
    results["total_seconds"] = round(time.monotonic() - started, 1)
    (LOGS / "results.json").write_text(json.dumps(results, indent=2, default=str))
    Path(args.output).write_text(render(results))
    log(f"wrote {args.output} in {results['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
