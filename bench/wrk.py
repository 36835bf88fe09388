"""Run wrk (closed loop) through bench/rotate.lua and parse what it prints."""

import re
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from .common import log, median
from .table import table

LUA = Path(__file__).resolve().parent / "rotate.lua"
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


@dataclass
class WrkResult:
    rps: float
    requests: int
    p50_ms: float
    p99_ms: float
    errors: int  # socket errors plus non-2xx/3xx responses
    not_modified: int = 0  # 304 answers to If-None-Match


def available() -> bool:
    return shutil.which("wrk") is not None


def require() -> None:
    """Fail before a closed-loop benchmark starts its server, if there is no wrk to drive it."""
    if not available():
        raise RuntimeError("wrk is not installed (apt-get install wrk)")


def _ms(value: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", value).groups()
    return float(number) * UNITS[unit]


def run(
    url: str,
    lines: list[tuple[str, ...]],
    duration: float,
    connections: int = 16,
    threads: int = 1,
    timeout: float = 10,
) -> WrkResult:
    """wrk against url, cycling through (path, cookie[, etag]) requests, for duration seconds."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.writelines("\t".join(line) + "\n" for line in lines)
        requests_file = f.name
    try:
        cmd = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration:g}s"]
        cmd += [f"--timeout={timeout:g}s", "--latency", "-s", str(LUA), url, "--", requests_file]
        limit = duration + timeout + 30
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, check=True).stdout
    finally:
        Path(requests_file).unlink(missing_ok=True)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))
    errors = 0
    if m := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out):
        errors += sum(int(g) for g in m.groups())
    if m := re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        errors += int(m.group(1))
    m = re.search(r"Not modified: (\d+)", out)
    return WrkResult(rps, total, p50, p99, errors, int(m.group(1)) if m else 0)


def rounds(
    url: str,
    lines: dict[str, list[tuple[str, ...]]],
    rounds: int,
    duration: float,
    warmup: float,
    connections: int,
    tag: str,
) -> dict[str, dict]:
    """Warm each endpoint up, then drive each in turn for rounds rounds, the order rotating.

    Returns per endpoint the medians over rounds (req/s, p50, p99), the errors and requests
    in all, and each round's figures.
    """
    names = tuple(lines)
    for name in names:
        run(url, lines[name], warmup, connections)
    measured: dict[str, list[dict]] = {name: [] for name in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            res = run(url, lines[name], duration, connections)
            measured[name].append(asdict(res))
            log(f"{tag} round {r + 1}/{rounds} {name}: {res.rps:.0f} req/s")
    return {name: _over_rounds(each) for name, each in measured.items()}


def _over_rounds(each: list[dict]) -> dict:
    """One endpoint's rounds: the medians of req/s, p50 and p99, the counts summed."""
    out = {f"{k}_median": median([x[k] for x in each]) for k in ("rps", "p50_ms", "p99_ms")}
    out |= {k: sum(x[k] for x in each) for k in ("errors", "requests", "not_modified")}
    return out | {"rounds": each}


def ratio(endpoints: dict[str, dict], a: str, b: str) -> dict:
    """a's req/s over b's per round (measured minutes apart at most), and the median."""
    if a not in endpoints or b not in endpoints:
        return {"median": float("nan"), "rounds": [], "skipped": True}
    pairs = zip(endpoints[a]["rounds"], endpoints[b]["rounds"], strict=True)
    per_round = [x["rps"] / y["rps"] for x, y in pairs]
    return {"median": median(per_round), "rounds": per_round}


def endpoints_table(endpoints: dict[str, dict]) -> list[str]:
    """The report's table of endpoints measured in rounds: medians, each round, errors."""
    rows = (
        (name, f"{e['rps_median']:.0f}", ", ".join(f"{x['rps']:.0f}" for x in e["rounds"]),
         f"{e['p50_ms_median']:.1f} ms", f"{e['p99_ms_median']:.1f} ms", e["errors"])
        for name, e in endpoints.items()
    )  # fmt: skip
    return table(("endpoint", "req/s (median)", "per round", "p50", "p99", "errors"), rows)


def ratios_table(ratios: dict[str, dict]) -> list[str]:
    """The report's table of ratios taken per round: the median, each round's."""
    rows = (
        (name, f"{v['median']:.2f}", ", ".join(f"{x:.2f}" for x in v["rounds"]))
        for name, v in ratios.items()
    )
    return table(("ratio", "median", "per round"), rows)
