"""An open-loop HTTP/1.1 load generator: requests leave on a fixed timetable.

wrk keeps N requests in flight and sends the next only when one returns (closed loop):
when the server slows down, it sends less and the slow period hides (coordinated
omission). Here B simulated browsers each poll every `interval` seconds, their phases
spread evenly, so requests are due every interval/B seconds whatever the server does.
A request due while its browser's connection is still busy goes out on another
connection. Latency is measured from the time the request was *due*, so a generator
or server that falls behind shows up in the figures instead of vanishing.

Each browser keeps its connections alive between polls, like a browser; when the server
has closed an idle one (gunicorn's keep-alive is 2 s: it closes it, or resets it when our
request was already on its way), the request is retried once on a new connection, as
browsers do for idempotent requests, and counted as a retry; the latency includes it.

With revalidate, each browser keeps the last 200 that carried an ETag, as a browser's cache
keeps a `Cache-Control: no-cache` response, and asks with If-None-Match; a 304 hands back
the kept body, which is then checked like a new one.

Only 127.0.0.1; bounded by duration and a per-request timeout.
"""

import asyncio
import collections
import gc
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from .common import USER_AGENT, percentile


@dataclass
class Record:
    due: float
    begun: float  # when the generator got to it: begun - due is the generator's own lag
    sent: float
    done: float
    ok: bool
    error: str | None = None


class _Conn(NamedTuple):
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def close(self) -> None:
        self.writer.close()


@dataclass
class _Browser:
    request: bytes
    idle: list[_Conn] = field(default_factory=list)
    etag: str | None = None  # of the kept body, with revalidate
    kept: bytes = b""

    def message(self) -> bytes:
        if self.etag is None:
            return self.request
        return self.request[:-2] + f"If-None-Match: {self.etag}\r\n\r\n".encode()


class _Closed(Exception):
    """The server closed the connection before sending any byte of a response."""


def response_head(head: bytes) -> tuple[int, dict[str, str]]:
    """The status and the headers (names in lower case) of an HTTP/1.1 response's head."""
    lines = head.decode("latin-1").split("\r\n")
    fields = (line.partition(":") for line in lines[1:])
    return int(lines[0].split(" ", 2)[1]), {k.strip().lower(): v.strip() for k, _, v in fields}


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool, str | None]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise _Closed() from exc
        raise
    except ConnectionResetError as exc:
        # A kept-alive connection the server closed while our request was on its way:
        # it resets it instead of answering. Browsers retry such a request too.
        raise _Closed() from exc
    status, headers = response_head(head)
    connection = headers.get("connection", "").lower()
    keep = connection == "keep-alive" or (head.startswith(b"HTTP/1.1") and connection != "close")
    length = int(headers.get("content-length", 0))
    body = await reader.readexactly(length) if length else b""
    return status, body, keep, headers.get("etag")


