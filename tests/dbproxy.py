"""Database faults for tests and benchmarks: a fault proxy, a PostgreSQL to crash, a schedule.

DbProxy is a TCP proxy between the app and PostgreSQL, an asyncio server on a background
thread: `down()` refuses new connections and cuts the open ones (the database was killed
or restarted), `stall()` keeps every byte in both directions until `up()` (the database
froze), `up()` restores service. Postgres is a server of its own (pgserver's binaries, in
a directory of its own) that can be restarted in immediate mode, as after a crash.
Outages plays these faults at random through a run, from a seeded schedule, and keeps
when each one began and ended.
"""

import asyncio
import collections
import contextlib
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from sqlalchemy.engine import make_url


class DbProxy:
    """Forward 127.0.0.1:<port> to the database at (host, port) or a unix socket path."""

    def __init__(self, host: str = "127.0.0.1", port: int = 5432, unix_path: str | None = None):
        self.target = (host, port)
        self.unix_path = unix_path
        self.port = 0
        self.connections = 0  # accepted since start, for tests that want to see traffic
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._open: set[asyncio.StreamWriter] = set()
        self._flowing: asyncio.Event | None = None  # cleared while stalled
        self._refusing = False
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @classmethod
    def to(cls, database_url: str) -> "DbProxy":
        """A proxy to the server of database_url (a TCP host, or a unix socket's directory)."""
        url = make_url(database_url)
        if url.host:
            return cls(url.host, url.port or 5432)
        return cls(unix_path=f"{url.query['host']}/.s.PGSQL.{url.port or 5432}")

    def url(self, database_url: str) -> str:
        """database_url, reached through this proxy."""
        through = make_url(database_url).set(host="127.0.0.1", port=self.port, query={})
        return through.render_as_string(hide_password=False)

    def start(self) -> "DbProxy":
        self._thread.start()
        self._call(self._listen())
        return self

    def close(self) -> None:
        self._call(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def down(self) -> None:
        """Refuse new connections and cut every open one."""
        self._call(self._down())

    def stall(self) -> None:
        """Hold every byte in both directions; connections stay open."""
        self._call(self._set_flowing(False))

    def up(self) -> None:
        """Accept and forward again."""
        self._call(self._up())

    def _call(self, coro) -> object:
        future: Future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(10)

    async def _listen(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _down(self) -> None:
        self._refusing = True
        # Closing the listening socket makes connect() fail with "connection refused",
        # as a stopped PostgreSQL does; the port is kept for up().
        self._server.close()
        for writer in list(self._open):
            writer.transport.abort()  # RST: the client sees the connection lost at once
        self._open.clear()

    async def _up(self) -> None:
        self._flowing.set()
        if self._refusing:
            self._refusing = False
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def _set_flowing(self, flowing: bool) -> None:
        if flowing:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._open):
            writer.transport.abort()
        self._flowing.set()  # a stalled pipe must see its aborted transport too
        # Every pipe ends once its transports are aborted: let them, before the loop stops.
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=2)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            writer.transport.abort()
            return
        self.connections += 1
        try:
            if self.unix_path:
                up_reader, up_writer = await asyncio.open_unix_connection(self.unix_path)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._open.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        self._open.difference_update((writer, up_writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self._flowing.wait()  # a stall holds the bytes it has read
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()  # one side ended: end the other


class Postgres:
    """A PostgreSQL server of its own in pgdata (deleted by stop()), which restart() crashes."""

    def __init__(self, pgdata: Path):
        self.pgdata = pgdata
        self.server = None

    def start(self) -> str:
        """Create and start the server; its URL (a unix socket)."""
        import pgserver

        self.server = pgserver.get_server(self.pgdata, cleanup_mode="delete")
        return self.server.get_uri()

    def restart(self) -> None:
        """Stop in immediate mode (every backend killed, no checkpoint: a crash) and start."""
        from pgserver._commands import pg_ctl

        user = self.server.system_user
        pg_ctl(["-w", "-m", "immediate", "restart"], pgdata=self.pgdata, user=user, timeout=120)

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()


class Outages:
    """Database faults at random, one after another, until stop(); their windows kept.

    Each fault is chosen from the seeded rng: every connection cut; connections refused
    (the open ones cut) for 0.5-5 s; every byte held for 0.5-3 s; or, with restart given,
    at restart_share, the server restarted in immediate mode. A window is (began, ended,
    kind) in wall-clock seconds, the database's clock on this machine, so it compares
    with the rows' timestamps.
    """

    def __init__(
        self,
        proxy: DbProxy,
        rng: random.Random,
        restart: Callable[[], None] | None = None,
        restart_share: float = 0.05,
        gap: tuple[float, float] = (2.0, 10.0),
    ):
        self.proxy, self.rng, self.restart = proxy, rng, restart
        self.restart_share, self.gap = restart_share, gap
        self.windows: list[tuple[float, float, str]] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Outages":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the fault under way; leave the database up."""
        self.stopping.set()
        self._thread.join(180)
        self.proxy.up()

    def counts(self) -> collections.Counter[str]:
        return collections.Counter(kind for *_, kind in self.windows)

    def returned(self, at: float) -> float | None:
        """When the database last came back at or before `at` (None: no fault before)."""
        return max((end for _, end, _ in self.windows if end <= at), default=None)

    def around(self, began: float, ended: float) -> list[str]:
        """The faults that overlap [began, ended], as text."""
        return [
            f"{kind} {a:.1f}-{b:.1f}" for a, b, kind in self.windows if a <= ended and b >= began
        ]

    def _run(self) -> None:
        while not self.stopping.wait(self.rng.uniform(*self.gap)):
            restart = self.restart is not None and self.rng.random() < self.restart_share
            kind = "restart" if restart else self.rng.choice(("cut", "refuse", "stall"))
            hold = self.rng.uniform(0.5, 3.0 if kind == "stall" else 5.0)
            began = time.time()
            try:
                if kind == "restart":
                    self.restart()
                elif kind == "stall":
                    self.proxy.stall()
                    time.sleep(hold)
                else:
                    self.proxy.down()
                    if kind == "refuse":
                        time.sleep(hold)
            except Exception as exc:  # noqa: BLE001 - a fault that failed is reported
                self.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            finally:
                self.proxy.up()
            self.windows.append((began, time.time(), kind))