async def _generate(
    host: str,
    port: int,
    targets: list[tuple[str, str]],
    browsers: int,
    interval: float,
    duration: float,
    warmup: float,
    timeout: float,
    expect: bytes,
    revalidate: bool = False,
) -> dict:
    loop = asyncio.get_running_loop()
    head = f"HTTP/1.1\r\nHost: {host}:{port}\r\nHX-Request: true\r\nUser-Agent: {USER_AGENT}\r\n"
    pool = [
        _Browser(f"GET {path} {head}Cookie: {cookie}\r\nAccept: */*\r\n\r\n".encode())
        for path, cookie in (targets[i % len(targets)] for i in range(browsers))
    ]
    records: list[Record] = []
    counts = {"connections": 0, "retries": 0, "not_modified": 0}
    tasks: set[asyncio.Task] = set()

    async def request(b: _Browser, due: float) -> None:
        deadline, begun, sent = due + timeout, loop.time(), None

        def failed(conn: _Conn | None, kind: str) -> None:
            if conn is not None:
                conn.close()
            records.append(Record(due, begun, sent or loop.time(), loop.time(), False, kind))

        for attempt in (0, 1):
            conn = None
            while b.idle:  # a connection the server closed while idle is of no use
                candidate = b.idle.pop()
                if candidate.reader.at_eof():
                    candidate.close()
                else:
                    conn = candidate
                    break
            reused = conn is not None
            try:
                if conn is None:
                    reader, writer = await asyncio.wait_for(
                        asyncio.open_connection(host, port), max(0.001, deadline - loop.time())
                    )
                    conn = _Conn(reader, writer)
                    counts["connections"] += 1
                if sent is None:
                    sent = loop.time()
                conn.writer.write(b.message())
                status, body, keep, etag = await asyncio.wait_for(
                    _read_response(conn.reader), max(0.001, deadline - loop.time())
                )
            except _Closed:
                if reused and attempt == 0:
                    conn.close()
                    counts["retries"] += 1
                    continue
                return failed(conn, "closed")
            except TimeoutError:
                return failed(conn, "timeout")
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
                return failed(conn, type(exc).__name__)
            done = loop.time()
            if keep:
                b.idle.append(conn)
            else:
                conn.close()
            if status == 304 and b.etag is not None:
                status, body = 200, b.kept
                if done - due <= timeout and due >= start + warmup:
                    counts["not_modified"] += 1
            elif status == 200 and revalidate and etag:
                b.etag, b.kept = etag, body
            error = f"http {status}" if status != 200 else None
            error = error or (None if expect in body else "unexpected body")
            records.append(Record(due, begun, sent, done, error is None, error))
            return

    start = loop.time() + 0.2
    total = int((warmup + duration) * browsers / interval)
    step = interval / browsers
    cpu0, wall0 = time.process_time(), time.monotonic()
    for k in range(total):
        due = start + k * step
        if (delay := due - loop.time()) > 0:
            await asyncio.sleep(delay)
        task = loop.create_task(request(pool[k % browsers], due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.wait(set(tasks), timeout=timeout + 1)
    for task in list(tasks):
        task.cancel()
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    for b in pool:
        for conn in b.idle:
            conn.close()
    await asyncio.sleep(0)

    measured = [r for r in records if r.due >= start + warmup]
    ok = [r for r in measured if r.ok]
    errors = dict(collections.Counter(r.error for r in measured if not r.ok))
    latency = [(r.done - r.due) * 1e3 for r in ok]
    service = [(r.done - r.sent) * 1e3 for r in ok]
    lag = [(r.begun - r.due) * 1e3 for r in measured]
    by_second: dict[int, list[float]] = {}
    for r in ok:  # when in the run the slow answers were: a burst, or throughout
        by_second.setdefault(int(r.due - start - warmup), []).append((r.done - r.due) * 1e3)
    out = {"browsers": browsers, "interval_s": interval, "target_rps": browsers / interval}
    out |= {"duration_s": duration, "warmup_s": warmup, "due": int(duration * browsers / interval)}
    out |= {"measured": len(measured), "ok": len(ok), "errors": sum(errors.values())}
    out |= {"errors_by_kind": errors, "unfinished": total - len(records)}
    out |= {"achieved_rps": len(ok) / duration, "p50_ms": percentile(latency, 50)}
    out |= {"p90_ms": percentile(latency, 90), "p99_ms": percentile(latency, 99)}
    out |= {"p999_ms": percentile(latency, 99.9), "max_ms": max(latency, default=float("nan"))}
    out |= {"service_p50_ms": percentile(service, 50), "service_p99_ms": percentile(service, 99)}
    out |= {"p99_by_second_ms": [round(percentile(v, 99), 1) for _, v in sorted(by_second.items())]}
    out |= {"generator_lag_p99_ms": percentile(lag, 99)}
    out |= {"generator_lag_max_ms": max(lag, default=float("nan"))}
    out |= {"new_connections": counts["connections"]}
    out |= {"retries_on_closed_keepalive": counts["retries"]}
    out |= {"not_modified": counts["not_modified"]}
    out |= {"generator_cpu_share": cpu / wall if wall else float("nan")}
    return out


def run(
    port: int,
    targets: list[tuple[str, str]],
    browsers: int = 1000,
    interval: float = 2.0,
    duration: float = 30.0,
    warmup: float = 5.0,
    timeout: float = 10.0,
    expect: bytes = b"",
    revalidate: bool = False,
) -> dict:
    """Run the timetable against 127.0.0.1:port; latency percentiles (from the due time), errors."""
    gc.collect()
    gc.disable()  # a collection pause would show up as generator lag
    try:
        args = (port, targets, browsers, interval, duration, warmup, timeout, expect, revalidate)
        return asyncio.run(_generate("127.0.0.1", *args))
    finally:
        gc.enable()
